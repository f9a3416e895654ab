"""The trigger's event validation over the corpus in tests/data/events (see its README)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hyperpod_nccl.monitor.events import Rejection, TriggerRequest, parse_trigger
from hyperpod_nccl.monitor.settings import SCHEDULE_SOURCE, WatchedCluster

CORPUS = Path(__file__).resolve().parents[1] / "data" / "events"
WATCHED = [WatchedCluster(name="ml-training-eks", region="us-west-2")]


def _load(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    event = json.loads(path.read_text())
    return event, event.pop("_expect")


@pytest.mark.parametrize("path", sorted(CORPUS.glob("accept-*.json")), ids=lambda p: p.stem)
def test_actionable_events_start_one_sweep_scoped_to_the_named_node(path: Path) -> None:
    event, expect = _load(path)
    parsed = parse_trigger(event, WATCHED)
    assert isinstance(parsed, list), parsed
    [request] = parsed
    assert request.cluster == "ml-training-eks"
    assert request.region == "us-west-2"
    assert request.trigger_id == event["id"]
    assert request.kind == expect["kind"]
    assert request.node == expect["expect_node"]
    assert expect.get("reason", "") in request.reason


@pytest.mark.parametrize("path", sorted(CORPUS.glob("reject-*.json")), ids=lambda p: p.stem)
def test_malformed_foreign_or_harmless_events_are_rejected_with_a_reason(path: Path) -> None:
    event, expect = _load(path)
    parsed = parse_trigger(event, WATCHED)
    assert isinstance(parsed, Rejection), parsed
    assert expect["reason"] in parsed.reason


def test_non_object_payload_is_rejected() -> None:
    parsed = parse_trigger(["not", "an", "event"], WATCHED)
    assert isinstance(parsed, Rejection)
    assert "not a JSON object" in parsed.reason


def test_replayed_event_maps_to_the_same_execution_name() -> None:
    event, _ = _load(CORPUS / "accept-node-health-unhealthy.json")
    first = parse_trigger(dict(event), WATCHED)
    again = parse_trigger(dict(event), WATCHED)
    assert isinstance(first, list) and isinstance(again, list)
    assert first[0].sweep_id == again[0].sweep_id
    other = dict(event, id="another-event-id")
    different = parse_trigger(other, WATCHED)
    assert isinstance(different, list) and different[0].sweep_id != first[0].sweep_id


def test_schedule_tick_sweeps_every_watched_cluster_with_valid_execution_names() -> None:
    watched = [*WATCHED, WatchedCluster(name="x" * 63, region="eu-west-1")]
    parsed = parse_trigger({"source": SCHEDULE_SOURCE, "id": "exec-1", "time": "2026-01-15T11:00:00Z"}, watched)
    assert isinstance(parsed, list)
    assert [(r.cluster, r.region) for r in parsed] == [(w.name, w.region) for w in watched]
    for request in parsed:
        assert isinstance(request, TriggerRequest)
        assert len(request.sweep_id) <= 80
        assert all(c.isalnum() or c in "-_" for c in request.sweep_id)


def test_a_tick_scheduler_retries_is_the_same_trigger_and_sweep() -> None:
    # Scheduler gives each attempt of a tick a new execution id; the schedule and its time stay.
    tick = {"source": SCHEDULE_SOURCE, "schedule": "arn:aws:scheduler:us-west-2:111122223333:schedule/default/s"}
    first = parse_trigger({**tick, "id": "attempt-1", "time": "2026-01-15T11:00:00Z"}, WATCHED)
    retried = parse_trigger({**tick, "id": "attempt-2", "time": "2026-01-15T11:00:00Z"}, WATCHED)
    following = parse_trigger({**tick, "id": "attempt-3", "time": "2026-01-15T11:15:00Z"}, WATCHED)
    assert isinstance(first, list) and isinstance(retried, list) and isinstance(following, list)
    assert [r.trigger_id for r in retried] == [r.trigger_id for r in first]
    assert [r.sweep_id for r in retried] == [r.sweep_id for r in first]
    assert {r.sweep_id for r in following}.isdisjoint({r.sweep_id for r in first})


def test_schedule_tick_without_clusters_is_rejected() -> None:
    parsed = parse_trigger({"source": SCHEDULE_SOURCE, "id": "exec-1", "time": "t"}, [])
    assert isinstance(parsed, Rejection)
    assert "no cluster is watched" in parsed.reason


def test_schedule_input_naming_an_unwatched_cluster_is_rejected_with_the_reason() -> None:
    tick = {"source": SCHEDULE_SOURCE, "id": "exec-1", "time": "t"}
    watched = WATCHED[0]
    accepted = parse_trigger({**tick, "clusters": [watched.model_dump()]}, WATCHED)
    assert isinstance(accepted, list) and [(r.cluster, r.region) for r in accepted] == [(watched.name, watched.region)]
    # Same name in another region, an unknown name, and any named cluster when nothing is watched.
    for clusters, watched_list in (
        ([{"name": watched.name, "region": "eu-central-1"}], WATCHED),
        ([watched.model_dump(), {"name": "someone-elses", "region": watched.region}], WATCHED),
        ([watched.model_dump()], []),
    ):
        rejected = parse_trigger({**tick, "clusters": clusters}, watched_list)
        assert isinstance(rejected, Rejection), clusters
        assert "unwatched cluster" in rejected.reason and rejected.event_id == "exec-1"
