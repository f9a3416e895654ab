"""The inventory: everything collectors gathered, the only input checks see."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from hyperpod_nccl.models.cluster import ControlPlaneInventory, Orchestrator
from hyperpod_nccl.models.findings import Scope
from hyperpod_nccl.models.kubernetes import KubernetesInventory
from hyperpod_nccl.models.logs import LogInventory
from hyperpod_nccl.models.node_probe import NodeProbeInventory


class Inventory(BaseModel):
    """All collected facts of one sweep. Sources that were not collected stay None."""

    cluster_name: str
    region: str
    orchestrator: Orchestrator = "unknown"
    scope: Scope = Field(default_factory=Scope)
    collected_at: datetime
    window_start: datetime
    window_end: datetime
    control_plane: ControlPlaneInventory = Field(default_factory=ControlPlaneInventory)
    logs: LogInventory | None = None
    node_probes: NodeProbeInventory | None = None
    kubernetes: KubernetesInventory | None = None
