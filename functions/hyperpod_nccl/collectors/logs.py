"""CloudWatch scan collector (implemented by the log-intelligence work, issue 3)."""

from __future__ import annotations

from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.models.cluster import ControlPlaneInventory
from hyperpod_nccl.models.logs import LogInventory


def collect_logs(ctx: CollectionContext, control_plane: ControlPlaneInventory) -> LogInventory | None:
    """Scan the cluster's CloudWatch log group. Returns None when nothing could be scanned."""
    return None
