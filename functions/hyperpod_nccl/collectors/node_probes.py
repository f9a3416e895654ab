"""SSM node-probe collector (implemented by the node-probe work, issue 4)."""

from __future__ import annotations

from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.models.cluster import ControlPlaneInventory
from hyperpod_nccl.models.node_probe import NodeProbeInventory


def collect_node_probes(ctx: CollectionContext, control_plane: ControlPlaneInventory) -> NodeProbeInventory | None:
    """Probe the planned nodes over SSM. Returns None when no node could be planned."""
    return None
