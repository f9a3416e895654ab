"""Incidents are the verdict's root causes told with timelines: one per cause in the verdict's order,
each cause's findings plus the inventory's signals that belong to it, recurrence against history.

Each sweep here is a hand-made inventory evaluated by the real checks and folded by the real verdict
(`engine.build_result`), plus log findings planted where a test needs a line the inventory cannot
make (the CloudWatch scan's watchdog timeouts)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hyperpod_nccl.engine import build_result
from hyperpod_nccl.hang.attribution import AttributionFact, RankLocation
from hyperpod_nccl.incidents.build import build_incidents
from hyperpod_nccl.incidents.escalation import RENDEZVOUS_KIND, SITUATIONS, judge
from hyperpod_nccl.incidents.models import Affected, Incident, RootCause, TimelineEntry
from hyperpod_nccl.models.cluster import ClusterEvent, ClusterNode, ControlPlaneInventory
from hyperpod_nccl.models.findings import Finding, Resource, Status, SweepResult
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.logs import HmaDetection, LogInventory
from hyperpod_nccl.models.node_probe import GpuInfo, NodeProbeData, NodeProbeInventory, NodeProbeResult, XidEvent
from hyperpod_nccl.references import DBG_FLIGHT_RECORDER, DBG_TIMEOUT_RENDEZVOUS, NODE_HARDWARE, OPS_REMEDIATIONS
from hyperpod_nccl.verdict import build_verdict
from hyperpod_nccl.verdict.fold import CAUSE_NOT_FOUND
from hyperpod_nccl.verdict.kinds import CAUSE_KINDS, HANG_KINDS

T0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
BAD, GOOD, OTHER = "i-0bad0000000000001", "i-0good000000000002", "i-0other00000000003"
SERIAL = "1650923001727"


def _inventory(*, events: list[ClusterEvent] | None = None, **extra: object) -> Inventory:
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
        control_plane=ControlPlaneInventory(nodes=nodes, events=events or []),
        **extra,  # type: ignore[arg-type]
    )


def _result(inventory: Inventory, *planted: Finding) -> SweepResult:
    """The sweep as the engine makes it, with `planted` findings beside the checks' and the verdict over all."""
    result = build_result(inventory, [], T0)
    findings = [*result.findings, *planted]
    return result.model_copy(update={"findings": findings, "verdict": build_verdict(findings, inventory)})


def _watchdog(at: datetime, node: str = GOOD, signature: str = "watchdog_timeout") -> Finding:
    return Finding(
        check_id="logs.signatures",
        status=Status.FAIL,
        title="NCCL collective timed out (watchdog)",
        reference=DBG_TIMEOUT_RENDEZVOUS,
        resources=[Resource(kind="node", id=node)],
        evidence=["[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE)"],
        fields={"signature": signature, "first_seen": at.isoformat()},
    )


def _xid_probe(serial: str = SERIAL) -> NodeProbeInventory:
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


def _hma(at: datetime = T0 + timedelta(minutes=1)) -> LogInventory:
    detection = HmaDetection(
        stream="SagemakerHealthMonitoringAgent/worker/" + BAD,
        instance_id=BAD,
        instance_group="worker",
        time=at,
        reason="XidHardwareFailure",
        condition="NvidiaErrorTerminate",
        action="Replace",
        message="NVRM: Xid (PCI:0000:53:00): 79, GPU has fallen off the bus.",
    )
    return LogInventory(group_exists=True, hma_detections=[detection])


def _event(instance: str, description: str, minutes: int, level: str = "Info") -> ClusterEvent:
    return ClusterEvent(
        event_id=f"{instance}-{minutes}",
        event_time=T0 + timedelta(minutes=minutes),
        instance_id=instance,
        instance_group="worker",
        level=level,
        description=description,
    )


def _assert_incidents_are_the_verdict(result: SweepResult, incidents: list[Incident]) -> None:
    causes = result.verdict.root_causes
    assert [i.id for i in incidents] == [c.id for c in causes]
    assert [i.verdict_rank for i in incidents] == list(range(len(causes)))
    for incident, cause in zip(incidents, causes, strict=True):
        assert (incident.title, incident.priority, incident.kind, incident.scope) == (
            cause.title,
            cause.priority,
            cause.kind,
            cause.scope,
        )
        assert incident.finding_fingerprints == sorted(cause.fingerprints)
        assert incident.findings_folded == len(cause.fingerprints)
        assert incident.root_cause.reference == cause.reference
    folded = [f for i in incidents for f in i.finding_fingerprints]
    assert sorted(folded) == sorted(f.fingerprint for f in result.issues)


def test_xid_hma_watchdog_and_replacement_become_one_incident() -> None:
    inventory = _inventory(
        events=[_event(BAD, "Instance replacement started.", 20)], logs=_hma(), node_probes=_xid_probe()
    )
    result = _result(inventory, _watchdog(T0 + timedelta(minutes=10)))
    incidents = build_incidents(result, inventory)

    _assert_incidents_are_the_verdict(result, incidents)
    [incident] = incidents  # the HMA finding, the probe's Xid and the watchdog: one GPU fault
    assert incident.kind == "gpu_hardware" and incident.findings_folded == 3
    assert incident.affected.instance_ids == [BAD]
    assert incident.affected.nodes == [GOOD]  # the witness that logged the timeout, not a suspect
    assert incident.affected.gpus == [SERIAL]
    assert incident.root_cause.xid == 79 and incident.root_cause.reference == NODE_HARDWARE
    kinds = [e.kind for e in incident.timeline]
    assert kinds[:3] == ["detection", "hang", "recovery"]  # HMA 02:01 → watchdog 02:10 → replacement 02:20
    assert incident.outcome == "recovering"
    assert incident.first_seen == T0 + timedelta(minutes=1)
    # The HMA finding is told through its detection, the probe's Xid through the node's Xid finding
    # (which gains the GPU's serial): neither twice.
    texts = [e.text for e in incident.timeline]
    assert not any(t.startswith("health-monitoring agent flagged") for t in texts)
    assert not any(t.startswith("Xid 79 (GPU has fallen off the bus) on GPU") for t in texts)
    assert incident.first_step is not None and "\n" not in incident.first_step


def test_a_replacement_event_lands_in_the_faulted_nodes_hardware_incident_and_marks_it_recovering() -> None:
    # A replacement has no finding of its own (an Info event): the most urgent cause naming its
    # instance claims it. An Info event on a node nothing is wrong with belongs to no incident.
    events = [_event(BAD, "Instance replacement started.", 20), _event(GOOD, "Instance reboot completed.", 25)]
    inventory = _inventory(events=events, node_probes=_xid_probe())
    result = _result(inventory)
    incidents = build_incidents(result, inventory)
    [hardware] = [i for i in incidents if i.kind == "gpu_hardware"]
    assert hardware.affected.instance_ids == [BAD]
    assert [(e.kind, e.text) for e in hardware.timeline if e.source == "cluster_event"] == [
        ("recovery", "HyperPod event: Instance replacement started.")
    ]
    assert hardware.outcome == "recovering"
    assert not any("reboot completed" in e.text for i in incidents for e in i.timeline)
    # Without the event, nothing says HyperPod is recovering the node.
    quiet = _inventory(node_probes=_xid_probe())
    [alone] = build_incidents(_result(quiet), quiet)
    assert alone.id == hardware.id and alone.outcome == "unknown"


def test_an_error_event_goes_to_the_cause_of_the_finding_that_reports_it() -> None:
    # Two causes on one node: the EFA health-check event is the `cluster.events` finding's, which
    # the verdict folds under the EFA cause; the replacement, reported by no finding, goes to the
    # most urgent cause on the node.
    events = [
        _event(BAD, "EFA health checks failed on instance: 28 of 32 EFA devices responded.", 5, level="Error"),
        _event(BAD, "Instance replacement started.", 20),
    ]
    inventory = _inventory(events=events, logs=_hma())
    result = _result(inventory)
    incidents = build_incidents(result, inventory)
    _assert_incidents_are_the_verdict(result, incidents)
    by_kind = {i.kind: i for i in incidents}
    efa, gpu = by_kind["efa_hardware"], by_kind["gpu_hardware"]
    assert [e.text for e in efa.timeline] == [
        "HyperPod event: EFA health checks failed on instance: 28 of 32 EFA devices responded."
    ]
    assert "HyperPod event: Instance replacement started." in [e.text for e in gpu.timeline]
    assert gpu.verdict_rank < efa.verdict_rank


def test_attribution_places_the_hang_on_the_named_node() -> None:
    fact = AttributionFact(
        rank=13,
        verdict="never_entered",
        source="flight_recorder",
        seq=1580,
        op="ALLREDUCE",
        location=RankLocation(rank=13, pod="train-1", namespace="ml", instance_id=OTHER, instance_group="worker"),
    )
    attributed = Finding(
        check_id="hang.attribution",
        status=Status.FAIL,
        title=fact.sentence,
        reference=DBG_FLIGHT_RECORDER,
        resources=[Resource(kind="node", id=OTHER), Resource(kind="pod", id="ml/train-1")],
        fields={"rank": 13, "instance_id": OTHER, "source": "flight_recorder", "seq": 1580},
    )
    inventory = _inventory()
    result = _result(inventory, _watchdog(T0), attributed)
    [incident] = build_incidents(result, inventory, attributions=[fact])
    assert incident.kind == "hang_attributed" and incident.findings_folded == 2
    assert incident.affected.instance_ids == [OTHER] and incident.affected.nodes == [GOOD]
    assert incident.affected.ranks == [13] and incident.affected.pods == ["ml/train-1"]
    assert "never entered ALLREDUCE #1580" in incident.root_cause.summary
    # The finding is told through the fact it states: one line for the rank, one for the witness.
    assert [(e.source, e.kind) for e in incident.timeline] == [("logs", "hang"), ("flight_recorder", "hang")]


def test_a_hang_nothing_explains_is_its_own_incident_without_a_suspect_node() -> None:
    inventory = _inventory()
    result = _result(inventory, _watchdog(T0))
    [incident] = build_incidents(result, inventory)
    assert incident.kind == "collective_hang" and incident.title.endswith(CAUSE_NOT_FOUND)
    assert incident.affected.instance_ids == [] and incident.affected.nodes == [GOOD]
    assert incident.root_cause.summary.startswith("NCCL collective timed out")


def test_a_configuration_finding_is_an_incident_like_any_root_cause() -> None:
    # Every FAIL/WARN finding is in exactly one incident: a security group's missing rule too.
    finding = Finding(
        check_id="network.security_group_self_reference",
        status=Status.FAIL,
        title="sg-1 has no self rule",
        reference=OPS_REMEDIATIONS,
        resources=[Resource(kind="security_group", id="sg-1")],
    )
    inventory = _inventory()
    result = _result(inventory, finding, _watchdog(T0))
    incidents = build_incidents(result, inventory)
    _assert_incidents_are_the_verdict(result, incidents)
    [incident] = incidents  # the security group explains the timeout
    assert incident.kind == "security_group_rules" and incident.scope == "cluster"
    assert [e.kind for e in incident.timeline] == ["hang", "fault"]  # the timeout at 02:00, the rule at the sweep
    assert finding.fingerprint in incident.finding_fingerprints


def test_a_hang_is_what_the_verdict_classifies_as_one() -> None:
    # `nccl_remote_error` is a collective hang in the verdict: the escalation situations and the
    # timeline say so too (one answer to "which signatures are a hang").
    assert HANG_KINDS.issubset(CAUSE_KINDS) and RENDEZVOUS_KIND in CAUSE_KINDS
    inventory = _inventory()
    result = _result(inventory, _watchdog(T0, signature="nccl_remote_error"))
    [incident] = build_incidents(result, inventory)
    assert incident.kind in HANG_KINDS and [e.kind for e in incident.timeline] == ["hang"]
    verdicts = {e.number: e.verdict for e in judge(result, [])}
    assert verdicts[2] == "confirm"  # hardware clean but not every node probed, and a hang seen


def test_same_gpu_recurrence_against_history_says_replace_and_escalate() -> None:
    earlier = Incident(
        id="rc-earlier",
        cluster="ml",
        title="Xid 79",
        priority="P0",
        root_cause=RootCause(summary="Xid 79", source="node_probe", reference=NODE_HARDWARE, xid=79),
        first_seen=T0 - timedelta(days=1),
        affected=Affected(instance_ids=[GOOD], gpus=[SERIAL]),
    )
    inventory = _inventory(node_probes=_xid_probe())
    result = _result(inventory)
    incidents = build_incidents(result, inventory, history=[earlier])
    recurrence = incidents[0].recurrence
    assert recurrence is not None and recurrence.kind == "same_gpu"
    assert "replace, don't reboot" in recurrence.advice
    assert recurrence.previous_incident_ids == ["rc-earlier"]
    verdicts = {e.number: e.verdict for e in judge(result, incidents)}
    assert verdicts[4] == "applies"
    # Another GPU's history is no recurrence of this one.
    other = earlier.model_copy(update={"affected": Affected(instance_ids=[GOOD], gpus=["999"])})
    assert build_incidents(result, inventory, history=[other])[0].recurrence is None


def test_same_instance_recurrence_needs_the_earlier_incident_first() -> None:
    earlier = Incident(
        id="rc-earlier",
        cluster="ml",
        title="Xid 79",
        priority="P0",
        root_cause=RootCause(summary="Xid 79", source="hma", reference=NODE_HARDWARE, xid=79),
        first_seen=T0 - timedelta(days=1),
        affected=Affected(instance_ids=[BAD]),
    )
    inventory = _inventory(logs=_hma())
    result = _result(inventory)
    [incident] = build_incidents(result, inventory, history=[earlier])
    assert incident.recurrence is not None and incident.recurrence.kind == "same_instance"
    assert incident.recurrence.previous_incident_ids == ["rc-earlier"]
    later = earlier.model_copy(update={"first_seen": T0 + timedelta(days=1)})
    assert build_incidents(result, inventory, history=[later])[0].recurrence is None


def test_group_recurrence_needs_a_replacement_before_the_new_fault() -> None:
    replaced = Incident(
        id="rc-replaced",
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
    inventory = _inventory(logs=_hma(at=T0))
    result = _result(inventory)
    incidents = build_incidents(result, inventory, history=[replaced])
    assert incidents[0].root_cause.xid == 79  # from the agent's detection the HMA finding summarises
    assert incidents[0].recurrence is not None and incidents[0].recurrence.kind == "same_instance_group"
    assert incidents[0].recurrence.previous_incident_ids == ["rc-replaced"]
    # The same replacement *after* the new fault is no recurrence.
    replaced.timeline[0].time = T0 + timedelta(hours=1)
    later = build_incidents(result, inventory, history=[replaced])
    assert later[0].recurrence is None


def test_incident_ids_are_the_root_cause_ids_and_stable_across_sweeps() -> None:
    inventory = _inventory(node_probes=_xid_probe())
    first = build_incidents(_result(inventory), inventory)
    second = build_incidents(_result(inventory), inventory)
    assert [i.id for i in first] == [i.id for i in second] != []
    assert all(i.id.startswith("rc-") for i in first)


def test_a_healthy_sweep_has_no_incident() -> None:
    inventory = _inventory(events=[_event(BAD, "Instance reboot completed.", 5)])
    assert build_incidents(_result(inventory), inventory) == []


def test_escalation_lists_exactly_the_five_situations() -> None:
    verdicts = judge(_result(_inventory()), [])
    assert [e.number for e in verdicts] == [1, 2, 3, 4, 5]
    assert [e.situation for e in verdicts] == list(SITUATIONS.values())
    by_number = {e.number: e.verdict for e in verdicts}
    assert by_number[3] == "confirm"  # Issues Found: 0 — escalate if training still fails
    assert by_number[4] == "no"
