"""CloudWatch log inventory (owned by the log-intelligence work, issue 3)."""

from __future__ import annotations

from pydantic import BaseModel


class LogInventory(BaseModel):
    """What the CloudWatch scan found. Extended by the log-intelligence collector."""

    log_group: str | None = None
    group_exists: bool = False
