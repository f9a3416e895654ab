"""Kubernetes inventory (owned by the EKS work, issue 5)."""

from __future__ import annotations

from pydantic import BaseModel


class KubernetesInventory(BaseModel):
    """Kubernetes objects read through the EKS API. Extended by the Kubernetes collector."""

    endpoint: str | None = None
