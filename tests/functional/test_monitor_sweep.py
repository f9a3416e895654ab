"""The serverless monitor end to end: the real state machine definition executed by the
emulation's Step Functions, Lambda tasks dispatched in-process to the real handlers, against the
simulated eks-p5 cluster; findings read back from DynamoDB, notifications from an SQS queue
subscribed to the alerts topic."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperpod_nccl.monitor.alert_messages import INCIDENT_EVENT_TYPES, ChatbotNotification
from hyperpod_nccl.monitor.store import Store, cluster_key
from hyperpod_nccl_sim.runtime import SimulatedCluster
from hyperpod_nccl_sim.scenario import FaultSpec
from hyperpod_nccl_sim.serverless import TABLE_NAME, LocalMonitor

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
    resource = monitor.emulation.session(monitor.region).resource(
        "dynamodb", endpoint_url=monitor.emulation.endpoint_url, region_name=monitor.region
    )
    return Store(resource.Table(TABLE_NAME))


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


def test_first_sweep_stores_and_notifies_then_second_sends_nothing(simulate, monitor) -> None:
    deployed = monitor(simulate("eks-p5"))
    first = deployed.sweep()
    assert first.status == "SUCCEEDED"
    visited = [v.name for v in first.states]
    for state in ("Discover", "Collect", "CollectLogs", "CollectKubernetes", "ProbeNodes", "Aggregate", "Notify"):
        assert state in visited
    # One ProbeNode state (one probe_node invocation) per planned node, in Express children whose
    # history the emulation does not keep: counted from the invocations.
    assert len(deployed.calls_of(first, "probe_node")) == 2
    [message] = _sweep_messages(first)
    chat = ChatbotNotification.model_validate(message)
    cluster = deployed.simulation.scenario.cluster.name
    assert cluster in chat.content.title
    for sg in _cluster_security_groups(deployed):
        assert sg in chat.content.description  # the SG missing its self-reference rule is named
    open_findings = _store(deployed).open_findings(deployed.region, cluster)
    assert open_findings
    assert {item["occurrences"] for item in open_findings} == {1}

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


def test_fixed_security_group_produces_a_resolved_notification(simulate, monitor) -> None:
    deployed = monitor(simulate("eks-p5"))
    assert deployed.sweep().notifications
    ec2 = deployed.client("ec2")
    for sg in _cluster_security_groups(deployed):  # test set-up: the operator applies the suggested fix
        ec2.authorize_security_group_egress(
            GroupId=sg, IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": sg}]}]
        )
    second = deployed.sweep()
    [message] = _sweep_messages(second)
    chat = ChatbotNotification.model_validate(message)
    assert "resolved" in chat.content.title
    assert "[RESOLVED]" in chat.content.description
    for sg in _cluster_security_groups(deployed):
        assert sg in chat.content.description
    cluster = deployed.simulation.scenario.cluster.name
    still_open = _store(deployed).open_findings(deployed.region, cluster)
    assert not any("outbound self-referencing" in str(item["title"]) for item in still_open)


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


def test_hung_job_incident_is_stored_and_told_once_in_its_own_thread(simulate, monitor) -> None:
    deployed = monitor(simulate("hung-job"), node_coverage="all")
    cluster = deployed.simulation.scenario.cluster.name
    hung_node = deployed.simulation.instance_id("worker:4")
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
    assert chat.metadata.threadId == incident_id
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
