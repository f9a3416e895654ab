"""Incidents in the monitor: which incidents are new, changed or resolved between sweeps, and the
one-message-per-incident alert whose chat thread is the incident's (root cause's) own."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from hyperpod_nccl.incidents.models import Affected, Incident, Recurrence, RootCause, TimelineEntry
from hyperpod_nccl.models.findings import Priority
from hyperpod_nccl.monitor.alert_messages import (
    INCIDENT_EVENT_TYPES,
    ChatbotNotification,
    build_incident_alert,
    sns_message,
)
from hyperpod_nccl.monitor.incident_tracking import (
    IncidentChange,
    IncidentSweep,
    StoredIncident,
    compute_incident_changes,
    digest,
    merge,
)
from hyperpod_nccl.references import NODE_HARDWARE

T0 = datetime(2026, 3, 1, 2, 5, tzinfo=UTC)
BASE = "https://example.com/refs"


def _entry(minutes: int, text: str, kind: str = "fault") -> TimelineEntry:
    return TimelineEntry(time=T0 + timedelta(minutes=minutes), source="cluster_event", kind=kind, text=text)  # type: ignore[arg-type]


def _incident(*entries: TimelineEntry, priority: Priority = Priority.P1, ranks: list[int] | None = None) -> Incident:
    return Incident(
        id="inc-0123456789ab",
        cluster="hp1",
        title="Xid 79 on i-0abc",
        priority=priority,
        root_cause=RootCause(
            summary="Xid 79 (GPU has fallen off the bus)", source="node_probe", reference=NODE_HARDWARE, xid=79
        ),
        first_seen=min((e.time for e in entries if e.time), default=None),
        last_seen=max((e.time for e in entries if e.time), default=None),
        timeline=list(entries),
        affected=Affected(instance_ids=["i-0abc"], ranks=ranks or []),
        finding_fingerprints=["node.xid|node=i-0abc"],
    )


def _stored(incident: Incident, status: str = "open") -> dict[str, StoredIncident]:
    return {incident.id: StoredIncident(incident=merge(None, incident), status=status)}  # type: ignore[arg-type]


def test_a_first_seen_incident_is_new_with_its_whole_timeline() -> None:
    incident = _incident(_entry(0, "Xid 79"), _entry(3, "HyperPod replaced the node", "recovery"))
    stored, changes = compute_incident_changes({}, [incident], open_fingerprints=set(), cluster_wide=True)
    [change] = changes
    assert change.kind == "new" and len(change.new_entries) == 2
    assert stored[0].id == incident.id


def test_the_same_story_again_is_not_news_even_reordered_or_with_entries_out_of_the_window() -> None:
    before = _incident(_entry(0, "Xid 79"), _entry(3, "node replaced", "recovery"))
    later = _incident(_entry(3, "node replaced", "recovery"))  # the Xid slid out of the window
    to_store, changes = compute_incident_changes(_stored(before), [later], open_fingerprints=set(), cluster_wide=True)
    assert changes == []
    # The stored story keeps the entry the window lost.
    assert [e.text for e in to_store[0].timeline] == ["Xid 79", "node replaced"]
    assert to_store[0].first_seen == T0
    assert digest(to_store[0]) == digest(merge(None, before))


def test_new_entries_priority_and_ranks_make_a_thread_update() -> None:
    before = _incident(_entry(0, "Xid 79"))
    after = _incident(_entry(0, "Xid 79"), _entry(9, "job failed", "job"), priority=Priority.P0, ranks=[37])
    _, [change] = compute_incident_changes(_stored(before), [after], open_fingerprints=set(), cluster_wide=True)
    assert change.kind == "changed"
    assert [e.text for e in change.new_entries] == ["job failed"]
    assert "priority P1 -> P0" in change.what and "newly affected ranks: 37" in change.what
    assert change.previous_priority is Priority.P1 and change.worse


def test_a_longer_story_alone_is_an_update_but_not_worse() -> None:
    before = _incident(_entry(0, "Xid 79"))
    after = _incident(_entry(0, "Xid 79"), _entry(4, "HyperPod rebooted the node", "recovery"))
    _, [change] = compute_incident_changes(_stored(before), [after], open_fingerprints=set(), cluster_wide=True)
    assert change.kind == "changed" and not change.worse
    lowered = _incident(_entry(0, "Xid 79"), priority=Priority.P2)
    _, [better] = compute_incident_changes(_stored(before), [lowered], open_fingerprints=set(), cluster_wide=True)
    assert not better.worse and better.previous_priority is Priority.P1


def test_an_absent_incident_resolves_only_on_a_cluster_wide_sweep_without_its_findings_open() -> None:
    stored = _stored(_incident(_entry(0, "Xid 79")))
    fingerprint = "node.xid|node=i-0abc"
    kept = compute_incident_changes(stored, [], open_fingerprints={fingerprint}, cluster_wide=True)[1]
    assert kept == []  # its node was not probed again: the finding, and so the incident, stays open
    assert compute_incident_changes(stored, [], open_fingerprints=set(), cluster_wide=False)[1] == []
    [resolved] = compute_incident_changes(stored, [], open_fingerprints=set(), cluster_wide=True)[1]
    assert resolved.kind == "resolved"


def test_a_cause_whose_findings_the_verdict_now_folds_under_another_is_resolved_naming_it() -> None:
    # The finding is still open, but this sweep's verdict explains it by another root cause (one
    # found since): the earlier cause is resolved, saying where its findings went.
    stored = _stored(_incident(_entry(0, "Xid 79")))
    fingerprint = "node.xid|node=i-0abc"
    other = _incident(_entry(1, "security group")).model_copy(
        update={"id": "rc-0000000000aa", "finding_fingerprints": [fingerprint, "sg|sg-1"]}
    )
    _, changes = compute_incident_changes(stored, [other], open_fingerprints={fingerprint}, cluster_wide=True)
    resolved = [c for c in changes if c.kind == "resolved"]
    assert [(c.incident.id, c.what) for c in resolved] == [
        ("inc-0123456789ab", ["its findings are now folded under rc-0000000000aa"])
    ]
    # A finding kept open without being seen (its node not probed) still keeps its cause open.
    both = stored["inc-0123456789ab"].incident.model_copy(update={"finding_fingerprints": [fingerprint, "kept|unseen"]})
    _, kept_open = compute_incident_changes(
        {both.id: StoredIncident(incident=both, status="open")},
        [other],
        open_fingerprints={"kept|unseen", fingerprint},
        cluster_wide=True,
    )
    assert [c for c in kept_open if c.kind == "resolved"] == []


def test_a_resolved_incident_that_comes_back_is_reopened_as_new() -> None:
    incident = _incident(_entry(0, "Xid 79"))
    [change] = compute_incident_changes(
        _stored(incident, "resolved"), [incident], open_fingerprints=set(), cluster_wide=True
    )[1]
    assert change.kind == "new" and change.what == ["reopened: the same root cause is back"]


def _sweep(change: IncidentChange) -> IncidentSweep:
    return IncidentSweep(
        sweep_id="schedule-hp1-0002",
        cluster="hp1",
        region="us-west-2",
        cluster_arn="arn:aws:sagemaker:us-west-2:123456789012:cluster/abcd1234efgh",
        started_at=T0,
        changes=[change],
    )


def test_incident_message_threads_on_the_incident_id() -> None:
    incident = _incident(_entry(0, "Xid 79"), _entry(3, "node replaced", "recovery"), priority=Priority.P0)
    incident.recurrence = Recurrence(
        kind="same_gpu", detail="Xid 79 on GPU 1650923001727 was seen before", advice="replace, don't reboot"
    )
    change = IncidentChange(kind="new", incident=incident, new_entries=incident.timeline)
    alert = build_incident_alert(_sweep(change), change, BASE)
    chat = ChatbotNotification.model_validate_json(json.loads(sns_message(alert)["Message"])["default"])
    # The cause's own thread, qualified by its cluster (the summary keeps the cluster's thread).
    assert chat.metadata.threadId == "hyperpod-nccl-us-west-2-hp1-inc-0123456789ab"
    assert chat.metadata.eventType == INCIDENT_EVENT_TYPES["new"]
    assert chat.id == "schedule-hp1-0002-inc-0123456789ab"
    assert "[P0] Xid 79 on i-0abc" in chat.content.title
    assert "2026-03-01 02:05 UTC [fault/cluster_event] Xid 79" in chat.content.description
    assert "replace, don't reboot" in chat.content.description and chat.content.nextSteps == ["replace, don't reboot"]
    assert NODE_HARDWARE.pointer in alert.email


def test_an_update_shows_only_the_new_entries_and_what_changed() -> None:
    incident = _incident(_entry(0, "Xid 79"), _entry(9, "job failed", "job"))
    change = IncidentChange(
        kind="changed", incident=incident, what=["1 new timeline entry"], new_entries=incident.timeline[1:]
    )
    alert = build_incident_alert(_sweep(change), change, BASE)
    assert alert.chatbot.metadata.eventType == INCIDENT_EVENT_TYPES["changed"]
    assert "What changed: 1 new timeline entry" in alert.email
    assert "job failed" in alert.chatbot.content.description
    assert "Xid 79\n" not in alert.chatbot.content.description + "\n"
