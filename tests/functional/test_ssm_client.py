"""Our Session Manager client against the protocol-faithful simulated agent, across every fault
knob, plus the budget and the StartSession retry policy. Its pure parts (the command wrapper, the
rate limiter, the out-of-order buffer's limits) are tests/unit/test_ssm_client.py."""

from __future__ import annotations

import json
import threading
import time

import pytest

from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.pacing import RateLimiter
from hyperpod_nccl.ssm import codec
from hyperpod_nccl.ssm.client import (
    SessionError,
    SessionErrorKind,
    SessionLimits,
    SessionRunner,
    run_data_channel,
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


def test_the_opening_frame_is_compact_json_text(agent) -> None:  # type: ignore[no-untyped-def]
    # As the plugin writes it (Go's encoding/json): a text frame, no spaces between tokens.
    response = agent.add_session("target", OUTPUT)
    run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 10)
    session = agent.session(response["SessionId"])
    assert session is not None and isinstance(session.opening, str)
    assert ", " not in session.opening and '": ' not in session.opening
    assert json.loads(session.opening)["TokenValue"] == response["TokenValue"]


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
    # The client raises once it has sent its answer; the agent's thread may record it a moment later.
    deadline = time.monotonic() + 5
    while True:
        received = list(agent.session(response["SessionId"]).received)
        answers = [m for m in received if m.message_type == codec.INPUT_STREAM_DATA]
        if answers or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert answers, "the agent never received the client's answer to the KMS handshake"
    answered = answers[0]
    statuses = {a["ActionType"]: a["ActionStatus"] for a in answered.json()["ProcessedClientActions"]}
    assert statuses == {"SessionType": 1, "KMSEncryption": 2}


def test_the_agent_waits_two_seconds_for_acks_then_closes_losing_what_was_not_acknowledged(  # type: ignore[no-untyped-def]
    agent, monkeypatch
) -> None:
    # As the real agent's PrepareToCloseChannel does: after the last output it waits up to 2 s for
    # the client's acks, then closes the channel whatever is still unacknowledged.
    from hyperpod_nccl.ssm import client

    def receive_without_acking(channel, message) -> None:  # type: ignore[no-untyped-def]
        if message.payload_type != codec.PayloadType.OUTPUT:
            return original(channel, message)
        # The output is read, its acknowledgement never sent.
        send = channel.ws.send
        channel.ws.send = lambda frame: None if codec.decode(frame).message_type == codec.ACKNOWLEDGE else send(frame)
        try:
            original(channel, message)
        finally:
            channel.ws.send = send

    original = client.DataChannel._on_stream
    monkeypatch.setattr(client.DataChannel, "_on_stream", receive_without_acking)
    response = agent.add_session("target", OUTPUT)
    started = time.monotonic()
    output, _ = run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 40)
    took = time.monotonic() - started
    session = agent.session(response["SessionId"])
    assert session is not None and not session.completed, "unacknowledged output must count as not delivered"
    assert output == EXPECTED  # what the client did receive (the agent resent it meanwhile) is kept
    assert 1.5 < took < 10, f"the agent closed after {took:.1f} s, not about 2 s after the output"


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
    assert result.throttles == 2


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
