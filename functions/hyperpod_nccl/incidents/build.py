"""Join a sweep's signals into incidents: one per root cause, with a timeline.

Sources, per cluster and window: HyperPod cluster events (lifecycle, replacement, reboot), the
health-monitoring agent's detections, node states, node-probe faults (Xids with the GPU's
serial), log findings (NCCL watchdog timeouts, aborts, job failures) and hang attribution
(Flight Recorder / RAS). Signals are grouped by instance; job-level signals (a watchdog timeout
in a training stream) join the node incident that attribution names, or the only node fault in
the causal window. Pure: a function of the sweep result, its inventory and earlier incidents.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from hyperpod_nccl import thresholds
from hyperpod_nccl.checks.cluster import node_status
from hyperpod_nccl.checks.cluster_events import categorise, cluster_events
from hyperpod_nccl.checks.k8s_nodes import node_health_labels, node_ready
from hyperpod_nccl.checks.logs import hma_detections
from hyperpod_nccl.hang.attribution import AttributionFact
from hyperpod_nccl.incidents.models import (
    Affected,
    Incident,
    Outcome,
    Recurrence,
    RootCause,
    SignalKind,
    SignalSource,
    TimelineEntry,
)
from hyperpod_nccl.models.common import parse_time
from hyperpod_nccl.models.findings import Finding, Priority, SweepResult
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.references import (
    CLUSTER_EVENTS,
    DBG_FLIGHT_RECORDER,
    DBG_NCCL_RAS,
    DBG_NODE_HARDWARE,
    DBG_ROW_REMAP_DCGM,
    NODE,
    NODE_DCGM,
    NODE_GPU,
    NODE_HARDWARE,
    NODE_NVIDIA,
    NODE_ROW_REMAP,
    Reference,
)
from hyperpod_nccl.xid import XID_LINE, xid_info

# Log signatures that say a job stopped or hung (the effect side of a causal chain).
HANG_SIGNATURES = frozenset({"watchdog_timeout", "watchdog_stuck", "comm_abort", "nccl_remote_error"})
JOB_FAILURE_SIGNATURES = frozenset({"slurm_job_failure", "pod_crashloop", "host_oom_kill"})
HARDWARE_SIGNATURES = frozenset(
    {"xid", "gpu_fallen_off_bus", "ecc_uncorrectable", "row_remap", "dcgm_failure", "nvlink_error"}
)
HARDWARE_REFERENCES = (
    NODE_HARDWARE,
    NODE_GPU,
    NODE_NVIDIA,
    NODE_ROW_REMAP,
    NODE_DCGM,
    DBG_NODE_HARDWARE,
    DBG_ROW_REMAP_DCGM,
)
# Check ids are read from the checks, never spelled here: a check that is removed or moved fails this import.
NODE_STATE_CHECKS = frozenset({node_status.meta.id, node_ready.meta.id, node_health_labels.meta.id})
CLUSTER_EVENTS_CHECK = cluster_events.meta.id
# Checks whose findings the inventory already gives in full detail (one entry per event).
COVERED_BY_INVENTORY = frozenset({CLUSTER_EVENTS_CHECK, hma_detections.meta.id})
# Signals that place a hang on a node (a log line is one witness's view of it).
_ATTRIBUTION_SOURCES = ("flight_recorder", "ras")
RESUMED = re.compile(r"(?i)\b(auto-?resum\w*|resumed|restarted from checkpoint|job resumed)\b")
REPLACE_ADVICE = (
    "replace, don't reboot: the same fault came back, so a reboot will not clear it "
    f"({NODE_HARDWARE.pointer}); if it persists after replacement, escalate to AWS Support "
    "(skill: GPU XID errors persist after node replacement)"
)
_KIND_RANK: dict[SignalKind, int] = {"fault": 0, "detection": 1, "hang": 2, "job": 3, "recovery": 4, "info": 5}
_SOURCE_RANK: dict[SignalSource, int] = {
    "node_probe": 0,
    # Attribution names the culprit rank; a log line is one witness's view of the same hang.
    "flight_recorder": 1,
    "ras": 2,
    "logs": 3,
    "hma": 4,
    "node_status": 5,
    "cluster_event": 6,
    "kubernetes": 7,
    "finding": 8,
}


@dataclass
class Signal:
    """One fact about one moment (or the sweep's present) that may belong to an incident."""

    source: SignalSource
    kind: SignalKind
    text: str
    reference: Reference
    time: datetime | None = None
    instance_id: str | None = None
    instance_group: str | None = None
    check_id: str | None = None
    fingerprint: str | None = None
    xid: int | None = None
    gpu: str | None = None
    signature: str | None = None
    pods: list[str] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    recovery: str | None = None  # "replacement" / "reboot" for recovery signals

    def rank(self) -> tuple[int, int, int]:
        """Root-cause preference: hardware Xids first, then faults, detections, hangs."""
        hardware = 0 if self.xid is not None and xid_info(self.xid).is_hardware else 1
        return (_KIND_RANK[self.kind], hardware, _SOURCE_RANK[self.source])


def _node_of(finding: Finding) -> tuple[str | None, str | None]:
    node = next((r for r in finding.resources if r.kind == "node"), None)
    group = next((r.id for r in finding.resources if r.kind == "instance_group"), None)
    return (node.id if node else None), group


def _finding_signal(finding: Finding) -> Signal | None:
    """A failure-like finding as a signal; configuration findings are not incidents."""
    if not finding.is_issue or finding.check_id in COVERED_BY_INVENTORY:
        return None
    signature = str(finding.fields.get("signature") or "")
    xid = finding.fields.get("xid")
    xid_code = int(xid) if isinstance(xid, int | str) and str(xid).isdigit() else None
    instance_id, group = _node_of(finding)
    pods = [r.id for r in finding.resources if r.kind == "pod"]
    jobs = [r.id for r in finding.resources if r.kind == "job"]
    ranks = [int(r.id) for r in finding.resources if r.kind == "rank" and r.id.isdigit()]
    hardware_ref = finding.reference in HARDWARE_REFERENCES
    kind: SignalKind
    if signature in HARDWARE_SIGNATURES or xid_code is not None:
        kind = "fault"
    elif signature in HANG_SIGNATURES:
        kind = "hang"
    elif signature in JOB_FAILURE_SIGNATURES:
        kind = "job"
    elif finding.check_id in NODE_STATE_CHECKS and instance_id:
        kind = "detection"
    elif hardware_ref and instance_id:
        kind = "fault"
    elif finding.reference.file == NODE and instance_id:
        kind = "detection"  # lifecycle scripts, SSM: node trouble, not GPU hardware
    else:
        return None
    source: SignalSource = "logs" if finding.check_id.startswith(("logs.", "k8s.pod")) else "finding"
    if finding.check_id.startswith("node."):
        source = "node_probe"
    elif finding.check_id in NODE_STATE_CHECKS:
        source = "node_status" if finding.check_id.startswith("cluster.") else "kubernetes"
    return Signal(
        source=source,
        kind=kind,
        text=finding.title + (f" — {finding.detail}" if finding.detail else ""),
        reference=finding.reference,
        time=finding.first_seen,
        instance_id=instance_id,
        instance_group=group,
        check_id=finding.check_id,
        fingerprint=finding.fingerprint,
        xid=xid_code,
        signature=signature or None,
        pods=pods,
        jobs=jobs,
        ranks=ranks,
        evidence=list(finding.evidence[:5]),
    )


def _inventory_signals(inventory: Inventory) -> list[Signal]:
    signals: list[Signal] = []
    for event in inventory.control_plane.events or []:
        category = categorise(event)
        level = (event.level or "").lower()
        if category.name in ("replacement", "reboot"):
            kind: SignalKind = "recovery"
        elif level == "error" or category.name in ("hardware", "efa_health_check"):
            kind = "detection"
        else:
            kind = "info"
        signals.append(
            Signal(
                source="cluster_event",
                kind=kind,
                text=f"HyperPod event: {event.description}",
                reference=category.reference if kind != "info" else CLUSTER_EVENTS,
                time=parse_time(event.event_time),
                instance_id=event.instance_id,
                instance_group=event.instance_group,
                recovery=category.name if kind == "recovery" else None,
            )
        )
    for detection in inventory.logs.hma_detections if inventory.logs else []:
        match = XID_LINE.search(detection.message)
        code = int(match.group("code")) if match else None
        what = " → ".join(p for p in (detection.reason, detection.condition, detection.action) if p)
        signals.append(
            Signal(
                source="hma",
                kind="detection",
                text=f"health-monitoring agent: {what or detection.message[:160]}",
                reference=NODE_HARDWARE,
                time=parse_time(detection.time),
                instance_id=detection.instance_id,
                instance_group=detection.instance_group,
                xid=code,
                evidence=[detection.message[:300]],
            )
        )
    return signals


def _probe_xid_signals(inventory: Inventory, existing: list[Signal]) -> list[Signal]:
    """Xids the probes saw, with the faulted GPU's serial/UUID; a finding that already reports
    the same Xid on the same node only gains the GPU identity (no duplicate timeline line)."""
    signals: list[Signal] = []
    groups = {n.instance_id: n.instance_group for n in inventory.control_plane.nodes or []}
    for result in inventory.node_probes.results if inventory.node_probes else []:
        if result.probe is None:
            continue
        # nvidia-smi and the kernel spell a GPU's bus id apart; the models hold one spelling (`PciBusId`).
        serials = {g.bus_id: g.serial or g.uuid for g in result.probe.gpus}
        for xid in result.probe.xids:
            info = xid_info(xid.code)
            gpu = serials.get(xid.bus_id)
            twin = next(
                (
                    s
                    for s in existing
                    if s.instance_id == result.instance_id and s.xid == xid.code and s.kind == "fault"
                ),
                None,
            )
            if twin is not None:
                twin.gpu = twin.gpu or gpu
                continue
            signals.append(
                Signal(
                    source="node_probe",
                    kind="fault" if info.is_hardware else "info",
                    text=f"Xid {xid.code} ({info.name}) on GPU {xid.bus_id}",
                    reference=NODE_HARDWARE if info.action == "replace" else NODE_GPU,
                    instance_id=result.instance_id,
                    instance_group=result.instance_group or groups.get(result.instance_id),
                    xid=xid.code,
                    gpu=gpu,
                    evidence=[xid.line[:300]],
                )
            )
    return signals


def _attribution_signal(fact: AttributionFact) -> Signal:
    return Signal(
        source=fact.source,
        kind="hang",
        text=fact.sentence,
        reference=DBG_FLIGHT_RECORDER if fact.source == "flight_recorder" else DBG_NCCL_RAS,
        instance_id=fact.location.instance_id,
        instance_group=fact.location.instance_group,
        pods=[f"{fact.location.namespace}/{fact.location.pod}" if fact.location.namespace else fact.location.pod]
        if fact.location.pod
        else [],
        jobs=[fact.location.job] if fact.location.job else [],
        ranks=[fact.rank],
    )


def collect_signals(
    result: SweepResult, inventory: Inventory | None = None, attributions: Iterable[AttributionFact] = ()
) -> list[Signal]:
    """Every signal of one sweep, from findings, the inventory and hang attribution."""
    signals = [s for f in result.findings if (s := _finding_signal(f)) is not None]
    if inventory is not None:
        signals.extend(_inventory_signals(inventory))
        signals.extend(_probe_xid_signals(inventory, signals))
    else:
        # Without the inventory, the grouped event / HMA findings are all there is.
        for finding in result.findings:
            if finding.check_id in COVERED_BY_INVENTORY and finding.is_issue:
                instance_id, group = _node_of(finding)
                signals.append(
                    Signal(
                        source="cluster_event" if finding.check_id == CLUSTER_EVENTS_CHECK else "hma",
                        kind="detection",
                        text=finding.title,
                        reference=finding.reference,
                        time=finding.first_seen,
                        instance_id=instance_id,
                        instance_group=group,
                        check_id=finding.check_id,
                        fingerprint=finding.fingerprint,
                        evidence=list(finding.evidence[:5]),
                    )
                )
    signals.extend(_attribution_signal(fact) for fact in attributions)
    groups = {n.instance_id: n.instance_group for n in (inventory.control_plane.nodes or [])} if inventory else {}
    for signal in signals:
        if signal.instance_id and not signal.instance_group:
            signal.instance_group = groups.get(signal.instance_id)
    return signals


def _is_incident_worthy(signals: list[Signal]) -> bool:
    return any(s.kind in ("fault", "detection", "hang", "job") for s in signals)


def _sort_key(signal: Signal, fallback: datetime) -> tuple[datetime, int]:
    return (signal.time or fallback, _KIND_RANK[signal.kind])


def build_incidents(
    result: SweepResult,
    inventory: Inventory | None = None,
    *,
    attributions: Iterable[AttributionFact] = (),
    history: Iterable[Incident] = (),
) -> list[Incident]:
    """One incident per root cause in the sweep, most urgent first."""
    signals = collect_signals(result, inventory, attributions)
    by_node: dict[str, list[Signal]] = defaultdict(list)
    unplaced: list[Signal] = []
    for signal in signals:
        # A watchdog timeout is logged by every waiting rank: the node that logged it is a
        # witness, not a suspect. Only attribution (FR / RAS) places a hang on a node.
        witness = signal.kind in ("hang", "job") and signal.source not in ("flight_recorder", "ras")
        if signal.instance_id and not witness:
            by_node[signal.instance_id].append(signal)
        elif signal.kind in ("hang", "job"):
            unplaced.append(signal)
    node_groups = {node: sigs for node, sigs in by_node.items() if _is_incident_worthy(sigs)}
    faulted = [node for node, sigs in node_groups.items() if any(s.kind == "fault" for s in sigs)]
    # Linear in the signals: each search and membership test below used to scan them all (Signal
    # equality compares every field): ~20 s per build for a hang logged on 10,000 nodes.
    faults = _fault_times(faulted, node_groups)
    named = {n for n, sigs in node_groups.items() if any(s.source in _ATTRIBUTION_SOURCES for s in sigs)}
    placed: set[int] = set()
    for signal in unplaced:
        target = _causal_target(signal, faulted, faults, named)
        if target:
            node_groups[target].append(signal)
            placed.add(id(signal))
            if signal.source in _ATTRIBUTION_SOURCES:
                named.add(target)
    leftovers = [s for s in unplaced if id(s) not in placed]
    previous = list(history)
    incidents = [_incident(result, node, sigs, previous) for node, sigs in node_groups.items()]
    if leftovers:
        incidents.append(_incident(result, "job", leftovers, previous))
    _mark_group_recurrence(incidents, previous)
    return sorted(incidents, key=lambda i: (i.priority.rank, i.first_seen or result.window_end, i.id))


def _fault_times(faulted: list[str], groups: dict[str, list[Signal]]) -> list[tuple[datetime, str]]:
    """Every timed fault of the faulted nodes as (time, node), sorted (searched by bisection)."""
    return sorted(
        (fault.time, node) for node in faulted for fault in groups[node] if fault.kind == "fault" and fault.time
    )


def _causal_target(
    signal: Signal, faulted: list[str], faults: list[tuple[datetime, str]], named: set[str]
) -> str | None:
    """The node incident a job-level signal belongs to: the node attribution named in the same
    job (`named`); else the latest timed node fault shortly before it; else the only faulted node."""
    if len(named) == 1:
        return next(iter(named))
    if signal.time is not None:
        # The greatest (time, node) at or before the signal, if it is inside the causal window.
        at = bisect_right(faults, signal.time, key=lambda fault: fault[0])
        if at and (signal.time - faults[at - 1][0]).total_seconds() <= thresholds.INCIDENT_CAUSAL_WINDOW_SECONDS:
            return faults[at - 1][1]
    return faulted[0] if len(faulted) == 1 else None


def _outcome(signals: list[Signal]) -> Outcome:
    if any(RESUMED.search(s.text) for s in signals):
        return "resumed"
    if any(s.signature in JOB_FAILURE_SIGNATURES for s in signals):
        return "failed"
    if any(s.kind == "recovery" for s in signals):
        return "recovering"
    return "unknown"


def _priority(root: Signal, signals: list[Signal]) -> Priority:
    if root.kind in ("fault", "hang") or any(s.kind == "hang" for s in signals):
        return Priority.P0
    return Priority.P1


def _incident(result: SweepResult, anchor: str, signals: list[Signal], history: list[Incident]) -> Incident:
    root = min(signals, key=lambda s: s.rank())
    fallback = result.window_end
    ordered = sorted(signals, key=lambda s: _sort_key(s, fallback))
    timed = [s.time for s in signals if s.time]
    where = f" on {anchor}" if anchor != "job" else ""
    signature = root.signature or (f"xid{root.xid}" if root.xid is not None else root.check_id or root.source)
    witnesses = [s for s in signals if s.kind in ("hang", "job") and s.source not in _ATTRIBUTION_SOURCES]
    witness_ids = {id(s) for s in witnesses}  # identities: `s not in witnesses` was quadratic
    affected = Affected(
        instance_ids=sorted({s.instance_id for s in signals if s.instance_id and id(s) not in witness_ids}),
        nodes=sorted({s.instance_id for s in witnesses if s.instance_id}),
        instance_groups=sorted({s.instance_group for s in signals if s.instance_group}),
        pods=sorted({p for s in signals for p in s.pods}),
        ranks=sorted({r for s in signals for r in s.ranks}),
        jobs=sorted({j for s in signals for j in s.jobs}),
        gpus=sorted({s.gpu for s in signals if s.gpu}),
    )
    incident = Incident(
        id=Incident.make_id(result.cluster_name, anchor, signature),
        cluster=result.cluster_name,
        title=f"{root.text.split(' — ')[0]}{where}",
        priority=_priority(root, signals),
        root_cause=RootCause(
            summary=root.text, source=root.source, reference=root.reference, check_id=root.check_id, xid=root.xid
        ),
        first_seen=min(timed) if timed else None,
        last_seen=max(timed) if timed else None,
        outcome=_outcome(signals),
        timeline=[TimelineEntry(time=s.time, source=s.source, kind=s.kind, text=s.text) for s in ordered],
        affected=affected,
        finding_fingerprints=sorted({s.fingerprint for s in signals if s.fingerprint}),
        evidence=[line for s in ordered for line in s.evidence][:20],
    )
    incident.recurrence = _same_gpu_or_instance(incident, root, history)
    return incident


def _same_gpu_or_instance(incident: Incident, root: Signal, history: list[Incident]) -> Recurrence | None:
    if root.xid is None:
        return None
    for gpu in incident.affected.gpus:
        earlier = [
            h for h in history if gpu in h.affected.gpus and h.root_cause.xid == root.xid and h.id != incident.id
        ]
        if earlier:
            return Recurrence(
                kind="same_gpu",
                detail=f"Xid {root.xid} on GPU {gpu} was seen before",
                advice=REPLACE_ADVICE,
                previous_incident_ids=[h.id for h in earlier],
            )
    same_node = [
        h
        for h in history
        if h.root_cause.xid == root.xid
        and set(h.affected.instance_ids) & set(incident.affected.instance_ids)
        and (h.first_seen or datetime.min.replace(tzinfo=UTC))
        < (incident.first_seen or datetime.max.replace(tzinfo=UTC))
    ]
    if same_node:
        return Recurrence(
            kind="same_instance",
            detail=f"Xid {root.xid} recurred on {', '.join(incident.affected.instance_ids)} after an earlier incident",
            advice=REPLACE_ADVICE,
            previous_incident_ids=[h.id for h in same_node],
        )
    return None


def _mark_group_recurrence(incidents: list[Incident], history: list[Incident]) -> None:
    """A hardware Xid again in an instance group whose node was already replaced (in this window
    or an earlier incident): the fault is following the group, not one host."""
    # group → (replacement time, incident id, replaced instances)
    replaced: dict[str, list[tuple[datetime, str, set[str]]]] = defaultdict(list)
    for incident in [*history, *incidents]:
        for entry in incident.timeline:
            if entry.kind == "recovery" and entry.time is not None and "replace" in entry.text.lower():
                for group in incident.affected.instance_groups:
                    replaced[group].append((entry.time, incident.id, set(incident.affected.instance_ids)))
    for incident in incidents:
        xid = incident.root_cause.xid
        if incident.recurrence is not None or xid is None or not xid_info(xid).is_hardware:
            continue
        if incident.first_seen is None:
            continue  # an untimed fault cannot be said to come after the replacement
        for group in incident.affected.instance_groups:
            earlier = [
                incident_id
                for when, incident_id, instances in replaced.get(group, [])
                if incident_id != incident.id
                and when < incident.first_seen
                and not instances & set(incident.affected.instance_ids)
            ]
            if earlier:
                incident.recurrence = Recurrence(
                    kind="same_instance_group",
                    detail=f"Xid {xid} in instance group {group} after a node of the group was replaced",
                    advice=REPLACE_ADVICE,
                    previous_incident_ids=earlier,
                )
                break
