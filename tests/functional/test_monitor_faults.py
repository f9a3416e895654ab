"""Faults inside the monitor's own path: DynamoDB throttling and conditional-write conflicts, a
retried Aggregate, a lock that could not be released, SNS outages. Exactly-once findings and
occurrences, and no alert lost or sent twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from hyperpod_nccl.monitor.payloads import SweepState
from hyperpod_nccl.monitor.states.aggregate import run_aggregate
from hyperpod_nccl.monitor.store import cluster_key
from hyperpod_nccl_sim.node_behaviours import NodeBehaviour, SessionFaultSpec, XidSpec
from hyperpod_nccl_sim.scenario import FaultSpec, Scenario
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
    # Not even Aggregate's own failure handling could release the lock: the error escaped the
    # function, so the execution fails (the monitor's alarm fires) after recording why.
    assert first.status == "FAILED"
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


# --- Lambda killed at its timeout -------------------------------------------------------------


# (The rows "Lambda killed at its timeout" of tests/functional/test_fault_matrix.py run these
# helpers: an Aggregate, a ProbeNode and a CloudWatch scan each stopped by Lambda.)


def stall_aggregate_at(monkeypatch: Any, call: int, on_stall: Callable[[], None] | None = None) -> list[int]:
    """Make the Aggregate hang in its `call`-th FINDING item write (`Store.record_finding_seen`:
    its first findings writes, after the diff was stored) until the emulated Lambda ends it at
    its timeout; later calls (the failure recorder's) run normally. `on_stall` runs as the stall
    begins. Returns the calls seen.
    A patch of the product's code in this process: the monitor must run `sandboxes="threads"`."""
    from hyperpod_nccl.monitor.store import Store
    from hyperpod_nccl_sim.sandboxes import frozen_event

    original = Store.record_finding_seen
    calls: list[int] = []

    def record_finding_seen(store: Store, *args: Any, **kwargs: Any) -> Any:
        frozen = frozen_event()
        if frozen is not None and threading.current_thread().name.endswith("-aggregate"):
            calls.append(len(calls) + 1)
            if len(calls) == call:
                if on_stall is not None:
                    on_stall()
                frozen.wait(60)  # until the emulated Lambda ended this invocation
        return original(store, *args, **kwargs)

    monkeypatch.setattr(Store, "record_finding_seen", record_finding_seen)
    return calls


def hanging_gpu_tools(scenario: Scenario) -> None:
    """Every node shows Xid 79 (a GPU fallen off the bus) and its GPU tools hang: the probe's
    output stops before dcgm_health, the first GPU tool the probe runs after the kernel log."""
    assert scenario.node_behaviours is not None
    scenario.node_behaviours.defaults = NodeBehaviour(
        xids=[XidSpec(gpu=2, code=79)],
        session_faults=[SessionFaultSpec(stall_at_section="dcgm_health", stall_seconds=30)],
    )


def ssm_budget(monkeypatch: Any, seconds: float, *, backoff_seconds: float | None = None) -> None:
    """The SSM budget scaled down for the test (deployed: thresholds.SSM_NODE_BUDGET_SECONDS), and
    with `backoff_seconds` the retries' first backoff (deployed: 1 s, doubling); the runner is
    otherwise the product's own (its paced client, pacer and output limits)."""
    from hyperpod_nccl.collectors import node_probes

    product_runner = node_probes._runner

    def runner(ctx: Any) -> Any:
        built = product_runner(ctx)
        built.budget_seconds = seconds
        if backoff_seconds is not None:
            built.backoff_seconds = backoff_seconds
        return built

    monkeypatch.setattr(node_probes, "_runner", runner)


def open_findings(deployed: Any) -> list[dict[str, Any]]:
    cluster = deployed.simulation.scenario.cluster.name
    return _store(deployed).open_findings(deployed.region, cluster)


def test_a_node_whose_gpu_tools_hang_keeps_what_it_sent(simulate, monitor, monkeypatch) -> None:  # noqa: F811
    # Scaled down: a 2 s SSM budget in a 10 s probe state (its Lambda stops at 5 s: a loaded 2-core
    # machine needs the margin to store the result), as 180 s in 210 s (205 s) when deployed.
    ssm_budget(monkeypatch, 2.0)
    # Threads: ssm_budget patches the product's code in this process.
    deployed = monitor(simulate("healthy-eks", edit=hanging_gpu_tools), probe_timeout_seconds=10, sandboxes="threads")
    run = deployed.sweep()
    assert run.status == "SUCCEEDED"
    probes = deployed.calls_of(run, "probe_node")
    assert probes and not any(p.timed_out for p in probes)
    titles = [str(item["title"]) for item in open_findings(deployed)]
    # What arrived before the hang is stored and checked: the kernel log's Xid 79.
    assert sum("Xid 79" in t for t in titles) == len(probes), titles
    cut = [t for t in titles if "probe cut at 2 s: sections dcgm_health.." in t]
    assert len(cut) == len(probes), titles
    assert not any("not reachable" in t or "before storing a result" in t for t in titles)


def test_lambda_at_its_timeout_keeps_what_was_written_and_lets_nothing_more_through(emulation, monkeypatch) -> None:
    from botocore.endpoint import Endpoint

    from hyperpod_nccl_sim import serverless

    monkeypatch.setattr(Endpoint, "_send", serverless.freezing(Endpoint._send))
    sqs = emulation.client("sqs", "us-west-2")
    queue = sqs.create_queue(QueueName="lambda-timeout-writes")["QueueUrl"]
    ended: list[BaseException] = []

    def handler(event: Any, context: Any) -> None:
        sqs.send_message(QueueUrl=queue, MessageBody="before the timeout")
        time.sleep(0.6)
        try:
            sqs.send_message(QueueUrl=queue, MessageBody="after the timeout")
        except BaseException as error:  # what Lambda's freeze looks like from the inside
            ended.append(error)
            raise

    context = serverless.LambdaContext("writer", "arn:aws:lambda:us-west-2:123456789012:function:writer", "request-1")
    assert serverless.run_until(handler, {}, context, 0.3) == (False, None)
    time.sleep(0.6)
    received = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
    assert [m["Body"] for m in received] == ["before the timeout"]
    assert ended and not isinstance(ended[0], Exception)  # no `except Exception` can carry on
    # Returning in time is unaffected.
    assert serverless.run_until(lambda event, ctx: event["x"], {"x": 1}, context, 5) == (True, 1)


def test_the_probe_batches_run_as_express_children_under_their_time_limit(simulate, monitor) -> None:  # noqa: F811
    # Scaled down: Express children stopped at 2 s while each node's GPU tools hang for 30 s (the
    # probe state allows 8 s), as 5 minutes against the 210 s probe state when deployed. The limit
    # applies to the deployed definition's children; the parent tolerates every lost child.
    deployed = monitor(simulate("healthy-eks", edit=hanging_gpu_tools), probe_timeout_seconds=8, express_max_seconds=2)
    run = deployed.sweep()
    assert run.status == "SUCCEEDED"
    sfn = deployed.client("stepfunctions")
    (map_run,) = sfn.list_map_runs(executionArn=run.execution_arn)["mapRuns"]
    counts = sfn.describe_map_run(mapRunArn=map_run["mapRunArn"])["itemCounts"]
    assert counts["timedOut"] == counts["total"] >= 1, counts
