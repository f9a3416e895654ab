"""The vocabulary every model shares: a finding's label and priority, and the resources it names.

Kept apart from `findings.py` so that the verdict's models (`models/verdict.py`), which
`SweepResult` carries, can use it without an import circle.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict


class Status(StrEnum):
    """The label printed in front of a finding.

    SKIP: the check could not tell, because something it reads was not read (denied, throttled,
    timed out, cut short); never an issue, and never a PASS, whatever the data read showed.
    """

    PASS = "PASS"
    FAIL = "FAIL"
    WARN = "WARN"
    INFO = "INFO"
    SKIP = "SKIP"


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


def parse_time(value: object) -> datetime | None:
    """ISO-8601 text (with or without Z) → aware datetime; None when absent or unreadable."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
