"""Our Session Manager client against the protocol-faithful simulated agent, across every fault
knob, plus the budget, the StartSession retry policy and the rate limiter."""

from __future__ import annotations

import threading
import time

import pytest

from hyperpod_nccl import thresholds
from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.ssm import codec
from hyperpod_nccl.ssm.client import (
    DataChannel,
    RateLimiter,
    SessionError,
    SessionErrorKind,
    SessionLimits,
    SessionRunner,
    run_data_channel,
    split_exit_code,
    wrap_command,
)
from hyperpod_nccl_sim.aws import EmulatedAws, register_start_session_handler, terminated_sessions
from hyperpod_nccl_sim.node_behaviours import SessionFaultSpec
from hyperpod_nccl_sim.scenario import FaultSpec
from hyperpod_nccl_sim.ssm_agent import SimulatedSsmAgent

OUTPUT = ("probe ✓ ü " * 400 + "\n").encode() + b"\n__RC__=3\n"
EXPECTED = OUTPUT[: -len(b"\n__RC__=3\n")]


@pytest.fixture(scope="module")
def agent():  # type: ignore[no-untyped-def]
    server = SimulatedSsmAgent().start()
    yield server
    server.stop()


@pytest.mark.parametrize(
    "faults",
    [
        SessionFaultSpec(),
        SessionFaultSpec(drop_first=2),
        SessionFaultSpec(duplicate=True),
        SessionFaultSpec(reorder=True),
        SessionFaultSpec(corrupt_digest=2),
        SessionFaultSpec(stall_seconds=0.3),
        SessionFaultSpec(close_without_channel_closed=True),
        SessionFaultSpec(drop_first=1, duplicate=True, reorder=True),
    ],
    ids=["clean", "drop", "duplicate", "reorder", "bad-digest", "stall", "no-channel-closed", "combined"],
)
def test_output_arrives_complete_and_in_order_despite_faults(agent, faults) -> None:  # type: ignore[no-untyped-def]
    response = agent.add_session("target", OUTPUT, faults)
    output, exit_code = run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 10)
    assert output == EXPECTED
    assert exit_code == 3
    session = agent.session(response["SessionId"])
    # The client answered the handshake and acknowledged every output message.
    sent = [m for m in session.received if m.message_type == codec.INPUT_STREAM_DATA]
    assert sent[0].payload_type == codec.PayloadType.HANDSHAKE_RESPONSE
    assert sent[0].json()["ProcessedClientActions"][0]["ActionStatus"] == 1
    if not faults.close_without_channel_closed:
        assert session.completed


def test_duplicates_are_re_acknowledged(agent) -> None:  # type: ignore[no-untyped-def]
    response = agent.add_session("target", OUTPUT, SessionFaultSpec(duplicate=True))
    run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 10)
    acks = [
        codec.acknowledged_sequence(m)
        for m in agent.session(response["SessionId"]).received
        if m.message_type == "acknowledge"
    ]
    assert len(acks) > len(set(acks))


def test_kms_encryption_fails_closed(agent) -> None:  # type: ignore[no-untyped-def]
    response = agent.add_session("target", OUTPUT, SessionFaultSpec(kms=True))
    with pytest.raises(SessionError) as raised:
        run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 10)
    assert raised.value.kind is SessionErrorKind.KMS_ENCRYPTION
    assert "KMS" in raised.value.message
    answered = next(
        m for m in agent.session(response["SessionId"]).received if m.message_type == codec.INPUT_STREAM_DATA
    )
    statuses = {a["ActionType"]: a["ActionStatus"] for a in answered.json()["ProcessedClientActions"]}
    assert statuses == {"SessionType": 1, "KMSEncryption": 2}


def test_a_dropped_connection_is_a_retryable_transport_error(agent) -> None:  # type: ignore[no-untyped-def]
    response = agent.add_session("target", OUTPUT, SessionFaultSpec(disconnect_after=1))
    with pytest.raises(SessionError) as raised:
        run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 10)
    assert raised.value.kind is SessionErrorKind.TRANSPORT and raised.value.kind.retryable


def test_a_wrong_token_is_refused(agent) -> None:  # type: ignore[no-untyped-def]
    response = agent.add_session("target", OUTPUT)
    with pytest.raises(SessionError) as raised:
        run_data_channel(response["StreamUrl"], "not-the-token", time.monotonic() + 5)
    assert raised.value.kind is SessionErrorKind.TRANSPORT


def test_budget_expiry_keeps_the_partial_output(agent) -> None:  # type: ignore[no-untyped-def]
    response = agent.add_session("target", OUTPUT, SessionFaultSpec(stall_seconds=5))
    with pytest.raises(SessionError) as raised:
        run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 0.5)
    assert raised.value.kind is SessionErrorKind.BUDGET_EXPIRED
    assert 0 < len(raised.value.partial_output) < len(OUTPUT)
    assert EXPECTED.startswith(raised.value.partial_output)


def test_wrap_command_round_trips_the_script_and_marker() -> None:
    command = wrap_command("echo 'quoted' \"double\" $HOME\n")
    assert command.startswith("bash -c 'echo ") and "__RC__=%d" in command
    assert split_exit_code(b"out\n__RC__=0\n") == (b"out", 0)
    assert split_exit_code(b"cut off") == (b"cut off", None)


# --- StartSession through the AWS emulation ---------------------------------------------------


@pytest.fixture
def ssm(emulation: EmulatedAws, agent):  # type: ignore[no-untyped-def]
    emulation.reset()
    clients = AwsClients(
        region="us-west-2", endpoint_url=emulation.endpoint_url, session=emulation.session(), max_attempts=0
    )
    calls: list[str] = []

    def handler(target, document, parameters):  # type: ignore[no-untyped-def]
        calls.append(target)
        return agent.add_session(target, OUTPUT, SessionFaultSpec(stall_seconds=5) if "slow" in target else None)

    register_start_session_handler("123456789012/us-west-2", handler)
    yield clients.client("ssm"), calls
    emulation.reset()


def _runner(client, budget: float = 10.0) -> SessionRunner:  # type: ignore[no-untyped-def]
    return SessionRunner(ssm=client, limiter=RateLimiter(1000, 1000), budget_seconds=budget, backoff_seconds=0.01)


def test_runner_retries_throttling_then_succeeds(ssm, emulation: EmulatedAws) -> None:  # type: ignore[no-untyped-def]
    client, calls = ssm
    emulation.faults.set_faults([FaultSpec(operation="ssm:StartSession", error_code="ThrottlingException", times=2)])
    result = _runner(client).run("sagemaker-cluster:abc_worker-i-1", "true")
    assert (result.exit_code, result.attempts, len(calls)) == (3, 3, 1)


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("AccessDeniedException", SessionErrorKind.ACCESS_DENIED),
        ("TargetNotConnected", SessionErrorKind.TARGET_NOT_CONNECTED),
        ("InvalidTarget", SessionErrorKind.INVALID_TARGET),
    ],
)
def test_runner_does_not_retry_permanent_errors(ssm, emulation: EmulatedAws, code: str, kind) -> None:  # type: ignore[no-untyped-def]
    client, _ = ssm
    emulation.faults.set_faults([FaultSpec(operation="ssm:StartSession", error_code=code)])
    before = emulation.faults.calls.count("ssm:StartSession")
    with pytest.raises(SessionError) as raised:
        _runner(client).run("sagemaker-cluster:abc_worker-i-1", "true")
    assert raised.value.kind is kind and raised.value.attempts == 1 and raised.value.code == code
    assert emulation.faults.calls.count("ssm:StartSession") - before == 1


def test_budget_expiry_terminates_the_session(ssm) -> None:  # type: ignore[no-untyped-def]
    client, _ = ssm
    with pytest.raises(SessionError) as raised:
        _runner(client, budget=0.6).run("sagemaker-cluster:abc_slow-i-1", "true")
    assert raised.value.kind is SessionErrorKind.BUDGET_EXPIRED
    assert raised.value.session_id in terminated_sessions()
    assert raised.value.partial_output


# --- the shared rate limiter (logic, not timing) ----------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


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


# --- a hostile agent (a compromised node) cannot grow the client's memory ---------------------


def _fails_alone(  # type: ignore[no-untyped-def]
    agent, faults: SessionFaultSpec, limits: SessionLimits, output: bytes = OUTPUT
) -> SessionError:
    """Run one hostile session next to two clean ones: the hostile one fails with a limit error,
    never retryable (another session would meet the same agent), and the clean ones succeed."""
    hostile = agent.add_session("hostile", output, faults)
    clean = [agent.add_session(f"clean-{i}", OUTPUT) for i in range(2)]
    results: dict[str, object] = {}

    def run(name: str, response: dict[str, str]) -> None:
        try:
            results[name] = run_data_channel(
                response["StreamUrl"], response["TokenValue"], time.monotonic() + 10, limits=limits
            )
        except SessionError as error:
            results[name] = error

    threads = [threading.Thread(target=run, args=(f"clean-{i}", r)) for i, r in enumerate(clean)]
    threads.append(threading.Thread(target=run, args=("hostile", hostile)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=15)
    assert results["clean-0"] == results["clean-1"] == (EXPECTED, 3)
    error = results["hostile"]
    assert isinstance(error, SessionError), error
    assert error.kind is SessionErrorKind.LIMIT_EXCEEDED and not error.kind.retryable
    return error


def test_a_frame_over_the_limit_fails_that_session_only(agent) -> None:  # type: ignore[no-untyped-def]
    error = _fails_alone(agent, SessionFaultSpec(giant_frame_bytes=codec.MAX_FRAME_BYTES), SessionLimits())
    assert "frame over the 65536 bytes" in error.message


def test_an_out_of_order_flood_fails_at_the_buffer_limit(agent) -> None:  # type: ignore[no-untyped-def]
    limits = SessionLimits(out_of_order_messages=50)
    error = _fails_alone(agent, SessionFaultSpec(out_of_order_flood=2000), limits)
    assert "message 2 never arrived while the agent sent 51 later ones" in error.message
    # Held messages are bounded by bytes too, whatever their count.
    error = _fails_alone(agent, SessionFaultSpec(out_of_order_flood=2000), SessionLimits(out_of_order_bytes=8192))
    assert "while the agent sent 9 later ones" in error.message and "8192 bytes out of order" in error.message


def test_output_past_the_session_cap_ends_it_keeping_what_fits(agent) -> None:  # type: ignore[no-untyped-def]
    flood = OUTPUT * 10
    error = _fails_alone(agent, SessionFaultSpec(), SessionLimits(output_bytes=2 * len(OUTPUT)), flood)
    assert f"more than {2 * len(OUTPUT)} bytes of output" in error.message
    assert error.partial_output == flood[: 2 * len(OUTPUT)]


class _FloodingSocket:
    """A websocket whose agent sends ever later messages, never the first one (client side only)."""

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


def test_the_session_output_cap_holds_a_full_flight_recorder_dump_and_the_ras_status() -> None:
    assert thresholds.SSM_SESSION_MAX_OUTPUT_BYTES >= (
        thresholds.FLIGHT_RECORDER_MAX_BYTES * 4 // 3 + thresholds.RAS_STATUS_MAX_BYTES
    )
