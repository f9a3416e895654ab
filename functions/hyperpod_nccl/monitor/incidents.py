"""Incidents in the monitor: built after Aggregate from the sweep's result and inventory (the same
pure `build_incidents` the CLI runs), stored one item per incident, and turned into the changes
Notify tells, one message per new, changed or resolved incident.

Item: `CLUSTER#C` / `INCIDENT#<incident id>` with `status` open/resolved, `first_seen` /
`last_seen`, the incident as JSON (its timeline is the union of every sweep's entries, so an
entry that slides out of a later sweep's window stays in the story), `digest`, first and last
sweep ids. Idempotent per sweep like findings: the changes are computed once and stored under
the sweep (a retried Aggregate reuses them) and each item write is conditional on the sweep id.

Size: an incident naming thousands of nodes (a job-wide hang on 10,000 nodes) does not fit an
item; like a finding, its item then keeps a shortened copy and `incident_body` names the blob
`INCIDENT#C#<id>` / `BODY#<sweep id>` holding it whole, which `load_stored` reads back.
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
from hyperpod_nccl.models.findings import SweepResult
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.monitor.store import FINDING_INLINE_MAX_BYTES, Store, cluster_key, epoch, halve_until_fits, sweep_key

INCIDENTS_BLOB = "INCIDENTS"
INCIDENT_PREFIX = "INCIDENT#"
IncidentChangeKind = Literal["new", "changed", "resolved"]
# An incident's JSON kept in its item, as for a finding (the other attributes are small); a longer
# one is stored whole in a blob and the item keeps a shortened copy.
INCIDENT_INLINE_MAX_BYTES = FINDING_INLINE_MAX_BYTES


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


class IncidentSweep(BaseModel):
    """The incident changes of one sweep (stored once under the sweep; Notify reads it)."""

    sweep_id: str
    cluster: str
    region: str
    cluster_arn: str | None = None
    started_at: datetime
    incidents: list[Incident] = Field(default_factory=list, description="this sweep's incidents as stored")
    changes: list[IncidentChange] = Field(default_factory=list)


def incident_sk(incident_id: str) -> str:
    """The sort key of an incident's item in its cluster's partition."""
    return f"{INCIDENT_PREFIX}{incident_id}"


def incident_history_key(region: str, cluster: str, incident_id: str) -> str:
    """The partition of an incident's whole bodies (one blob per sweep that stored it too long)."""
    return f"INCIDENT#{region}#{cluster}#{incident_id}"


def shortened_incident(incident: Incident, max_bytes: int) -> str:
    """`incident` as JSON of at most `max_bytes`: its timeline, evidence, affected lists and
    finding fingerprints cut to their first entries (halving), never its id, title, priority or
    root cause. The copy an item keeps when the whole incident is in a blob."""
    affected = incident.affected
    lists = {name: getattr(affected, name) for name in type(affected).model_fields}

    def render(keep: int) -> str:
        update = {
            "timeline": incident.timeline[:keep],
            "evidence": incident.evidence[:keep],
            "finding_fingerprints": incident.finding_fingerprints[:keep],
            "affected": affected.model_copy(update={name: values[:keep] for name, values in lists.items()}),
        }
        return incident.model_copy(update=update).model_dump_json()

    longest = max(
        len(incident.timeline), len(incident.evidence), len(incident.finding_fingerprints), *map(len, lists.values())
    )
    # With every list empty: the title and root cause, bounded by their sources.
    return halve_until_fits(render, longest, max_bytes)[0]


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
    for name in ("instance_ids", "pods", "ranks", "jobs", "gpus"):
        added = sorted(set(getattr(merged.affected, name)) - set(getattr(previous.affected, name)), key=str)
        if added:
            what.append(f"newly affected {name.replace('_', ' ')}: {', '.join(map(str, added[:10]))}")
    if new_entries:
        what.append(f"{len(new_entries)} new timeline entr{'y' if len(new_entries) == 1 else 'ies'}")
    return what


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
        changes.append(IncidentChange(kind="changed", incident=merged, what=what, new_entries=new_entries))
    built = {i.id for i in current}
    if cluster_wide:
        for incident_id, before in sorted(stored.items()):
            if before.status != "open" or incident_id in built:
                continue
            if set(before.incident.finding_fingerprints) & open_fingerprints:
                continue
            changes.append(
                IncidentChange(
                    kind="resolved", incident=before.incident, what=["no open finding or signal of it this sweep"]
                )
            )
    return to_store, changes


def load_stored(store: Store, region: str, cluster: str) -> dict[str, StoredIncident]:
    """Every incident item of a cluster, open and resolved (the recurrence history)."""
    found: dict[str, StoredIncident] = {}
    for item in store.query(cluster_key(region, cluster), INCIDENT_PREFIX):
        text = str(item["incident"])
        if body := str(item.get("incident_body") or ""):
            # The item's copy is shortened; the blob holds it whole (the copy is kept if it expired).
            incident_id = str(item["sk"]).removeprefix(INCIDENT_PREFIX)
            text = store.get_blob(incident_history_key(region, cluster, incident_id), body) or text
        incident = Incident.model_validate_json(text)
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
    ck = cluster_key(region, cluster)
    for incident in incidents:
        text = incident.model_dump_json()
        body = ""
        if len(text.encode()) > INCIDENT_INLINE_MAX_BYTES:
            # The blob first, so that an item never names a body that is not there (a retry
            # rewrites the same text under the same name).
            body = f"BODY#{sweep_id}"
            store.put_blob(incident_history_key(region, cluster, incident.id), body, text, expires_at=expires_at)
            text = shortened_incident(incident, INCIDENT_INLINE_MAX_BYTES)
        store.update_if(
            ck,
            incident_sk(incident.id),
            UpdateExpression=(
                "SET incident = :incident, #status = :open, digest = :digest, priority = :priority, "
                "title = :title, first_seen = :first, last_seen = :last, last_sweep_id = :sweep, "
                "first_sweep_id = if_not_exists(first_sweep_id, :sweep), expires_at = :expires"
                + (", incident_body = :body REMOVE resolved_at" if body else " REMOVE resolved_at, incident_body")
            ),
            ConditionExpression="attribute_not_exists(last_sweep_id) OR last_sweep_id <> :sweep",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":incident": text,
                **({":body": body} if body else {}),
                ":open": "open",
                ":digest": digest(incident),
                ":priority": incident.priority.value,
                ":title": incident.title,
                ":first": incident.first_seen.isoformat() if incident.first_seen else "",
                ":last": incident.last_seen.isoformat() if incident.last_seen else "",
                ":sweep": sweep_id,
                ":expires": expires_at,
            },
        )
    for change in changes:
        if change.kind != "resolved":
            continue
        store.update_if(
            ck,
            incident_sk(change.incident.id),
            UpdateExpression="SET #status = :resolved, resolved_sweep_id = :sweep",
            ConditionExpression="#status = :open",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":resolved": "resolved", ":open": "open", ":sweep": sweep_id},
        )


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
    """Build this sweep's incidents, store them and the changes to tell (once per sweep)."""
    pk = sweep_key(sweep_id)
    expires = epoch(started_at) + history_seconds
    sweep = load_incident_sweep(store, sweep_id)
    if sweep is None:
        stored = load_stored(store, region, result.cluster_name)
        attributions = attributions_of(inventory)
        ids = {i.id for i in build_incidents(result, inventory, attributions=attributions)}
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
        )
        if not store.put_blob(pk, INCIDENTS_BLOB, sweep.model_dump_json(), expires_at=expires, only_if_new=True):
            sweep = load_incident_sweep(store, sweep_id) or sweep
    # A retried Aggregate reuses the first attempt's decision and completes its writes (each
    # conditional on the sweep id, so what was written is not written twice).
    _persist(store, region, sweep.cluster, sweep_id, sweep.incidents, sweep.changes, expires)
    return sweep


def load_incident_sweep(store: Store, sweep_id: str) -> IncidentSweep | None:
    """The incident changes Aggregate stored for a sweep (None when it stored none)."""
    text = store.get_blob(sweep_key(sweep_id), INCIDENTS_BLOB)
    return None if text is None else IncidentSweep.model_validate_json(text)
