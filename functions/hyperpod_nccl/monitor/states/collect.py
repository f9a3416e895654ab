"""The collector states of the Collect branch besides the per-node Map: the CloudWatch scan and
Kubernetes, each run over the control plane Discover stored, its result stored under the sweep."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.collectors.kubernetes import collect_kubernetes
from hyperpod_nccl.collectors.logs import collect_logs
from hyperpod_nccl.models.findings import DegradedSource
from hyperpod_nccl.monitor.payloads import StepOutput, SweepRef
from hyperpod_nccl.monitor.settings import SCRATCH_RETENTION_SECONDS, MonitorSettings
from hyperpod_nccl.monitor.shared_pacer import AccountPace
from hyperpod_nccl.monitor.states.shared import context_for, expiry, load_control_plane, store_degraded
from hyperpod_nccl.monitor.store import KUBERNETES, LOGS, Store


def run_collect_logs(
    ref: SweepRef,
    store: Store,
    aws: AwsClients,
    coverage: int | Literal["all"],
    settings: MonitorSettings | None = None,
) -> StepOutput:
    """CloudWatch scan state: collect_logs over the stored control plane; result stored. Its
    FilterLogEvents calls go at the account's pace that `settings` configure (default: thresholds.py's),
    shared through the table with every other CollectLogs sandbox (several watched clusters' scans
    share the account's 5/s)."""
    ctx = context_for(ref, aws, coverage)
    pace = AccountPace.of(settings) if settings is not None else AccountPace()
    pacer = pace.filter_log_events(store, ref.region)
    ctx.filter_pacer = pacer
    return _run_collector(
        ref, store, ctx, "logs", LOGS, also_degraded=lambda: [pacer.unshared] if pacer.unshared else []
    )


def run_collect_kubernetes(
    ref: SweepRef,
    store: Store,
    aws: AwsClients,
    coverage: int | Literal["all"],
    settings: MonitorSettings | None = None,
) -> StepOutput:
    """Kubernetes state: collect_kubernetes over the stored control plane; result stored (`settings`
    unused: it calls no account-paced API)."""
    return _run_collector(ref, store, context_for(ref, aws, coverage), "kubernetes", KUBERNETES)


def _run_collector(
    ref: SweepRef,
    store: Store,
    ctx: CollectionContext,
    source: str,
    blob: str,
    *,
    also_degraded: Callable[[], list[DegradedSource]] = list,
) -> StepOutput:
    """Collect `source` over the stored control plane and store it with its degraded sources, and
    what `also_degraded` says once it ran (the logs scan: a pace it could not share)."""
    control_plane = load_control_plane(store, ref.sweep_id)
    if control_plane is None:
        raise LookupError(f"sweep {ref.sweep_id} has no stored control plane (Discover did not run)")
    collector = collect_logs if source == "logs" else collect_kubernetes
    collected: BaseModel | None = collector(ctx, control_plane)
    text = "null" if collected is None else collected.model_dump_json()
    store.put_sweep_blob(ref.sweep_id, blob, text, expires_at=expiry(ref, SCRATCH_RETENTION_SECONDS))
    ctx.degraded.extend(also_degraded())
    count = store_degraded(store, ref, source, ctx.degraded)
    return StepOutput(source=source, collected=collected is not None, degraded=count)
