"""Kubernetes collector (implemented by the EKS work, issue 5)."""

from __future__ import annotations

from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.models.cluster import ControlPlaneInventory
from hyperpod_nccl.models.kubernetes import KubernetesInventory


def collect_kubernetes(ctx: CollectionContext, control_plane: ControlPlaneInventory) -> KubernetesInventory | None:
    """Read the EKS cluster's objects. Returns None on Slurm clusters or when unreachable."""
    return None
