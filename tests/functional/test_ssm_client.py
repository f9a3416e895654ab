"""Our Session Manager client against the protocol-faithful simulated agent, across every fault
knob, plus the budget and the StartSession retry policy. Its pure parts (the command wrapper, the
rate limiter, the out-of-order buffer's limits) are tests/unit/test_ssm_client.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from websockets.exceptions import ConnectionClosedOK
from websockets.frames import Close
from websockets.protocol import State

from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.pacing import RateLimiter
from hyperpod_nccl.ssm import codec
from hyperpod_nccl.ssm.client import (
    DataChannel,
    SessionError,
    SessionErrorKind,
    SessionLimits,
    SessionRunner,
    run_data_channel,
)
from hyperpod_nccl_sim.aws import EmulatedAws, register_start_session_handler, terminated_sessions
from hyperpod_nccl_sim.node_behaviours import SessionFaultSpec
from hyperpod_nccl_sim.scenario import FaultSpec
from hyperpod_nccl_sim.ssm_agent import AgentSession, SimulatedSsmAgent

OUTPUT = ("probe ✓ ü " * 400 + "\n").encode() + b"\n__RC__=3\n"
EXPECTED = OUTPUT[: -len(b"\n__RC__=3\n")]


@pytest.fixture(scope="module")
def agent():  # type: ignore[no-untyped-def]
    server = SimulatedSsmAgent().start()
    yield server
    server.stop()


# The data-channel faults every output mode must survive, by name.
CHANNEL_FAULTS: dict[str, dict[str, object]] = {
    "clean": {},
    "drop": {"drop_first": 2},
    "duplicate": {"duplicate": True},
    "reorder": {"reorder": True},
    "bad-digest": {"corrupt_digest": 2},
    "stall": {"stall_seconds": 0.3},
    "no-channel-closed": {"close_without_channel_closed": True},
    "combined": {"drop_first": 1, "duplicate": True, "reorder": True},
}


@pytest.mark.parametrize(
    "faults",
    [SessionFaultSpec.model_validate(knobs) for knobs in CHANNEL_FAULTS.values()],
    ids=list(CHANNEL_FAULTS),
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


@pytest.mark.filterwarnings("error::DeprecationWarning")
def test_the_data_channel_uses_websockets_without_a_deprecated_form(agent) -> None:  # type: ignore[no-untyped-def]
    # The suite ignores DeprecationWarning (pyproject.toml); here it is an error, so that a `connect()`
    # left open outside `with` (websockets 17.1 warns at its first recv/send) fails this test.
    response = agent.add_session("target", OUTPUT)
    assert run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 10) == (EXPECTED, 3)


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


# --- separate stdout/stderr (a document with separateOutputStream) and the exit-code message ---

STDOUT = ("stdout ✓ " * 450 + "\n").encode()  # no __RC__ marker: the exit code comes from the agent
STDERR = ("stderr ü " * 300 + "\n").encode()


def _separate(**faults: object) -> SessionFaultSpec:
    return SessionFaultSpec(separate_output_streams=True, **faults)


def _stream_payloads(session: AgentSession | None, *types: codec.PayloadType) -> list[bytes]:
    """The payloads of the given types the agent sent, in sequence order."""
    assert session is not None
    return [m.payload for m in session.sent if m.payload_type in types]


@pytest.mark.parametrize("faults", [_separate(**knobs) for knobs in CHANNEL_FAULTS.values()], ids=list(CHANNEL_FAULTS))
def test_separate_streams_arrive_merged_with_the_exit_code_message(agent, faults) -> None:  # type: ignore[no-untyped-def]
    # The client's API has one output: stdout and stderr merged in the order the agent sent them
    # (sequence order). The exit code comes from the final ExitCode message: stdout has no marker.
    response = agent.add_session("target", STDOUT, faults, stderr=STDERR, exit_code=7)
    output, exit_code = run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 10)
    session = agent.session(response["SessionId"])
    assert exit_code == 7
    assert output == b"".join(_stream_payloads(session, codec.PayloadType.OUTPUT, codec.PayloadType.STDERR))
    # What the agent sent: stdout as Output (1), stderr as StdErr (11), interleaved as two pipes read
    # at once, then one ExitCode (12) message, last, with the exact text of the real agent.
    assert b"".join(_stream_payloads(session, codec.PayloadType.OUTPUT)) == STDOUT
    assert b"".join(_stream_payloads(session, codec.PayloadType.STDERR)) == STDERR
    types = [m.payload_type for m in session.sent]
    assert types.index(codec.PayloadType.STDERR) < len(types) - 1 - types[::-1].index(codec.PayloadType.OUTPUT)
    assert types[-1] == codec.PayloadType.EXIT_CODE and types.count(codec.PayloadType.EXIT_CODE) == 1
    assert session.sent[-1].payload == b"EXIT_CODE: 7"
    if not faults.close_without_channel_closed:
        assert session.completed


@pytest.mark.parametrize("code", [0, 1, 127, -1], ids=["ok", "failed", "not-found", "killed-by-signal"])
def test_the_exit_code_message_is_the_exit_code_without_a_marker(agent, code: int) -> None:  # type: ignore[no-untyped-def]
    # -1 is what the agent reports for a process a signal killed (Go's ExitError.ExitCode()).
    response = agent.add_session("target", b"done\n", _separate(), exit_code=code)
    output, exit_code = run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 10)
    assert (output, exit_code) == (b"done\n", code)


def test_the_marker_wins_over_the_exit_code_message(agent) -> None:  # type: ignore[no-untyped-def]
    # Our wrapper's `bash -c` exits 0 after printing the command's status as the marker: the agent's
    # ExitCode is the wrapper's, the marker the command's.
    response = agent.add_session("target", OUTPUT, _separate(), stderr=b"a warning\n", exit_code=0)
    output, exit_code = run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 10)
    assert exit_code == 3
    assert output.replace(b"a warning\n", b"", 1) == EXPECTED


def test_stderr_only_sends_no_output_message(agent) -> None:  # type: ignore[no-untyped-def]
    # The agent never sends an empty payload: a command that writes nothing to stdout sends no Output.
    response = agent.add_session("target", b"", _separate(), stderr=b"bash: nvidia-smi: not found\n", exit_code=127)
    output, exit_code = run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 10)
    assert (output, exit_code) == (b"bash: nvidia-smi: not found\n", 127)
    session = agent.session(response["SessionId"])
    assert not _stream_payloads(session, codec.PayloadType.OUTPUT)


@pytest.mark.parametrize("separate", [False, True], ids=["merged", "separate"])
def test_the_handshake_is_that_of_the_real_agent_in_either_mode(agent, separate: bool) -> None:  # type: ignore[no-untyped-def]
    # The document's separateOutputStream does not travel in the handshake (Properties stay null);
    # only HandshakeComplete's CustomerMessage differs: the agent asks a client announcing a version
    # up to 1.2.295 (ours says 1.2.0.0) to upgrade. Our client keeps it and goes on.
    response = agent.add_session("target", STDOUT, SessionFaultSpec(separate_output_streams=separate))
    output, exit_code = run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 10)
    assert (output, exit_code) == (STDOUT, 0 if separate else None)
    session = agent.session(response["SessionId"])
    request, complete = session.sent[0], session.sent[1]
    assert request.payload_type == codec.PayloadType.HANDSHAKE_REQUEST
    action = request.json()["RequestedClientActions"][0]
    assert action["ActionParameters"] == {"SessionType": "NonInteractiveCommands", "Properties": None}
    assert complete.payload_type == codec.PayloadType.HANDSHAKE_COMPLETE
    message = complete.json()["CustomerMessage"]
    assert ("1.2.312.0" in message) if separate else message == ""


# --- how a session ends: channel_closed, a close without it, a dropped connection -------------


@pytest.mark.parametrize(
    ("stdout", "faults", "exit_code"),
    [
        (OUTPUT, SessionFaultSpec(), 3),
        (OUTPUT, SessionFaultSpec(close_without_channel_closed=True), 3),
        (STDOUT, SessionFaultSpec(), None),
        (STDOUT, _separate(), 5),
        (STDOUT, _separate(close_without_channel_closed=True), 5),
    ],
    ids=["marker", "marker-no-channel-closed", "no-marker", "exit-code", "exit-code-no-channel-closed"],
)
def test_a_session_that_ended_returns_its_output(agent, stdout: bytes, faults, exit_code) -> None:  # type: ignore[no-untyped-def]
    # channel_closed says the session ended; without it, the exit marker or the ExitCode message
    # says the command finished (only the goodbye was lost).
    response = agent.add_session("target", stdout, faults, exit_code=5)
    output, code = run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 10)
    assert output == (EXPECTED if stdout == OUTPUT else stdout)
    assert code == exit_code


@pytest.mark.parametrize(
    ("stdout", "faults", "complete"),
    [
        (OUTPUT, SessionFaultSpec(disconnect_after=1), False),
        (OUTPUT, _separate(disconnect_after=2), False),
        # Everything but the ExitCode message: the command's output is all there, its end is not.
        (STDOUT, _separate(disconnect_after=len(codec.utf8_chunks(STDOUT)) + len(codec.utf8_chunks(STDERR))), True),
        # The whole output then a close without channel_closed, and nothing that says the command
        # finished: the client cannot tell it from a cut, so it does not pretend to.
        (STDOUT, SessionFaultSpec(close_without_channel_closed=True), True),
    ],
    ids=["mid-output", "mid-output-separate", "before-the-exit-code", "no-channel-closed-no-marker"],
)
def test_a_session_cut_off_is_flagged_incomplete_with_what_arrived(agent, stdout: bytes, faults, complete) -> None:  # type: ignore[no-untyped-def]
    response = agent.add_session("target", stdout, faults, stderr=STDERR if faults.separate_output_streams else b"")
    with pytest.raises(SessionError) as raised:
        run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 10)
    error = raised.value
    assert error.kind is SessionErrorKind.TRANSPORT and error.kind.retryable
    assert "closed before the command finished" in error.message
    sent = _stream_payloads(agent.session(response["SessionId"]), codec.PayloadType.OUTPUT, codec.PayloadType.STDERR)
    everything = b"".join(sent)
    assert error.partial_output and everything.startswith(error.partial_output)
    assert (error.partial_output == everything) is complete


class _SocketClosedByTheAgent:
    """A websocket the agent has closed: it still hands over the frames that arrived before the
    close (as websockets' sync connection does), then reports the close; sending fails."""

    protocol = SimpleNamespace(state=State.CLOSED)

    def __init__(self, frames: list[bytes]) -> None:
        self.frames = frames
        self.close = ConnectionClosedOK(Close(1000, ""), Close(1000, ""), True)

    def recv(self, timeout: float | None = None) -> bytes:
        if self.frames:
            return self.frames.pop(0)
        raise self.close

    def send(self, frame: bytes | str) -> None:
        raise self.close


def test_output_read_after_the_agent_closed_is_kept_though_it_cannot_be_acked() -> None:
    # The real agent closes 2 s after its last message whether or not the acks came: what arrived
    # before the close is the command's output, though its acks can no longer be sent.
    payloads = [
        (codec.PayloadType.OUTPUT, b"data\n"),
        (codec.PayloadType.STDERR, b"oops\n"),
        (codec.PayloadType.EXIT_CODE, b"EXIT_CODE: 4"),
    ]
    frames = [
        codec.stream_message(codec.OUTPUT_STREAM_DATA, seq, payload_type, payload).encode()
        for seq, (payload_type, payload) in enumerate(payloads)
    ]
    channel = DataChannel(_SocketClosedByTheAgent(frames), "token")  # type: ignore[arg-type]
    channel.run(time.monotonic() + 5)
    assert (bytes(channel.output), channel.exit_code) == (b"data\noops\n", 4)


# --- the agent's command line ------------------------------------------------------------------

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


def _agent_process(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "hyperpod_nccl_sim.ssm_agent", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(FUNCTIONS)},
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--text", "x" * 3000 + "\n__RC__=5\n", "--fault", "drop_first=2"], (b"x" * 3000, 5)),
        (
            [
                *("--text", "data\n", "--stderr", "oops\n", "--exit-code", "4"),
                *("--fault", "separate_output_streams=true", "--fault", "reorder=yes", "--fault", "drop_first=1"),
            ],
            (b"data\noops\n", 4),
        ),
    ],
    ids=["drop", "separate-streams"],
)
def test_the_agent_command_line_serves_a_session_with_its_faults(args: list[str], expected) -> None:  # type: ignore[no-untyped-def]
    process = _agent_process("--seconds", "20", *args)
    try:
        assert process.stdout is not None
        response = json.loads(process.stdout.readline())
        assert run_data_channel(response["StreamUrl"], response["TokenValue"], time.monotonic() + 10) == expected
    finally:
        process.terminate()
        process.communicate(timeout=10)


def test_a_bad_fault_on_the_command_line_is_one_error_line_and_status_2() -> None:
    process = _agent_process("--fault", "drop_first=two", "--seconds", "5")
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 2
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == (
        "python -m hyperpod_nccl_sim.ssm_agent: error: --fault drop_first='two': "
        "Input should be a valid integer, unable to parse string as an integer"
    )
