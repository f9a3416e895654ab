"""A protocol-faithful simulated SSM agent on loopback (the agent side of the data channel).

It accepts the client's OpenDataChannelInput (checking the token), runs the 5→6→7 handshake
of NonInteractiveCommands, streams the session's output in 1024-byte chunks (UTF-8 kept whole),
acknowledges and buffers client messages, retransmits its own until acknowledged, and ends
with `channel_closed`. Fault knobs (`SessionFaultSpec`) drop, duplicate, reorder and corrupt
frames, stall (halfway or before a named probe section), disconnect, skip `channel_closed` or
request KMS encryption; hostile ones flood messages out of order or send a giant frame.

Run `python -m hyperpod_nccl_sim.ssm_agent` to start one on its own: it prints a
StartSession response (StreamUrl, TokenValue, SessionId) any Session Manager client can use.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

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


@dataclass
class AgentSession:
    """One session the agent will serve: who may open it and what it answers."""

    session_id: str
    token: str
    target: str
    output: bytes
    faults: SessionFaultSpec = field(default_factory=SessionFaultSpec)
    opened: bool = False
    completed: bool = False
    received: list[ClientMessage] = field(default_factory=list)
    # The client's OpenDataChannelInput frame, as received (tests read how the client wrote it).
    opening: str | bytes | None = None


class SimulatedSsmAgent:
    """A websocket server on 127.0.0.1 serving the sessions registered with `add_session`."""

    def __init__(self, is_terminated: Callable[[str], bool] | None = None) -> None:
        self._sessions: dict[str, AgentSession] = {}
        self._lock = threading.Lock()
        self._is_terminated = is_terminated or (lambda _sid: False)
        self._server: Server = serve(self._handle, "127.0.0.1", 0, compression=None, max_size=None)
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
        self, target: str, output: bytes, faults: SessionFaultSpec | None = None, session_id: str | None = None
    ) -> dict[str, str]:
        """Register a session and return the StartSession response that opens it."""
        session = AgentSession(
            session_id=session_id or f"sim-{uuid.uuid4().hex[:17]}",
            token=secrets.token_urlsafe(32),
            target=target,
            output=output,
            faults=faults or SessionFaultSpec(),
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
        self._send(
            PayloadType.HANDSHAKE_COMPLETE,
            codec.json_bytes({"HandshakeTimeToComplete": elapsed_ns, "CustomerMessage": ""}),
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
        before, after = self.session.output, b""
        if self.faults.stall_at_section:
            marker = f"{begin_line(self.faults.stall_at_section)}\n".encode()
            cut = self.session.output.find(marker)
            if cut >= 0:
                before, after = self.session.output[:cut], self.session.output[cut:]
        chunks = codec.utf8_chunks(before)
        stall_at = len(chunks) if after else len(chunks) // 2
        chunks += codec.utf8_chunks(after)
        messages = [self._message(PayloadType.OUTPUT, chunk) for chunk in chunks]
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
        self.out_seq += 1
        return message

    def _send(self, payload_type: PayloadType, payload: bytes) -> None:
        self._transmit(self._message(payload_type, payload), first=True)

    def _transmit(self, message: ClientMessage, *, first: bool) -> None:
        """Send a stream message the first time, applying the drop/corrupt/duplicate knobs to
        the first output frames (retransmission has to recover them)."""
        frame = self.outgoing[message.sequence_number].frame
        if first and message.payload_type == PayloadType.OUTPUT:
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


def main() -> None:
    """Start an agent with one session and print its StartSession response."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--text", default="hello from the simulated SSM agent\n__RC__=0\n", help="output to stream")
    parser.add_argument("--target", default="sagemaker-cluster:abc123def456_worker-i-0123456789abcdef0")
    parser.add_argument("--seconds", type=float, default=300.0, help="serve this long, then exit")
    args = parser.parse_args()
    agent = SimulatedSsmAgent().start()
    response = agent.add_session(args.target, args.text.encode("utf-8"))
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
