"""Collectors: all AWS, SSM and Kubernetes I/O. Each returns a pydantic inventory model and
records what it could not read in the context; none of them evaluates anything."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.collectors.control_plane import collect_control_plane
from hyperpod_nccl.collectors.kubernetes import collect_kubernetes
from hyperpod_nccl.collectors.logs import collect_logs
from hyperpod_nccl.collectors.node_probes import collect_node_probes
from hyperpod_nccl.errors import ScopeMatchesNothing
from hyperpod_nccl.models.cluster import ControlPlaneInventory, Orchestrator
from hyperpod_nccl.models.inventory import Inventory


def resolve_orchestrator(ctx: CollectionContext, detected: Orchestrator) -> Orchestrator:
    """`--orchestrator` wins; otherwise what DescribeCluster says."""
    return ctx.request.orchestrator or detected


# Node ids a `--node` that matches nothing lists, before "and N more".
NODES_LISTED = 5


def require_scoped_node(ctx: CollectionContext, control_plane: ControlPlaneInventory) -> None:
    """Stop when `--node` names an instance that a complete ListClusterNodes does not list: a
    diagnosis of nothing must not print "No issues found". A partial or denied listing proves
    nothing, so the diagnosis goes on (the probe plan says the node was not found)."""
    wanted = ctx.request.scope.node
    nodes = control_plane.nodes
    if wanted is None or nodes is None or not control_plane.nodes_complete:
        return
    ids = sorted(n.instance_id for n in nodes)
    if wanted in ids:
        return
    cluster = control_plane.cluster.name if control_plane.cluster else ctx.request.cluster
    listed = ", ".join(ids[:NODES_LISTED]) + (f" and {len(ids) - NODES_LISTED} more" if len(ids) > NODES_LISTED else "")
    raise ScopeMatchesNothing(
        f"--node {wanted} is not a node of cluster {cluster}; its {len(ids)} node(s): {listed or 'none'}",
        fix="pass the instance id of one of the cluster's nodes (aws sagemaker list-cluster-nodes)",
    )


def collect(ctx: CollectionContext) -> Inventory:
    """Run every collector: the control plane first (the others need the cluster and its
    nodes), then logs, node probes and Kubernetes concurrently.

    Raises `ScopeMatchesNothing` when `--node` is not a node of the cluster."""
    control_plane = collect_control_plane(ctx)
    require_scoped_node(ctx, control_plane)
    cluster = control_plane.cluster
    orchestrator = resolve_orchestrator(ctx, cluster.orchestrator if cluster else "unknown")
    if cluster is not None and cluster.orchestrator != orchestrator:
        cluster = cluster.model_copy(update={"orchestrator": orchestrator})
        control_plane = control_plane.model_copy(update={"cluster": cluster})
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="collector") as pool:
        logs = pool.submit(collect_logs, ctx, control_plane)
        probes = pool.submit(collect_node_probes, ctx, control_plane)
        kube = pool.submit(collect_kubernetes, ctx, control_plane)
        return Inventory(
            cluster_name=cluster.name if cluster else ctx.request.cluster,
            region=ctx.request.region,
            orchestrator=orchestrator,
            scope=ctx.request.scope,
            collected_at=ctx.now,
            window_start=ctx.window_start,
            window_end=ctx.now,
            control_plane=control_plane,
            logs=logs.result(),
            node_probes=probes.result(),
            kubernetes=kube.result(),
        )
