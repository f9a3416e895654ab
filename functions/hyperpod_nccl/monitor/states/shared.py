"""What every state of one sweep shares: its engine request and collection context (one start
time for all its Lambdas), the expiry of its scratch items, the degraded sources each state
records, and the request and control plane Discover stored."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.models.cluster import ControlPlaneInventory
from hyperpod_nccl.models.findings import DegradedSource, Scope
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.monitor.payloads import SweepRef
from hyperpod_nccl.monitor.store import CONTROL_PLANE, Store, epoch


def request_for(ref: SweepRef, coverage: int | Literal["all"]) -> DiagnoseRequest:
    """The engine request of a sweep: the cluster, the node a trigger named, the coverage."""
    scope = Scope(node=ref.node, sample_nodes=coverage, since_seconds=ref.since_seconds)
    return DiagnoseRequest(cluster=ref.cluster, region=ref.region, scope=scope)


def context_for(ref: SweepRef, aws: AwsClients, coverage: int | Literal["all"]) -> CollectionContext:
    """Every state of one sweep shares its start time, so windows agree across Lambdas."""
    return CollectionContext(request=request_for(ref, coverage), aws=aws, now=ref.started_at)


def expiry(ref: SweepRef, seconds: int) -> int:
    """The TTL of an item kept `seconds` after the sweep started."""
    return epoch(ref.started_at) + seconds


def store_degraded(store: Store, ref: SweepRef, step: str, degraded: Iterable[DegradedSource]) -> int:
    """Store what `step` could not read (read back by Aggregate: `Store.degraded_sources`); how many."""
    sources = list(degraded)
    store.record_degraded(ref, step, sources)
    return len(sources)


def load_control_plane(store: Store, sweep_id: str) -> ControlPlaneInventory | None:
    """The control plane Discover stored (None if it stored none)."""
    text = store.sweep_blob(sweep_id, CONTROL_PLANE)
    return None if text is None else ControlPlaneInventory.model_validate_json(text)


def load_ref(store: Store, sweep_id: str) -> SweepRef:
    """The sweep Discover stored (its request); LookupError when Discover did not run."""
    raw = store.sweep_request(sweep_id)
    if raw is None:
        raise LookupError(f"sweep {sweep_id} has no stored request (Discover did not run)")
    return SweepRef.model_validate(raw)
