"""The serverless monitor end to end: the real state machine definition executed by the
emulation's Step Functions, Lambda tasks dispatched in-process to the real handlers, against the
simulated eks-p5 cluster; findings read back from DynamoDB, notifications from an SQS queue
subscribed to the alerts topic."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hyperpod_nccl.incidents.models import Affected, Incident, RootCause
from hyperpod_nccl.models.findings import Priority
from hyperpod_nccl.monitor.alert_messages import INCIDENT_EVENT_TYPES, SWEEP_EVENT_TYPES, ChatbotNotification
from hyperpod_nccl.monitor.code_version import code_version
from hyperpod_nccl.monitor.diff import SweepDiff
from hyperpod_nccl.monitor.incident_tracking import IncidentChange, IncidentSweep, load_stored
from hyperpod_nccl.monitor.payloads import NotifyOutput, SweepRef, SweepState
from hyperpod_nccl.monitor.states.notify import run_notify
from hyperpod_nccl.monitor.store import DIFF, INCIDENTS, Store, cluster_key
from hyperpod_nccl.references import NODE_HARDWARE
from hyperpod_nccl.sanitize import for_slack
from hyperpod_nccl_sim.runtime import SimulatedCluster
from hyperpod_nccl_sim.scenario import FaultSpec
from hyperpod_nccl_sim.serverless import LocalMonitor

EVENTS = Path(__file__).resolve().parents[1] / "data" / "events"
MonitorFactory = Callable[..., LocalMonitor]


@pytest.fixture
def monitor() -> Iterator[MonitorFactory]:
    """Deploy the monitor into a running simulation: `monitor(sim, failing_functions=...)`."""
    started: list[LocalMonitor] = []

    def factory(simulation: SimulatedCluster, **kwargs: Any) -> LocalMonitor:
        kwargs.setdefault("node_coverage", 2)  # keep each sweep fast; coverage is not under test here
        deployed = LocalMonitor(simulation, **kwargs).start()
        started.append(deployed)
        return deployed

    yield factory
    for deployed in started:
        deployed.stop()


def _store(monitor: LocalMonitor) -> Store:
    return monitor.store()


def _sweep_records(monitor: LocalMonitor) -> list[dict[str, Any]]:
    cluster = monitor.simulation.scenario.cluster.name
    return list(_store(monitor).query(cluster_key(monitor.region, cluster), "SWEEP#"))


def _sweep_messages(run: Any) -> list[dict[str, Any]]:
    """The per-sweep findings messages of a run (incident messages go to their own threads)."""
    return [m for m in run.notifications if m["metadata"]["eventType"] not in INCIDENT_EVENT_TYPES.values()]


def _event(name: str, **detail_updates: Any) -> dict[str, Any]:
    event = json.loads((EVENTS / name).read_text())
    event.pop("_expect")
    event["detail"].update(detail_updates)
    return event


def _cluster_security_groups(monitor: LocalMonitor) -> list[str]:
    described = monitor.client("sagemaker").describe_cluster(ClusterName=monitor.simulation.scenario.cluster.name)
    return list(described["VpcConfig"]["SecurityGroupIds"])


def test_first_sweep_stores_and_sends_one_baseline_then_second_sends_nothing(simulate, monitor) -> None:
    deployed = monitor(simulate("eks-p5"))
    first = deployed.sweep()
    assert first.status == "SUCCEEDED"
    visited = [v.name for v in first.states]
    for state in ("Discover", "Collect", "CollectLogs", "CollectKubernetes", "ProbeNodes", "Aggregate", "Notify"):
        assert state in visited
    # One ProbeNode state (one probe_node invocation) per planned node, in Express children whose
    # history the emulation does not keep: counted from the invocations.
    assert len(deployed.calls_of(first, "probe_node")) == 2
    # The first sweep after the deployment: one baseline summary, not one message per open cause.
    cluster = deployed.simulation.scenario.cluster.name
    causes = sorted((s.incident for s in load_stored(_store(deployed), deployed.region, cluster).values()),
                    key=lambda i: i.verdict_rank)  # fmt: skip
    assert len(causes) > 1
    [message] = first.notifications
    chat = ChatbotNotification.model_validate(message)
    assert chat.metadata.eventType == SWEEP_EVENT_TYPES["baseline"]
    assert chat.metadata.threadId == f"hyperpod-nccl-{deployed.region}-{cluster}"
    assert cluster in chat.content.title and f"baseline, {len(causes)} root causes" in chat.content.title
    # Every open cause, in the verdict's order (as far as the chat limit lets the list go).
    shown = [chat.content.description.find(f"] {for_slack(c.title)} (") for c in causes]
    assert shown[:5] == sorted(shown[:5]) and -1 not in shown[:5], shown
    for sg in _cluster_security_groups(deployed):
        assert sg in chat.content.description  # the SG missing its self-reference rule is named (first step)
    open_findings = _store(deployed).open_findings(deployed.region, cluster)
    assert open_findings
    assert {item["occurrences"] for item in open_findings} == {1}
    # Step Functions retrying Notify (its Lambda timed out after publishing) sends no second baseline.
    assert first.output is not None
    state = SweepState.model_validate({k: v for k, v in first.output.items() if k not in ("aggregate", "notify")})
    again = run_notify(state, _store(deployed), deployed.client("sns"), topic_arn=deployed.topic_arn, base_url="x")
    assert not again.incident_messages and again.reason == "already published for this sweep"
    assert deployed.drain_notifications() == []

    second = deployed.sweep()
    assert second.status == "SUCCEEDED"
    assert second.notifications == []
    assert "Notify" not in [v.name for v in second.states]
    assert second.output is not None and second.output["aggregate"]["changes"] == 0
    again = _store(deployed).open_findings(deployed.region, cluster)
    assert {item["sk"] for item in again} == {item["sk"] for item in open_findings}
    assert {item["occurrences"] for item in again} == {2}
    records = _sweep_records(deployed)
    assert len(records) == 2
    assert all(int(r["expires_at"]) > 0 for r in records)  # sweep records carry the TTL attribute


def _self_reference(sg: str) -> list[dict[str, Any]]:
    """The egress rule a cluster security group needs: all traffic to itself."""
    return [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": sg}]}]


def _cause_messages(run: Any) -> list[ChatbotNotification]:
    """The per-root-cause messages of a run (each in its cause's thread)."""
    return [ChatbotNotification.model_validate(m) for m in run.notifications if m not in _sweep_messages(run)]


def test_fixed_then_broken_security_group_is_told_in_its_cause_thread(simulate, monitor) -> None:
    deployed = monitor(simulate("eks-p5"))
    cluster = deployed.simulation.scenario.cluster.name
    assert _cause_messages(deployed.sweep()) == []  # the baseline: its summary only
    ec2 = deployed.client("ec2")
    for sg in _cluster_security_groups(deployed):  # test set-up: the operator applies the suggested fix
        ec2.authorize_security_group_egress(GroupId=sg, IpPermissions=_self_reference(sg))
    second = deployed.sweep()
    [message] = _sweep_messages(second)
    chat = ChatbotNotification.model_validate(message)
    assert "resolved" in chat.content.title
    assert "[RESOLVED]" in chat.content.description
    for sg in _cluster_security_groups(deployed):
        assert sg in chat.content.description
    still_open = _store(deployed).open_findings(deployed.region, cluster)
    assert not any("outbound self-referencing" in str(item["title"]) for item in still_open)
    [resolved] = _cause_messages(second)
    assert resolved.metadata.eventType == INCIDENT_EVENT_TYPES["resolved"]
    assert "Security group" in resolved.content.title
    cause_id = resolved.metadata.additionalContext["incidentId"]
    assert resolved.metadata.threadId == f"hyperpod-nccl-{deployed.region}-{cluster}-{cause_id}"
    assert resolved.metadata.threadId != chat.metadata.threadId  # the summary keeps the cluster's thread

    for sg in _cluster_security_groups(deployed):  # and someone removes the rule again
        ec2.revoke_security_group_egress(GroupId=sg, IpPermissions=_self_reference(sg))
    [reopened] = _cause_messages(deployed.sweep())
    assert reopened.metadata.eventType == INCIDENT_EVENT_TYPES["new"]
    assert reopened.metadata.additionalContext["incidentId"] == cause_id
    assert reopened.metadata.threadId == resolved.metadata.threadId  # the same cause, the same thread


def test_failing_collector_still_yields_a_stored_partial_sweep(simulate, monitor) -> None:
    denied = FaultSpec(operation="ec2:DescribeSecurityGroups", error_code="UnauthorizedOperation", http_status=403)
    deployed = monitor(simulate("eks-p5", faults=[denied]), failing_functions={"collect_logs": "RuntimeError"})
    run = deployed.sweep()
    assert run.status == "SUCCEEDED"
    assert "LogsNotCollected" in [v.name for v in run.states]
    [record] = _sweep_records(deployed)
    assert record["status"] == "partial"
    degraded = json.loads(record["degraded_sources"])
    sources = " | ".join(f"{d['source']}: {d['reason']}" for d in degraded)
    assert "CloudWatch scan" in sources
    assert any(d.get("missing_action") == "ec2:DescribeSecurityGroups" for d in degraded)
    [message] = _sweep_messages(run)
    assert "Degraded source" in ChatbotNotification.model_validate(message).content.description


def test_two_triggers_for_one_cluster_run_one_sweep_and_fold_the_second(simulate, monitor) -> None:
    simulation = simulate("eks-p5")
    deployed = monitor(simulation)
    node = simulation.instance_id("worker:5")
    first = deployed.trigger(_event("accept-node-health-unhealthy.json", InstanceId=node))
    second_event = _event("accept-state-change-failed.json")
    second = deployed.trigger(second_event)
    assert [o["status"] for o in first["outcomes"]] == ["started"]
    assert [o["status"] for o in second["outcomes"]] == ["folded"]
    run = deployed.wait(deployed.execution_arn(first["outcomes"][0]["sweep_id"]))
    assert run.status == "SUCCEEDED"
    assert len(deployed.executions()) == 1  # never two executions for one cluster
    visited = [v.name for v in run.states]
    assert visited.count("Discover") == 2  # the folded trigger was swept by the same execution
    assert "NextSweep" in visited
    records = _sweep_records(deployed)
    assert len(records) == 2
    follow_up = next(r for r in records if r["sweep_id"].endswith("-f1"))
    assert second_event["id"] in follow_up["triggers"]
    lock = _store(deployed).get(cluster_key(deployed.region, simulation.scenario.cluster.name), "LOCK")
    assert lock is None  # released at the end


def test_replayed_event_starts_no_second_sweep(simulate, monitor) -> None:
    simulation = simulate("eks-p5")
    deployed = monitor(simulation)
    event = _event("accept-node-health-unhealthy.json", InstanceId=simulation.instance_id("worker:5"))
    first = deployed.trigger(event)
    run = deployed.wait(deployed.execution_arn(first["outcomes"][0]["sweep_id"]))
    assert run.status == "SUCCEEDED"
    replay = deployed.trigger(event)
    assert [o["status"] for o in replay["outcomes"]] == ["duplicate"]
    assert len(deployed.executions()) == 1
    assert len(_sweep_records(deployed)) == 1


def test_malformed_and_foreign_events_start_nothing(simulate, monitor) -> None:
    deployed = monitor(simulate("eks-p5"))
    for name in ("reject-malformed-cluster-event.json", "reject-foreign-source.json", "reject-other-cluster.json"):
        event = json.loads((EVENTS / name).read_text())
        expected = event.pop("_expect")["reason"]
        outcome = deployed.trigger(event)
        assert outcome["outcomes"] == []
        assert expected in outcome["rejected"]["reason"]
    assert deployed.executions() == []


def _swept_before(
    deployed: LocalMonitor, *, status: str = "complete", node: str | None = None, version: str | None = None
) -> None:
    """An earlier sweep of the cluster on record (a day ago), as Aggregate records one (by this
    code unless `version` names another)."""
    cluster, earlier = deployed.simulation.scenario.cluster.name, datetime.now(UTC) - timedelta(days=1)
    ref = SweepRef(sweep_id=f"schedule-earlier-{status}-{node}", execution="earlier", cluster=cluster,
                   region=deployed.region, node=node, started_at=earlier)  # fmt: skip
    diff = SweepDiff(sweep_id=ref.sweep_id, cluster=cluster, region=deployed.region, started_at=earlier)
    _store(deployed).record_sweep(
        ref, status=status, diff=diff, finished_at=earlier, duration_seconds=1.0, expires_at=2_000_000_000,
        code_version=code_version() if version is None else version,
    )  # fmt: skip


def test_only_an_earlier_evaluated_full_sweep_ends_the_baseline(simulate, monitor) -> None:
    deployed = monitor(simulate("eks-p5"))
    # Neither a failed sweep nor a node-scoped one has told the cluster's state, nor one of the
    # code before this deployment (what it called a root cause may not be what this code calls one).
    _swept_before(deployed, status="failed")
    _swept_before(deployed, status="complete", version="an-earlier-deployment")
    _swept_before(deployed, status="partial", node=deployed.simulation.instance_id("worker:5"))
    assert [m["metadata"]["eventType"] for m in deployed.sweep().notifications] == [SWEEP_EVENT_TYPES["baseline"]]
    # The sweep just recorded counts for the next one, but not for itself.
    [record] = [r for r in _sweep_records(deployed) if r["execution"] != "earlier"]
    store, cluster = _store(deployed), deployed.simulation.scenario.cluster.name
    started = datetime.fromisoformat(record["started_at"])
    this = code_version()
    assert not store.has_earlier_full_sweep(
        deployed.region, cluster, started_at=started, sweep_id=record["sweep_id"], code_version=this
    )
    later = started + timedelta(minutes=15)
    assert store.has_earlier_full_sweep(
        deployed.region, cluster, started_at=later, sweep_id="schedule-next", code_version=this
    )
    # The next deployment's first sweep is a baseline again.
    assert not store.has_earlier_full_sweep(
        deployed.region, cluster, started_at=later, sweep_id="schedule-next", code_version="the-next-deployment"
    )


def test_a_sweep_records_its_probe_time_for_the_next_sweep_to_size_its_concurrency_from(simulate, monitor) -> None:
    deployed = monitor(simulate("eks-p5"))
    store, cluster = _store(deployed), deployed.simulation.scenario.cluster.name
    assert store.last_full_sweep_probe_seconds(deployed.region, cluster) is None  # first sweep: the expected time
    deployed.sweep()
    [record] = _sweep_records(deployed)
    measured = float(record["probe_seconds"])
    assert measured > 0 and store.last_full_sweep_probe_seconds(deployed.region, cluster) == measured
    # A later single-node sweep or failed sweep says nothing of the cluster's probe time; a later
    # full sweep that probed no node replaces it (no measurement: the expected time again).
    started = datetime.fromisoformat(record["started_at"])
    for n, (status, node, probe) in enumerate(
        [
            ("partial", deployed.simulation.instance_id("worker:5"), 99.0),
            ("failed", None, None),
            ("complete", None, None),
        ]
    ):
        later = started + timedelta(minutes=15 * (n + 1))
        ref = SweepRef(sweep_id=f"later-{n}", execution="later", cluster=cluster, region=deployed.region, node=node,
                       started_at=later)  # fmt: skip
        diff = SweepDiff(sweep_id=ref.sweep_id, cluster=cluster, region=deployed.region, started_at=later)
        store.record_sweep(
            ref, status=status, diff=diff, finished_at=later, duration_seconds=1.0, expires_at=2_000_000_000,
            probe_seconds=probe,
        )  # fmt: skip
        expected = None if status == "complete" else measured
        assert store.last_full_sweep_probe_seconds(deployed.region, cluster) == expected, status


def test_hung_job_incident_is_stored_and_told_once_in_its_own_thread(simulate, monitor) -> None:
    deployed = monitor(simulate("hung-job"), node_coverage="all")
    cluster = deployed.simulation.scenario.cluster.name
    hung_node = deployed.simulation.instance_id("worker:4")
    _swept_before(deployed)  # not the baseline: the monitor has told this cluster's state before
    first = deployed.sweep()
    assert first.status == "SUCCEEDED"
    [item] = _store(deployed).query(cluster_key(deployed.region, cluster), "INCIDENT#")
    incident_id = item["sk"].removeprefix("INCIDENT#")
    assert item["status"] == "open" and item["priority"] == "P0" and item["first_sweep_id"] == item["last_sweep_id"]
    stored = json.loads(item["incident"])
    assert hung_node in stored["affected"]["instance_ids"] and 37 in stored["affected"]["ranks"]
    assert {"fault", "hang"} <= {entry["kind"] for entry in stored["timeline"]}

    incident_messages = [m for m in first.notifications if m not in _sweep_messages(first)]
    [message] = incident_messages
    chat = ChatbotNotification.model_validate(message)
    assert chat.metadata.threadId == f"hyperpod-nccl-{deployed.region}-{cluster}-{incident_id}"
    assert chat.metadata.eventType == INCIDENT_EVENT_TYPES["new"]
    assert chat.metadata.threadId != ChatbotNotification.model_validate(_sweep_messages(first)[0]).metadata.threadId
    assert "[P0]" in chat.content.title and "Timeline:" in chat.content.description
    assert "rank 37 on pod gpt-pretrain-worker-4" in chat.content.description

    second = deployed.sweep()
    assert second.status == "SUCCEEDED"
    assert second.notifications == []
    assert second.output is not None and second.output["aggregate"]["incident_changes"] == 0
    [again] = _store(deployed).query(cluster_key(deployed.region, cluster), "INCIDENT#")
    assert again["status"] == "open" and again["first_sweep_id"] == item["first_sweep_id"]
    assert again["last_sweep_id"] != item["last_sweep_id"]


def _cause(cause_id: str, title: str, priority: Priority, rank: int) -> Incident:
    """A root cause as Aggregate stores it (the verdict's fields set)."""
    return Incident(
        id=cause_id, cluster="ml-alerts", title=title, priority=priority, verdict_rank=rank, findings_folded=2,
        root_cause=RootCause(summary=title, source="finding", reference=NODE_HARDWARE), first_step="kubectl cordon n1",
    )  # fmt: skip


def _stored_sweep(deployed: LocalMonitor, minutes: int, changes: list[IncidentChange]) -> SweepRef:
    """A sweep whose Aggregate stored these root-cause changes (and no finding change)."""
    started = datetime(2026, 1, 5, 10, tzinfo=UTC) + timedelta(minutes=minutes)
    ref = SweepRef(sweep_id=f"schedule-ml-alerts-{minutes}", execution="x", cluster="ml-alerts",
                   region=deployed.region, started_at=started)  # fmt: skip
    sweep = IncidentSweep(
        sweep_id=ref.sweep_id, cluster=ref.cluster, region=ref.region, started_at=started, changes=changes,
        incidents=[c.incident for c in changes if c.kind != "resolved"],
    )  # fmt: skip
    diff = SweepDiff(sweep_id=ref.sweep_id, cluster=ref.cluster, region=ref.region, started_at=started)
    _store(deployed).put_sweep_blob(ref.sweep_id, INCIDENTS, sweep.model_dump_json(), expires_at=2_000_000_000)
    _store(deployed).put_sweep_blob(ref.sweep_id, DIFF, diff.model_dump_json(), expires_at=2_000_000_000)
    return ref


def _notify(deployed: LocalMonitor, ref: SweepRef) -> NotifyOutput:
    sns = deployed.client("sns")
    return run_notify(SweepState(sweep=ref), _store(deployed), sns, topic_arn=deployed.topic_arn, base_url="x")


def test_each_root_cause_has_its_own_thread_across_sweeps_and_p2_causes_none(simulate, monitor) -> None:
    deployed = monitor(simulate("healthy-eks"))
    hang = _cause("rc-0000000000a1", "Collective hang in training/llama", Priority.P0, 0)
    xid = _cause("rc-0000000000b2", "GPU hardware fault on i-0abc", Priority.P1, 1)
    latency = _cause("rc-0000000000c3", "EFA latency above the fleet's on i-0def", Priority.P2, 2)
    first = _notify(
        deployed, _stored_sweep(deployed, 0, [IncidentChange(kind="new", incident=c) for c in (latency, xid, hang)])
    )
    worse = hang.model_copy(update={"affected": Affected(jobs=["training/llama", "training/eval"])})
    second = _stored_sweep(deployed, 15, [
        IncidentChange(kind="changed", incident=worse, previous_priority=Priority.P0, worse=True,
                       what=["newly affected jobs: training/eval"]),
        IncidentChange(kind="resolved", incident=xid),
    ])  # fmt: skip
    assert _notify(deployed, second).incident_messages == 2
    messages = [ChatbotNotification.model_validate(m) for m in deployed.drain_notifications()]
    threads: dict[str, list[str]] = {}
    for message in messages:
        cause = message.metadata.additionalContext.get("incidentId", "summary")
        threads.setdefault(cause, []).append(message.metadata.threadId)
    assert first.incident_messages == 2  # the P0 and the P1; the P2 advisory has no thread of its own
    assert threads == {
        hang.id: [f"hyperpod-nccl-{deployed.region}-ml-alerts-{hang.id}"] * 2,
        xid.id: [f"hyperpod-nccl-{deployed.region}-ml-alerts-{xid.id}"] * 2,
        "summary": [f"hyperpod-nccl-{deployed.region}-ml-alerts"],  # the P2's news, with the others'
    }
    [summary] = [m for m in messages if m.metadata.eventType == SWEEP_EVENT_TYPES["changed"]]
    lines = summary.content.description.split("\n")
    assert [line for line in lines if line.startswith("*")] == [
        "*1. [NEW] [P0] [node] Collective hang in training/llama (2 findings)*",
        "*2. [NEW] [P1] [node] GPU hardware fault on i-0abc (2 findings)*",
        "*3. [NEW] [P2] [node] EFA latency above the fleet's on i-0def (2 findings)*",
    ]
    # The cause's update lands in its thread, once: a retried Notify sends nothing again.
    [update] = [m for m in messages if m.metadata.eventType == INCIDENT_EVENT_TYPES["changed"]]
    assert "What changed: newly affected jobs: training/eval" in update.content.description
    retried = _notify(deployed, second)
    assert retried.incident_messages == 0 and deployed.drain_notifications() == []
