"""Hang attribution: which rank, on which pod / node, stopped a collective (NCCL RAS + Flight Recorder)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_nccl import suggested
from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._node import probed_nodes
from hyperpod_nccl.hang.attribution import AttributionFact
from hyperpod_nccl.hang.evidence import hang_evidence
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import XidEvent
from hyperpod_nccl.references import DBG_FLIGHT_RECORDER, NODE_GPU, NODE_HARDWARE
from hyperpod_nccl.xid import xid_info

# Verdicts that name the rank that held the others up (RAS "lagging" alone is a symptom).
_CULPRIT_VERDICTS = ("never_entered", "never_completed", "stuck_inside", "desync", "dead", "unresponsive")
_DMESG_TIME = re.compile(r"^\[(?P<when>[^\]]+)\]")


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
                "on the same node hangs again. Confirm with the Flight Recorder analysis (debugging-guide "
                f"§ 22) and NCCL RAS (§ 9){hardware}."
            ),
            evidence=[f.sentence for f in facts]
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
