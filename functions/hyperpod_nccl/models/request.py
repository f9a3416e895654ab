"""What a caller (CLI, Lambda, demo) asks the engine to diagnose."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from hyperpod_nccl.models.findings import Scope


class DiagnoseRequest(BaseModel):
    """One diagnosis: which cluster, where, and how wide to look."""

    cluster: str
    region: str
    orchestrator: Literal["eks", "slurm"] | None = None
    scope: Scope = Field(default_factory=Scope)
