"""Incidents: one per root cause, with the timeline that explains it and what it touched."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from hyperpod_nccl.models.findings import Priority
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
    """The finding an incident is about, with its runbook pointer."""

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
    """One root cause on one cluster in one window."""

    id: str
    cluster: str
    title: str
    priority: Priority
    root_cause: RootCause
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    outcome: Outcome = "unknown"
    timeline: list[TimelineEntry] = Field(default_factory=list)
    affected: Affected = Field(default_factory=Affected)
    finding_fingerprints: list[str] = Field(default_factory=list)
    recurrence: Recurrence | None = None
    evidence: list[str] = Field(default_factory=list, description="verbatim error lines")

    @staticmethod
    def make_id(cluster: str, anchor: str, signature: str) -> str:
        """Stable across sweeps: the cluster, the node (or job) and the root signature."""
        digest = hashlib.sha256(f"{cluster}|{anchor}|{signature}".encode()).hexdigest()[:12]
        return f"inc-{digest}"
