"""The Step Functions limits the emulation enforces (hyperpod_nccl_sim/stepfunctions_limits.py), each
shown on a small state machine of its own run by the emulation's engine: the 256 KiB payload limit
(States.DataLimitExceeded, which a Catch or Retry on States.ALL does not match), the 5-minute limit of
the Express children of a Distributed Map (States.Timeout, here a 1-second limit) and the Map's
tolerated failure threshold (States.ExceedToleratedFailureThreshold)."""

from __future__ import annotations

import io
import json
import logging
import time
import urllib.request
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from hyperpod_nccl.aws_limits import STATE_PAYLOAD_MAX_BYTES
from hyperpod_nccl_sim.aws import EmulatedAws
from hyperpod_nccl_sim.stepfunctions_limits import (
    DATA_LIMIT_EXCEEDED,
    EXCEED_TOLERATED_FAILURE_THRESHOLD,
    payload_bytes,
    stepfunctions_limits_changed,
)

REGION = "us-west-2"
# An Express child that waits this long outlives the test's Express limit, EXPRESS_SECONDS.
EXPRESS_SECONDS = 1
SLOW_CHILD_SECONDS = 3


@dataclass
class Execution:
    """One finished execution: DescribeExecution's answer and its history's events."""

    description: dict[str, Any]
    events: list[dict[str, Any]]
    seconds: float

    @property
    def status(self) -> str:
        return str(self.description["status"])

    @property
    def output(self) -> Any:
        return json.loads(self.description["output"])

    def entered(self) -> list[str]:
        return [e["stateEnteredEventDetails"]["name"] for e in self.events if e["type"].endswith("StateEntered")]

    def count(self, event_type: str) -> int:
        return sum(1 for e in self.events if e["type"] == event_type)


@dataclass
class StateMachines:
    """Creates and runs state machines in the emulation."""

    emulation: EmulatedAws
    role_arn: str
    # What each function's next invocations return (function name -> JSON texts, in turn).
    results: dict[str, list[str]] = field(default_factory=dict)

    @property
    def sfn(self) -> Any:
        return self.emulation.client("stepfunctions", REGION)

    def create(self, definition: dict[str, Any]) -> str:
        return str(
            self.sfn.create_state_machine(
                name=f"limits-{uuid.uuid4().hex[:8]}", definition=json.dumps(definition), roleArn=self.role_arn
            )["stateMachineArn"]
        )

    def run(self, definition: dict[str, Any], execution_input: Any = None, timeout: float = 30.0) -> Execution:
        arn = self.create(definition)
        started = time.monotonic()
        execution_arn = self.sfn.start_execution(stateMachineArn=arn, input=json.dumps(execution_input or {}))[
            "executionArn"
        ]
        while True:
            description = self.sfn.describe_execution(executionArn=execution_arn)
            if description["status"] != "RUNNING":
                break
            assert time.monotonic() - started < timeout, f"{execution_arn} still running after {timeout} s"
            time.sleep(0.05)
        seconds = time.monotonic() - started
        events = self.sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
        return Execution(description, events, seconds)

    def map_run_item_counts(self, execution_arn: str) -> dict[str, int]:
        (map_run,) = self.sfn.list_map_runs(executionArn=execution_arn)["mapRuns"]
        return dict(self.sfn.describe_map_run(mapRunArn=map_run["mapRunArn"])["itemCounts"])

    def function(self, *results: Any) -> str:
        """A function of the emulated Lambda (moto's Docker-less one, which echoes its event); its
        next invocations return `results`, JSON-encoded, in turn (queued per function here: moto's
        own queue is one per account and Region, from which an execution an earlier test left
        running could take this test's results)."""
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as archive:
            archive.writestr("handler.py", "def handler(event, context):\n    return event\n")
        arn = self.emulation.client("lambda", REGION).create_function(
            FunctionName=f"limits-{uuid.uuid4().hex[:8]}",
            Runtime="python3.12",
            Role=self.role_arn,
            Handler="handler.handler",
            Code={"ZipFile": code.getvalue()},
        )["FunctionArn"]
        self.results[str(arn).rsplit(":", 1)[-1]] = [json.dumps(r) for r in results]
        return str(arn)

    def answer(self, original: Any) -> Any:
        """moto's Docker-less `invoke`, answering this fixture's functions from `results`."""

        def invoke(backend: Any, function_name: str, *args: Any, **kwargs: Any) -> Any:
            queued = self.results.get(function_name.split(":function:", 1)[-1].split(":", 1)[0])
            if queued:
                return queued.pop(0).encode()
            return original(backend, function_name, *args, **kwargs)

        return invoke


def _post(emulation: EmulatedAws, path: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(
        f"{emulation.endpoint_url}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request).read()


@pytest.fixture
def machines(
    emulation: EmulatedAws, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> Iterator[StateMachines]:
    """The emulation set to execute state machines, its engine calling Lambda at the emulation."""
    # moto logs each failed state with its whole input: hundreds of KiB in a failing test's report.
    caplog.set_level(logging.CRITICAL, logger="moto.stepfunctions.parser")
    _post(
        emulation,
        "/moto-api/config",
        {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}},
    )
    monkeypatch.setenv("MOTO_PORT", str(emulation.port))
    role_arn = emulation.client("iam", REGION).create_role(
        RoleName=f"limits-{uuid.uuid4().hex[:8]}", AssumeRolePolicyDocument="{}"
    )["Role"]["Arn"]
    machines = StateMachines(emulation, role_arn)
    from moto.awslambda_simple.models import LambdaSimpleBackend

    monkeypatch.setattr(LambdaSimpleBackend, "invoke", machines.answer(LambdaSimpleBackend.invoke))
    yield machines


def _payload_of(size: int) -> dict[str, str]:
    """A JSON object of exactly `size` bytes as the emulation counts them."""
    payload = {"data": ""}
    payload["data"] = "x" * (size - payload_bytes(payload))
    assert payload_bytes(payload) == size
    return payload


def _pass_then_end(name: str) -> dict[str, Any]:
    return {name: {"Type": "Pass", "End": True}}


# --- 256 KiB: States.DataLimitExceeded -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "status"),
    [(STATE_PAYLOAD_MAX_BYTES, "SUCCEEDED"), (STATE_PAYLOAD_MAX_BYTES + 1, "FAILED")],
    ids=["at-the-limit", "one-byte-over"],
)
def test_a_state_output_over_256_kib_fails_the_execution(machines: StateMachines, size: int, status: str) -> None:
    run = machines.run(
        {"StartAt": "Big", "States": {"Big": {"Type": "Pass", "Result": _payload_of(size), "End": True}}}
    )

    assert run.status == status
    if status == "FAILED":
        assert run.description["error"] == DATA_LIMIT_EXCEEDED


def test_a_branch_output_over_256_kib_fails_the_execution_under_a_catch_of_states_all(
    machines: StateMachines,
) -> None:
    branch = {
        "StartAt": "Big",
        "States": {"Big": {"Type": "Pass", "Result": _payload_of(STATE_PAYLOAD_MAX_BYTES + 1), "End": True}},
    }
    definition = {
        "StartAt": "Branches",
        "States": {
            "Branches": {
                "Type": "Parallel",
                "Branches": [branch],
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}],
                "End": True,
            },
            **_pass_then_end("Caught"),
        },
    }

    run = machines.run(definition)

    # The branch's error reaches the Parallel state under its own name, and States.ALL lets it through.
    assert (run.status, run.description["error"]) == ("FAILED", DATA_LIMIT_EXCEEDED)
    assert "Caught" not in run.entered()


@pytest.mark.parametrize(
    ("catches", "status"),
    [(["States.ALL"], "FAILED"), ([DATA_LIMIT_EXCEEDED], "SUCCEEDED")],
    ids=["states-all-does-not-catch-it", "its-own-name-does"],
)
def test_a_task_result_over_256_kib_is_not_caught_or_retried_by_states_all(
    machines: StateMachines, catches: list[str], status: str
) -> None:
    function = machines.function(_payload_of(STATE_PAYLOAD_MAX_BYTES + 1))
    definition = {
        "StartAt": "Invoke",
        "States": {
            "Invoke": {
                "Type": "Task",
                "Resource": function,
                "ResultPath": None,
                "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 1, "MaxAttempts": 2}],
                "Catch": [{"ErrorEquals": catches, "ResultPath": "$.error", "Next": "Caught"}],
                "End": True,
            },
            **_pass_then_end("Caught"),
        },
    }

    run = machines.run(definition)

    assert run.status == status
    assert run.count("LambdaFunctionScheduled") == 1  # never retried
    if status == "FAILED":
        assert run.description["error"] == DATA_LIMIT_EXCEEDED
        assert "Caught" not in run.entered()
    else:
        assert run.output["error"]["Error"] == DATA_LIMIT_EXCEEDED


def test_a_task_result_of_exactly_256_kib_is_within_the_limit(machines: StateMachines) -> None:
    """The result is the function's payload, not the whole Invoke response around it."""
    function = machines.function(_payload_of(STATE_PAYLOAD_MAX_BYTES))
    definition = {
        "StartAt": "Invoke",
        "States": {"Invoke": {"Type": "Task", "Resource": function, "ResultPath": None, "End": True}},
    }

    assert machines.run(definition).status == "SUCCEEDED"


def test_a_state_input_over_256_kib_after_parameters_fails_the_execution_before_the_task_runs(
    machines: StateMachines,
) -> None:
    function = machines.function()  # never invoked
    # The state's input is half the limit; its Parameters pass it twice.
    half = _payload_of(STATE_PAYLOAD_MAX_BYTES // 2)
    definition = {
        "StartAt": "Invoke",
        "States": {
            "Invoke": {
                "Type": "Task",
                "Resource": function,
                "Parameters": {"first.$": "$.half", "second.$": "$.half"},
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}],
                "End": True,
            },
            **_pass_then_end("Caught"),
        },
    }

    run = machines.run(definition, {"half": half})

    assert (run.status, run.description["error"]) == ("FAILED", DATA_LIMIT_EXCEEDED)
    assert run.count("LambdaFunctionScheduled") == 0
    assert "Caught" not in run.entered()


# --- Express children of a Distributed Map: States.Timeout -----------------------------------------------


def _distributed_map(**map_fields: Any) -> dict[str, Any]:
    """A Distributed Map with EXPRESS children over `$.items`: a child whose item says `slow` waits
    SLOW_CHILD_SECONDS, the others end at once."""
    child = {
        "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "EXPRESS"},
        "StartAt": "HowLong",
        "States": {
            "HowLong": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.slow", "BooleanEquals": True, "Next": "Slow"}],
                "Default": "Done",
            },
            "Slow": {"Type": "Wait", "Seconds": SLOW_CHILD_SECONDS, "Next": "Done"},
            **_pass_then_end("Done"),
        },
    }
    return {
        "StartAt": "Children",
        "States": {
            "Children": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "ItemProcessor": child,
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "MapFailed"}],
                "End": True,
                **map_fields,
            },
            **_pass_then_end("MapFailed"),
        },
    }


QUICK_AND_SLOW = {"items": [{"slow": False}, {"slow": True}]}


def test_an_express_child_still_running_at_the_limit_fails_with_states_timeout(machines: StateMachines) -> None:
    definition = _distributed_map(ToleratedFailurePercentage=100.0)

    with stepfunctions_limits_changed(express_max_seconds=EXPRESS_SECONDS):
        run = machines.run(definition, QUICK_AND_SLOW)

    assert run.status == "SUCCEEDED"  # the Map tolerates every failure
    # The quick child's output, none from the slow one, stopped at the limit rather than waited for.
    assert run.output == [{"slow": False}, None]
    assert run.seconds < SLOW_CHILD_SECONDS
    counts = machines.map_run_item_counts(run.description["executionArn"])
    assert (counts["succeeded"], counts["timedOut"], counts["failed"]) == (1, 1, 0)
    # The definition is stored as given: EXPRESS, as AWS keeps it.
    arn = run.description["stateMachineArn"]
    stored = json.loads(machines.sfn.describe_state_machine(stateMachineArn=arn)["definition"])
    assert stored["States"]["Children"]["ItemProcessor"]["ProcessorConfig"]["ExecutionType"] == "EXPRESS"


def test_without_the_express_limit_the_slow_child_runs_to_its_end(machines: StateMachines) -> None:
    with stepfunctions_limits_changed(express_max_seconds=EXPRESS_SECONDS, express_time_limit=False):
        run = machines.run(_distributed_map(ToleratedFailurePercentage=100.0), QUICK_AND_SLOW)

    assert run.output == [{"slow": False}, {"slow": True}]
    assert run.seconds >= SLOW_CHILD_SECONDS


def _map_error(run: Execution) -> str | None:
    """The Map's error as its Catch recorded it (None when the Map succeeded)."""
    return run.output.get("Error") if isinstance(run.output, dict) else None


@pytest.mark.parametrize(
    ("tolerance", "error"),
    [
        ({}, EXCEED_TOLERATED_FAILURE_THRESHOLD),
        ({"ToleratedFailurePercentage": 49.0}, EXCEED_TOLERATED_FAILURE_THRESHOLD),
        ({"ToleratedFailurePercentage": 50.0}, None),
        ({"ToleratedFailureCount": 1}, None),
        ({"ToleratedFailureCount": 1, "ToleratedFailurePercentage": 0.0}, EXCEED_TOLERATED_FAILURE_THRESHOLD),
    ],
    ids=["default-none", "percentage-below", "percentage-at", "count-at", "either-exceeded"],
)
def test_a_timed_out_child_counts_against_the_tolerated_failure_threshold(
    machines: StateMachines, tolerance: dict[str, Any], error: str | None
) -> None:
    with stepfunctions_limits_changed(express_max_seconds=EXPRESS_SECONDS):
        run = machines.run(_distributed_map(**tolerance), QUICK_AND_SLOW)

    assert run.status == "SUCCEEDED"
    assert _map_error(run) == error
    assert ("MapFailed" in run.entered()) == (error is not None)
