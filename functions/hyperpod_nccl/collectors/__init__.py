"""Collectors: all AWS, SSM and Kubernetes I/O. Each returns a pydantic inventory model and
records what it could not read in the context; none of them evaluates anything."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.collectors.control_plane import collect_control_plane
from hyperpod_nccl.collectors.kubernetes import collect_kubernetes
from hyperpod_nccl.collectors.logs import collect_logs
from hyperpod_nccl.collectors.node_probes import collect_node_probes
from hyperpod_nccl.models.cluster import Orchestrator
from hyperpod_nccl.models.inventory import Inventory


def resolve_orchestrator(ctx: CollectionContext, detected: Orchestrator) -> Orchestrator:
    """`--orchestrator` wins; otherwise what DescribeCluster says."""
    return ctx.request.orchestrator or detected


def collect(ctx: CollectionContext) -> Inventory:
    """Run every collector: the control plane first (the others need the cluster and its
    nodes), then logs, node probes and Kubernetes concurrently."""
    control_plane = collect_control_plane(ctx)
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
