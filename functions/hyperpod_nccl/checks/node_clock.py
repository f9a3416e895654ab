"""The node's clock against the collector's (original host-info row: the node's clock)."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_nccl import thresholds
from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._node import node_label, node_resource, probed_nodes
from hyperpod_nccl.models.findings import Finding, Priority
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import NodeProbeData, NodeProbeResult
from hyperpod_nccl.references import NODE_CLOCK


def clock_skew_seconds(result: NodeProbeResult, probe: NodeProbeData) -> float | None:
    """How far the node's clock reading lies outside the session it was read in (0 inside it; None
    when either clock is unknown). `date +%s` drops the fraction: one second is no skew."""
    if probe.clock_epoch is None or result.started_at is None or result.answered_at is None:
        return None
    if probe.clock_epoch < result.started_at - 1:
        return probe.clock_epoch - result.started_at
    if probe.clock_epoch > result.answered_at + 1:
        return probe.clock_epoch - result.answered_at
    return 0.0


@check(id="node.clock", title="Node clock", priority=Priority.P1, reference=NODE_CLOCK, source="node_probes")
def clock(inv: Inventory) -> Iterator[Finding]:
    """A node whose clock is off by more than thresholds.NODE_CLOCK_SKEW_WARN_SECONDS warns; past munge's
    credential time-to-live (NODE_CLOCK_SKEW_FAIL_SECONDS) it fails: Slurm rejects it, and its log
    times and any timeout measured across nodes are wrong."""
    in_sync = 0
    for result, probe in probed_nodes(inv):
        skew = clock_skew_seconds(result, probe)
        if skew is None:
            continue
        size = abs(skew)
        if size < thresholds.NODE_CLOCK_SKEW_WARN_SECONDS:
            in_sync += 1
            continue
        ahead = "ahead of" if skew > 0 else "behind"
        title = f"clock of {node_label(result)} is {size:.0f} s {ahead} the collector's"
        fields: dict[str, str | int | float | bool | None] = {"clock_skew_seconds": round(skew)}
        evidence = [
            f"node: date -u +%s = {probe.clock_epoch}",
            f"collector: {result.started_at:.0f}..{result.answered_at:.0f}",
        ]
        if size >= thresholds.NODE_CLOCK_SKEW_FAIL_SECONDS:
            yield clock.fail(
                title,
                detail="past munge's 5-minute credential lifetime: Slurm rejects the node's credentials; the node's "
                "log times and timeouts measured across nodes are wrong too. Restore time sync (chronyd)",
                evidence=evidence,
                resources=[node_resource(result)],
                fields=fields,
            )
        else:
            yield clock.warn(
                title,
                priority=Priority.P2,
                detail="time sync is drifting: the node's log times do not line up with the cluster's; check chronyd",
                evidence=evidence,
                resources=[node_resource(result)],
                fields=fields,
            )
    if in_sync:
        yield clock.passed(f"clocks in sync on {in_sync} node(s)")
