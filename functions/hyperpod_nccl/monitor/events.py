"""What starts a sweep: EventBridge Scheduler ticks and the three HyperPod EventBridge detail
types (original-checks § 3b). Validation here decides "sweep this cluster (and this node)" or
"reject, because ..." — a malformed or foreign event never starts a sweep. What the API models
leave optional is not required here: a cluster event without EventLevel is accepted (its level
unknown), and a node-health event whose instance id does not parse sweeps the whole cluster, the
reason saying so, rather than nothing.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from typing import Any, Literal

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hyperpod_nccl.monitor.settings import (
    ACTIONABLE_EVENT_LEVELS,
    CLUSTER_EVENT,
    HYPERPOD_SOURCE,
    NODE_HEALTH_EVENT,
    SCHEDULE_SOURCE,
    STATE_CHANGE_EVENT,
    WatchedCluster,
)

DETAIL_TYPES = (CLUSTER_EVENT, NODE_HEALTH_EVENT, STATE_CHANGE_EVENT)

ACTIONABLE_CLUSTER_STATUSES = frozenset({"Failed", "RollingBack"})
ACTIONABLE_GROUP_STATUSES = frozenset({"Degraded", "Failed"})
_INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class TriggerRequest(BaseModel):
    """One accepted trigger: sweep `cluster` (only `node` when set) because of `reason`."""

    trigger_id: str
    kind: Literal["schedule", "cluster-event", "node-health", "state-change", "manual"]
    cluster: str
    region: str
    node: str | None = None
    reason: str
    received_at: datetime

    @property
    def sweep_id(self) -> str:
        """Deterministic execution name (so a replayed trigger cannot start a second execution):
        at most 80 characters of [A-Za-z0-9-_]."""
        digest = hashlib.sha256(f"{self.region}|{self.cluster}|{self.trigger_id}".encode()).hexdigest()[:16]
        return f"{self.kind}-{_UNSAFE.sub('-', self.cluster)[:40]}-{digest}"


class Rejection(BaseModel):
    """An event that starts nothing, and why (logged by the trigger handler)."""

    reason: str
    event_id: str | None = None


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ClusterEventInner(_Loose):
    """`detail.EventDetails` of a "SageMaker HyperPod Cluster Event"."""

    EventId: str
    ClusterArn: str | None = None
    ClusterName: str
    InstanceGroupName: str | None = None
    InstanceId: str | None = None
    ResourceType: str | None = None
    # Optional in the API model's ClusterEventSummary (and absent from DescribeClusterEvent's).
    EventLevel: str | None = None
    Description: str = ""


class ClusterEventDetail(_Loose):
    """`detail` of a "SageMaker HyperPod Cluster Event"."""

    EventDetails: ClusterEventInner


class HealthSummary(_Loose):
    """`detail.HealthSummary` of a node-health event."""

    HealthStatus: str
    HealthStatusReason: str | None = None
    RepairAction: str | None = None
    Recommendation: str | None = None


class NodeHealthDetail(_Loose):
    """`detail` of a "SageMaker HyperPod Cluster Node Health Event"."""

    ClusterName: str
    ClusterArn: str | None = None
    # Whatever the event carries: an id that does not parse widens the sweep, never rejects it.
    InstanceId: object = None
    HealthSummary: HealthSummary


class StateChangeGroup(_Loose):
    """One instance group in a state-change event."""

    InstanceGroupName: str
    Status: str | None = None


class StateChangeDetail(_Loose):
    """`detail` of a "SageMaker HyperPod Cluster State Change" (mirrors DescribeCluster)."""

    ClusterName: str
    ClusterArn: str | None = None
    ClusterStatus: str
    FailureMessage: str | None = None
    InstanceGroups: list[StateChangeGroup] = Field(default_factory=list)


class ScheduleInput(BaseModel):
    """The input EventBridge Scheduler sends (settings.SCHEDULE_TARGET_INPUT)."""

    source: Literal["hyperpod-nccl.schedule"]
    id: str
    # The schedule's ARN (absent from a tick sent by hand, e.g. the local harness's).
    schedule: str | None = None
    time: str
    clusters: list[WatchedCluster] | None = None
    # Sent by `hyperpod-nccl sweep-now` (a person asked for this sweep), not by the schedule.
    manual: bool = False

    @property
    def trigger_id(self) -> str:
        """The tick's identity, the same for each attempt Scheduler makes (settings.SCHEDULE_TARGET_INPUT)."""
        return f"{self.schedule or self.id}@{self.time}"


def _error_text(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg", "invalid"))


def _event_id(event: dict[str, Any]) -> str | None:
    """The event's id when it is a string (a hostile event may put anything there)."""
    value = event.get("id")
    return value[:200] if isinstance(value, str) else None


def _watched(cluster: str, region: str, watched: list[WatchedCluster]) -> bool:
    return not watched or any(w.name == cluster and w.region == region for w in watched)


def parse_trigger(
    event: Any, watched: list[WatchedCluster], now: datetime | None = None
) -> list[TriggerRequest] | Rejection:
    """Accept an event as one sweep request per cluster, or reject it with the reason."""
    now = now or datetime.now(UTC)
    if not isinstance(event, dict):
        return Rejection(reason=f"event is a {type(event).__name__}, not a JSON object")
    if event.get("source") == SCHEDULE_SOURCE:
        return _schedule(event, watched, now)
    try:
        envelope = EventBridgeModel.model_validate(event)
    except ValidationError as error:
        return Rejection(reason=f"not an EventBridge event ({_error_text(error)})", event_id=_event_id(event))
    if envelope.source != HYPERPOD_SOURCE:
        return Rejection(reason=f"foreign source {envelope.source!r}", event_id=envelope.id)
    if envelope.detail_type not in DETAIL_TYPES:
        return Rejection(reason=f"unsupported detail-type {envelope.detail_type!r}", event_id=envelope.id)
    detail = envelope.detail if isinstance(envelope.detail, dict) else {}
    try:
        accepted = _classify(envelope.detail_type, detail)
    except ValidationError as error:
        return Rejection(
            reason=f"malformed {envelope.detail_type!r} detail ({_error_text(error)})", event_id=envelope.id
        )
    if isinstance(accepted, str):
        return Rejection(reason=accepted, event_id=envelope.id)
    kind, cluster, node, reason = accepted
    if not _watched(cluster, envelope.region, watched):
        return Rejection(reason=f"cluster {cluster!r} in {envelope.region} is not watched", event_id=envelope.id)
    return [
        TriggerRequest(
            trigger_id=envelope.id,
            kind=kind,
            cluster=cluster,
            region=envelope.region,
            node=node,
            reason=reason,
            received_at=now,
        )
    ]


_Accepted = tuple[Literal["cluster-event", "node-health", "state-change"], str, str | None, str]


def _node(value: object) -> str | None:
    return value if isinstance(value, str) and _INSTANCE_ID.match(value) else None


def _shown(value: object) -> str:
    """A value of the event as a reason quotes it: repr, cut (the event is not trusted)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def _classify(detail_type: str, detail: dict[str, Any]) -> _Accepted | str:
    """The sweep an event asks for, or why it asks for none (a str)."""
    if detail_type == CLUSTER_EVENT:
        inner = ClusterEventDetail.model_validate(detail).EventDetails
        if inner.EventLevel is not None and inner.EventLevel not in ACTIONABLE_EVENT_LEVELS:
            return f"cluster event level {inner.EventLevel!r} is not Warn/Error"
        if inner.EventLevel is None:
            reason = f"cluster event {inner.EventId} with no EventLevel (level unknown): {inner.Description}"
        else:
            reason = f"{inner.EventLevel} cluster event {inner.EventId}: {inner.Description}"
        node = _node(inner.InstanceId)
        if inner.InstanceId and node is None:
            reason += f" (instance id {_shown(inner.InstanceId)} does not parse: the whole cluster is swept)"
        return "cluster-event", inner.ClusterName, node, reason.strip()
    if detail_type == NODE_HEALTH_EVENT:
        health = NodeHealthDetail.model_validate(detail)
        if health.HealthSummary.HealthStatus.lower() != "unhealthy":
            return f"node health status {health.HealthSummary.HealthStatus!r} is not Unhealthy"
        why = health.HealthSummary.HealthStatusReason or "no reason given"
        node = _node(health.InstanceId)
        if node is None:
            # An unhealthy node we cannot name is still an unhealthy node: look at all of them.
            return (
                "node-health",
                health.ClusterName,
                None,
                f"a node unhealthy ({why}); its instance id {_shown(health.InstanceId)} does not parse, "
                "so the whole cluster is swept",
            )
        return "node-health", health.ClusterName, node, f"node {node} unhealthy: {why}"
    change = StateChangeDetail.model_validate(detail)
    degraded = [g.InstanceGroupName for g in change.InstanceGroups if g.Status in ACTIONABLE_GROUP_STATUSES]
    if change.ClusterStatus not in ACTIONABLE_CLUSTER_STATUSES and not degraded:
        return f"cluster status {change.ClusterStatus!r} with no degraded instance group is not actionable"
    reason = f"cluster status {change.ClusterStatus}" + (f", degraded groups {', '.join(degraded)}" if degraded else "")
    return "state-change", change.ClusterName, None, reason


def _schedule(event: dict[str, Any], watched: list[WatchedCluster], now: datetime) -> list[TriggerRequest] | Rejection:
    try:
        tick = ScheduleInput.model_validate(event)
    except ValidationError as error:
        return Rejection(reason=f"malformed schedule input ({_error_text(error)})", event_id=_event_id(event))
    clusters = tick.clusters if tick.clusters is not None else watched
    if not clusters:
        return Rejection(reason="schedule tick but no cluster is watched", event_id=tick.id)
    # A schedule input is only trusted for the clusters of the watched configuration: anyone who
    # may invoke the trigger must not be able to point the sweep (and its probes) elsewhere.
    foreign = [f"{c.name[:100]!r} in {c.region[:30]!r}" for c in clusters if c not in watched]
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        return Rejection(reason=f"schedule input names unwatched cluster(s): {shown}", event_id=tick.id)
    return [
        TriggerRequest(
            trigger_id=tick.trigger_id,
            kind="manual" if tick.manual else "schedule",
            cluster=c.name,
            region=c.region,
            reason=f"sweep asked for with sweep-now at {tick.time}"
            if tick.manual
            else f"scheduled sweep at {tick.time}",
            received_at=now,
        )
        for c in clusters
    ]
