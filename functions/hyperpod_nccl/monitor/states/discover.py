"""State Discover: the control plane and the probe plan, stored under the sweep; the node ids to
probe, returned in batches for the probe Map."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Literal

from hyperpod_nccl import thresholds
from hyperpod_nccl.aws_errors import AWS_CALL_ERRORS
from hyperpod_nccl.collectors import resolve_orchestrator
from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.collectors.control_plane import collect_control_plane
from hyperpod_nccl.collectors.node_probes import plan_probes
from hyperpod_nccl.errors import DiagnosisAborted
from hyperpod_nccl.monitor.payloads import DiscoverOutput, FirstRound, SweepRef
from hyperpod_nccl.monitor.settings import (
    DEFAULT_MAP_MAX_CONCURRENCY,
    SCRATCH_RETENTION_SECONDS,
    batch_targets,
    batches_at_once,
    sized_batches_at_once,
)
from hyperpod_nccl.monitor.states.shared import context_for, expiry, store_degraded
from hyperpod_nccl.monitor.store import CONTROL_PLANE, PLAN, Store

logger = logging.getLogger(__name__)


def run_discover(
    ref: SweepRef,
    store: Store,
    aws: AwsClients,
    coverage: int | Literal["all"],
    max_batches_at_once: int = batches_at_once(DEFAULT_MAP_MAX_CONCURRENCY),
    rate_per_second: float = thresholds.SSM_START_SESSION_PER_SECOND,
    clock: Callable[[], float] = time.time,
) -> DiscoverOutput:
    """Discover: the control plane and the probe plan, stored; the node ids, returned in batches
    with how many of them to probe at once (`probe_concurrency`) and the order of the first
    round's starts from now on `clock` (`FirstRound`)."""
    store.put_sweep_request(ref)
    ctx = context_for(ref, aws, coverage)
    try:
        control_plane = collect_control_plane(ctx)
    except DiagnosisAborted as aborted:
        reason = f"{aborted.message}; fix: {aborted.fix}"
        store.record_discovery_aborted(ref, reason)
        return DiscoverOutput(discovered=False, reason=reason)
    cluster = control_plane.cluster
    orchestrator = resolve_orchestrator(ctx, cluster.orchestrator if cluster else "unknown")
    if cluster is not None and cluster.orchestrator != orchestrator:
        control_plane = control_plane.model_copy(
            update={"cluster": cluster.model_copy(update={"orchestrator": orchestrator})}
        )
    plan = plan_probes(ctx, control_plane)
    expires = expiry(ref, SCRATCH_RETENTION_SECONDS)
    store.put_sweep_blob(ref.sweep_id, CONTROL_PLANE, control_plane.model_dump_json(), expires_at=expires)
    store.put_sweep_blob(ref.sweep_id, PLAN, plan.model_dump_json(), expires_at=expires)
    store.put_probe_targets(ref.sweep_id, plan.targets, expires_at=expires)
    store_degraded(store, ref, "discover", ctx.degraded)
    targets = [t.instance_id for t in plan.targets]
    children = probe_concurrency(store, ref, max_batches_at_once, rate_per_second, nodes=len(targets))
    batches = batch_targets(targets, children)
    first_round = FirstRound(paced_from=clock(), batch_size=len(batches[0]), batches=children) if batches else None
    return DiscoverOutput(
        discovered=True,
        batches=batches,
        nodes=len(targets),
        batches_at_once=children,
        first_round=first_round,
        orchestrator=str(orchestrator),
    )


def probe_concurrency(
    store: Store, ref: SweepRef, max_batches_at_once: int, rate_per_second: float, nodes: int | None = None
) -> int:
    """The probe Map's child executions at once for this sweep: sized for the StartSession rate
    from the probe time the cluster's previous full sweep measured (its p90), or from the expected
    probe time on a first sweep, and all at once for a cluster of `nodes` that small
    (settings.sized_batches_at_once). The history only sizes the sweep:
    when it cannot be read, the sweep runs at the expected probe time rather than not at all."""
    try:
        probe_seconds = store.last_full_sweep_probe_seconds(ref.region, ref.cluster)
    except AWS_CALL_ERRORS as error:
        logger.warning("previous probe time not read (%s): sizing for the expected probe time", error)
        probe_seconds = None
    return sized_batches_at_once(rate_per_second, probe_seconds, max_batches_at_once, nodes)
