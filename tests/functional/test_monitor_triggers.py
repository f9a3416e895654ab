"""What the API models leave optional never stops a trigger (issue 15, point 6): a node-health
event whose instance id does not parse sweeps the whole cluster, the reason saying so; a cluster
event without EventLevel passes the deployed rule and starts a sweep. Delivered to the monitor as
EventBridge would (the corpus of tests/data/events)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from moto.events.models import EventPattern

from hyperpod_nccl.monitor.settings import HYPERPOD_EVENT_PATTERNS
from tests.functional.test_monitor_sweep import _store, _sweep_records, monitor  # noqa: F401 - fixture

EVENTS = Path(__file__).resolve().parents[1] / "data" / "events"


def _event(name: str) -> dict[str, Any]:
    event = json.loads((EVENTS / name).read_text())
    event.pop("_expect")
    return event


def _rule_for(event: dict[str, Any]) -> EventPattern:
    """The deployed rule's pattern for the event's detail type, as the emulation's EventBridge reads it."""
    [pattern] = [p for p in HYPERPOD_EVENT_PATTERNS if p["detail-type"] == [event["detail-type"]]]
    return EventPattern.load(json.dumps(pattern))


def test_a_node_health_event_whose_instance_id_does_not_parse_sweeps_the_whole_cluster(simulate, monitor) -> None:  # noqa: F811
    deployed = monitor(simulate("eks-p5"))
    event = _event("accept-node-health-unparseable-id.json")
    assert _rule_for(event).matches_event(event)
    [started] = deployed.trigger(event)["outcomes"]
    assert started["status"] == "started"
    run = deployed.wait(deployed.execution_arn(started["sweep_id"]))
    assert run.status == "SUCCEEDED"
    # The whole cluster's sample (node_coverage 2), not one node, and the stored reason says why.
    assert len(deployed.calls_of(run, "probe_node")) == 2
    [record] = _sweep_records(deployed)
    assert record["node"] == ""
    seen = _store(deployed).trigger_seen(deployed.region, deployed.simulation.scenario.cluster.name, event["id"])
    assert seen is not None and seen["node"] == ""
    assert "hyperpod-i-0fedcba9876543210" in seen["reason"]
    assert "does not parse, so the whole cluster is swept" in seen["reason"]


def test_a_cluster_event_without_event_level_passes_the_rule_and_starts_a_sweep(simulate, monitor) -> None:  # noqa: F811
    event = _event("accept-cluster-event-no-level.json")
    # The rule lets it through, as it lets Warn/Error through and keeps Info out.
    assert _rule_for(event).matches_event(event)
    assert _rule_for(_event("accept-cluster-event-error.json")).matches_event(_event("accept-cluster-event-error.json"))
    assert not _rule_for(event).matches_event(_event("reject-cluster-event-info.json"))
    deployed = monitor(simulate("eks-p5"))
    [started] = deployed.trigger(event)["outcomes"]
    assert started["status"] == "started"
    assert deployed.wait(deployed.execution_arn(started["sweep_id"])).status == "SUCCEEDED"
    seen = _store(deployed).trigger_seen(deployed.region, deployed.simulation.scenario.cluster.name, event["id"])
    assert seen is not None and "no EventLevel (level unknown)" in seen["reason"]
