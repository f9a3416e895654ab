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
from hyperpod_nccl.monitor.store import CONTROL_PLANE, Store, epoch, sweep_key


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
    """Store what `step` could not read (`DEGRADED#<step>`, read back by Aggregate); how many."""
    items = [d.model_dump(mode="json") for d in degraded]
    store.put_scratch(ref.sweep_id, f"DEGRADED#{step}", items, now=ref.started_at)
    return len(items)


def load_control_plane(store: Store, sweep_id: str) -> ControlPlaneInventory | None:
    """The control plane Discover stored (None if it stored none)."""
    text = store.get_blob(sweep_key(sweep_id), CONTROL_PLANE)
    return None if text is None else ControlPlaneInventory.model_validate_json(text)


def load_ref(store: Store, sweep_id: str) -> SweepRef:
    """The sweep Discover stored (its request); LookupError when Discover did not run."""
    raw = store.get_scratch(sweep_id, "REQUEST")
    if raw is None:
        raise LookupError(f"sweep {sweep_id} has no stored request (Discover did not run)")
    return SweepRef.model_validate(raw)
