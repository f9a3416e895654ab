"""Domain models shared by collectors, checks, the CLI and the Lambda handlers."""

from hyperpod_nccl.models.findings import (
    Coverage,
    DegradedSource,
    Finding,
    Priority,
    Resource,
    Scope,
    Status,
    SuggestedCommand,
    SweepResult,
)
from hyperpod_nccl.models.inventory import Inventory

__all__ = [
    "Coverage",
    "DegradedSource",
    "Finding",
    "Inventory",
    "Priority",
    "Resource",
    "Scope",
    "Status",
    "SuggestedCommand",
    "SweepResult",
]
