"""What the deployed monitor knows, read back from its table for a person: each watched cluster's
last sweep and open root causes (`cluster_status`), and a node's or a GPU's fault history across
clusters and replacements (`fault_history`). Read-only: only `Store`'s queries.

Everything here was written by the monitor from what clusters said (titles, check details): the
models keep it as data; the CLI escapes it when it prints.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from hyperpod_nccl.incidents.models import Incident
from hyperpod_nccl.models.findings import Coverage
from hyperpod_nccl.monitor.store import Store, fingerprint_of

FaultSubject = Literal["node", "gpu"]


class LastSweep(BaseModel):
    """The newest sweep of a cluster, as the monitor recorded it."""

    sweep_id: str
    status: str = Field(description="complete, partial or failed")
    started_at: str
    finished_at: str = ""
    duration_seconds: float | None = None
    coverage: Coverage = Field(default_factory=Coverage)
    failure: str = Field("", description="why the sweep could not run, when it failed")
    degraded_sources: list[str] = Field(default_factory=list, description="the sources it could not fully read")


class OpenRootCause(BaseModel):
    """One root cause still open on a cluster (a stored incident) and how long it has been seen."""

    id: str
    title: str
    priority: str
    scope: str = ""
    first_seen: str = Field("", description="when a sweep first saw one of its findings (ISO)")
    last_seen: str = Field("", description="when a sweep last saw one of its findings (ISO)")
    occurrences: int = Field(0, description="sweeps that saw its findings (the most of any finding it folds)")
    findings_folded: int = 0
    first_step: str | None = None


class ClusterStatus(BaseModel):
    """One watched cluster as the monitor's table describes it."""

    cluster: str
    region: str
    last_sweep: LastSweep | None = None
    open_root_causes: list[OpenRootCause] = Field(default_factory=list)
    unreadable: list[str] = Field(default_factory=list, description="stored items that could not be read, and why")


class FaultRecord(BaseModel):
    """One fault the monitor recorded on a node or a GPU."""

    seen_at: str
    sweep_id: str
    cluster: str
    region: str
    check_id: str
    priority: str
    title: str


def _sweep(item: dict[str, Any]) -> LastSweep:
    degraded = json.loads(str(item.get("degraded_sources") or "[]"))
    return LastSweep(
        sweep_id=str(item.get("sweep_id", "")),
        status=str(item.get("status", "")),
        started_at=str(item.get("started_at", "")),
        finished_at=str(item.get("finished_at", "")),
        duration_seconds=float(item["duration_seconds"]) if item.get("duration_seconds") else None,
        coverage=Coverage.model_validate_json(str(item.get("coverage") or "{}")),
        failure=str(item.get("failure") or ""),
        degraded_sources=[str(d.get("source", "")) for d in degraded if isinstance(d, dict)],
    )


def _iso(moment: datetime | None, fallback: Any) -> str:
    return moment.isoformat() if moment else str(fallback or "")


def cluster_status(store: Store, region: str, cluster: str) -> ClusterStatus:
    """The last sweep and the open root causes of `cluster`, most urgent first (the verdict's order
    within a priority). An item that does not parse is named in `unreadable`, never fatal."""
    status = ClusterStatus(cluster=cluster, region=region)
    if (item := store.last_sweep(region, cluster)) is not None:
        try:
            status.last_sweep = _sweep(item)
        except (ValueError, ValidationError, TypeError, AttributeError) as error:
            status.unreadable.append(f"last sweep record: {error}")
    # What the monitor saw of each open finding: when it first and last saw it, in how many sweeps.
    seen_by_finding = {
        fingerprint_of(f): (
            str(f.get("first_seen") or ""),
            str(f.get("last_seen") or ""),
            int(f.get("occurrences") or 0),
        )
        for f in store.open_findings(region, cluster)
    }
    causes: list[tuple[tuple[int, int, str], OpenRootCause]] = []
    for stored in store.stored_incidents(region, cluster):
        if stored.get("status") != "open":
            continue
        try:
            incident = Incident.model_validate_json(str(stored["incident"]))
        except (KeyError, ValueError, ValidationError) as error:
            status.unreadable.append(f"root cause {stored.get('title', '?')}: {error}")
            continue
        seen = [seen_by_finding[f] for f in incident.finding_fingerprints if f in seen_by_finding]
        cause = OpenRootCause(
            id=incident.id,
            title=incident.title,
            priority=incident.priority.value,
            scope=incident.scope,
            # The monitor's own sightings of the cause's findings, else the times its evidence bears.
            first_seen=min((s[0] for s in seen if s[0]), default="")
            or _iso(incident.first_seen, stored.get("first_seen")),
            last_seen=max((s[1] for s in seen if s[1]), default="")
            or _iso(incident.last_seen, stored.get("last_seen")),
            occurrences=max((s[2] for s in seen), default=0),
            findings_folded=incident.findings_folded,
            first_step=incident.first_step,
        )
        causes.append(((incident.priority.rank, incident.verdict_rank, incident.id), cause))
    status.open_root_causes = [cause for _, cause in sorted(causes, key=lambda pair: pair[0])]
    return status


def fault_history(store: Store, subject: FaultSubject, resource_id: str) -> list[FaultRecord]:
    """Every fault recorded on the node `resource_id` (an instance id) or the GPU (a serial),
    oldest first."""
    records = []
    for item in store.fault_history(subject, resource_id):
        records.append(
            FaultRecord(
                seen_at=str(item.get("seen_at", "")),
                sweep_id=str(item.get("sweep_id", "")),
                cluster=str(item.get("cluster", "")),
                region=str(item.get("region", "")),
                check_id=str(item.get("check_id", "")),
                priority=str(item.get("priority", "")),
                title=str(item.get("title", "")),
            )
        )
    return records
