"""Cluster-level checks over DescribeCluster and ListClusterNodes."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_nccl import instance_types, suggested, thresholds
from hyperpod_nccl.checks import check
from hyperpod_nccl.models.cluster import ClusterNode
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.node_statuses import NodeCondition, condition_of, status_entry
from hyperpod_nccl.reads import DESCRIBE_CLUSTER, LIST_CLUSTER_NODES
from hyperpod_nccl.references import (
    CLUSTER_INSTANCE_GROUPS,
    CLUSTER_LARGE,
    CLUSTER_STATUS,
    NODE_HARDWARE,
    NODE_NEURON,
    OPS_NODE_HEALTH_LABELS,
)

# ClusterStatus enum of the SageMaker API (botocore model), mapped to what it means for training.
_TRANSIENT_STATUSES = {"Creating", "Updating", "SystemUpdating"}


def _cluster_resource(inv: Inventory) -> Resource:
    cluster = inv.control_plane.cluster
    return Resource(kind="cluster", id=cluster.arn if cluster else inv.cluster_name, name=inv.cluster_name)


@check(
    id="cluster.status",
    title="HyperPod cluster status",
    priority=Priority.P0,
    reference=CLUSTER_STATUS,
    source="control_plane",
    reads=(DESCRIBE_CLUSTER,),
)
def cluster_status(inv: Inventory) -> Iterator[Finding]:
    """InService passes; transitions warn; Failed blocks training."""
    cluster = inv.control_plane.cluster
    if cluster is None:
        return
    resource = [_cluster_resource(inv)]
    status = cluster.status
    if status == "InService":
        yield cluster_status.passed(f"cluster {cluster.name} is InService", resources=resource)
    elif status in _TRANSIENT_STATUSES:
        yield cluster_status.warn(
            f"cluster {cluster.name} is {status}",
            priority=Priority.P2,
            detail="nodes may be added, patched or replaced while this lasts; jobs can be interrupted",
            resources=resource,
        )
    elif status == "RollingBack":
        yield cluster_status.warn(
            f"cluster {cluster.name} is RollingBack",
            priority=Priority.P1,
            detail="an update failed and HyperPod is reverting it; expect node churn",
            resources=resource,
        )
    elif status == "Deleting":
        yield cluster_status.warn(
            f"cluster {cluster.name} is being deleted",
            priority=Priority.P1,
            detail="every job on it will stop; confirm the deletion was intended",
            resources=resource,
        )
    elif status == "Failed":
        yield cluster_status.fail(
            f"cluster {cluster.name} is Failed",
            detail=cluster.failure_message or "DescribeCluster gives no FailureMessage",
            evidence=[f"FailureMessage: {cluster.failure_message}"] if cluster.failure_message else [],
            resources=resource,
        )
    else:
        yield cluster_status.warn(
            f"cluster {cluster.name} reports an unrecognised status {status!r}",
            priority=Priority.P1,
            resources=resource,
        )


@check(
    id="cluster.node_recovery",
    title="Automatic node recovery",
    priority=Priority.P2,
    reference=OPS_NODE_HEALTH_LABELS,
    source="control_plane",
    reads=(DESCRIBE_CLUSTER,),
)
def node_recovery(inv: Inventory) -> Iterator[Finding]:
    """NodeRecovery=Automatic lets HyperPod reboot/replace faulty nodes by itself."""
    cluster = inv.control_plane.cluster
    if cluster is None:
        return
    resource = [_cluster_resource(inv)]
    if cluster.node_recovery == "Automatic":
        yield node_recovery.passed("NodeRecovery is Automatic", resources=resource)
    elif cluster.node_recovery == "None":
        yield node_recovery.warn(
            "NodeRecovery is None: faulty nodes stay in the cluster until someone acts",
            detail="HyperPod will neither reboot nor replace nodes that fail health checks",
            resources=resource,
        )
    else:
        yield node_recovery.info("DescribeCluster does not report NodeRecovery", resources=resource)


@check(
    id="cluster.node_status",
    title="Node status (ListClusterNodes, all pages)",
    priority=Priority.P1,
    reference=NODE_HARDWARE,
    source="control_plane",
    reads=(LIST_CLUSTER_NODES,),
)
def node_status(inv: Inventory) -> Iterator[Finding]:
    """A Failure is a finding of its own with the reboot/replace ladder; a node HyperPod is moving
    (a transition) is waited for, never rebooted or replaced; NotFound and a status the API model
    does not list are reported without a destructive command (`node_statuses.py`)."""
    nodes = inv.control_plane.nodes
    cluster = inv.control_plane.cluster
    if nodes is None:
        return
    name = cluster.name if cluster else inv.cluster_name
    by_condition: dict[NodeCondition | None, list[ClusterNode]] = {}
    for node in nodes:
        by_condition.setdefault(condition_of(node.status), []).append(node)
    failed = by_condition.get(NodeCondition.FAILED, [])
    for node in failed:
        yield node_status.fail(
            f"node {node.instance_id} ({node.instance_group}) is {node.status}",
            detail=(node.message or "no status message")[:300],
            resources=_node_resources(node),
            suggested_commands=[
                suggested.describe_cluster_node(name, node.instance_id, inv.region),
                suggested.batch_reboot(name, [node.instance_id], inv.region),
                suggested.batch_replace(name, [node.instance_id], inv.region),
            ],
            fields={"node_status": node.status},
        )
    absent = [*by_condition.get(NodeCondition.NOT_FOUND, []), *by_condition.get(None, [])]
    for node in absent:
        entry = status_entry(node.status)
        yield node_status.warn(
            f"node {node.instance_id} ({node.instance_group}) is {node.status}"
            + ("" if entry else " (a status the SageMaker API model does not list)"),
            reference=CLUSTER_INSTANCE_GROUPS,
            detail=(entry.meaning if entry else "read HyperPod's view of the node before acting on it")
            + (f"; HyperPod says: {node.message[:240]}" if node.message else ""),
            resources=_node_resources(node),
            suggested_commands=[suggested.describe_cluster_node(name, node.instance_id, inv.region)],
            fields={"node_status": node.status},
        )
    moving = by_condition.get(NodeCondition.TRANSITION, [])
    if moving:
        yield node_status.info(
            f"{len(moving)} node(s) in a transition: wait and recheck",
            detail="HyperPod is working on these nodes; do not reboot or replace them while it does, "
            "and diagnose again once they are Running",
            evidence=[f"{n.instance_id} ({n.instance_group}): {n.status}, {_meaning(n.status)}" for n in moving[:20]],
            fields={"nodes": len(moving)},
        )
    if not failed and not absent:
        running = len(by_condition.get(NodeCondition.RUNNING, []))
        yield node_status.passed(f"{running}/{len(nodes)} nodes Running, none failed")


def _node_resources(node: ClusterNode) -> list[Resource]:
    return [Resource(kind="node", id=node.instance_id), Resource(kind="instance_group", id=node.instance_group)]


def _meaning(status: str) -> str:
    entry = status_entry(status)
    return entry.meaning if entry else "unknown"


@check(
    id="cluster.instance_groups",
    title="Instance group status and capacity",
    priority=Priority.P1,
    reference=CLUSTER_INSTANCE_GROUPS,
    source="control_plane",
    reads=(DESCRIBE_CLUSTER,),
)
def instance_groups(inv: Inventory) -> Iterator[Finding]:
    """Degraded/Failed groups and groups short of their target count."""
    cluster = inv.control_plane.cluster
    if cluster is None:
        return
    healthy = True
    for group in cluster.instance_groups:
        resource = [Resource(kind="instance_group", id=group.name)]
        if group.status in {"Failed", "Degraded"}:
            healthy = False
            yield instance_groups.fail(f"instance group {group.name} is {group.status}", resources=resource)
        if group.current_count < group.target_count:
            healthy = False
            yield instance_groups.warn(
                f"instance group {group.name} has {group.current_count} of {group.target_count} nodes",
                detail="missing nodes usually mean insufficient capacity or failing lifecycle scripts",
                resources=resource,
                fields={"current_count": group.current_count, "target_count": group.target_count},
            )
    if healthy:
        yield instance_groups.passed(f"{len(cluster.instance_groups)} instance group(s) at target count")


@check(
    id="cluster.nccl_applicability",
    title="Which instance groups run NCCL",
    priority=Priority.P2,
    reference=CLUSTER_INSTANCE_GROUPS,
    source="control_plane",
    reads=(DESCRIBE_CLUSTER,),
)
def nccl_applicability(inv: Inventory) -> Iterator[Finding]:
    """NCCL advice only applies to NVIDIA groups; Neuron groups use their own collectives."""
    cluster = inv.control_plane.cluster
    if cluster is None:
        return
    kinds = {g.name: instance_types.accelerator(g.instance_type) for g in cluster.instance_groups}
    for group in cluster.instance_groups:
        if kinds[group.name] == "neuron":
            yield nccl_applicability.info(
                f"instance group {group.name} ({group.instance_type}) uses Neuron collectives, not NCCL",
                reference=NODE_NEURON,
                resources=[Resource(kind="instance_group", id=group.name)],
            )
    if cluster.instance_groups and "nvidia" not in kinds.values():
        yield nccl_applicability.warn(
            "no instance group has NVIDIA GPUs: NCCL checks do not apply to this cluster",
            evidence=[f"{g.name}: {g.instance_type}" for g in cluster.instance_groups],
        )
    cpu_groups = [g for g in cluster.instance_groups if kinds[g.name] == "cpu"]
    if cpu_groups and "nvidia" in kinds.values():
        yield nccl_applicability.info(
            "CPU-only instance groups are not probed for GPU/EFA faults",
            evidence=[f"{g.name}: {g.instance_type}" for g in cpu_groups],
        )


@check(
    id="cluster.large_cluster",
    title="Large-cluster collective timeout and memlock advisories",
    priority=Priority.P2,
    reference=CLUSTER_LARGE,
    source="control_plane",
    reads=(LIST_CLUSTER_NODES,),
)
def large_cluster(inv: Inventory) -> Iterator[Finding]:
    """At 256+ nodes the default 10-minute collective timeout is often too short."""
    nodes = inv.control_plane.nodes
    if nodes is None or len(nodes) < thresholds.LARGE_CLUSTER_NODES:
        return
    suggested_timeout = len(nodes) * thresholds.TIMEOUT_SECONDS_PER_NODE + thresholds.TIMEOUT_BASE_SECONDS
    yield large_cluster.warn(
        f"{len(nodes)} nodes: first rendezvous may exceed PyTorch's 10-minute default timeout",
        detail=(
            f"raise it with init_process_group(timeout=timedelta(seconds={suggested_timeout})); "
            f"if topology search hangs with memlock 'unlimited', a fixed memlock of "
            f"{thresholds.LARGE_CLUSTER_MEMLOCK_KIB} KiB resolved it in the field (not documented by AWS or NCCL)"
        ),
        resources=[_cluster_resource(inv)],
        fields={"nodes": len(nodes), "suggested_timeout_s": suggested_timeout},
    )
