"""CloudWatch log checks: the cluster's log group classified with the failure-signature catalog.

One finding per signature per stream (counts, first/last time, evidence, extracted fields), the
health-monitoring agent's detection events as node findings, NCCL version drift across streams,
an INFO when CloudWatch is not enabled for the cluster (operations.md § 4), and a P1 when the scan
was cut short (naming the streams that flooded it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from hyperpod_nccl.checks import check
from hyperpod_nccl.classifier import hits_to_findings, version_drift_hit
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.logs import HmaDetection, LogInventory, StreamScan
from hyperpod_nccl.references import DBG_VERSION_MISMATCH, NODE_HARDWARE, OPS_CLOUDWATCH, PAT_RUNTIME

# Handled by `logs.hma_detections` (one finding per node, not per line).
_HMA_SIGNATURE = "hma_detection"
# Drift inside one stream is reported per stream; across streams by `logs.nccl_versions`.
_DRIFT_SIGNATURE = "nccl_version_drift"
# Flooding streams (and their nodes) named as resources of the incomplete-scan finding.
_FLOOD_RESOURCES = 10


def _stream_resources(scan: StreamScan) -> list[Resource]:
    resources = [Resource(kind="log_stream", id=scan.stream)]
    if scan.instance_id:
        resources.insert(0, Resource(kind="node", id=scan.instance_id, name=scan.instance_group))
    return resources


def _scanned(inv: Inventory) -> LogInventory | None:
    logs = inv.logs
    return logs if logs is not None and logs.group_exists else None


@check(
    id="logs.cloudwatch",
    title="CloudWatch log group of the cluster",
    priority=Priority.P2,
    reference=OPS_CLOUDWATCH,
    source="logs",
)
def cloudwatch_group(inv: Inventory) -> Iterator[Finding]:
    """INFO when the group does not exist; otherwise what was scanned (and whether it was cut short)."""
    logs = inv.logs
    if logs is None:
        return
    if not logs.group_exists:
        yield cloudwatch_group.info(
            "CloudWatch not enabled: the cluster's log group does not exist",
            detail=f"{logs.log_group} not found; HMA, lifecycle and NCCL logs could not be scanned",
            resources=[Resource(kind="cluster", id=inv.cluster_name)],
        )
        return
    summary = (
        f"{len(logs.streams_scanned)} stream(s) with candidate lines of {logs.streams_listed} active, "
        f"{logs.events_matched} candidate event(s), {len(logs.filter_terms)} filter terms"
    )
    if logs.truncated:
        # Cut short by what the cluster printed (a flood, the call budget): P1, not the check's
        # P2, since what was not read may hold a P0 and a job can flood the group on purpose. An
        # API failure alone stays P2: its degraded source already says what is missing and why.
        floods = [f for f in logs.flooded_streams if not f.complete]
        by_volume = bool(floods) or logs.budget_spent
        resources = [Resource(kind="cluster", id=inv.cluster_name)]
        for flood in floods[:_FLOOD_RESOURCES]:
            if flood.instance_id:
                resources.append(Resource(kind="node", id=flood.instance_id))
            resources.append(Resource(kind="log_stream", id=flood.stream))
        more = f" and {len(floods) - 1} more" if len(floods) > 1 else ""
        yield cloudwatch_group.warn(
            f"CloudWatch scan incomplete: stream {floods[0].stream}{more} flooded the log group"
            if floods
            else "CloudWatch scan incomplete",
            detail=f"{logs.truncation_reason or 'cut short'}; {summary}",
            resources=resources,
            priority=Priority.P1 if by_volume else None,
            fields={
                "signature": "truncated",
                "flooded_streams": len(floods),
                "filter_calls": logs.filter_calls,
            },
        )
        return
    yield cloudwatch_group.passed(f"scanned {logs.log_group}", detail=summary)


@check(
    id="logs.signatures",
    title="Failure signatures in CloudWatch logs",
    priority=Priority.P1,
    reference=PAT_RUNTIME,
    source="logs",
)
def log_signatures(inv: Inventory) -> Iterator[Finding]:
    """One finding per failure signature per stream; PASS when no stream has any."""
    logs = _scanned(inv)
    if logs is None:
        return
    reported = 0
    for scan in logs.scans:
        hits = [h for h in scan.hits if h.id != _HMA_SIGNATURE]
        reported += len(hits)
        yield from hits_to_findings(log_signatures, hits, _stream_resources(scan), where=f"stream {scan.stream}")
    if reported == 0:
        yield log_signatures.passed(
            "no NCCL/EFA/GPU failure signatures in CloudWatch logs",
            detail=f"{logs.events_matched} candidate event(s) in {len(logs.streams_scanned)} stream(s) classified",
        )


def _hma_by_node(detections: list[HmaDetection]) -> dict[str, list[HmaDetection]]:
    by_node: dict[str, list[HmaDetection]] = defaultdict(list)
    for detection in detections:
        by_node[detection.instance_id or detection.stream].append(detection)
    return by_node


@check(
    id="logs.hma_detections",
    title="HyperPod health-monitoring agent detection events",
    priority=Priority.P0,
    reference=NODE_HARDWARE,
    source="logs",
)
def hma_detections(inv: Inventory) -> Iterator[Finding]:
    """Each node with `HealthMonitoringAgentDetectionEvent` records fails, with reasons and actions."""
    logs = _scanned(inv)
    if logs is None:
        return
    for node, detections in sorted(_hma_by_node(logs.hma_detections).items()):
        ordered = sorted(detections, key=lambda d: d.time)
        reasons = sorted({d.reason for d in ordered if d.reason})
        conditions = sorted({d.condition for d in ordered if d.condition})
        actions = sorted({d.action for d in ordered if d.action})
        resources = [Resource(kind="log_stream", id=ordered[0].stream)]
        if ordered[0].instance_id:
            resources.insert(0, Resource(kind="node", id=node, name=ordered[0].instance_group))
        yield hma_detections.fail(
            f"health-monitoring agent flagged {node}: {', '.join(reasons) or 'detection event'}",
            detail=(
                f"{len(ordered)} detection(s); condition {', '.join(conditions) or '?'}; "
                f"agent action {', '.join(actions) or '?'}"
            ),
            evidence=[f"{d.time.isoformat()} {d.message[:300]}" for d in ordered[-5:]],
            resources=resources,
            fields={
                "signature": "hma_detection",
                "count": len(ordered),
                "reasons": ",".join(reasons),
                "conditions": ",".join(conditions),
                "actions": ",".join(actions),
                "first_seen": ordered[0].time.isoformat(),
                "last_seen": ordered[-1].time.isoformat(),
            },
        )


@check(
    id="logs.nccl_versions",
    title="NCCL version consistency across log streams",
    priority=Priority.P1,
    reference=DBG_VERSION_MISMATCH,
    source="logs",
)
def nccl_versions(inv: Inventory) -> Iterator[Finding]:
    """Fail when the streams announce more than one NCCL version (ranks run different images)."""
    logs = _scanned(inv)
    if logs is None or not logs.nccl_versions:
        return
    counts = {version: len(streams) for version, streams in logs.nccl_versions.items()}
    examples = [f"NCCL version {v}: {', '.join(s[:3])}" for v, s in sorted(logs.nccl_versions.items())]
    drift = version_drift_hit(counts, examples)
    if drift is None:
        only = next(iter(counts))
        yield nccl_versions.passed(f"every stream announces NCCL {only}", fields={"nccl_version": only})
        return
    # The minority version is the odd one out: name its streams as resources.
    minority = min(logs.nccl_versions, key=lambda v: len(logs.nccl_versions[v]))
    yield nccl_versions.fail(
        f"{len(counts)} NCCL versions across log streams ({drift.fields['nccl_versions']})",
        detail=f"minority version {minority} in {len(logs.nccl_versions[minority])} stream(s)",
        evidence=drift.evidence,
        resources=[Resource(kind="log_stream", id=s) for s in logs.nccl_versions[minority]],
        fields={"signature": _DRIFT_SIGNATURE, **drift.fields},
    )
