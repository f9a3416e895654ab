"""Incidents: the verdict's root causes, each told with the timeline of the signals that belong to it.

There is one incident per root cause of the verdict the sweep result carries (`SweepResult.verdict`),
in the verdict's order and with the cause's id, so every FAIL/WARN finding is in exactly one
incident because it is in exactly one root cause, and the CLI, the monitor's table and the alerts
name a cause the same way sweep after sweep. An incident's timeline holds:

- the findings the cause accounts for, its evidence and the symptoms it explains;
- the inventory's signals that no finding holds in full detail, one entry each: HyperPod cluster
  events, the health-monitoring agent's detections, the probes' Xids (with the faulted GPU's serial)
  and hang attribution facts. Each goes to the cause of the finding that reports it (the
  `cluster.events` finding of its category on its instance, the `logs.hma_detections` finding of its
  node, the node's `node.gpu_xid` finding, the `hang.attribution` finding of its rank), which is then
  told through those entries rather than as one summary line. A signal no finding reports (a
  replacement, a reboot, a lagging rank) goes to the most urgent cause naming its instance, else
  its pod, else its job; a signal nothing claims is no issue and stays out of every timeline.

Every lookup is by key (fingerprint, instance, pod, job, rank): linear in the signals on 10,000 nodes.
Pure: a function of the sweep result, its inventory, hang attribution and earlier incidents.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from hyperpod_nccl import thresholds
from hyperpod_nccl.checks.cluster import node_status
from hyperpod_nccl.checks.cluster_events import categorise, cluster_events
from hyperpod_nccl.checks.hang_attribution import hang_attribution
from hyperpod_nccl.checks.k8s_nodes import node_health_labels, node_ready
from hyperpod_nccl.checks.logs import hma_detections
from hyperpod_nccl.checks.node_gpu import gpu_xid
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
from hyperpod_nccl.models.findings import Finding, SweepResult
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.verdict import RootCause as VerdictCause
from hyperpod_nccl.references import (
    CLUSTER_EVENTS,
    DBG_FLIGHT_RECORDER,
    DBG_NCCL_RAS,
    NODE_GPU,
    NODE_HARDWARE,
    Reference,
)
from hyperpod_nccl.verdict.fold import named_instances
from hyperpod_nccl.verdict.kinds import CAUSE_KINDS, HANG_KINDS, base_signature, classify, xid_code
from hyperpod_nccl.xid import XID_LINE, xid_info

# Log signatures that say a job stopped (the effect side of a causal chain, and a failed outcome).
JOB_FAILURE_SIGNATURES = frozenset({"slurm_job_failure", "pod_crashloop", "host_oom_kill"})
# Check ids are read from the checks, never spelled here: a check that is removed or moved fails this import.
NODE_STATE_CHECKS = frozenset({node_status.meta.id, node_ready.meta.id, node_health_labels.meta.id})
CLUSTER_EVENTS_CHECK = cluster_events.meta.id
HMA_CHECK = hma_detections.meta.id
XID_CHECK = gpu_xid.meta.id
HANG_ATTRIBUTION_CHECK = hang_attribution.meta.id
# What a finding reports, as the key its inventory signals carry: ("event", category, place),
# ("hma", node), ("xid", node), ("rank", rank). A finding of the first, second and last kind is
# told through the signals it summarises; a `node.gpu_xid` finding stays and gains the GPU's serial.
_DETAILED = frozenset({"event", "hma", "rank"})
# Signals that place a hang on a node (a log line is one witness's view of it).
_ATTRIBUTION_SOURCES: tuple[SignalSource, ...] = ("flight_recorder", "ras")
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
# Earlier incidents a group recurrence names: the latest few say the fault follows the group.
RECURRENCE_IDS_LIMIT = thresholds.INCIDENT_LIST_LIMIT
_EARLIEST = datetime.min.replace(tzinfo=UTC)
_LATEST = datetime.max.replace(tzinfo=UTC)

Key = tuple[str, ...]


@dataclass
class Signal:
    """One fact about one moment (or the sweep's present) on an incident's timeline."""

    source: SignalSource
    kind: SignalKind
    text: str
    reference: Reference
    time: datetime | None = None
    instances: list[str] = field(default_factory=list)
    instance_group: str | None = None
    check_id: str | None = None
    xid: int | None = None
    gpus: list[str] = field(default_factory=list)
    signature: str | None = None
    pods: list[str] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    # Seen by a node that only witnessed the failure (see `_finding_signal`): its node is no suspect.
    witness: bool = False

    def rank(self) -> tuple[int, int, int]:
        """Which signal states the cause best: hardware Xids first, then faults, detections, hangs."""
        hardware = 0 if self.xid is not None and xid_info(self.xid).is_hardware else 1
        return (_KIND_RANK[self.kind], hardware, _SOURCE_RANK[self.source])


# --- findings ------------------------------------------------------------------------------------


def _first(finding: Finding, kind: str) -> str | None:
    return next((r.id for r in finding.resources if r.kind == kind), None)


def _xid_codes(finding: Finding) -> list[int]:
    """The Xids a finding reports: `xid` (a log line), `xid_codes` (a probe: one number or a comma list)."""
    codes = [code] if (code := xid_code(finding)) is not None else []
    listed = finding.fields.get("xid_codes")
    if isinstance(listed, int) and not isinstance(listed, bool):
        codes.append(listed)
    elif isinstance(listed, str):
        codes += [int(part) for part in listed.split(",") if part.strip().isdigit()]
    return list(dict.fromkeys(codes))


def _finding_source(finding: Finding) -> SignalSource:
    check = finding.check_id
    if check == HANG_ATTRIBUTION_CHECK:
        source = finding.fields.get("source")
        return "flight_recorder" if source == "flight_recorder" else "ras" if source == "ras" else "finding"
    if check in NODE_STATE_CHECKS:
        return "node_status" if check == node_status.meta.id else "kubernetes"
    if check == CLUSTER_EVENTS_CHECK:
        return "cluster_event"
    if check == HMA_CHECK:
        return "hma"
    if check.startswith("node."):
        return "node_probe"
    if check.startswith(("logs.", "k8s.pod")):
        return "logs"
    return "finding"


def _finding_signal(finding: Finding, *, evidence: bool, job_symptom: bool = False) -> Signal:
    """A finding of a root cause as a timeline entry: what the cause is (`fault`) for its evidence,
    another view of it (`detection`) for a symptom, and a hang or a stopped job as what it says.

    A witness is a node that only saw the failure: a hang or a stopped job as one waiting rank
    logged it (attribution alone places a hang on a node), or a job's symptom (`job_symptom`: a
    timeout, a fallback, the job's gathered output) explained by a cause elsewhere."""
    signature = base_signature(finding)
    kind: SignalKind
    if classify(finding) in HANG_KINDS:
        kind = "hang"
    elif signature in JOB_FAILURE_SIGNATURES:
        kind = "job"
    else:
        kind = "fault" if evidence else "detection"
    codes = _xid_codes(finding)
    source = _finding_source(finding)
    rank = finding.fields.get("rank")
    ranks = [int(r.id) for r in finding.resources if r.kind == "rank" and r.id.isdigit()]
    if isinstance(rank, int) and not isinstance(rank, bool):
        ranks.append(rank)
    return Signal(
        source=source,
        kind=kind,
        text=finding.title + (f" — {finding.detail}" if finding.detail else ""),
        reference=finding.reference,
        time=finding.first_seen,
        instances=named_instances(finding),
        instance_group=_first(finding, "instance_group"),
        check_id=finding.check_id,
        # The hardware Xid states the fault when there are several.
        xid=min(codes, key=lambda c: (not xid_info(c).is_hardware, c)) if codes else None,
        signature=signature or None,
        pods=[r.id for r in finding.resources if r.kind == "pod"],
        jobs=[r.id for r in finding.resources if r.kind == "job"],
        ranks=sorted(set(ranks)),
        evidence=list(finding.evidence[:5]),
        witness=job_symptom or (kind in ("hang", "job") and source not in _ATTRIBUTION_SOURCES),
    )


def _reported(finding: Finding) -> Key | None:
    """The key of the inventory signals a finding summarises, if it summarises any."""
    check = finding.check_id
    node = _first(finding, "node")
    if check == CLUSTER_EVENTS_CHECK:
        # The check groups events by category and by instance, else instance group, else cluster.
        place = node or _first(finding, "instance_group") or "cluster"
        return ("event", str(finding.fields.get("signature") or ""), place)
    if check == HMA_CHECK:
        return ("hma", node or _first(finding, "log_stream") or "")
    if check == XID_CHECK and node:
        return ("xid", node)
    rank = finding.fields.get("rank")
    if check == HANG_ATTRIBUTION_CHECK and isinstance(rank, int):
        return ("rank", str(rank))
    return None


# --- the inventory's signals ---------------------------------------------------------------------


def _event_signals(inventory: Inventory) -> Iterator[tuple[Key, Signal]]:
    for event in inventory.control_plane.events or []:
        category = categorise(event)
        level = (event.level or "").lower()
        kind: SignalKind
        if category.name in ("replacement", "reboot"):
            kind = "recovery"
        elif level == "error" or category.name in ("hardware", "efa_health_check"):
            kind = "detection"
        else:
            kind = "info"
        signal = Signal(
            source="cluster_event",
            kind=kind,
            text=f"HyperPod event: {event.description}",
            reference=category.reference if kind != "info" else CLUSTER_EVENTS,
            time=parse_time(event.event_time),
            instances=[event.instance_id] if event.instance_id else [],
            instance_group=event.instance_group,
        )
        yield ("event", category.name, event.instance_id or event.instance_group or "cluster"), signal


def _hma_signals(inventory: Inventory) -> Iterator[tuple[Key, Signal]]:
    for detection in inventory.logs.hma_detections if inventory.logs else []:
        match = XID_LINE.search(detection.message)
        what = " → ".join(p for p in (detection.reason, detection.condition, detection.action) if p)
        signal = Signal(
            source="hma",
            kind="detection",
            text=f"health-monitoring agent: {what or detection.message[:160]}",
            reference=NODE_HARDWARE,
            time=parse_time(detection.time),
            instances=[detection.instance_id] if detection.instance_id else [],
            instance_group=detection.instance_group,
            xid=int(match.group("code")) if match else None,
            evidence=[detection.message[:300]],
        )
        yield ("hma", detection.instance_id or detection.stream), signal


def _probe_xid_signals(inventory: Inventory) -> Iterator[tuple[Key, Signal]]:
    """Xids the probes saw, with the faulted GPU's serial (or UUID)."""
    for result in inventory.node_probes.results if inventory.node_probes else []:
        if result.probe is None:
            continue
        # nvidia-smi and the kernel spell a GPU's bus id apart; the models hold one spelling (`PciBusId`).
        serials = {g.bus_id: g.serial or g.uuid for g in result.probe.gpus}
        for xid in result.probe.xids:
            info = xid_info(xid.code)
            gpu = serials.get(xid.bus_id)
            signal = Signal(
                source="node_probe",
                kind="fault" if info.is_hardware else "info",
                text=f"Xid {xid.code} ({info.name}) on GPU {xid.bus_id}",
                reference=NODE_HARDWARE if info.action == "replace" else NODE_GPU,
                instances=[result.instance_id],
                instance_group=result.instance_group,
                xid=xid.code,
                gpus=[gpu] if gpu else [],
                evidence=[xid.line[:300]],
            )
            yield ("xid", result.instance_id), signal


def _attribution_signal(fact: AttributionFact) -> tuple[Key, Signal]:
    where = fact.location
    pod = f"{where.namespace}/{where.pod}" if where.namespace and where.pod else where.pod
    signal = Signal(
        source=fact.source,
        kind="hang",
        text=fact.sentence,
        reference=DBG_FLIGHT_RECORDER if fact.source == "flight_recorder" else DBG_NCCL_RAS,
        instances=[where.instance_id] if where.instance_id else [],
        instance_group=where.instance_group,
        pods=[pod] if pod else [],
        jobs=[where.job] if where.job else [],
        ranks=[fact.rank],
    )
    return ("rank", str(fact.rank)), signal


def _inventory_signals(
    inventory: Inventory | None, attributions: Iterable[AttributionFact]
) -> Iterator[tuple[Key, Signal]]:
    if inventory is not None:
        yield from _event_signals(inventory)
        yield from _hma_signals(inventory)
        yield from _probe_xid_signals(inventory)
    for fact in attributions:
        yield _attribution_signal(fact)


# --- which cause a signal belongs to ---------------------------------------------------------------


class _Claims:
    """Which root cause (its index in the verdict) a signal of the inventory belongs to: the cause
    of the finding that reports it, else the most urgent cause naming its instance (among equally
    urgent ones, the node's own cause), else its pod, else its job."""

    def __init__(self, causes: list[VerdictCause]) -> None:
        self.reported: dict[Key, int] = {}
        self.instance: dict[str, tuple[tuple[int, int, int], int]] = {}
        self.pod: dict[str, int] = {}
        self.job: dict[str, int] = {}
        for index, cause in enumerate(causes):
            urgency = (cause.priority.rank, cause.scope != "node", index)
            named = [r.id for r in cause.resources if r.kind == "node"]
            for instance in [cause.anchor, *named] if cause.scope == "node" else named:
                if instance not in self.instance or urgency < self.instance[instance][0]:
                    self.instance[instance] = (urgency, index)
            for resource in cause.resources:
                if resource.kind == "pod":
                    self.pod.setdefault(resource.id, index)
                elif resource.kind == "job":
                    self.job.setdefault(resource.id, index)

    def report(self, key: Key, index: int) -> None:
        """The cause at `index` holds a finding that reports the signals of `key`."""
        self.reported.setdefault(key, index)

    def claim(self, key: Key, signal: Signal) -> int | None:
        """The cause the signal belongs to, or None when no cause claims it."""
        if key in self.reported:
            return self.reported[key]
        for instance in signal.instances:
            if instance in self.instance:
                return self.instance[instance][1]
        for pod in signal.pods:
            if pod in self.pod:
                return self.pod[pod]
        return next((self.job[job] for job in signal.jobs if job in self.job), None)


@dataclass
class _Story:
    """The signals of one root cause while they are gathered."""

    cause: VerdictCause
    findings: list[tuple[Signal, Key | None]] = field(default_factory=list)
    evidence: list[Signal] = field(default_factory=list)
    details: list[Signal] = field(default_factory=list)
    # (instance, Xid) → the finding that reports it: a probe's Xid line lends it the GPU's serial.
    xids: dict[tuple[str, int], Signal] = field(default_factory=dict)

    def gather(self, issues: dict[str, list[Finding]]) -> Iterator[Key]:
        """Add the cause's findings (`issues` by fingerprint): its evidence, then each symptom's;
        yield the keys of the inventory signals they report."""
        parts = [(self.cause.evidence, True, False)]
        for symptom in self.cause.explains:
            kind = CAUSE_KINDS.get(symptom.kind)
            parts.append((symptom.findings, False, kind is not None and kind.scope == "job"))
        seen: set[str] = set()
        for fingerprints, evidence, job_symptom in parts:
            for fingerprint in fingerprints:
                if fingerprint in seen:
                    continue
                seen.add(fingerprint)
                for finding in issues.get(fingerprint, ()):
                    if (key := self._add(finding, evidence=evidence, job_symptom=job_symptom)) is not None:
                        yield key

    def _add(self, finding: Finding, *, evidence: bool, job_symptom: bool) -> Key | None:
        signal = _finding_signal(finding, evidence=evidence, job_symptom=job_symptom)
        self.findings.append((signal, key := _reported(finding)))
        if evidence:
            self.evidence.append(signal)
        for instance in signal.instances:
            for code in _xid_codes(finding):
                self.xids.setdefault((instance, code), signal)
        return key

    def add_detail(self, key: Key, signal: Signal) -> None:
        """An inventory signal the cause claimed; a probe's Xid that a finding already states only
        lends that finding the GPU's identity (no second line for the same Xid)."""
        if key[0] == "xid" and signal.xid is not None:
            twin = self.xids.get((signal.instances[0], signal.xid))
            if twin is not None:
                twin.gpus.extend(g for g in signal.gpus if g not in twin.gpus)
                return
        self.details.append(signal)

    def signals(self, detailed: set[Key]) -> list[Signal]:
        """Every signal of the cause: a finding told through the signals it summarises (`detailed`)
        is not told again as a summary line."""
        kept = [signal for signal, key in self.findings if key is None or key not in detailed]
        return [*kept, *self.details]


def _stories(
    result: SweepResult, inventory: Inventory | None, attributions: Iterable[AttributionFact]
) -> list[tuple[_Story, list[Signal]]]:
    """Each root cause of the verdict with its signals, in the verdict's order."""
    causes = result.verdict.root_causes
    issues: dict[str, list[Finding]] = defaultdict(list)
    for finding in result.issues:
        issues[finding.fingerprint].append(finding)
    claims = _Claims(causes)
    stories = [_Story(cause) for cause in causes]
    for index, story in enumerate(stories):
        for key in story.gather(issues):
            claims.report(key, index)
    detailed: set[Key] = set()
    for key, signal in _inventory_signals(inventory, attributions):
        claimant = claims.claim(key, signal)
        if claimant is None:
            continue  # nothing broken names it: no issue, no incident
        if key[0] in _DETAILED and key in claims.reported:
            detailed.add(key)
        stories[claimant].add_detail(key, signal)
    groups = {n.instance_id: n.instance_group for n in inventory.control_plane.nodes or []} if inventory else {}
    told = []
    for story in stories:
        signals = story.signals(detailed)
        for signal in signals:
            if signal.instances and not signal.instance_group:
                signal.instance_group = groups.get(signal.instances[0])
        told.append((story, signals))
    return told


# --- the incident --------------------------------------------------------------------------------


def _outcome(signals: list[Signal]) -> Outcome:
    if any(RESUMED.search(s.text) for s in signals):
        return "resumed"
    if any(s.signature in JOB_FAILURE_SIGNATURES for s in signals):
        return "failed"
    if any(s.kind == "recovery" for s in signals):
        return "recovering"
    return "unknown"


def first_step(cause: VerdictCause) -> str | None:
    """The first step of the cause's plan in one line: what it does, and its command's first line."""
    if not cause.plan:
        return None
    step = cause.plan[0]
    if step.language == "yaml":
        return step.description + (f" (YAML under {step.yaml_path})" if step.yaml_path else " (YAML)")
    lines = [line.strip() for line in (step.command or "").splitlines() if line.strip()]
    if not lines:
        return step.description
    return f"{step.description}: {lines[0]}" + (" …" if len(lines) > 1 else "")


def _root_cause(story: _Story, signals: list[Signal]) -> RootCause:
    """The cause's own statement: its most telling evidence, the verdict's runbook pointer, and the
    Xid its evidence (or the signals its evidence summarises) reports."""
    cause = story.cause
    ranked = sorted(story.evidence, key=Signal.rank)
    lead = ranked[0] if ranked else None
    candidates = [*ranked, *sorted(signals, key=Signal.rank)]
    return RootCause(
        summary=lead.text if lead else f"{cause.title}: {cause.why}",
        source=lead.source if lead else "finding",
        reference=cause.reference,
        check_id=next((s.check_id for s in ranked if s.check_id), None),
        xid=next((s.xid for s in candidates if s.xid is not None), None),
    )


def _incident(result: SweepResult, rank: int, story: _Story, signals: list[Signal]) -> Incident:
    cause = story.cause
    fallback = result.window_end
    ordered = sorted(signals, key=lambda s: (s.time or fallback, _KIND_RANK[s.kind]))
    timed = [s.time for s in signals if s.time]
    witnesses = [s for s in signals if s.witness]
    affected = Affected(
        instance_ids=sorted({i for s in signals if not s.witness for i in s.instances}),
        nodes=sorted({i for s in witnesses for i in s.instances}),
        instance_groups=sorted({s.instance_group for s in signals if s.instance_group}),
        pods=sorted({p for s in signals for p in s.pods}),
        ranks=sorted({r for s in signals for r in s.ranks}),
        jobs=sorted({j for s in signals for j in s.jobs}),
        gpus=sorted({g for s in signals for g in s.gpus}),
    )
    return Incident(
        id=cause.id,
        cluster=result.cluster_name,
        title=cause.title,
        priority=cause.priority,
        root_cause=_root_cause(story, signals),
        kind=cause.kind,
        scope=cause.scope,
        verdict_rank=rank,
        first_step=first_step(cause),
        findings_folded=len(cause.fingerprints),
        first_seen=min(timed) if timed else None,
        last_seen=max(timed) if timed else None,
        outcome=_outcome(signals),
        timeline=[TimelineEntry(time=s.time, source=s.source, kind=s.kind, text=s.text) for s in ordered],
        affected=affected,
        finding_fingerprints=sorted(cause.fingerprints),
        evidence=[line for s in ordered for line in s.evidence][:20],
    )


def build_incidents(
    result: SweepResult,
    inventory: Inventory | None = None,
    *,
    attributions: Iterable[AttributionFact] = (),
    history: Iterable[Incident] = (),
) -> list[Incident]:
    """One incident per root cause of `result.verdict`, in the verdict's order (most urgent first),
    with its timeline, what it touched, and whether it came back (against `history`)."""
    stories = _stories(result, inventory, attributions)
    incidents = [_incident(result, rank, story, signals) for rank, (story, signals) in enumerate(stories)]
    earlier = _History(history)
    for incident in incidents:
        incident.recurrence = earlier.same_gpu_or_instance(incident)
    _mark_group_recurrence(incidents, earlier.incidents)
    return incidents


# --- recurrence ----------------------------------------------------------------------------------


class _History:
    """Earlier incidents indexed by (GPU, Xid) and (instance, Xid)."""

    def __init__(self, history: Iterable[Incident]) -> None:
        self.incidents = list(history)
        self.by_gpu: dict[tuple[str, int], list[Incident]] = defaultdict(list)
        self.by_instance: dict[tuple[str, int], list[tuple[int, Incident]]] = defaultdict(list)
        for position, incident in enumerate(self.incidents):
            xid = incident.root_cause.xid
            if xid is None:
                continue
            for gpu in incident.affected.gpus:
                self.by_gpu[gpu, xid].append(incident)
            for instance in incident.affected.instance_ids:
                self.by_instance[instance, xid].append((position, incident))

    def same_gpu_or_instance(self, incident: Incident) -> Recurrence | None:
        """The same Xid on the same GPU, or on the same instance after an earlier incident."""
        xid = incident.root_cause.xid
        if xid is None:
            return None
        for gpu in incident.affected.gpus:
            earlier = [h for h in self.by_gpu.get((gpu, xid), ()) if h.id != incident.id]
            if earlier:
                return Recurrence(
                    kind="same_gpu",
                    detail=f"Xid {xid} on GPU {gpu} was seen before",
                    advice=REPLACE_ADVICE,
                    previous_incident_ids=[h.id for h in earlier],
                )
        now = incident.first_seen or _LATEST
        found = {
            position: h
            for instance in incident.affected.instance_ids
            for position, h in self.by_instance.get((instance, xid), ())
            if (h.first_seen or _EARLIEST) < now
        }
        if not found:
            return None
        return Recurrence(
            kind="same_instance",
            detail=f"Xid {xid} recurred on {', '.join(incident.affected.instance_ids)} after an earlier incident",
            advice=REPLACE_ADVICE,
            previous_incident_ids=[found[p].id for p in sorted(found)],
        )


def _mark_group_recurrence(incidents: list[Incident], history: list[Incident]) -> None:
    """A hardware Xid again in an instance group whose node was already replaced (in this window
    or an earlier incident): the fault is following the group, not one host."""
    # group → replacements in time order: (time, incident id, replaced instances)
    replaced: dict[str, list[tuple[datetime, str, frozenset[str]]]] = defaultdict(list)
    for incident in [*history, *incidents]:
        instances = frozenset(incident.affected.instance_ids)
        for entry in incident.timeline:
            if entry.kind == "recovery" and entry.time is not None and "replace" in entry.text.lower():
                for group in incident.affected.instance_groups:
                    replaced[group].append((entry.time, incident.id, instances))
    for entries in replaced.values():
        entries.sort(key=lambda e: e[0])
    for incident in incidents:
        xid = incident.root_cause.xid
        if incident.recurrence is not None or xid is None or not xid_info(xid).is_hardware:
            continue
        if incident.first_seen is None:
            continue  # an untimed fault cannot be said to come after the replacement
        mine = set(incident.affected.instance_ids)
        for group in incident.affected.instance_groups:
            entries = replaced.get(group, [])
            earlier = _latest_replacements(
                entries, bisect_left(entries, incident.first_seen, key=lambda e: e[0]), incident.id, mine
            )
            if earlier:
                incident.recurrence = Recurrence(
                    kind="same_instance_group",
                    detail=f"Xid {xid} in instance group {group} after a node of the group was replaced",
                    advice=REPLACE_ADVICE,
                    previous_incident_ids=earlier,
                )
                break


def _latest_replacements(
    entries: list[tuple[datetime, str, frozenset[str]]], end: int, incident_id: str, instances: set[str]
) -> list[str]:
    """The incidents of the latest replacements before `entries[end]` of other instances than
    `instances`, oldest first: at most `RECURRENCE_IDS_LIMIT`, so that a group replaced node after
    node does not make every later fault list all of them (nor cost their product)."""
    found: dict[str, None] = {}
    for position in range(end - 1, -1, -1):  # newest first, without copying the list
        _, replaced_in, replaced = entries[position]
        if replaced_in != incident_id and not replaced & instances:
            found.setdefault(replaced_in)
            if len(found) == RECURRENCE_IDS_LIMIT:
                break
    return list(reversed(found))
