"""Host facts of each probed node (original probes 1, 23 and 31): the instance type and zone its
instance metadata service answers, its memory, and the newest kernel lines about EFA, RDMA and
memory errors."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._node import node_label, node_resource, probed_nodes
from hyperpod_nccl.models.findings import Finding, Priority
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import NodeProbeData, NodeProbeResult
from hyperpod_nccl.probe.sections import NodeSection
from hyperpod_nccl.references import NODE_HARDWARE, NODE_SSM

# Nodes listed one per evidence line in a group's host facts; the rest are counted. The facts of
# every node stay in the probe results (the JSON report, the support bundle).
MAX_HOST_LINES = 50
_KIB_PER_GIB = 1024 * 1024
# HyperPod names an EC2 instance type with this prefix (ml.p5.48xlarge is EC2's p5.48xlarge).
_HYPERPOD_TYPE_PREFIX = "ml."


def _host_line(result: NodeProbeResult, probe: NodeProbeData) -> str:
    """`i-0abc (worker) ip-10-1-0-5: p5.48xlarge in us-west-2a (usw2-az1), 2015.6 GiB memory`."""
    identity = probe.host_identity
    host = f" {result.hostname.split('.', 1)[0]}" if result.hostname else ""
    if identity is None or identity.instance_type is None:
        notes = "; ".join(identity.notes) if identity is not None and identity.notes else "not read"
        where = f"IMDS: {notes}"
    else:
        zone = identity.availability_zone or "zone unknown"
        if identity.availability_zone_id:
            zone = f"{zone} ({identity.availability_zone_id})"
        where = f"{identity.instance_type} in {zone}"
    memory = "memory unknown" if probe.mem_total_kib is None else f"{probe.mem_total_kib / _KIB_PER_GIB:.1f} GiB memory"
    return f"{node_label(result)}{host}: {where}, {memory}"


@check(
    id="node.host_info",
    title="Instance type, zone and memory of each node",
    priority=Priority.P2,
    reference=NODE_SSM,
    source="node_probes",
)
def host_info(inv: Inventory) -> Iterator[Finding]:
    """Each instance group's nodes with the instance type and zone IMDSv2 answered and their memory
    (INFO, one finding per group: facts, not findings about a node); a node whose IMDS instance type
    is not the one HyperPod lists warns, since the checks that expect a type's GPUs and EFA devices
    judged it by HyperPod's."""
    groups: dict[str, list[str]] = defaultdict(list)
    for result, probe in probed_nodes(inv):
        identity = probe.host_identity
        if identity is None and probe.mem_total_kib is None:
            continue  # an older probe: nothing to show
        groups[result.instance_group or "?"].append(_host_line(result, probe))
        listed = result.instance_type
        seen = identity.instance_type if identity is not None else None
        if seen and listed and listed.removeprefix(_HYPERPOD_TYPE_PREFIX) != seen:
            yield host_info.warn(
                f"{node_label(result)} is a {seen} by its instance metadata, HyperPod lists {listed}",
                detail="the SSM session reached an instance of another type than the node HyperPod lists (a "
                "target that maps to another instance) or the listing is stale; the GPU and EFA counts "
                f"expected of this node were {listed}'s. Compare `describe-cluster-node` with the instance",
                evidence=[f"IMDS meta-data/instance-type: {seen}", f"ListClusterNodes InstanceType: {listed}"],
                resources=[node_resource(result)],
                fields={"imds_instance_type": seen, "listed_instance_type": listed},
            )
    for group, lines in sorted(groups.items()):
        shown = sorted(lines)[:MAX_HOST_LINES]
        if len(lines) > len(shown):
            shown.append(f"... and {len(lines) - len(shown)} more node(s)")
        yield host_info.info(
            f"host facts of {len(lines)} node(s) of group {group}",
            detail="instance type and zone as the node's instance metadata service (IMDSv2) answers them; "
            "memory is /proc/meminfo's MemTotal",
            evidence=shown,
            fields={"nodes": len(lines)},
        )


@check(
    id="node.kernel_log",
    title="Kernel log lines about EFA, RDMA and memory errors",
    priority=Priority.P2,
    reference=NODE_HARDWARE,
    source="node_probes",
)
def kernel_log(inv: Inventory) -> Iterator[Finding]:
    """The newest kernel lines of each node that mention EFA, RDMA, ECC/EDAC or machine checks, as
    evidence for the engineer (INFO): the faults they may show are judged by the GPU, EFA and ECC
    checks, and a boot message is no fault."""
    quiet = 0
    for result, probe in probed_nodes(inv):
        if probe.kernel_log:
            yield kernel_log.info(
                f"{len(probe.kernel_log)} kernel log line(s) about EFA, RDMA or memory errors on {node_label(result)}",
                detail="the newest lines of `dmesg -T` naming EFA, RDMA, InfiniBand verbs, ECC/EDAC or machine "
                "checks (the GPU driver's Xid lines are judged by node.gpu_xid); read them beside the node's "
                "other findings",
                evidence=probe.kernel_log,
                resources=[node_resource(result)],
            )
        elif probe.section_rc(NodeSection.KERNEL_LOG) == 0:
            quiet += 1
    if quiet:
        yield kernel_log.passed(f"no kernel log line about EFA, RDMA or memory errors on {quiet} node(s)")
