"""Incidents are built from a sweep's signals: one per root cause, causal joins, recurrence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hyperpod_nccl.hang.attribution import AttributionFact, RankLocation
from hyperpod_nccl.incidents.build import build_incidents
from hyperpod_nccl.incidents.escalation import SITUATIONS, judge
from hyperpod_nccl.incidents.models import Affected, Incident, RootCause, TimelineEntry
from hyperpod_nccl.models.cluster import ClusterEvent, ClusterNode, ControlPlaneInventory
from hyperpod_nccl.models.findings import Finding, Resource, Status, SweepResult
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.logs import HmaDetection, LogInventory
from hyperpod_nccl.models.node_probe import GpuInfo, NodeProbeData, NodeProbeInventory, NodeProbeResult, XidEvent
from hyperpod_nccl.references import DBG_TIMEOUT_RENDEZVOUS, NODE_HARDWARE

T0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
BAD, GOOD, OTHER = "i-0bad0000000000001", "i-0good000000000002", "i-0other00000000003"


def _result(findings: list[Finding]) -> SweepResult:
    return SweepResult(
        cluster_name="ml",
        region="us-west-2",
        started_at=T0,
        window_start=T0 - timedelta(hours=2),
        window_end=T0 + timedelta(hours=1),
        findings=findings,
    )


def _inventory(**extra: object) -> Inventory:
    nodes = [
        ClusterNode(instance_id=i, instance_group="worker", instance_type="ml.p5.48xlarge", status="Running")
        for i in (BAD, GOOD, OTHER)
    ]
    return Inventory(
        cluster_name="ml",
        region="us-west-2",
        collected_at=T0,
        window_start=T0 - timedelta(hours=2),
        window_end=T0 + timedelta(hours=1),
        control_plane=ControlPlaneInventory(nodes=nodes, events=extra.pop("events", [])),
        **extra,  # type: ignore[arg-type]
    )


def _watchdog(at: datetime, node: str = GOOD) -> Finding:
    return Finding(
        check_id="logs.signatures",
        status=Status.FAIL,
        title="NCCL collective timed out (watchdog)",
        reference=DBG_TIMEOUT_RENDEZVOUS,
        resources=[Resource(kind="node", id=node)],
        evidence=["[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE)"],
        fields={"signature": "watchdog_timeout", "first_seen": at.isoformat()},
    )


def _xid_probe(serial: str = "1650923001727") -> NodeProbeInventory:
    data = NodeProbeData(
        gpus=[GpuInfo(index=0, name="H100", bus_id="00000000:53:00.0", serial=serial)],
        xids=[
            XidEvent(bus_id="0000:53:00", code=79, line="NVRM: Xid (PCI:0000:53:00): 79, GPU has fallen off the bus.")
        ],
    )
    return NodeProbeInventory(
        probed_instance_ids=[BAD],
        results=[NodeProbeResult(instance_id=BAD, reachable=True, instance_group="worker", probe=data)],
    )


def test_xid_hma_watchdog_and_replacement_become_one_incident() -> None:
    events = [
        ClusterEvent(
            event_id="1",
            event_time=T0 + timedelta(minutes=20),
            instance_id=BAD,
            instance_group="worker",
            level="Info",
            description="Instance replacement started.",
        ),
    ]
    hma = HmaDetection(
        stream="SagemakerHealthMonitoringAgent/worker/" + BAD,
        instance_id=BAD,
        instance_group="worker",
        time=T0 + timedelta(minutes=1),
        reason="XidHardwareFailure",
        condition="NvidiaErrorTerminate",
        action="Replace",
        message="NVRM: Xid (PCI:0000:53:00): 79, GPU has fallen off the bus.",
    )
    inventory = _inventory(events=events, logs=LogInventory(hma_detections=[hma]), node_probes=_xid_probe())
    incidents = build_incidents(_result([_watchdog(T0 + timedelta(minutes=10))]), inventory)

    assert len(incidents) == 1
    incident = incidents[0]
    assert incident.affected.instance_ids == [BAD]
    assert incident.affected.nodes == [GOOD]  # the witness that logged the timeout, not a suspect
    assert incident.affected.gpus == ["1650923001727"]
    assert incident.root_cause.xid == 79 and incident.root_cause.reference == NODE_HARDWARE
    kinds = [e.kind for e in incident.timeline]
    assert kinds[:3] == ["detection", "hang", "recovery"]  # HMA 02:01 → watchdog 02:10 → replacement 02:20
    assert incident.outcome == "recovering"
    assert incident.first_seen == T0 + timedelta(minutes=1)


def test_attribution_places_the_hang_on_the_named_node() -> None:
    fact = AttributionFact(
        rank=13,
        verdict="never_entered",
        source="flight_recorder",
        seq=1580,
        op="ALLREDUCE",
        location=RankLocation(rank=13, pod="train-1", namespace="ml", instance_id=OTHER, instance_group="worker"),
    )
    incidents = build_incidents(_result([_watchdog(T0)]), _inventory(), attributions=[fact])
    assert len(incidents) == 1
    assert incidents[0].affected.instance_ids == [OTHER]
    assert incidents[0].affected.ranks == [13] and incidents[0].affected.pods == ["ml/train-1"]
    assert "never entered ALLREDUCE #1580" in incidents[0].root_cause.summary


def test_unrelated_hang_without_fault_is_its_own_job_incident() -> None:
    incidents = build_incidents(_result([_watchdog(T0)]), _inventory())
    assert len(incidents) == 1 and incidents[0].affected.instance_ids == []
    assert incidents[0].root_cause.summary.startswith("NCCL collective timed out")


def test_configuration_findings_are_not_incidents() -> None:
    finding = Finding(
        check_id="network.security_group_self_reference",
        status=Status.FAIL,
        title="no self rule",
        reference=DBG_TIMEOUT_RENDEZVOUS,
        resources=[Resource(kind="security_group", id="sg-1")],
    )
    assert build_incidents(_result([finding]), _inventory()) == []


def test_same_gpu_recurrence_against_history_says_replace_and_escalate() -> None:
    earlier = Incident(
        id="inc-earlier",
        cluster="ml",
        title="Xid 79",
        priority="P0",
        root_cause=RootCause(summary="Xid 79", source="node_probe", reference=NODE_HARDWARE, xid=79),
        first_seen=T0 - timedelta(days=1),
        affected=Affected(instance_ids=[GOOD], gpus=["1650923001727"]),
    )
    incidents = build_incidents(_result([]), _inventory(node_probes=_xid_probe()), history=[earlier])
    recurrence = incidents[0].recurrence
    assert recurrence is not None and recurrence.kind == "same_gpu"
    assert "replace, don't reboot" in recurrence.advice
    assert recurrence.previous_incident_ids == ["inc-earlier"]
    verdicts = {e.number: e.verdict for e in judge(_result([]), incidents)}
    assert verdicts[4] == "applies"


def test_group_recurrence_needs_a_replacement_before_the_new_fault() -> None:
    replaced = Incident(
        id="inc-replaced",
        cluster="ml",
        title="Xid 79",
        priority="P0",
        root_cause=RootCause(summary="Xid 79", source="hma", reference=NODE_HARDWARE, xid=79),
        affected=Affected(instance_ids=[GOOD], instance_groups=["worker"]),
        timeline=[
            TimelineEntry(
                time=T0 - timedelta(hours=3),
                source="cluster_event",
                kind="recovery",
                text="HyperPod event: Instance replacement started.",
            )
        ],
    )
    hma = HmaDetection(
        stream="s",
        instance_id=BAD,
        instance_group="worker",
        time=T0,
        reason="XidHardwareFailure",
        message="NVRM: Xid (PCI:0000:53:00): 79, GPU has fallen off the bus.",
    )
    incidents = build_incidents(_result([]), _inventory(logs=LogInventory(hma_detections=[hma])), history=[replaced])
    assert incidents[0].recurrence is not None and incidents[0].recurrence.kind == "same_instance_group"
    # The same replacement *after* the new fault is no recurrence.
    replaced.timeline[0].time = T0 + timedelta(hours=1)
    later = build_incidents(_result([]), _inventory(logs=LogInventory(hma_detections=[hma])), history=[replaced])
    assert later[0].recurrence is None


def test_incident_ids_are_stable_across_sweeps() -> None:
    first = build_incidents(_result([]), _inventory(node_probes=_xid_probe()))
    second = build_incidents(_result([]), _inventory(node_probes=_xid_probe()))
    assert [i.id for i in first] == [i.id for i in second]


def test_escalation_lists_exactly_the_five_situations() -> None:
    verdicts = judge(_result([]), [])
    assert [e.number for e in verdicts] == [1, 2, 3, 4, 5]
    assert [e.situation for e in verdicts] == list(SITUATIONS.values())
    by_number = {e.number: e.verdict for e in verdicts}
    assert by_number[3] == "confirm"  # Issues Found: 0 — escalate if training still fails
    assert by_number[4] == "no"
