"""Helpers shared by the on-node checks (not a check module: no `@check` here)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from hyperpod_nccl import suggested
from hyperpod_nccl.models.findings import Resource, SuggestedCommand
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import GPU_SERIAL_PATTERN, GpuInfo, NodeProbeData, NodeProbeResult

_GPU_SERIAL = re.compile(GPU_SERIAL_PATTERN)


def probed_nodes(inv: Inventory) -> Iterator[tuple[NodeProbeResult, NodeProbeData]]:
    """Every node probe that produced parsed data (partial outputs included)."""
    if inv.node_probes is None:
        return
    for result in inv.node_probes.results:
        if result.role == "node" and result.probe is not None:
            yield result, result.probe


def node_resource(result: NodeProbeResult) -> Resource:
    """The node as a finding resource, named by group and hostname."""
    name = result.instance_group or ""
    if result.hostname:
        name = f"{name} {result.hostname.split('.', 1)[0]}".strip()
    return Resource(kind="node", id=result.instance_id, name=name or None)


def gpu_resources(gpus: Iterable[GpuInfo | None]) -> list[Resource]:
    """The GPUs a finding is about, as resources named by serial (the node's resource comes first
    in the finding): the monitor keeps each GPU's fault history under its serial, so that it follows
    the GPU across node replacements. A GPU whose serial is missing or of no serial's shape is left
    out (the node still names it); each GPU once."""
    named: dict[str, Resource] = {}
    for gpu in gpus:
        if gpu is not None and gpu.serial and _GPU_SERIAL.fullmatch(gpu.serial):
            named.setdefault(gpu.serial, Resource(kind="gpu", id=gpu.serial, name=f"GPU {gpu.index} ({gpu.bus_id})"))
    return list(named.values())


def node_label(result: NodeProbeResult) -> str:
    """`i-0abc (worker)` for titles."""
    return f"{result.instance_id} ({result.instance_group})" if result.instance_group else result.instance_id


def counted_node_lines(lines: list[str], limit: int) -> list[str]:
    """The first `limit` evidence lines (one per node), then how many more nodes there are."""
    if len(lines) <= limit:
        return lines
    return [*lines[:limit], f"… and {len(lines) - limit} more node(s)"]


def reboot(inv: Inventory, result: NodeProbeResult) -> SuggestedCommand:
    """Reboot this node (drain first)."""
    return suggested.batch_reboot(inv.cluster_name, [result.instance_id], inv.region)


def replace(inv: Inventory, result: NodeProbeResult) -> SuggestedCommand:
    """Replace this node (confirmed hardware fault)."""
    return suggested.batch_replace(inv.cluster_name, [result.instance_id], inv.region)


def ssm_target(inv: Inventory, result: NodeProbeResult) -> str | None:
    """The node's SSM target (operations.md § 3), when the cluster id and group are known."""
    cluster = inv.control_plane.cluster
    if cluster is None or not result.instance_group:
        return None
    return f"sagemaker-cluster:{cluster.cluster_id}_{result.instance_group}-{result.instance_id}"


def nodes_count(inv: Inventory) -> int:
    """How many nodes produced probe data."""
    return sum(1 for _ in probed_nodes(inv))
