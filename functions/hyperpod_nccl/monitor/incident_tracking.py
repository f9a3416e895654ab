"""Incidents in the monitor: built after Aggregate from the sweep's result and inventory (the same
pure `build_incidents` the CLI runs), stored one item per incident, and turned into the changes
Notify tells, one message per new, changed or resolved incident.

Item (one per incident of a cluster, `Store.record_incident_seen`) with `status` open/resolved,
`first_seen` / `last_seen`, the incident as JSON (its timeline is the union of every sweep's
entries, so an entry that slides out of a later sweep's window stays in the story), `digest`,
first and last sweep ids. Idempotent per sweep like findings: the changes are computed once and
stored under the sweep (a retried Aggregate reuses them) and each item write is conditional on
the sweep id.

Size: an incident naming thousands of nodes (a job-wide hang on 10,000 nodes) does not fit an
item; like a finding, its item then keeps a shortened copy and `incident_body` names the blob
holding it whole, which `load_stored` reads back (`Store.stored_incidents`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from hyperpod_nccl.incidents.build import build_incidents
from hyperpod_nccl.incidents.models import Incident, TimelineEntry
from hyperpod_nccl.incidents.report import attributions_of
from hyperpod_nccl.models.findings import Priority, SweepResult
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.monitor.code_version import code_version
from hyperpod_nccl.monitor.store import INCIDENTS, Store, epoch

IncidentChangeKind = Literal["new", "changed", "resolved"]
# What an incident affects that, when it grows, is news (a node name follows its instance id).
_TOLD_WHEN_ADDED = ("instance_ids", "pods", "ranks", "jobs", "gpus")


class StoredIncident(BaseModel):
    """An incident as the table holds it."""

    incident: Incident
    status: Literal["open", "resolved"]
    first_sweep_id: str | None = None
    last_sweep_id: str | None = None


class IncidentChange(BaseModel):
    """One incident message: what the incident is now and what changed since the last message."""

    kind: IncidentChangeKind
    incident: Incident
    what: list[str] = Field(default_factory=list)
    new_entries: list[TimelineEntry] = Field(default_factory=list)
    previous_priority: Priority | None = Field(None, description="changed: the priority it had when last stored")
    worse: bool = Field(False, description="changed: higher priority, more affected, a recurrence or a failed job")


class IncidentSweep(BaseModel):
    """The incident changes of one sweep (stored once under the sweep; Notify reads it)."""

    sweep_id: str
    cluster: str
    region: str
    cluster_arn: str | None = None
    started_at: datetime
    incidents: list[Incident] = Field(default_factory=list, description="this sweep's incidents as stored")
    changes: list[IncidentChange] = Field(default_factory=list)
    baseline: bool = Field(
        False,
        description="no earlier cluster-wide sweep evaluated the cluster (Store.has_earlier_full_sweep): Notify "
        "sends one summary of every open root cause instead of a message per cause",
    )


def _entry_key(entry: TimelineEntry) -> tuple[str, str, str, str]:
    return (entry.time.isoformat() if entry.time else "", entry.source, entry.kind, entry.text)


def _sorted_timeline(entries: Iterable[TimelineEntry]) -> list[TimelineEntry]:
    # Untimed entries (a probe's current state) sort after the timed ones, as build_incidents does.
    latest = datetime.max.replace(tzinfo=UTC)
    return sorted(entries, key=lambda e: (e.time or latest, _entry_key(e)))


def merge(previous: Incident | None, current: Incident) -> Incident:
    """The current incident with the earlier story kept: timeline union, widest first/last seen."""
    if previous is None:
        return current.model_copy(update={"timeline": _sorted_timeline(current.timeline)})
    seen = {_entry_key(e) for e in current.timeline}
    timeline = _sorted_timeline([*current.timeline, *(e for e in previous.timeline if _entry_key(e) not in seen)])
    times = [t for t in (previous.first_seen, current.first_seen, previous.last_seen, current.last_seen) if t]
    return current.model_copy(
        update={
            "timeline": timeline,
            "first_seen": min(times) if times else None,
            "last_seen": max(times) if times else None,
        }
    )


def digest(incident: Incident) -> str:
    """What a message about the incident says, hashed (order-insensitive; stored so an operator
    can tell at a glance whether two sweeps saw the same story)."""
    material = {
        "priority": incident.priority.value,
        "outcome": incident.outcome,
        "recurrence": incident.recurrence.kind if incident.recurrence else None,
        "affected": incident.affected.model_dump(mode="json"),
        "timeline": sorted(list(_entry_key(e)) for e in incident.timeline),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def _what_changed(previous: Incident, merged: Incident, new_entries: list[TimelineEntry]) -> list[str]:
    what = []
    if previous.priority != merged.priority:
        what.append(f"priority {previous.priority.value} -> {merged.priority.value}")
    if previous.outcome != merged.outcome:
        what.append(f"outcome {previous.outcome} -> {merged.outcome}")
    if merged.recurrence is not None and (
        previous.recurrence is None or previous.recurrence.kind != merged.recurrence.kind
    ):
        what.append(f"recurrence: {merged.recurrence.detail}")
    for name in _TOLD_WHEN_ADDED:
        added = sorted(set(getattr(merged.affected, name)) - set(getattr(previous.affected, name)), key=str)
        if added:
            what.append(f"newly affected {name.replace('_', ' ')}: {', '.join(map(str, added[:10]))}")
    if new_entries:
        what.append(f"{len(new_entries)} new timeline entr{'y' if len(new_entries) == 1 else 'ies'}")
    return what


def _worse(previous: Incident, merged: Incident) -> bool:
    """The cause got worse: a higher priority, something newly affected, a recurrence, a failed job."""
    if merged.priority.rank < previous.priority.rank:
        return True
    if merged.outcome == "failed" and previous.outcome != "failed":
        return True
    if merged.recurrence is not None and previous.recurrence is None:
        return True
    return any(set(getattr(merged.affected, name)) - set(getattr(previous.affected, name)) for name in _TOLD_WHEN_ADDED)


def compute_incident_changes(
    stored: dict[str, StoredIncident],
    current: list[Incident],
    *,
    open_fingerprints: set[str],
    cluster_wide: bool,
) -> tuple[list[Incident], list[IncidentChange]]:
    """(incidents to store, merged with their stored story; changes to tell).

    An open incident this sweep no longer builds is resolved only when the sweep covered the
    whole cluster and none of its findings is still open (a finding whose node was not probed
    this time stays open in the findings history, and so does its incident)."""
    to_store: list[Incident] = []
    changes: list[IncidentChange] = []
    for incident in current:
        before = stored.get(incident.id)
        merged = merge(before.incident if before else None, incident)
        to_store.append(merged)
        if before is None or before.status == "resolved":
            what = ["reopened: the same root cause is back"] if before is not None else []
            changes.append(IncidentChange(kind="new", incident=merged, what=what, new_entries=merged.timeline))
            continue
        known = {_entry_key(e) for e in before.incident.timeline}
        new_entries = [e for e in merged.timeline if _entry_key(e) not in known]
        what = _what_changed(before.incident, merged, new_entries)
        if not what:  # entries sliding out of the window, a re-ordering: nothing to tell
            continue
        changes.append(
            IncidentChange(
                kind="changed",
                incident=merged,
                what=what,
                new_entries=new_entries,
                previous_priority=before.incident.priority,
                worse=_worse(before.incident, merged),
            )
        )
    built = {i.id for i in current}
    # A finding the verdict folds under another root cause this sweep (a cause found since explains
    # it) keeps no earlier cause open; one kept open unseen (its node not probed) does.
    folded_under = {f: i.id for i in current for f in i.finding_fingerprints}
    if cluster_wide:
        for incident_id, before in sorted(stored.items()):
            if before.status != "open" or incident_id in built:
                continue
            fingerprints = set(before.incident.finding_fingerprints)
            if any(f not in folded_under for f in fingerprints & open_fingerprints):
                continue
            moved = sorted({folded_under[f] for f in fingerprints if f in folded_under})
            what = [f"its findings are now folded under {', '.join(moved)}"] if moved else []
            changes.append(
                IncidentChange(
                    kind="resolved",
                    incident=before.incident,
                    what=what or ["no open finding or signal of it this sweep"],
                )
            )
    return to_store, changes


def load_stored(store: Store, region: str, cluster: str) -> dict[str, StoredIncident]:
    """Every incident item of a cluster, open and resolved (the recurrence history)."""
    found: dict[str, StoredIncident] = {}
    for item in store.stored_incidents(region, cluster):
        incident = Incident.model_validate_json(str(item["incident"]))
        found[incident.id] = StoredIncident(
            incident=incident,
            status="resolved" if item.get("status") == "resolved" else "open",
            first_sweep_id=item.get("first_sweep_id"),
            last_sweep_id=item.get("last_sweep_id"),
        )
    return found


def _history(stored: dict[str, StoredIncident], current_ids: set[str]) -> list[Incident]:
    """Earlier incidents for recurrence: an incident still open with the same id is this same
    incident continuing, not an earlier occurrence of it."""
    return [s.incident for i, s in stored.items() if not (s.status == "open" and i in current_ids)]


def _persist(
    store: Store, region: str, cluster: str, sweep_id: str, incidents: list[Incident], changes: list[IncidentChange],
    expires_at: int,
) -> None:  # fmt: skip
    for incident in incidents:
        store.record_incident_seen(
            region, cluster, incident, digest=digest(incident), sweep_id=sweep_id, expires_at=expires_at
        )
    for change in changes:
        if change.kind == "resolved":
            store.mark_incident_resolved(region, cluster, change.incident.id, sweep_id=sweep_id)


def record_incidents(
    store: Store,
    *,
    sweep_id: str,
    region: str,
    started_at: datetime,
    result: SweepResult,
    inventory: Inventory,
    open_fingerprints: set[str],
    cluster_wide: bool,
    history_seconds: int,
) -> IncidentSweep:
    """Build this sweep's incidents, store them and the changes to tell (once per sweep), and
    whether the sweep is the cluster's baseline (decided with the changes, so that a retried
    Aggregate, whose own sweep record may exist by then, keeps the first attempt's answer)."""
    expires = epoch(started_at) + history_seconds
    sweep = load_incident_sweep(store, sweep_id)
    if sweep is None:
        stored = load_stored(store, region, result.cluster_name)
        attributions = attributions_of(inventory)
        ids = {cause.id for cause in result.verdict.root_causes}  # the incidents' ids, before building them
        current = build_incidents(result, inventory, attributions=attributions, history=_history(stored, ids))
        to_store, changes = compute_incident_changes(
            stored, current, open_fingerprints=open_fingerprints, cluster_wide=cluster_wide
        )
        sweep = IncidentSweep(
            sweep_id=sweep_id,
            cluster=result.cluster_name,
            region=region,
            cluster_arn=result.cluster_arn,
            started_at=started_at,
            incidents=to_store,
            changes=changes,
            baseline=not store.has_earlier_full_sweep(
                region, result.cluster_name, started_at=started_at, sweep_id=sweep_id, code_version=code_version()
            ),
        )
        if not store.put_sweep_blob(sweep_id, INCIDENTS, sweep.model_dump_json(), expires_at=expires, only_if_new=True):
            sweep = load_incident_sweep(store, sweep_id) or sweep
    # A retried Aggregate reuses the first attempt's decision and completes its writes (each
    # conditional on the sweep id, so what was written is not written twice).
    _persist(store, region, sweep.cluster, sweep_id, sweep.incidents, sweep.changes, expires)
    return sweep


def load_incident_sweep(store: Store, sweep_id: str) -> IncidentSweep | None:
    """The incident changes Aggregate stored for a sweep (None when it stored none)."""
    text = store.sweep_blob(sweep_id, INCIDENTS)
    return None if text is None else IncidentSweep.model_validate_json(text)
