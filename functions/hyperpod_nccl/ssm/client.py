"""A Session Manager client for one non-interactive command per session.

`SessionRunner.run(target, command)` calls `ssm:StartSession` with the
`AWS-StartNonInteractiveCommand` document, speaks the data-channel protocol over a websocket
(open frame, 5→6→7 handshake, acks, in-order delivery, retransmission, `channel_closed`) and
returns the command's output and exit code. The exit code comes from a marker the wrapper
prints after the command, because that document sends no exit-code message.

Everything runs within one budget per node (connection included); on expiry the session is
terminated and the partial output is kept on the error. What the agent sends is bounded too
(`SessionLimits`: frame size, output kept, messages held out of order), so a hostile or broken
node fails its own session (kind `limit_exceeded`) instead of growing the client's memory.
"""

from __future__ import annotations

import base64
import contextlib
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.frames import CloseCode
from websockets.protocol import State
from websockets.sync.client import ClientConnection, connect

from hyperpod_nccl import reads, thresholds
from hyperpod_nccl.aws_errors import ACCESS_DENIED_CODES, AWS_CALL_ERRORS, THROTTLING_CODES, error_code, error_message
from hyperpod_nccl.pacing import StartPacer, start_session_limiter
from hyperpod_nccl.ssm import codec
from hyperpod_nccl.ssm.codec import ClientMessage, PayloadType

DOCUMENT = "AWS-StartNonInteractiveCommand"
CLIENT_VERSION = "1.2.0.0"
RC_MARKER = "__RC__"
_RC_LINE = re.compile(rb"\n?" + RC_MARKER.encode() + rb"=(\d+)\r?\n?")
_EXIT_CODE = re.compile(rb"EXIT_CODE:\s*(-?\d+)")
# Session types whose output our runner understands (all are plain byte streams without KMS).
_ACCEPTED_SESSION_TYPES = {"NonInteractiveCommands", "InteractiveCommands", "Standard_Stream"}
_ACTION_SUCCESS, _ACTION_FAILED, _ACTION_UNSUPPORTED = 1, 2, 3
# Retransmission timer (Jacobson/Karels as in the plugin): RTO = RTT + max(10 ms, 4 RTTVAR), <= 1 s.
_RTO_MIN_VARIANCE, _RTO_MAX = 0.010, 1.0
_POLL_SECONDS = 0.05
# How long closing the websocket waits for the other side's close frame: a peer that stopped
# reading (a flooding agent) must not hold the probe past its budget for websockets' default 10 s.
# Nothing we need arrives after channel_closed, so the wait is kept short: websockets also spends
# it whenever an acknowledgement is sent while the service is already closing (see _on_stream),
# and every second of it is billed to the probe's Lambda.
_CLOSE_SECONDS = 0.25
INVALID_TARGET_CODES = frozenset({"InvalidTarget", "InvalidDocument", "ValidationException", "InvalidParameters"})


class SessionErrorKind(StrEnum):
    """Why a session did not produce the command's full output."""

    ACCESS_DENIED = "access_denied"
    TARGET_NOT_CONNECTED = "target_not_connected"
    INVALID_TARGET = "invalid_target"
    KMS_ENCRYPTION = "kms_encryption"
    BUDGET_EXPIRED = "budget_expired"
    THROTTLED = "throttled"
    TRANSPORT = "transport"
    PROTOCOL = "protocol"
    # The agent sent more than a session keeps (SessionLimits): another session would do the same.
    LIMIT_EXCEEDED = "limit_exceeded"
    # No session was started: the account's StartSession rate (the pacer, or AWS throttling every
    # try) left no start inside the budget. The node was not probed, which says nothing about it.
    RATE_LIMITED = "rate_limited"

    @property
    def retryable(self) -> bool:
        """Transient kinds: throttling and dropped connections are worth another session."""
        return self in (SessionErrorKind.THROTTLED, SessionErrorKind.TRANSPORT)


class SessionError(Exception):
    """A session failure with its kind, the AWS error code if any and the output seen so far."""

    def __init__(
        self,
        kind: SessionErrorKind,
        message: str,
        *,
        code: str = "",
        partial_output: bytes = b"",
        session_id: str | None = None,
        attempts: int = 1,
        throttles: int = 0,
        paced_seconds: float = 0.0,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.code = code
        self.partial_output = partial_output
        self.session_id = session_id
        self.attempts = attempts
        # StartSession calls AWS throttled on the way (each one retried, and fed back to the pacer).
        self.throttles = throttles
        # Seconds spent waiting for the StartSession rate (the pacer, the jitter after a throttle).
        self.paced_seconds = paced_seconds


# Throttled StartSession calls one run retries at most (the budget bounds them first at any sane
# rate: 20 full-jitter waits of up to 1, 2, 4... s outlast a 180 s budget).
MAX_THROTTLED_TRIES = 20
# The most one full-jitter draw may wait: botocore's standard retry mode caps its backoff at 20 s
# (botocore/retries/standard.py, _MAX_BACKOFF), as AWS's retry-behaviour guide describes.
THROTTLE_BACKOFF_MAX_SECONDS = 20.0
# What a node not probed because of the account's StartSession rate says (SessionErrorKind.RATE_LIMITED).
NOT_STARTED_MESSAGE = "not probed: the account's StartSession rate left no start inside the probe budget"


def throttled_quota(error: BaseException) -> str:
    """The quota a throttling error names, e.g. " (quota L-1234ABCD of ssm)", or "".

    SSM's ThrottlingException models `QuotaCode` and `ServiceCode` (botocore's ssm service-2.json);
    botocore merges an error's modeled members into the top level of `error.response`, next to
    `Error` (botocore/endpoint.py: `_add_modeled_error_fields`), so that is where they are read."""
    response = getattr(error, "response", None) or {}
    quota, service = str(response.get("QuotaCode") or ""), str(response.get("ServiceCode") or "")
    if not quota and not service:
        return ""
    return f" (quota {quota or 'unnamed'} of {service or 'the service'})"


def classify_start_error(error: BaseException) -> SessionError:
    """Map a StartSession failure to a kind: denied, not connected, invalid, transient."""
    code = error_code(error)
    message = error_message(error)
    if code in ACCESS_DENIED_CODES:
        kind = SessionErrorKind.ACCESS_DENIED
    elif code == "TargetNotConnected":
        kind = SessionErrorKind.TARGET_NOT_CONNECTED
    elif code in INVALID_TARGET_CODES:
        kind = SessionErrorKind.INVALID_TARGET
    elif code in THROTTLING_CODES:
        kind = SessionErrorKind.THROTTLED
        message = f"StartSession throttled{throttled_quota(error)}: {message}"
    else:
        # Service errors without a client-side cause, and endpoint/connection errors (no code).
        kind = SessionErrorKind.TRANSPORT
    return SessionError(kind, message, code=code)


def wrap_command(script: str) -> str:
    """The `command` parameter: the script travels base64-encoded (no quoting issues) and the
    exit status is printed after it as `__RC__=<n>`. The document exec's the string without a
    shell, hence the explicit `bash -c`."""
    encoded = base64.b64encode(script.encode("utf-8")).decode("ascii")
    return f"bash -c 'echo {encoded} | base64 -d | bash; printf \"\\n{RC_MARKER}=%d\\n\" $?'"


def split_exit_code(output: bytes) -> tuple[bytes, int | None]:
    """Separate the command output from the trailing RC marker (None when the marker is absent)."""
    matches = list(_RC_LINE.finditer(output))
    if not matches:
        return output, None
    last = matches[-1]
    return output[: last.start()] + output[last.end() :], int(last.group(1))


@dataclass
class CommandResult:
    """The output of one command run over a session."""

    output: bytes
    exit_code: int | None
    session_id: str
    attempts: int = 1
    # StartSession calls AWS throttled before this one started (each retried), and the seconds the
    # run waited for the StartSession rate (part of its budget, not of the node's answer).
    throttles: int = 0
    paced_seconds: float = 0.0

    @property
    def text(self) -> str:
        """The output decoded as UTF-8 (invalid bytes replaced)."""
        return self.output.decode("utf-8", "replace")


def _mib(size: int) -> str:
    return f"{size / (1 << 20):g} MiB" if size >= 1 << 20 else f"{size} bytes"


@dataclass(frozen=True)
class SessionLimits:
    """What one session keeps of what the agent sends; past any of these the session fails with
    `SessionErrorKind.LIMIT_EXCEEDED` (the output so far kept on the error)."""

    frame_bytes: int = codec.MAX_FRAME_BYTES
    output_bytes: int = thresholds.SSM_SESSION_MAX_OUTPUT_BYTES
    out_of_order_messages: int = thresholds.SSM_OUT_OF_ORDER_MAX_MESSAGES
    out_of_order_bytes: int = thresholds.SSM_OUT_OF_ORDER_MAX_BYTES


@dataclass
class _Pending:
    message: ClientMessage
    frame: bytes
    first_sent: float
    last_sent: float
    resent: bool = False


@dataclass
class _RetransmitTimer:
    rtt: float = 0.1
    rttvar: float = 0.0
    rto: float = 0.2

    def observe(self, sample: float) -> None:
        self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.rtt - sample)
        self.rtt = 0.875 * self.rtt + 0.125 * sample
        self.rto = min(_RTO_MAX, self.rtt + max(_RTO_MIN_VARIANCE, 4 * self.rttvar))


@dataclass
class DataChannel:
    """The client side of one data channel, from the open frame to `channel_closed`."""

    ws: ClientConnection
    token: str
    clock: Callable[[], float] = time.monotonic
    limits: SessionLimits = field(default_factory=SessionLimits)
    output: bytearray = field(default_factory=bytearray)
    exit_code: int | None = None
    handshake_complete: bool = False
    customer_message: str = ""
    _out_seq: int = 0
    _expected: int = 0
    _buffer: dict[int, ClientMessage] = field(default_factory=dict)
    _buffered_bytes: int = 0
    _outgoing: dict[int, _Pending] = field(default_factory=dict)
    _timer: _RetransmitTimer = field(default_factory=_RetransmitTimer)

    def open(self) -> None:
        """Send the OpenDataChannelInput text frame (the token authorises the channel), compact
        as every other JSON document of the channel (`codec.json_bytes`)."""
        import uuid

        opening = {
            "MessageSchemaVersion": "1.0",
            "RequestId": str(uuid.uuid4()),
            "TokenValue": self.token,
            "ClientId": str(uuid.uuid4()),
            "ClientVersion": CLIENT_VERSION,
        }
        self.ws.send(codec.json_bytes(opening).decode("utf-8"))

    def run(self, deadline: float) -> None:
        """Receive until `channel_closed`. Raises SessionError on expiry, KMS, or a dropped
        connection before the command's exit marker arrived."""
        while True:
            now = self.clock()
            if now >= deadline:
                raise SessionError(
                    SessionErrorKind.BUDGET_EXPIRED, "probe budget expired", partial_output=bytes(self.output)
                )
            try:
                self._resend_oldest(now)
                frame = self.ws.recv(timeout=min(_POLL_SECONDS, max(0.0, deadline - now)))
            except TimeoutError:
                continue
            except ConnectionClosed as closed:
                self._closed(closed)
                return
            if isinstance(frame, str):
                continue  # text frames after the open frame carry nothing for a client
            try:
                message = codec.decode(frame)
            except codec.CodecError:
                continue
            if not message.digest_ok:
                continue  # not acknowledged, so the agent sends it again
            if message.message_type == codec.CHANNEL_CLOSED:
                return
            if message.message_type == codec.ACKNOWLEDGE:
                self._on_ack(message)
            elif message.message_type == codec.OUTPUT_STREAM_DATA:
                try:
                    self._on_stream(message)
                except ConnectionClosed as closed:
                    self._closed(closed)
                    return

    def _closed(self, closed: ConnectionClosed) -> None:
        """The peer closed the socket: fine once the exit marker arrived (only the goodbye or
        an ack was lost), a transient transport failure otherwise. A frame over the size limit
        makes the websocket close itself (1009): that node's agent is not speaking the protocol."""
        if closed.sent is not None and closed.sent.code == CloseCode.MESSAGE_TOO_BIG:
            raise self._limit(
                f"the agent sent a frame over the {_mib(self.limits.frame_bytes)} a session accepts"
            ) from closed
        if split_exit_code(bytes(self.output))[1] is not None or self.exit_code is not None:
            return
        raise SessionError(
            SessionErrorKind.TRANSPORT,
            f"data channel closed before the command finished ({closed})",
            partial_output=bytes(self.output),
        ) from closed

    def _send_stream(self, payload_type: PayloadType, payload: bytes) -> None:
        message = codec.stream_message(codec.INPUT_STREAM_DATA, self._out_seq, payload_type, payload)
        frame = message.encode()
        now = self.clock()
        self._outgoing[self._out_seq] = _Pending(message, frame, now, now)
        self._out_seq += 1
        self.ws.send(frame)

    def _resend_oldest(self, now: float) -> None:
        if not self._outgoing:
            return
        oldest = self._outgoing[min(self._outgoing)]
        if now - oldest.last_sent >= self._timer.rto:
            oldest.last_sent = now
            oldest.resent = True
            self.ws.send(oldest.frame)

    def _on_ack(self, ack: ClientMessage) -> None:
        try:
            seq = codec.acknowledged_sequence(ack)
        except (ValueError, KeyError, TypeError):
            return
        pending = self._outgoing.pop(seq, None)
        # Karn's rule: only unambiguous (never resent) messages give an RTT sample.
        if pending is not None and not pending.resent:
            self._timer.observe(self.clock() - pending.first_sent)

    def _on_stream(self, message: ClientMessage) -> None:
        seq = message.sequence_number
        # Every stream message is acked, duplicates too: a lost ack would otherwise make the
        # agent resend forever. A message read after the agent closed the socket (the websocket
        # still hands over what arrived before the close) is not acked, but it is output all the
        # same: the ack must not lose it, nor the messages queued behind it. Nor should it wait:
        # websockets blocks a send on a closing socket until the close completes (up to
        # _CLOSE_SECONDS), and the close cannot complete while its reader is paused on the
        # messages still queued for us (more than its max_queue), so acks sent after the service
        # closed made every probe whose last output came in a burst wait out the close timeout.
        # (The service may still close between this check and the send: then the wait is that
        # short timeout.)
        if self.ws.protocol.state is State.OPEN:
            with contextlib.suppress(ConnectionClosed):
                self.ws.send(codec.acknowledgement(message).encode())
        if seq < self._expected or seq in self._buffer:
            return
        if seq > self._expected:
            self._hold(message)
            return
        self._process(message)
        self._expected += 1
        while self._expected in self._buffer:
            held = self._buffer.pop(self._expected)
            self._buffered_bytes -= len(held.payload)
            self._process(held)
            self._expected += 1

    def _hold(self, message: ClientMessage) -> None:
        """Keep a message that arrived before an earlier one, within the limits (the agent never
        has more unacknowledged messages in flight than the plugin buffers)."""
        limits = self.limits
        seq = message.sequence_number
        if (
            seq - self._expected > limits.out_of_order_messages
            or len(self._buffer) >= limits.out_of_order_messages
            or self._buffered_bytes + len(message.payload) > limits.out_of_order_bytes
        ):
            raise self._limit(
                f"message {self._expected} never arrived while the agent sent {len(self._buffer) + 1} later ones "
                f"(up to {seq}); a session holds at most {limits.out_of_order_messages} messages or "
                f"{_mib(limits.out_of_order_bytes)} out of order"
            )
        self._buffer[seq] = message
        self._buffered_bytes += len(message.payload)

    def _limit(self, why: str) -> SessionError:
        return SessionError(SessionErrorKind.LIMIT_EXCEEDED, why, partial_output=bytes(self.output))

    def _process(self, message: ClientMessage) -> None:
        ptype = message.payload_type
        if ptype in (PayloadType.OUTPUT, PayloadType.STDERR):
            room = self.limits.output_bytes - len(self.output)
            self.output.extend(message.payload[: max(0, room)])
            if len(message.payload) > room:
                raise self._limit(
                    f"the node sent more than {_mib(self.limits.output_bytes)} of output; the session was ended "
                    "and what fits was kept"
                )
        elif ptype == PayloadType.EXIT_CODE:
            match = _EXIT_CODE.search(message.payload)
            if match:
                self.exit_code = int(match.group(1))
        elif ptype == PayloadType.HANDSHAKE_REQUEST:
            self._answer_handshake(message)
        elif ptype == PayloadType.HANDSHAKE_COMPLETE:
            self.handshake_complete = True
            try:
                self.customer_message = str(message.json().get("CustomerMessage") or "")
            except ValueError:
                self.customer_message = ""
        elif ptype == PayloadType.ENC_CHALLENGE_REQUEST:
            raise _kms_error()

    def _answer_handshake(self, request: ClientMessage) -> None:
        actions = request.json().get("RequestedClientActions") or []
        processed: list[dict[str, Any]] = []
        kms_requested = False
        for action in actions:
            action_type = action.get("ActionType")
            parameters = action.get("ActionParameters") or {}
            if action_type == "SessionType" and parameters.get("SessionType") in _ACCEPTED_SESSION_TYPES:
                processed.append(_action(action_type, _ACTION_SUCCESS))
            elif action_type == "KMSEncryption":
                kms_requested = True
                processed.append(_action(action_type, _ACTION_FAILED, "KMS session encryption is not supported"))
            else:
                processed.append(_action(str(action_type), _ACTION_UNSUPPORTED, "unsupported client action"))
        self._send_stream(
            PayloadType.HANDSHAKE_RESPONSE,
            codec.json_bytes({"ClientVersion": CLIENT_VERSION, "ProcessedClientActions": processed, "Errors": None}),
        )
        if kms_requested:
            raise _kms_error()


def _action(action_type: str, status: int, error: str = "") -> dict[str, Any]:
    return {"ActionType": action_type, "ActionStatus": status, "ActionResult": None, "Error": error}


def _kms_error() -> SessionError:
    return SessionError(
        SessionErrorKind.KMS_ENCRYPTION,
        "the account's Session Manager preferences require KMS encryption, which this client does not "
        "implement; the session was refused (fail closed)",
    )


# HTTP statuses with which the service refuses a websocket handshake it does not authorise.
_DENIED_HANDSHAKE_STATUSES = frozenset({401, 403})


def _refused_handshake(error: InvalidStatus) -> SessionError:
    """The service answered the data channel's websocket handshake with an HTTP error: access denied
    when it did not authorise the channel (the principal lacks ssmmessages:OpenDataChannel on the
    session), a transient transport failure otherwise."""
    status = error.response.status_code
    if status in _DENIED_HANDSHAKE_STATUSES:
        return SessionError(
            SessionErrorKind.ACCESS_DENIED,
            f"{reads.OPEN_DATA_CHANNEL} denied: the service refused the data channel (HTTP {status})",
            code=str(status),
        )
    return SessionError(SessionErrorKind.TRANSPORT, f"cannot open the data channel: HTTP {status}")


def run_data_channel(
    stream_url: str,
    token: str,
    deadline: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    limits: SessionLimits | None = None,
) -> tuple[bytes, int | None]:
    """Open the data channel at `stream_url`, collect the command's output until the channel
    closes, and return (output without the RC marker, exit code). `limits` bound what the agent
    may make the client hold (default: `SessionLimits()`)."""
    limits = limits or SessionLimits()
    remaining = deadline - clock()
    if remaining <= 0:
        raise SessionError(SessionErrorKind.BUDGET_EXPIRED, "probe budget expired before connecting")
    try:
        # On websockets 18 (`legacy` off by default) connect() returns a lazy connecter whose handshake
        # runs at `with`, outside these excepts: then open it with `with connect(...) as ws` inside the try.
        ws = connect(
            stream_url,
            open_timeout=remaining,
            close_timeout=_CLOSE_SECONDS,
            compression=None,
            max_size=limits.frame_bytes,
        )
    except InvalidStatus as error:
        raise _refused_handshake(error) from error
    except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as error:
        raise SessionError(SessionErrorKind.TRANSPORT, f"cannot open the data channel: {error}") from error
    with ws:  # closed on every way out, as websockets' documented use
        channel = DataChannel(ws, token, clock=clock, limits=limits)
        try:
            channel.open()
            channel.run(deadline)
        except ConnectionClosed as closed:
            raise SessionError(
                SessionErrorKind.TRANSPORT, f"data channel closed: {closed}", partial_output=bytes(channel.output)
            ) from closed
        except SessionError as error:
            if not error.partial_output:
                error.partial_output = bytes(channel.output)
            raise
    output, marker_code = split_exit_code(bytes(channel.output))
    return output, marker_code if marker_code is not None else channel.exit_code


@dataclass
class SessionRunner:
    """Runs commands on nodes over Session Manager within a per-node budget.

    `ssm` is a boto3 SSM client; `limiter` paces StartSession for every runner sharing the account's
    rate (the diagnose run's `RateLimiter`, the monitor's table-backed `SharedPacer`; a runner built
    without one paces only itself). `clock` is the limiter's deadline clock.

    A throttled StartSession is fed back to the limiter (`throttled()`) and retried after a full
    jitter sleep, `jitter(0, backoff x 2^n)`, within the budget: retries of sandboxes throttled at
    once spread out instead of coming back together. Throttles are bounded by the budget (and by
    MAX_THROTTLED_TRIES), the other retryable failures by `max_attempts`, with plain exponential backoff.
    """

    ssm: Any
    limiter: StartPacer = field(default_factory=start_session_limiter)
    budget_seconds: float = thresholds.SSM_NODE_BUDGET_SECONDS
    max_attempts: int = 5
    backoff_seconds: float = 1.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    # The full-jitter draw (random.uniform; injectable so tests can fix it).
    jitter: Callable[[float, float], float] = random.uniform
    # What one session may make this process hold (the monitor's ProbeNode keeps less than the
    # CLI: its Lambda has less memory).
    limits: SessionLimits = field(default_factory=SessionLimits)

    def run(self, target: str, command: str | None = None, *, document: str | None = None) -> CommandResult:
        """Run `command` (already wrapped, see `wrap_command`) on `target` through the AWS managed
        document, or, with `document`, the one command that custom Session document embeds (it
        takes no parameters, so nothing else can run). Raises SessionError."""
        if (command is None) == (document is None):
            raise ValueError("SessionRunner.run needs exactly one of command and document")
        request: dict[str, Any] = (
            {"DocumentName": document} if document else {"DocumentName": DOCUMENT, "Parameters": {"command": [command]}}
        )
        deadline = self.clock() + self.budget_seconds
        attempt = failures = throttles = 0
        last_throttle = ""
        paced: list[float] = []  # each wait for the rate (threads share the runner: no state on self)
        while True:
            attempt += 1
            try:
                result = self._attempt(target, request, deadline, attempt, paced)
            except SessionError as error:
                error.attempts, error.throttles, error.paced_seconds = attempt, throttles, sum(paced)
                if error.kind is SessionErrorKind.THROTTLED:
                    throttles = error.throttles = throttles + 1
                    last_throttle = error.message
                    self.limiter.throttled()
                    if throttles >= MAX_THROTTLED_TRIES:
                        raise
                    # Full jitter, capped by what is left of the budget; the limiter then refuses a
                    # start past the deadline (RATE_LIMITED), so the wait never overruns it.
                    ceiling = min(self.backoff_seconds * 2 ** (throttles - 1), THROTTLE_BACKOFF_MAX_SECONDS)
                    delay = min(self.jitter(0.0, ceiling), deadline - self.clock())
                    if delay > 0:
                        self.sleep(delay)
                        paced.append(delay)
                    continue
                if error.kind is SessionErrorKind.RATE_LIMITED and last_throttle:
                    error.message = f"{error.message} (after {throttles} throttled call(s); the last: {last_throttle})"
                failures += 1
                delay = self.backoff_seconds * (2 ** (failures - 1))
                if not error.kind.retryable or failures >= self.max_attempts or self.clock() + delay >= deadline:
                    raise
                self.sleep(delay)
            else:
                result.throttles, result.paced_seconds = throttles, sum(paced)
                return result

    def _attempt(
        self, target: str, request: dict[str, Any], deadline: float, attempt: int, paced: list[float]
    ) -> CommandResult:
        asked = self.clock()
        granted = self.limiter.acquire(deadline)
        paced.append(self.clock() - asked)
        if not granted:
            raise SessionError(SessionErrorKind.RATE_LIMITED, NOT_STARTED_MESSAGE)
        try:
            response = self.ssm.start_session(Target=target, **request)
        except AWS_CALL_ERRORS as error:
            raise classify_start_error(error) from error
        if not all(response.get(key) for key in ("SessionId", "StreamUrl", "TokenValue")):
            raise SessionError(
                SessionErrorKind.PROTOCOL, "StartSession answered without SessionId/StreamUrl/TokenValue"
            )
        session_id = str(response["SessionId"])
        try:
            output, exit_code = run_data_channel(
                response["StreamUrl"], response["TokenValue"], deadline, clock=self.clock, limits=self.limits
            )
        except SessionError as error:
            error.session_id = session_id
            # The session may still be alive on the agent side: end it so the command stops.
            self.terminate(session_id)
            raise
        return CommandResult(output=output, exit_code=exit_code, session_id=session_id, attempts=attempt)

    def terminate(self, session_id: str) -> None:
        """TerminateSession, best effort (a failure here must not hide the original error)."""
        try:
            self.ssm.terminate_session(SessionId=session_id)
        except AWS_CALL_ERRORS:
            return
