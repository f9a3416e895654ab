"""Faults inside the monitor's own path: DynamoDB throttling, a retried Aggregate, SNS outages.
Exactly-once findings and occurrences, and no alert lost or sent twice."""

from __future__ import annotations

from typing import Any

from hyperpod_nccl.monitor.store import cluster_key
from hyperpod_nccl.monitor.sweep import SweepState, run_aggregate
from hyperpod_nccl.simulation.scenario import FaultSpec
from tests.functional.test_monitor_sweep import _store, _sweep_messages, _sweep_records, monitor  # noqa: F401 - fixture

HISTORY_SECONDS = 7 * 86400


def _occurrences(deployed: Any) -> dict[str, int]:
    cluster = deployed.simulation.scenario.cluster.name
    return {item["sk"]: int(item["occurrences"]) for item in _store(deployed).open_findings(deployed.region, cluster)}


def test_dynamodb_throttling_bursts_are_absorbed_exactly_once(simulate, monitor) -> None:  # noqa: F811
    # The local monitor runs its Lambdas with AWS_MAX_ATTEMPTS=2: a burst of one per operation.
    throttled = [
        FaultSpec(operation=f"dynamodb:{op}", error_code="ProvisionedThroughputExceededException", times=1)
        for op in ("PutItem", "UpdateItem", "Query", "BatchWriteItem")
    ]
    deployed = monitor(simulate("eks-p5", faults=throttled))
    run = deployed.sweep()
    assert run.status == "SUCCEEDED"
    assert len(_sweep_messages(run)) == 1
    occurrences = _occurrences(deployed)
    assert occurrences and set(occurrences.values()) == {1}
    assert len(_sweep_records(deployed)) == 1
    calls = deployed.emulation.faults.calls
    for op in ("PutItem", "UpdateItem", "Query"):
        assert calls.count(f"dynamodb:{op}") >= 2, f"{op} was never throttled and retried"


def test_a_retried_aggregate_changes_nothing(simulate, monitor) -> None:  # noqa: F811
    deployed = monitor(simulate("eks-p5"))
    run = deployed.sweep()
    assert run.status == "SUCCEEDED" and run.output is not None
    before = _occurrences(deployed)
    # Step Functions retries a task whose Lambda timed out after it had written: same input again.
    state = SweepState.model_validate({k: v for k, v in run.output.items() if k != "aggregate"})
    store = _store(deployed)
    again = run_aggregate(state, store, history_seconds=HISTORY_SECONDS)
    assert _occurrences(deployed) == before
    assert len(_sweep_records(deployed)) == 1
    assert again.changes == run.output["aggregate"]["changes"]
    cluster = deployed.simulation.scenario.cluster.name
    assert list(store.query(cluster_key(deployed.region, cluster), "SWEEP#"))  # still one record, above


def test_sns_outage_is_retried_and_the_alert_sent_exactly_once(simulate, monitor) -> None:  # noqa: F811
    # Two failed publishes exhaust one Notify invocation's SDK attempts (AWS_MAX_ATTEMPTS=2
    # locally); the state machine retries the task, which publishes once.
    outage = FaultSpec(operation="sns:Publish", error_code="InternalError", http_status=500, times=2)
    deployed = monitor(simulate("eks-p5", faults=[outage]))
    run = deployed.sweep()
    assert run.status == "SUCCEEDED"
    assert deployed.emulation.faults.calls.count("sns:Publish") >= 3
    assert len(_sweep_messages(run)) == 1
    assert len(_sweep_records(deployed)) == 1
