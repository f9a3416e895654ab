"""On-node probe inventory (owned by the SSM node-probe work, issue 4)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ProbeTarget(BaseModel):
    """One node to probe: enough to build its SSM target."""

    instance_id: str
    instance_group: str
    instance_type: str
    cluster_id: str


class ProbePlan(BaseModel):
    """Which nodes a sweep probes, and which it skips (with the reason)."""

    targets: list[ProbeTarget] = Field(default_factory=list)
    skipped: dict[str, str] = Field(default_factory=dict)


class NodeProbeResult(BaseModel):
    """What probing one node produced (extended by the node-probe work)."""

    instance_id: str
    reachable: bool
    error: str | None = None


class NodeProbeInventory(BaseModel):
    """Results of probing nodes over SSM. Extended by the node-probe collector."""

    planned_instance_ids: list[str] = Field(default_factory=list)
    probed_instance_ids: list[str] = Field(default_factory=list)
    unreachable_instance_ids: list[str] = Field(default_factory=list)
    skipped_instance_ids: list[str] = Field(default_factory=list)
