"""On-node probe inventory (owned by the SSM node-probe work, issue 4)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class NodeProbeInventory(BaseModel):
    """Results of probing nodes over SSM. Extended by the node-probe collector."""

    planned_instance_ids: list[str] = Field(default_factory=list)
    probed_instance_ids: list[str] = Field(default_factory=list)
    unreachable_instance_ids: list[str] = Field(default_factory=list)
    skipped_instance_ids: list[str] = Field(default_factory=list)
