"""Checks across the probed nodes of each instance group: version drift and EFA error-counter
outliers."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterator

from hyperpod_nccl import thresholds
from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._node import node_label, node_resource, probed_nodes
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import NodeProbeData, NodeProbeResult
from hyperpod_nccl.references import DBG_VERSION_MISMATCH, PERF_STRAGGLERS

# Components whose versions must agree within one instance group (debugging-guide § 10).
DRIFT_COMPONENTS = ("driver", "nccl", "ofi_nccl", "libfabric", "kernel", "cuda", "efa_installer")


def _groups(inv: Inventory) -> dict[str, list[tuple[NodeProbeResult, NodeProbeData]]]:
    groups: dict[str, list[tuple[NodeProbeResult, NodeProbeData]]] = defaultdict(list)
    for result, probe in probed_nodes(inv):
        groups[result.instance_group or "?"].append((result, probe))
    return groups


@check(
    id="fleet.version_drift",
    title="Software versions agree within each instance group",
    priority=Priority.P1,
    reference=DBG_VERSION_MISMATCH,
    source="node_probes",
)
def version_drift(inv: Inventory) -> Iterator[Finding]:
    """A node whose driver/NCCL/aws-ofi-nccl/libfabric/kernel differs from its group's majority."""
    compared = 0
    for group, members in sorted(_groups(inv).items()):
        if len(members) < 2:
            continue
        compared += len(members)
        for component in DRIFT_COMPONENTS:
            values = {
                r.instance_id: getattr(p.versions, component) for r, p in members if getattr(p.versions, component)
            }
            counts = Counter(values.values())
            if len(counts) < 2:
                continue
            majority, _ = counts.most_common(1)[0]
            odd = [
                (r, getattr(p.versions, component))
                for r, p in members
                if values.get(r.instance_id) not in (None, majority)
            ]
            for result, value in odd:
                yield version_drift.warn(
                    f"{component} {value} on {node_label(result)} differs from group {group} ({majority})",
                    detail="mixed versions in one communicator cause 'Incompatible NCCL version' errors or hangs; "
                    "typical after a rolling replacement brought a new AMI: pin versions in the lifecycle script",
                    resources=[node_resource(result), Resource(kind="instance_group", id=group)],
                    fields={"component": component, "value": value, "majority": majority, "signature": component},
                )
    if compared:
        yield version_drift.passed(f"versions compared across {compared} node(s)")


def _outliers(values: dict[str, int]) -> list[tuple[str, int, float]]:
    """(node, value, robust z) of values far above the group's median (median/MAD)."""
    if len(values) < 3:
        return []
    median = statistics.median(values.values())
    mad = statistics.median(abs(v - median) for v in values.values())
    found = []
    for node, value in values.items():
        excess = value - median
        if excess < thresholds.EFA_COUNTER_MIN_EXCESS:
            continue
        z = 0.6745 * excess / mad if mad else float("inf")
        if z >= thresholds.EFA_COUNTER_OUTLIER_Z:
            found.append((node, value, z))
    return found


@check(
    id="fleet.efa_error_outliers",
    title="EFA error counters against the instance group",
    priority=Priority.P1,
    reference=PERF_STRAGGLERS,
    source="node_probes",
)
def efa_error_outliers(inv: Inventory) -> Iterator[Finding]:
    """Nodes whose summed EFA error counters stand out of their group: straggler suspects."""
    for group, members in sorted(_groups(inv).items()):
        by_counter: dict[str, dict[str, int]] = defaultdict(dict)
        results = {r.instance_id: r for r, _ in members}
        for result, probe in members:
            for device_counters in probe.efa_counters.values():
                for counter, value in device_counters.items():
                    by_counter[counter][result.instance_id] = by_counter[counter].get(result.instance_id, 0) + value
        flagged: dict[str, list[str]] = defaultdict(list)
        for counter, values in sorted(by_counter.items()):
            for node, value, _z in _outliers(values):
                median = statistics.median(values.values())
                flagged[node].append(f"{counter}={value} (group median {median:g})")
        for node, evidence in flagged.items():
            yield efa_error_outliers.warn(
                f"EFA error counters of {node_label(results[node])} stand out in group {group}",
                detail="a straggler NIC slows every collective; confirm with pairwise fi_pingpong / all_reduce_perf "
                "test, then drain and replace",
                evidence=evidence,
                resources=[node_resource(results[node])],
            )
