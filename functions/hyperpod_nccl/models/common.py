"""The vocabulary every model shares: a finding's label and priority, and the resources it names.

Kept apart from `findings.py` so that the verdict's models (`models/verdict.py`), which
`SweepResult` carries, can use it without an import circle.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict


class Status(StrEnum):
    """The label printed in front of a finding."""

    PASS = "PASS"
    FAIL = "FAIL"
    WARN = "WARN"
    INFO = "INFO"


class Priority(StrEnum):
    """P0 blocks training, P1 degrades it, P2 is advisory."""

    P0 = "P0"
    P1 = "P1"
    P2 = "P2"

    @property
    def rank(self) -> int:
        """0 for P0 (most urgent), 2 for P2."""
        return int(self.value[1])

    def at_least(self, other: Priority) -> bool:
        """True when this priority is as urgent as `other` or more."""
        return self.rank <= other.rank


ResourceKind = Literal[
    "cluster",
    "instance_group",
    "node",
    "pod",
    "namespace",
    "job",
    "security_group",
    "log_stream",
    "gpu",
    "k8s_node",
    "network_policy",
    "service",
    "slurm_node",
    "rank",
]


class Resource(BaseModel):
    """One thing a finding concerns, e.g. ("node", "i-0abc...") or ("security_group", "sg-1")."""

    model_config = ConfigDict(frozen=True)

    kind: ResourceKind
    id: str
    name: str | None = None
