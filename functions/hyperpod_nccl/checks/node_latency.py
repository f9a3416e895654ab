"""On-node EFA latency: the loopback fi_pingpong of the probe (original probe 34)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator

from hyperpod_nccl import instance_types, suggested, thresholds
from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._node import node_label, node_resource, probed_nodes, replace
from hyperpod_nccl.models.findings import Finding, Priority
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import NodeProbeData
from hyperpod_nccl.references import PERF_FI_PING


def _private_ip(probe: NodeProbeData) -> str | None:
    """The node's VPC address (first IPv4 of an UP ENI), for the pairwise test command."""
    for interface in probe.interfaces:
        if interface.kind == "eni" and interface.state == "UP":
            for address in interface.addresses:
                if "." in address:
                    return address.split("/", 1)[0]
    return None


def _group_medians(inv: Inventory) -> dict[str, float]:
    """Median EFA loopback latency per instance group (groups with enough measured nodes)."""
    by_group: dict[str, list[float]] = {}
    for result, probe in probed_nodes(inv):
        latency = probe.efa_latency
        if latency is not None and latency.provider != "tcp" and latency.small_message_usec is not None:
            by_group.setdefault(result.instance_group or "", []).append(latency.small_message_usec)
    return {
        group: statistics.median(values)
        for group, values in by_group.items()
        if len(values) >= thresholds.EFA_LOOPBACK_MIN_GROUP
    }


def _slow(usec: float, group_median: float | None) -> str | None:
    """Why a loopback latency is slow, or None when it is not."""
    if usec > thresholds.EFA_LOOPBACK_LATENCY_WARN_USEC:
        return f"small messages above {thresholds.EFA_LOOPBACK_LATENCY_WARN_USEC:.0f} µs"
    if (
        group_median is not None
        and usec > thresholds.EFA_LOOPBACK_LATENCY_FLOOR_USEC
        and usec > thresholds.EFA_LOOPBACK_OUTLIER_FACTOR * group_median
    ):
        return f"{usec / group_median:.1f}x the group's median of {group_median:.1f} µs"
    return None


@check(
    id="node.efa_latency",
    title="EFA loopback latency",
    priority=Priority.P2,
    reference=PERF_FI_PING,
    source="node_probes",
)
def efa_latency(inv: Inventory) -> Iterator[Finding]:
    """Small-message loopback latency above the threshold warns (confirm pairwise, then replace);
    a run that only worked over TCP, or not at all, is reported for information."""
    ok = 0
    medians = _group_medians(inv)
    for result, probe in probed_nodes(inv):
        latency = probe.efa_latency
        if latency is None or not instance_types.expects_efa_for_nccl(result.instance_type or ""):
            continue
        evidence = [f"{size} B: {usec:.2f} usec/xfer" for size, usec in sorted(latency.usec_by_size.items())]
        if latency.small_message_usec is None:
            yield efa_latency.info(
                f"EFA loopback latency not measured on {node_label(result)}",
                detail="the loopback fi_pingpong did not run over EFA or TCP; measure pairwise instead",
                evidence=[latency.error or "no result"],
                resources=[node_resource(result)],
                suggested_commands=[suggested.efa_pingpong_pair(_private_ip(probe))],
            )
        elif latency.provider == "tcp":
            yield efa_latency.info(
                f"EFA loopback test fell back to TCP on {node_label(result)} ({latency.small_message_usec:.1f} µs)",
                detail="fi_pingpong could not use the EFA provider; the TCP figure says nothing about EFA "
                "(see node.efa_provider)",
                evidence=evidence,
                resources=[node_resource(result)],
                fields={"provider": "tcp", "usec": latency.small_message_usec},
            )
        elif (why := _slow(latency.small_message_usec, medians.get(result.instance_group or ""))) is not None:
            yield efa_latency.warn(
                f"EFA loopback latency {latency.small_message_usec:.1f} µs on {node_label(result)}",
                detail=f"{why} on the node's own EFA device: confirm against two known-good nodes, then drain "
                "and replace the node if the pairwise latency is high too",
                evidence=evidence,
                resources=[node_resource(result)],
                suggested_commands=[suggested.efa_pingpong_pair(_private_ip(probe)), replace(inv, result)],
                fields={"provider": "efa", "usec": latency.small_message_usec},
            )
        else:
            ok += 1
    if ok:
        yield efa_latency.passed(f"EFA loopback latency normal on {ok} node(s)")
