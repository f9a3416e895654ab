"""A protocol-faithful simulated SSM agent on loopback (the agent side of the data channel).

It accepts the client's OpenDataChannelInput (checking the token), runs the 5→6→7 handshake
of NonInteractiveCommands, streams the session's output in 1024-byte chunks (UTF-8 kept whole),
acknowledges and buffers client messages, retransmits its own until acknowledged, waits up to 2 s
for the last acknowledgements, and ends with `channel_closed`.

Two output modes, as the session document chooses: by default stdout and stderr travel together
as Output messages (one file on the real agent) and no exit code is sent; with
`separate_output_streams` (a document with `separateOutputStream: true`) stdout goes as Output
(1), stderr as StdErr (11), and the command's exit status follows both as one ExitCode (12)
message `EXIT_CODE: <n>`.

Fault knobs (`SessionFaultSpec`) drop, duplicate, reorder and corrupt frames, stall (halfway or
before a named probe section), disconnect mid-output, end without `channel_closed` or request
KMS encryption; hostile ones flood messages out of order or send a giant frame.

Run `python -m hyperpod_nccl_sim.ssm_agent` to start one on its own: it prints a StartSession
response (StreamUrl, TokenValue, SessionId) any Session Manager client can use, as its first
stdout line. `--text`/`--stderr`/`--exit-code` set what the session answers, and every
`SessionFaultSpec` field is a repeatable `--fault NAME=VALUE` (`--list-faults` lists them), e.g.
`--fault separate_output_streams=true --fault drop_first=2`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from pydantic import ValidationError
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection, serve

from hyperpod_nccl.probe.sections import begin_line
from hyperpod_nccl.ssm import codec
from hyperpod_nccl.ssm.codec import ClientMessage, PayloadType
from hyperpod_nccl_sim.node_behaviours import SessionFaultSpec

AGENT_VERSION = "3.3.1142.0"
_RETRANSMIT_SECONDS = 0.2
_POLL_SECONDS = 0.02
# How long the agent waits, after the command's last output, for the client to acknowledge what it
# sent before it closes the channel: what is still unacknowledged then is lost. The real agent's
# DataChannel.PrepareToCloseChannel gives up after 2 s (aws/amazon-ssm-agent@1c217c89,
# agent/session/datachannel/datachannel.go).
_DRAIN_SECONDS = 2.0
_HANDSHAKE_SECONDS = 15.0
# The separate-stream mode, as the real agent implements it (aws/amazon-ssm-agent@1c217c89):
# - the document's `separateOutputStream` (in `properties.linux`) reaches the agent with the
#   session's configuration, not through the handshake: the SessionType action's `Properties` stay
#   null for the command plugins (agent/session/plugins/sessionplugin/sessionplugin.go,
#   agent/session/plugins/singlecommand/singlecommand.go GetPluginParameters);
# - two goroutines read the command's stdout and stderr pipes as they fill and send them as Output
#   and StdErr messages, 1024 bytes at most each; empty payloads are never sent
#   (agent/session/shell/shell.go setupRoutineToWriteCmdPipelineOutput,
#   agent/session/datachannel/datachannel.go SendStreamDataMessage). The document's optional
#   stdOutSeparatorPrefix/stdErrSeparatorPrefix, which the agent puts before a stream's first
#   bytes and after each chunk that ends a line, are not simulated;
# - once both pipes are closed and the process has been waited for, one ExitCode message carries
#   the ASCII text `EXIT_CODE: <n>` (no newline; n = -1 for a process a signal killed, 1 when the
#   command could not start), then the 2 s drain, then the session ends (channel_closed); a
#   session cancelled meanwhile sends no exit code (shell.go processCommandsWithOutputStreamSeparate,
#   sendExitCode);
# - HandshakeComplete's CustomerMessage asks a client of version <= 1.2.295 to upgrade (datachannel.go
#   buildHandshakeCompletePayload); versions compare component by component (agent/versionutil).
# The plugin (aws/session-manager-plugin@61cf1288, src/datachannel/streaming.go,
# src/sessionmanagerplugin/session/shellsession/shellsession.go) displays StdErr and ExitCode
# payloads as it displays Output.
EXIT_CODE_FORMAT = "EXIT_CODE: {}"
_OLD_CLIENT_VERSION = "1.2.295"
# The real agent's notice names 1.2.312.0 as the first version that separates the streams; this is
# the simulation's own wording of it (clients display it, none parses it).
_UPGRADE_MESSAGE = "Session Manager plugin 1.2.312.0 or newer is needed to separate stdout and stderr.\r\n"
# The command's stream messages: the drop/corrupt/duplicate knobs apply to these.
_COMMAND_OUTPUT = frozenset({PayloadType.OUTPUT, PayloadType.STDERR, PayloadType.EXIT_CODE})


@dataclass
class AgentSession:
    """One session the agent will serve: who may open it and what it answers."""

    session_id: str
    token: str
    target: str
    output: bytes
    faults: SessionFaultSpec = field(default_factory=SessionFaultSpec)
    # What the command writes to stderr, and its exit status: with `faults.separate_output_streams`
    # they travel as StdErr messages and the final ExitCode message; without it stderr shares the
    # Output messages and the exit status is not sent (as by the real agent).
    stderr: bytes = b""
    exit_code: int = 0
    opened: bool = False
    completed: bool = False
    received: list[ClientMessage] = field(default_factory=list)
    # Every stream message the agent sent, once each, in sequence order (tests read what went out).
    sent: list[ClientMessage] = field(default_factory=list)
    # The client's OpenDataChannelInput frame, as received (tests read how the client wrote it).
    opening: str | bytes | None = None


class SimulatedSsmAgent:
    """A websocket server on 127.0.0.1 serving the sessions registered with `add_session`."""

    def __init__(self, is_terminated: Callable[[str], bool] | None = None) -> None:
        self._sessions: dict[str, AgentSession] = {}
        self._lock = threading.Lock()
        self._is_terminated = is_terminated or (lambda _sid: False)
        # The service's end reads the socket whatever the agent is doing (max_queue=None): with
        # websockets' default, the acks the agent leaves unread while it stalls or closes pause its
        # reader, so a closing handshake waited out the client's close timeout, which AWS's
        # endpoint never makes a client do (measured: a second on a third of 2 s probes).
        self._server: Server = serve(self._handle, "127.0.0.1", 0, compression=None, max_size=None, max_queue=None)
        self._thread = threading.Thread(target=self._server.serve_forever, name="simulated-ssm-agent", daemon=True)

    @property
    def port(self) -> int:
        """The TCP port of the websocket server."""
        return int(self._server.socket.getsockname()[1])

    def start(self) -> SimulatedSsmAgent:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._thread.join(timeout=5)

    def stream_url(self, session_id: str) -> str:
        """The StreamUrl StartSession returns for `session_id`."""
        return f"ws://127.0.0.1:{self.port}/v1/data-channel/{session_id}?role=publish_subscribe"

    def add_session(
        self,
        target: str,
        output: bytes,
        faults: SessionFaultSpec | None = None,
        session_id: str | None = None,
        *,
        stderr: bytes = b"",
        exit_code: int = 0,
    ) -> dict[str, str]:
        """Register a session and return the StartSession response that opens it. `output` and
        `stderr` are what the command writes, `exit_code` its status (sent only in the
        separate-stream mode, `faults.separate_output_streams`)."""
        session = AgentSession(
            session_id=session_id or f"sim-{uuid.uuid4().hex[:17]}",
            token=secrets.token_urlsafe(32),
            target=target,
            output=output,
            faults=faults or SessionFaultSpec(),
            stderr=stderr,
            exit_code=exit_code,
        )
        with self._lock:
            self._sessions[session.session_id] = session
        return {
            "SessionId": session.session_id,
            "TokenValue": session.token,
            "StreamUrl": self.stream_url(session.session_id),
        }

    def session(self, session_id: str) -> AgentSession | None:
        """A registered session (tests inspect what the client sent)."""
        with self._lock:
            return self._sessions.get(session_id)

    def _handle(self, ws: ServerConnection) -> None:
        path = ws.request.path if ws.request else ""
        session_id = path.split("?", 1)[0].rsplit("/", 1)[-1]
        session = self.session(session_id)
        try:
            opening = ws.recv(timeout=10)
        except (TimeoutError, ConnectionClosed):
            return
        try:
            token = json.loads(opening).get("TokenValue") if isinstance(opening, str) else None
        except ValueError:
            token = None
        if session is None or token != session.token or session.opened:
            ws.close(code=1008, reason="invalid or expired session token")
            return
        session.opened, session.opening = True, opening
        _AgentChannel(ws, session, self._is_terminated).serve()


@dataclass
class _Outgoing:
    frame: bytes
    last_sent: float


class _AgentChannel:
    """The agent's half of one data channel."""

    def __init__(self, ws: ServerConnection, session: AgentSession, is_terminated: Callable[[str], bool]) -> None:
        self.ws = ws
        self.session = session
        self.faults = session.faults
        self.is_terminated = is_terminated
        self.out_seq = 0
        self.expected = 0
        self.buffer: dict[int, ClientMessage] = {}
        self.outgoing: dict[int, _Outgoing] = {}
        self.handshake_response: ClientMessage | None = None
        self.sent_stream_frames = 0

    def serve(self) -> None:
        try:
            self._serve()
        except ConnectionClosed:
            return
        finally:
            self.ws.close()

    def _serve(self) -> None:
        actions: list[dict[str, object]] = [
            {
                "ActionType": "SessionType",
                "ActionParameters": {"SessionType": "NonInteractiveCommands", "Properties": None},
            }
        ]
        if self.faults.kms:
            actions.append(
                {
                    "ActionType": "KMSEncryption",
                    "ActionParameters": {"KMSKeyId": "arn:aws:kms:us-west-2:123456789012:key/sim", "Challenge": ""},
                }
            )
        started = time.monotonic()
        self._send(
            PayloadType.HANDSHAKE_REQUEST,
            codec.json_bytes({"AgentVersion": AGENT_VERSION, "RequestedClientActions": actions}),
        )
        if not self._pump_until(lambda: self.handshake_response is not None, started + _HANDSHAKE_SECONDS):
            return
        assert self.handshake_response is not None
        processed = self.handshake_response.json().get("ProcessedClientActions") or []
        if any(action.get("ActionStatus") != 1 for action in processed):
            # The agent cancels the session when the client fails any requested action.
            self._close("client failed a handshake action")
            return
        elapsed_ns = int((time.monotonic() - started) * 1e9)
        client_version = str(self.handshake_response.json().get("ClientVersion") or "")
        old_client = _compare_versions(client_version, _OLD_CLIENT_VERSION) <= 0
        customer_message = _UPGRADE_MESSAGE if self.faults.separate_output_streams and old_client else ""
        self._send(
            PayloadType.HANDSHAKE_COMPLETE,
            codec.json_bytes({"HandshakeTimeToComplete": elapsed_ns, "CustomerMessage": customer_message}),
        )
        self._stream_output()
        self._pump_until(lambda: not self.outgoing, time.monotonic() + _DRAIN_SECONDS)
        self.session.completed = not self.outgoing
        if not self.faults.close_without_channel_closed:
            self._close("")

    def _close(self, output: str) -> None:
        self.ws.send(codec.channel_closed(self.session.session_id, self.session.target, output).encode())
        self.ws.close()

    def _stream_output(self) -> None:
        if self.faults.giant_frame_bytes:
            self._send(PayloadType.OUTPUT, b"G" * self.faults.giant_frame_bytes)
        if self.faults.out_of_order_flood:
            self._flood_out_of_order(self.faults.out_of_order_flood)
            return
        chunks, stall_at = self._command_output()
        messages = [self._message(payload_type, chunk) for payload_type, chunk in chunks]
        order = list(range(len(messages)))
        if self.faults.reorder:
            for i in range(0, len(order) - 1, 2):
                order[i], order[i + 1] = order[i + 1], order[i]
        for position, index in enumerate(order):
            if self.faults.stall_seconds and position == stall_at:
                self._pump_until(lambda: False, time.monotonic() + self.faults.stall_seconds, retransmit=False)
            if self.faults.disconnect_after is not None and position >= self.faults.disconnect_after:
                self.ws.close()  # a dropped connection: no channel_closed
                raise ConnectionClosed(None, None)
            message = messages[index]
            self._transmit(message, first=True)
            self._pump_until(lambda: False, time.monotonic())  # service acks between frames

    def _command_output(self) -> tuple[list[tuple[PayloadType, bytes]], int]:
        """The command's stream messages in the order the agent sends them, and the position of
        the stall (before the `stall_at_section` marker of stdout, else halfway)."""
        separate = self.faults.separate_output_streams
        # Without separate streams the real agent sends one file both streams were written to; the
        # simulation puts stderr first, so a trailing __RC__ line stays last.
        stream = self.session.output if separate else self.session.stderr + self.session.output
        before, after = stream, b""
        if self.faults.stall_at_section:
            marker = f"{begin_line(self.faults.stall_at_section)}\n".encode()
            cut = stream.find(marker)
            if cut >= 0:
                before, after = stream[:cut], stream[cut:]
        stdout = [(PayloadType.OUTPUT, chunk) for chunk in codec.utf8_chunks(before)]
        stall_chunk = len(stdout) if after else None
        stdout += [(PayloadType.OUTPUT, chunk) for chunk in codec.utf8_chunks(after)]
        if not separate:
            return stdout, len(stdout) // 2 if stall_chunk is None else stall_chunk
        stderr = [(PayloadType.STDERR, chunk) for chunk in codec.utf8_chunks(self.session.stderr)]
        # The real agent reads both pipes at once, so their messages interleave: alternate chunks.
        chunks: list[tuple[PayloadType, bytes]] = []
        stall_at: int | None = None
        for i in range(max(len(stdout), len(stderr))):
            if i < len(stdout):
                if i == stall_chunk:
                    stall_at = len(chunks)
                chunks.append(stdout[i])
            if i < len(stderr):
                chunks.append(stderr[i])
        chunks.append((PayloadType.EXIT_CODE, EXIT_CODE_FORMAT.format(self.session.exit_code).encode("ascii")))
        return chunks, len(chunks) // 2 if stall_at is None else stall_at

    def _flood_out_of_order(self, count: int) -> None:
        """A hostile agent: the next message never comes (not even retransmitted), `count` later
        ones do, as fast as the socket takes them."""
        self.out_seq += 1
        for _ in range(count):
            self._transmit(self._message(PayloadType.OUTPUT, b"F" * codec.STREAM_CHUNK_BYTES), first=True)
            self._pump_until(lambda: False, time.monotonic(), retransmit=False)

    def _message(self, payload_type: PayloadType, payload: bytes) -> ClientMessage:
        message = codec.stream_message(
            codec.OUTPUT_STREAM_DATA,
            self.out_seq,
            payload_type,
            payload,
            flags=codec.FLAG_SYN if self.out_seq == 0 else 0,
        )
        self.outgoing[self.out_seq] = _Outgoing(message.encode(), time.monotonic())
        self.session.sent.append(message)
        self.out_seq += 1
        return message

    def _send(self, payload_type: PayloadType, payload: bytes) -> None:
        self._transmit(self._message(payload_type, payload), first=True)

    def _transmit(self, message: ClientMessage, *, first: bool) -> None:
        """Send a stream message the first time, applying the drop/corrupt/duplicate knobs to
        the first output frames (retransmission has to recover them)."""
        frame = self.outgoing[message.sequence_number].frame
        if first and message.payload_type in _COMMAND_OUTPUT:
            index = self.sent_stream_frames
            self.sent_stream_frames += 1
            if index < self.faults.drop_first:
                return
            if index < self.faults.corrupt_digest:
                corrupted = ClientMessage(**{**message.__dict__, "digest": b"\x00" * 32})
                self.ws.send(corrupted.encode())
                return
            if self.faults.duplicate:
                self.ws.send(frame)
        self.ws.send(frame)

    def _pump_until(self, done: Callable[[], bool], deadline: float, *, retransmit: bool = True) -> bool:
        """Process inbound frames (and retransmit) until `done()` or `deadline`."""
        while True:
            if done():
                return True
            if self.is_terminated(self.session.session_id):
                self._close("session terminated")
                raise ConnectionClosed(None, None)
            now = time.monotonic()
            if now >= deadline:
                return done()
            if retransmit and self.outgoing:
                oldest_seq = min(self.outgoing)
                oldest = self.outgoing[oldest_seq]
                if now - oldest.last_sent >= _RETRANSMIT_SECONDS:
                    oldest.last_sent = now
                    self.ws.send(oldest.frame)
            try:
                frame = self.ws.recv(timeout=min(_POLL_SECONDS, max(0.001, deadline - now)))
            except TimeoutError:
                continue
            if isinstance(frame, bytes):
                self._on_frame(frame)

    def _on_frame(self, frame: bytes) -> None:
        try:
            message = codec.decode(frame)
        except codec.CodecError:
            return
        self.session.received.append(message)
        if message.message_type == codec.ACKNOWLEDGE:
            try:
                self.outgoing.pop(codec.acknowledged_sequence(message), None)
            except (ValueError, KeyError):
                return
            return
        if message.message_type != codec.INPUT_STREAM_DATA:
            return
        self.ws.send(codec.acknowledgement(message).encode())
        seq = message.sequence_number
        if seq < self.expected or seq in self.buffer:
            return
        self.buffer[seq] = message
        while self.expected in self.buffer:
            current = self.buffer.pop(self.expected)
            self.expected += 1
            if current.payload_type == PayloadType.HANDSHAKE_RESPONSE:
                self.handshake_response = current


def _compare_versions(this: str, other: str) -> int:
    """Negative, zero or positive as version `this` is older than, equal to or newer than `other`,
    compared as the agent compares dotted versions: component by component, as numbers where both
    are numbers and as text otherwise; with the common components equal, fewer components is older."""
    mine, theirs = this.split("."), other.split(".")
    for a, b in zip(mine, theirs, strict=False):
        if a.isascii() and a.isdigit() and b.isascii() and b.isdigit():
            if int(a) != int(b):
                return int(a) - int(b)
        elif a != b:
            return -1 if a < b else 1
    return len(mine) - len(theirs)


def _type_name(annotation: object) -> str:
    return annotation.__name__ if isinstance(annotation, type) else str(annotation).replace("typing.", "")


def fault_table() -> str:
    """Every `SessionFaultSpec` field, one line each: name, type, default and description."""
    rows = [
        (name, f"{_type_name(spec.annotation)} = {spec.default!r}", spec.description or "")
        for name, spec in SessionFaultSpec.model_fields.items()
    ]
    name_width, kind_width = (max(len(row[column]) for row in rows) for column in (0, 1))
    return "\n".join(f"{name:<{name_width}}  {kind:<{kind_width}}  {about}".rstrip() for name, kind, about in rows)


def parse_faults(items: Sequence[str], error: Callable[[str], NoReturn]) -> SessionFaultSpec:
    """The `SessionFaultSpec` of `--fault NAME=VALUE` items, each value validated by the model as
    text (`2`, `0.5`, `true`, `dcgm_health`). `error` reports a bad item in one line and does not
    return (argparse's `parser.error`)."""
    values: dict[str, str] = {}
    known = SessionFaultSpec.model_fields
    for item in items:
        name, equals, value = item.partition("=")
        name = name.strip()
        if not equals or not name:
            error(f"--fault {item!r}: expected NAME=VALUE (--list-faults lists the names)")
        if name not in known:
            error(f"--fault {name}: no such fault; one of: {', '.join(known)}")
        if name in values:
            error(f"--fault {name}: given twice")
        values[name] = value
    try:
        return SessionFaultSpec.model_validate_strings(values)
    except ValidationError as invalid:
        problems = []
        for problem in invalid.errors():
            name = str(problem["loc"][0]) if problem["loc"] else ""
            problems.append(f"{name}={values.get(name, '')!r}: {problem['msg']}")
        error(f"--fault {'; '.join(problems)}")


def main(argv: Sequence[str] | None = None) -> None:
    """Start an agent with one session and print its StartSession response (the first line)."""
    parser = argparse.ArgumentParser(
        prog="python -m hyperpod_nccl_sim.ssm_agent", description=__doc__.split("\n\n", 1)[0]
    )
    parser.add_argument("--text", default="hello from the simulated SSM agent\n__RC__=0\n", help="output to stream")
    parser.add_argument(
        "--stderr", default="", help="what the command writes to stderr (StdErr messages with separate streams)"
    )
    parser.add_argument(
        "--exit-code",
        type=int,
        default=None,
        help="the command's exit status, sent as the final ExitCode message (needs separate_output_streams)",
    )
    parser.add_argument("--target", default="sagemaker-cluster:abc123def456_worker-i-0123456789abcdef0")
    parser.add_argument("--seconds", type=float, default=300.0, help="serve this long, then exit")
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a SessionFaultSpec field for the session (repeatable; see --list-faults)",
    )
    parser.add_argument("--list-faults", action="store_true", help="list the --fault names, types and defaults")
    args = parser.parse_args(argv)
    if args.list_faults:
        print(fault_table())
        return
    faults = parse_faults(args.fault, parser.error)
    if args.exit_code is not None and not faults.separate_output_streams:
        # Only the separate-stream mode sends an exit code; without it the status would be ignored.
        parser.error("--exit-code needs --fault separate_output_streams=true (only that mode sends an exit code)")
    agent = SimulatedSsmAgent().start()
    response = agent.add_session(
        args.target,
        args.text.encode("utf-8"),
        faults,
        stderr=args.stderr.encode("utf-8"),
        exit_code=args.exit_code or 0,
    )
    print(json.dumps(response), flush=True)
    print(
        f"# real plugin: sleep 30 | session-manager-plugin '{json.dumps(response)}' us-east-1 StartSession '' "
        f"'{json.dumps({'Target': args.target})}' https://ssm.us-east-1.amazonaws.com",
        flush=True,
    )
    with contextlib.suppress(KeyboardInterrupt):
        time.sleep(args.seconds)
    agent.stop()


if __name__ == "__main__":
    main()
