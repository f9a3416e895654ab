"""What a caller (CLI, Lambda, demo) asks the engine to diagnose."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from hyperpod_nccl import thresholds
from hyperpod_nccl.models.findings import Scope


class DiagnoseRequest(BaseModel):
    """One diagnosis: which cluster, where, and how wide to look."""

    cluster: str
    region: str
    orchestrator: Literal["eks", "slurm"] | None = None
    scope: Scope = Field(default_factory=Scope)
    # The StartSession rate this run's probes pace themselves at (per second, the account's: leave
    # room for a monitor of the same account, docs/pacing.md). The monitor's states use the table's
    # shared pace instead.
    start_session_rate: float = Field(default=thresholds.SSM_START_SESSION_PER_SECOND, gt=0)
