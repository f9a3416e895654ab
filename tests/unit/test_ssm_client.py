"""Our Session Manager client's pure parts: the command wrapper, the shared rate limiter (on a fake
clock) and the out-of-order buffer's limits (against a scripted socket). The data channel against
the simulated agent is tests/functional/test_ssm_client.py."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from websockets.protocol import State

from hyperpod_nccl import thresholds
from hyperpod_nccl.pacing import RateLimiter
from hyperpod_nccl.ssm import codec
from hyperpod_nccl.ssm.client import (
    DataChannel,
    SessionError,
    SessionErrorKind,
    SessionLimits,
    split_exit_code,
    wrap_command,
)
from tests.builders import FakeClock


def test_wrap_command_round_trips_the_script_and_marker() -> None:
    command = wrap_command("echo 'quoted' \"double\" $HOME\n")
    assert command.startswith("bash -c 'echo ") and "__RC__=%d" in command
    assert split_exit_code(b"out\n__RC__=0\n") == (b"out", 0)
    assert split_exit_code(b"cut off") == (b"cut off", None)


# --- the shared rate limiter (logic, not timing) ----------------------------------------------


def test_rate_limiter_allows_a_burst_then_paces_at_the_rate() -> None:
    clock = FakeClock()
    limiter = RateLimiter(3.0, burst=3, clock=clock, sleep=clock.sleep)
    for _ in range(9):
        assert limiter.acquire()
    # 3 immediately, then 6 more at 3 per second: 2 seconds of waiting in total.
    assert clock.now == pytest.approx(2.0)
    assert all(s == pytest.approx(1 / 3) for s in clock.slept)


def test_rate_limiter_gives_up_at_the_deadline() -> None:
    clock = FakeClock()
    limiter = RateLimiter(1.0, burst=1, clock=clock, sleep=clock.sleep)
    assert limiter.acquire(deadline=10)
    assert not limiter.acquire(deadline=0.5)
    assert clock.slept == []


# --- a hostile agent cannot grow the client's memory -----------------------------------------


class _FloodingSocket:
    """A websocket whose agent sends ever later messages, never the first one (client side only)."""

    protocol = SimpleNamespace(state=State.OPEN)

    def __init__(self) -> None:
        self.next_seq = 1
        self.sent = 0

    def recv(self, timeout: float) -> bytes:
        message = codec.stream_message(codec.OUTPUT_STREAM_DATA, self.next_seq, codec.PayloadType.OUTPUT, b"F" * 1024)
        self.next_seq += 1
        return message.encode()

    def send(self, frame: object) -> None:
        self.sent += 1


def test_the_out_of_order_buffer_never_holds_more_than_its_limits() -> None:
    limits = SessionLimits(out_of_order_messages=300, out_of_order_bytes=100 * 1024)
    socket = _FloodingSocket()
    channel = DataChannel(socket, "token", limits=limits)  # type: ignore[arg-type]
    with pytest.raises(SessionError) as raised:
        channel.run(time.monotonic() + 10)
    assert raised.value.kind is SessionErrorKind.LIMIT_EXCEEDED
    assert len(channel._buffer) == 100 and channel._buffered_bytes == 100 * 1024
    assert socket.next_seq == 102  # it stopped reading at the limit


def test_a_sequence_number_far_ahead_is_refused_without_holding_it() -> None:
    socket = _FloodingSocket()
    socket.next_seq = 10**12
    channel = DataChannel(socket, "token", limits=SessionLimits())  # type: ignore[arg-type]
    with pytest.raises(SessionError, match="up to 1000000000000"):
        channel.run(time.monotonic() + 10)
    assert channel._buffer == {}


class _ClosingSocket:
    """A websocket the service has started to close (its close frame read, the messages before it
    still queued): websockets would block a send here until the close completes."""

    protocol = SimpleNamespace(state=State.CLOSING)

    def __init__(self, frames: list[bytes]) -> None:
        self.frames = frames
        self.sent: list[object] = []

    def recv(self, timeout: float) -> bytes:
        return self.frames.pop(0)

    def send(self, frame: object) -> None:
        self.sent.append(frame)


def test_messages_read_after_the_service_began_closing_are_kept_and_not_acknowledged() -> None:
    payloads = [(codec.PayloadType.OUTPUT, b"tail of the output\n"), (codec.PayloadType.EXIT_CODE, b"EXIT_CODE: 0")]
    frames = [
        codec.stream_message(codec.OUTPUT_STREAM_DATA, seq, payload_type, payload).encode()
        for seq, (payload_type, payload) in enumerate(payloads)
    ]
    frames.append(codec.channel_closed("session", "i-0123456789abcdef0", "").encode())
    socket = _ClosingSocket(frames)
    channel = DataChannel(socket, "token")  # type: ignore[arg-type]
    channel.run(time.monotonic() + 5)
    assert (bytes(channel.output), channel.exit_code) == (b"tail of the output\n", 0)
    assert socket.sent == []


# --- the session's output cap -------------------------------------------------------------------


def test_the_session_output_cap_holds_a_full_flight_recorder_dump_and_the_ras_status() -> None:
    assert thresholds.SSM_SESSION_MAX_OUTPUT_BYTES >= (
        thresholds.FLIGHT_RECORDER_MAX_BYTES * 4 // 3 + thresholds.RAS_STATUS_MAX_BYTES
    )
