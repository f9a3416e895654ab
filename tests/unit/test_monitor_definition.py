"""The contract between the runtime and infra: handlers, environment names, ASL placeholders."""

from __future__ import annotations

import importlib
import json

import pytest

from hyperpod_nccl import thresholds
from hyperpod_nccl.monitor import (
    LAMBDA_TIMEOUT_HEADROOM_SECONDS,
    asl_placeholders,
    lambda_timeouts,
    load_definition,
    task_timeouts,
)
from hyperpod_nccl.monitor.payloads import SANDBOX_TIMED_OUT, TaskFailure, aggregate_failure_text
from hyperpod_nccl.monitor.settings import (
    ASL_FUNCTION_PLACEHOLDERS,
    ASL_MAP_CONCURRENCY_PLACEHOLDER,
    ASL_PROBE_TIMEOUT_PLACEHOLDER,
    LAMBDAS,
    PROBE_STORE_MARGIN_SECONDS,
    PROBE_TIMEOUT_SECONDS,
    MonitorSettings,
    execution_arn,
)


def _substitutions() -> dict[str, str | int]:
    values: dict[str, str | int] = {
        placeholder: f"arn:aws:lambda:us-west-2:123456789012:function:{module}"
        for module, placeholder in ASL_FUNCTION_PLACEHOLDERS.items()
    }
    values[ASL_MAP_CONCURRENCY_PLACEHOLDER] = 7
    values[ASL_PROBE_TIMEOUT_PLACEHOLDER] = PROBE_TIMEOUT_SECONDS
    return values


def test_every_handler_module_exists_and_exposes_handler() -> None:
    for function in LAMBDAS.values():
        path, attribute = function.handler.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(path), attribute))


def test_a_sweeps_execution_arn_is_its_state_machines_with_the_execution_name() -> None:
    machine = "arn:aws:states:us-west-2:123456789012:stateMachine:hpnc-sweep"
    assert execution_arn(machine, "s-1") == "arn:aws:states:us-west-2:123456789012:execution:hpnc-sweep:s-1"
    assert execution_arn(machine, "*") == "arn:aws:states:us-west-2:123456789012:execution:hpnc-sweep:*"


def test_placeholders_are_exactly_the_declared_ones() -> None:
    assert asl_placeholders() == set(_substitutions())


def test_probe_state_has_budget_transient_retry_and_catch_to_unreachable() -> None:
    definition = load_definition(_substitutions())
    branches = definition["States"]["Collect"]["Branches"]
    probe_map = next(b for b in branches if b["StartAt"] == "ProbeNodes")["States"]["ProbeNodes"]
    # The deployed ceiling goes to Discover, which sizes the sweep's concurrency under it; the Map
    # reads that from its input (Collect passes it on).
    assert definition["States"]["Discover"]["Parameters"]["max_batches_at_once"] == 7
    assert "MaxConcurrency" not in probe_map and probe_map["MaxConcurrencyPath"] == "$.batches_at_once"
    assert definition["States"]["Collect"]["Parameters"]["batches_at_once.$"] == "$.discover.batches_at_once"
    assert probe_map["ItemProcessor"]["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "EXPRESS"}
    assert probe_map["ItemSelector"]["instance_ids.$"] == "$$.Map.Item.Value"
    batch = probe_map["ItemProcessor"]["States"]["ProbeBatch"]
    assert batch["ItemSelector"]["instance_id.$"] == "$$.Map.Item.Value"
    probe = batch["ItemProcessor"]["States"]["ProbeNode"]
    assert probe["TimeoutSeconds"] == PROBE_TIMEOUT_SECONDS
    retried = {e for r in probe["Retry"] for e in r["ErrorEquals"]}
    assert "States.ALL" not in retried and "States.Timeout" not in retried
    assert all(e.startswith("Lambda.") for e in retried)
    assert probe["Catch"][0]["ErrorEquals"] == ["States.ALL"]
    assert probe["Catch"][0]["Next"] == "NodeUnreachable"


def test_settings_read_from_environment() -> None:
    settings = MonitorSettings.from_env(
        {
            "FINDINGS_TABLE_NAME": "t",
            "NODE_COVERAGE": "5",
            "WATCHED_CLUSTERS": '[{"name": "hp1", "region": "us-east-1"}]',
            "HISTORY_RETENTION_DAYS": "30",
        }
    )
    assert settings.require_table() == "t"
    assert settings.node_coverage == 5
    assert settings.clusters[0].name == "hp1"
    assert settings.history_seconds == 30 * 86400
    assert MonitorSettings.from_env({"NODE_COVERAGE": "all"}).node_coverage == "all"


def test_probe_state_leaves_room_after_the_ssm_budget_to_store_what_arrived() -> None:
    # The SSM client gives up at its budget and keeps the partial output; the state (and its
    # Lambda, whose timeout is the state's) must outlive it to store that output.
    assert task_timeouts()["probe_node"] == PROBE_TIMEOUT_SECONDS
    assert PROBE_TIMEOUT_SECONDS - thresholds.SSM_NODE_BUDGET_SECONDS >= PROBE_STORE_MARGIN_SECONDS > 0
    # The Lambda itself, stopped a little before its state, still outlives the budget.
    assert lambda_timeouts()["probe_node"] - thresholds.SSM_NODE_BUDGET_SECONDS >= 20


def test_lambda_stops_every_function_before_step_functions_gives_up_on_its_state() -> None:
    # Otherwise a state timer firing first runs the Catch path (RecordAggregateFailure) while the
    # killed function still writes.
    states, functions = task_timeouts(), lambda_timeouts()
    assert states.keys() == functions.keys()
    assert all(states[h] - functions[h] == LAMBDA_TIMEOUT_HEADROOM_SECONDS > 0 for h in states)


def test_a_stopped_aggregate_is_recorded_notified_and_fails_the_execution() -> None:
    states = load_definition(_substitutions())["States"]
    aggregate, record = states["Aggregate"], states["RecordAggregateFailure"]
    [catch] = aggregate["Catch"]
    assert catch == {"ErrorEquals": ["States.ALL"], "ResultPath": "$.aggregate_error", "Next": "RecordAggregateFailure"}
    # Never re-run a stopped Aggregate: only Lambda's own transient failures are retried.
    assert all(e.startswith("Lambda.") for r in aggregate["Retry"] for e in r["ErrorEquals"])
    # The same function with the same timeout, so the function's Lambda timeout stays Aggregate's.
    assert record["Resource"] == aggregate["Resource"] and record["TimeoutSeconds"] == aggregate["TimeoutSeconds"]
    assert task_timeouts()["aggregate"] == aggregate["TimeoutSeconds"]
    assert record["Next"] == "Notify" and record["Catch"][0]["Next"] == "Notify"
    assert record["ResultPath"] == "$.aggregate"
    done = states["Done"]
    assert {c["Next"] for c in done["Choices"]} == {"AggregateDidNotFinish", "EarlierAggregateDidNotFinish"}
    assert states["AggregateDidNotFinish"] == {
        **states["AggregateDidNotFinish"],
        "Type": "Fail",
        "ErrorPath": "$.aggregate_error.Error",
        "CausePath": "$.aggregate_error.Cause",
    }
    assert states[done["Default"]]["Type"] == "Succeed"


@pytest.mark.parametrize(
    ("error", "cause", "expected"),
    [
        (
            SANDBOX_TIMED_OUT,
            json.dumps(
                {
                    "errorType": SANDBOX_TIMED_OUT,
                    "errorMessage": "RequestId: r Error: Task timed out after 600.00 seconds",
                }
            ),
            "Aggregate timed out after 600 s (Sandbox.Timedout)",
        ),
        ("States.Timeout", "", f"Aggregate timed out after {task_timeouts()['aggregate']} s (States.Timeout)"),
        (
            "AwsCallFailed",
            json.dumps({"errorType": "AwsCallFailed", "errorMessage": "dynamodb:Query denied"}),
            "Aggregate failed: AwsCallFailed: dynamodb:Query denied",
        ),
    ],
    ids=["lambda-timeout", "state-timeout", "error"],
)
def test_the_failure_of_a_stopped_aggregate_says_how_long_it_ran(error: str, cause: str, expected: str) -> None:
    assert aggregate_failure_text(TaskFailure(Error=error, Cause=cause)).startswith(expected)
