"""Incidents: the verdict's root causes, each with the timeline that explains it and what it touched."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from hyperpod_nccl.models.findings import Priority
from hyperpod_nccl.models.verdict import BlastRadius
from hyperpod_nccl.references import Reference

SignalKind = Literal["fault", "detection", "hang", "job", "recovery", "info"]
SignalSource = Literal[
    "node_probe", "hma", "cluster_event", "node_status", "logs", "flight_recorder", "ras", "finding", "kubernetes"
]
Outcome = Literal["resumed", "failed", "recovering", "unknown"]


class TimelineEntry(BaseModel):
    """One line of an incident's story. `time` is None when the source carries no timestamp
    (e.g. a probe's current state): such entries sort after the timed ones, at the sweep."""

    time: datetime | None = None
    source: SignalSource
    kind: SignalKind
    text: str


class RootCause(BaseModel):
    """What an incident is about, in one line: the verdict cause's most telling evidence (`summary`,
    from `source`, by `check_id`), the cause's runbook pointer, and the Xid its evidence reports."""

    summary: str
    source: SignalSource
    reference: Reference
    check_id: str | None = None
    xid: int | None = None


class Recurrence(BaseModel):
    """Why this is not the first time, and what the runbooks say to do about it."""

    kind: Literal["same_gpu", "same_instance_group", "same_instance"]
    detail: str
    advice: str
    previous_incident_ids: list[str] = Field(default_factory=list)


class Affected(BaseModel):
    """What an incident touched."""

    instance_ids: list[str] = Field(default_factory=list)
    instance_groups: list[str] = Field(default_factory=list)
    nodes: list[str] = Field(default_factory=list)
    pods: list[str] = Field(default_factory=list)
    ranks: list[int] = Field(default_factory=list)
    jobs: list[str] = Field(default_factory=list)
    gpus: list[str] = Field(default_factory=list, description="serial or UUID of the faulted GPUs")


class Incident(BaseModel):
    """One root cause of the verdict on one cluster in one window, with its story: the verdict's
    root cause and the incident share their `id`, so the CLI, the table and the alerts name the
    same cause the same way, sweep after sweep."""

    id: str = Field(description="the verdict root cause's id (`rc-…`): stable across sweeps")
    cluster: str
    title: str
    priority: Priority
    root_cause: RootCause
    kind: str = Field("", description="the verdict root cause's kind (verdict.kinds.CAUSE_KINDS key or a check id)")
    scope: BlastRadius = Field("node", description="what the cause blocks: cluster, job or node")
    verdict_rank: int = Field(0, description="the cause's place in the verdict's order (0 = first)")
    first_step: str | None = Field(None, description="the first safe step of the cause's plan, in one line")
    findings_folded: int = Field(0, description="how many findings the cause accounts for")
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    outcome: Outcome = "unknown"
    timeline: list[TimelineEntry] = Field(default_factory=list)
    affected: Affected = Field(default_factory=Affected)
    finding_fingerprints: list[str] = Field(default_factory=list)
    recurrence: Recurrence | None = None
    evidence: list[str] = Field(default_factory=list, description="verbatim error lines")
