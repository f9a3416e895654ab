"""Faults inside the monitor's own path: DynamoDB throttling and conditional-write conflicts, a
retried Aggregate, a lock that could not be released, SNS outages. Exactly-once findings and
occurrences, and no alert lost or sent twice."""

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


def _conflict(operation: str) -> FaultSpec:
    """One write refused as if another writer had changed the item first."""
    return FaultSpec(
        operation=operation,
        error_code="ConditionalCheckFailedException",
        message="The conditional request failed",
        times=1,
    )


def test_conflicts_on_the_lock_writes_are_retried_and_count_once(simulate, monitor) -> None:  # noqa: F811
    # The trigger's first PutItem takes the cluster's lock, Aggregate's first DeleteItem releases
    # it: both are conditional writes, each refused once here as if another writer had been
    # first. The trigger re-reads and takes the lock; Aggregate re-reads and releases it.
    deployed = monitor(simulate("eks-p5"))
    injector = deployed.emulation.faults
    injector.injected.clear()
    for operation in ("dynamodb:PutItem", "dynamodb:DeleteItem"):
        injector.add_fault(_conflict(operation))
    run = deployed.sweep()
    assert sorted(injector.injected) == ["dynamodb:DeleteItem", "dynamodb:PutItem"]
    assert run.status == "SUCCEEDED"
    assert len(deployed.executions()) == 1
    assert len(_sweep_messages(run)) == 1
    [record] = _sweep_records(deployed)
    assert record["status"] in ("complete", "partial") and record["failure"] == ""
    occurrences = _occurrences(deployed)
    assert occurrences and set(occurrences.values()) == {1}
    cluster = deployed.simulation.scenario.cluster.name
    assert _store(deployed).get(cluster_key(deployed.region, cluster), "LOCK") is None

    second = deployed.sweep()  # the next sweep counts each open finding once more, no more
    assert second.status == "SUCCEEDED"
    assert set(_occurrences(deployed).values()) == {2}
    assert len(_sweep_records(deployed)) == 2


def test_a_conflict_while_folding_a_trigger_is_retried_and_swept_once(simulate, monitor) -> None:  # noqa: F811
    # A trigger arriving during a sweep appends itself to the lock's pending list with a
    # conditional UpdateItem; refused once (the lock looked released), it re-reads the lock,
    # sees the sweep still running and folds itself in once.
    deployed = monitor(simulate("healthy-eks"))
    first = deployed.schedule_tick("tick-1")
    [started] = first["outcomes"]
    injector = deployed.emulation.faults
    injector.injected.clear()
    injector.add_fault(_conflict("dynamodb:UpdateItem"))
    second = deployed.schedule_tick("tick-2")
    assert injector.injected == ["dynamodb:UpdateItem"]
    assert [o["status"] for o in second["outcomes"]] == ["folded"]
    run = deployed.wait(deployed.execution_arn(started["sweep_id"]))
    assert run.status == "SUCCEEDED"
    assert len(deployed.executions()) == 1
    assert [v.name for v in run.states].count("Discover") == 2  # the folded tick, swept by the same execution
    records = _sweep_records(deployed)
    assert len(records) == 2
    follow_up = next(r for r in records if r["sweep_id"].endswith("-f1"))
    assert follow_up["triggers"] == [second["outcomes"][0]["trigger_id"]]
    cluster = deployed.simulation.scenario.cluster.name
    assert _store(deployed).get(cluster_key(deployed.region, cluster), "LOCK") is None


def test_a_lock_aggregate_could_not_release_is_taken_over_by_the_next_trigger(simulate, monitor) -> None:  # noqa: F811
    denied = FaultSpec(operation="dynamodb:DeleteItem", error_code="AccessDeniedException", http_status=403)
    deployed = monitor(simulate("healthy-eks"))
    cluster = deployed.simulation.scenario.cluster.name
    deployed.emulation.faults.add_fault(denied)
    first = deployed.sweep()
    deployed.emulation.faults.set_faults([])
    assert first.status == "SUCCEEDED"
    [record] = _sweep_records(deployed)
    assert record["status"] == "failed" and "grant dynamodb:DeleteItem" in record["failure"]
    [alert] = _sweep_messages(first)  # the operator is told why
    assert "dynamodb:DeleteItem" in alert["content"]["description"]
    assert _store(deployed).get(cluster_key(deployed.region, cluster), "LOCK") is not None

    # The lock's lease would block the cluster for hours; its execution has ended, so the next
    # tick takes the lock over instead of folding into a sweep that will never run.
    second = deployed.sweep()
    assert second.status == "SUCCEEDED"
    assert len(deployed.executions()) == 2
    assert [r["status"] for r in _sweep_records(deployed)].count("failed") == 1
    assert len(_sweep_records(deployed)) == 2
    assert _store(deployed).get(cluster_key(deployed.region, cluster), "LOCK") is None


def test_a_lost_permission_alerts_once_even_on_a_healthy_cluster(simulate, monitor) -> None:  # noqa: F811
    # Denied logs leave the monitor blind to every log signature: that is news once, not every sweep.
    denied = FaultSpec(operation="logs:FilterLogEvents", error_code="AccessDeniedException")
    deployed = monitor(simulate("healthy-eks", faults=[denied]))
    first = deployed.sweep()
    assert first.status == "SUCCEEDED"
    [message] = _sweep_messages(first)
    assert "monitor denied logs:FilterLogEvents" in message["content"]["title"]
    assert "grant logs:FilterLogEvents" in message["content"]["description"]

    second = deployed.sweep()
    assert second.status == "SUCCEEDED" and _sweep_messages(second) == []

    deployed.emulation.faults.set_faults([])  # granted back: only the incomplete scan resolves
    recovered = _sweep_messages(deployed.sweep())
    assert all("monitor denied" not in m["content"]["title"] for m in recovered)
    deployed.emulation.faults.set_faults([denied])  # and lost again: told again
    [again] = _sweep_messages(deployed.sweep())
    assert "monitor denied logs:FilterLogEvents" in again["content"]["title"]
