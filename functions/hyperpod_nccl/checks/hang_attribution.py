"""Hang attribution: which rank, on which pod / node, stopped a collective (NCCL RAS + Flight Recorder)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_nccl import suggested
from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._node import counted_node_lines, node_label, node_resource, probed_nodes
from hyperpod_nccl.hang.attribution import AttributionFact
from hyperpod_nccl.hang.evidence import HangEvidence, hang_evidence
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import NcclJobChoice, NodeProbeData, NodeProbeResult, XidEvent
from hyperpod_nccl.references import DBG_FLIGHT_RECORDER, DBG_NCCL_RAS, NODE_GPU, NODE_HARDWARE, Reference
from hyperpod_nccl.xid import xid_info

# Verdicts that name the rank that held the others up (RAS "lagging" alone is a symptom).
_CULPRIT_VERDICTS = ("never_entered", "never_completed", "stuck_inside", "desync", "dead", "unresponsive")
_DMESG_TIME = re.compile(r"^\[(?P<when>[^\]]+)\]")
# Nodes named one per line in an evidence list; the rest are counted.
_MAX_NODE_LINES = 20


def _xid_clause(inv: Inventory, instance_id: str | None, xids: list[XidEvent]) -> str:
    """``; its node shows Xid 79 at 2026-03-01 10:12 UTC`` — the time from dmesg -T when the line
    kept it, else from the earliest HyperPod event on the node that names the Xid."""
    hardware = [x for x in xids if xid_info(x.code).is_hardware] or xids
    if not hardware:
        return ""
    first = hardware[0]
    at = ""
    if when := _DMESG_TIME.match(first.line):
        at = f" at {' '.join(when['when'].split())}"
    else:
        events = [
            e
            for e in inv.control_plane.events or []
            if e.instance_id == instance_id and re.search(rf"\bXid\W*{first.code}\b", e.description)
        ]
        if events:
            at = f" at {min(e.event_time for e in events):%Y-%m-%d %H:%M} UTC"
    return f"; its node shows Xid {first.code}{at}"


def _read_from(evidence: HangEvidence, rank: int, facts: list[AttributionFact]) -> list[str]:
    """Which process each source of these facts was read from (the probe's choice of "the job")."""
    lines = []
    dump_node = evidence.dump_nodes.get(rank)
    if any(f.source == "flight_recorder" for f in facts) and dump_node in evidence.jobs:
        lines.append(f"rank {rank}'s Flight Recorder dump read on {dump_node} from {evidence.jobs[dump_node].label}")
    ras_node = evidence.ras_node
    if any(f.source == "ras" for f in facts) and ras_node in evidence.jobs:
        lines.append(f"NCCL RAS answer read on {ras_node} for {evidence.jobs[ras_node].label}")
    return lines


def _headline(facts: list[AttributionFact]) -> AttributionFact:
    """Flight Recorder names the collective; prefer it over RAS for the same rank."""
    return sorted(facts, key=lambda f: (f.source != "flight_recorder", _CULPRIT_VERDICTS.index(f.verdict)))[0]


@check(
    id="hang.attribution",
    title="Rank and node that hung a collective (NCCL RAS / Flight Recorder)",
    priority=Priority.P0,
    reference=DBG_FLIGHT_RECORDER,
    source="node_probes",
)
def hang_attribution(inv: Inventory) -> Iterator[Finding]:
    """One P0 per rank that RAS or the Flight Recorder dumps name as holding up a collective."""
    evidence = hang_evidence(inv)
    if evidence.ras is None and evidence.analysis is None:
        return
    xids_by_node = {result.instance_id: probe.xids for result, probe in probed_nodes(inv)}
    by_rank: dict[int, list[AttributionFact]] = {}
    for fact in evidence.facts:
        if fact.verdict in _CULPRIT_VERDICTS:
            by_rank.setdefault(fact.rank, []).append(fact)
    refused = evidence.analysis.refused if evidence.analysis else {}
    for rank, facts in sorted(by_rank.items()):
        head = _headline(facts)
        where = head.location
        xid = _xid_clause(inv, where.instance_id, xids_by_node.get(where.instance_id or "", []))
        commands = []
        if xid and where.instance_id:
            commands.append(suggested.batch_replace(inv.cluster_name, [where.instance_id], inv.region))
        resources = []
        if where.instance_id:
            resources.append(Resource(kind="node", id=where.instance_id, name=where.hostname))
        if where.pod:
            resources.append(
                Resource(kind="pod", id=f"{where.namespace}/{where.pod}" if where.namespace else where.pod)
            )
        hardware = f"; the Xid makes this a hardware fault: see {NODE_HARDWARE.pointer} and {NODE_GPU.pointer}"
        hardware = hardware if xid else ""
        yield hang_attribution.fail(
            f"{head.sentence}{xid}",
            detail=(
                "Every other rank waits in this collective until the watchdog fires; restarting the job "
                "on the same node hangs again. Confirm with the Flight Recorder analysis "
                f"({DBG_FLIGHT_RECORDER.pointer}) and NCCL RAS ({DBG_NCCL_RAS.pointer}){hardware}."
            ),
            evidence=[f.sentence for f in facts]
            + _read_from(evidence, rank, facts)
            + [f"Flight Recorder dump refused ({name}): {why}" for name, why in list(refused.items())[:3]],
            resources=resources,
            suggested_commands=commands,
            fields={
                "rank": rank,
                "pod": where.pod,
                "node": where.node_name or where.hostname,
                "instance_id": where.instance_id,
                "collective": head.op,
                "seq": head.seq,
                "process_group": head.process_group,
                "verdict": head.verdict,
                "source": head.source,
            },
        )
    if refused and not by_rank:
        # Dumps were written but none could be analysed (unreadable: malformed, past a bound,
        # hostile; or not kept): say so, or the hang evidence silently shrinks to nothing.
        yield hang_attribution.info(
            f"{len(refused)} Flight Recorder dump(s) not analysed: no rank could be attributed from them",
            detail="The reason is given per file; the ranks of these dumps are not judged.",
            evidence=[f"Flight Recorder dump not analysed ({name}): {why}" for name, why in list(refused.items())[:5]],
        )


# What the probe says when it refuses a setting of the job (probe.parsers.refused_settings), and
# what that costs the diagnosis.
_REFUSALS: dict[str, tuple[str, str, Reference]] = {
    "NCCL_RAS_ADDR": (
        "is not host:port of the node itself: NCCL RAS was not asked there",
        "The probe asks NCCL RAS only at an address of the node itself (loopback or an address `ip` "
        "lists, written as numbers) and never passes a value that nc could take for an option. A "
        "value outside that shape is a misconfiguration (a host name, another node's address, a "
        "typo) or a value planted so that a tool running as root would execute it. Find who runs "
        "the process and what it sets (`ps -o user,pid,args -p <pid>` and its environ on the node).",
        DBG_NCCL_RAS,
    ),
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": (
        "is not a plain absolute path: the default dump prefix was read instead",
        "The probe reads dumps only under a plain absolute prefix (letters, digits, `.`, `_`, `-`; no "
        "`..`, at most 200 characters), without following links. A prefix outside that shape is a "
        "misconfiguration (a relative path, `~`, a space) or a value planted to make a tool running "
        "as root read another file; dumps written under it are not in this diagnosis. Find who runs "
        "the process and what it sets (`ps -o user,pid,args -p <pid>` and its environ on the node).",
        DBG_FLIGHT_RECORDER,
    ),
}


def _choice_line(result: NodeProbeResult, probe: NodeProbeData, job: NcclJobChoice) -> str:
    """`i-1 (worker): pid 4242 (python, uid 1000), 1 of 3 candidates (lowest pid ...)` with why
    dumps or RAS gave nothing there (a refusal has its own finding)."""
    line = f"{node_label(result)}: {job.label}, 1 of {job.candidates} candidate(s) ({job.reason})"
    refusals = set(job.refused.values())
    dump_notes = [n for n in (probe.flight_recorder_error or "").split("; ") if n and n not in refusals]
    notes = [f"Flight Recorder {note}" for note in dump_notes]
    if probe.ras_error and probe.ras_error not in refusals:
        notes.append(f"NCCL RAS: {probe.ras_error}")
    return "; ".join([line, *notes])


@check(
    id="hang.evidence_source",
    title="Which process on each node the hang evidence was read from (the NCCL job)",
    priority=Priority.P2,
    reference=DBG_FLIGHT_RECORDER,
    source="node_probes",
)
def hang_evidence_source(inv: Inventory) -> Iterator[Finding]:
    """One INFO naming, per node, the process the probe took for the NCCL job (pid, command, uid)
    and why, since its settings decide which RAS port is asked and which dumps are read; and one
    P2 WARN per setting of that process the probe refused, naming the nodes, pids and users."""
    chosen: list[tuple[NodeProbeResult, NodeProbeData, NcclJobChoice]] = [
        (result, probe, probe.nccl_job) for result, probe in probed_nodes(inv) if probe.nccl_job is not None
    ]
    if not chosen:
        return
    for variable, (what, why, reference) in _REFUSALS.items():
        refused = [(result, job) for result, _, job in chosen if variable in job.refused]
        if not refused:
            continue
        yield hang_evidence_source.warn(
            f"{variable} of the NCCL job on {len(refused)} node(s) {what}",
            reference=reference,
            detail=why,
            evidence=counted_node_lines(
                [f"{node_label(r)}: {job.label}: {job.refused[variable]}" for r, job in refused], _MAX_NODE_LINES
            ),
            resources=[node_resource(r) for r, _ in refused],
            fields={"signature": variable, "nodes": len(refused)},
        )
    users = sorted({"unknown" if job.uid is None else str(job.uid) for _, _, job in chosen})
    # One uid is a number, several a comma list (the classifier's rule for a field's values).
    uids_field: str | int = int(users[0]) if len(users) == 1 and users[0].isdigit() else ",".join(users)
    if len(chosen) == 1:
        title = f"hang evidence on {node_label(chosen[0][0])} read from {chosen[0][2].label}"
    else:
        uids = f"uid{'s' if len(users) > 1 else ''} {', '.join(users)}"
        title = f"hang evidence read from one NCCL process per node on {len(chosen)} nodes ({uids})"
    yield hang_evidence_source.info(
        title,
        detail=(
            "On each node the probe takes as the job the lowest-pid python/torchrun process whose "
            "environment carries NCCL or TORCH_NCCL settings (else the lowest pid with any). Its "
            "NCCL_RAS_ADDR decides which local RAS port is asked, its TORCH_NCCL_DEBUG_INFO_TEMP_FILE "
            "where dumps are looked for, and only dumps owned by its user are read. Any user of the "
            "node can start such a process: if this is not the training job, the RAS answer and dumps "
            "of that node are not its evidence."
        ),
        evidence=counted_node_lines(
            [_choice_line(result, probe, job) for result, probe, job in chosen], _MAX_NODE_LINES
        ),
        resources=[node_resource(result) for result, _, _ in chosen],
        fields={"nodes": len(chosen), "uids": uids_field},
    )
