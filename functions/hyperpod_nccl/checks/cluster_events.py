"""Cluster-event checks: ListClusterEvents classified into infrastructure signals.

Events carry infrastructure state only (lifecycle, bootstrap, EFA health checks, capacity,
replacement, reboot, rollback), never NCCL timeouts or Xids: "no events" is not "healthy".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from hyperpod_nccl.checks import check
from hyperpod_nccl.models.cluster import CONTINUOUS_PROVISIONING, ClusterEvent
from hyperpod_nccl.models.findings import Finding, Priority, Resource, Status
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.reads import LIST_CLUSTER_EVENTS
from hyperpod_nccl.references import (
    CLUSTER_EVENTS,
    CLUSTER_INSTANCE_GROUPS,
    CLUSTER_STATUS,
    DBG_EFA_CONFIG,
    NODE_HARDWARE,
    NODE_LIFECYCLE,
    OPS_REMEDIATIONS,
    Reference,
)


@dataclass(frozen=True)
class EventCategory:
    """A family of cluster-event descriptions and the runbook that explains it."""

    name: str
    keywords: tuple[str, ...]
    reference: Reference


# Ordered: the first category whose keyword appears in the description wins.
EVENT_CATEGORIES: tuple[EventCategory, ...] = (
    EventCategory("efa_health_check", ("efa health check", "efa health-check", "efa check"), DBG_EFA_CONFIG),
    EventCategory("network_misconfiguration", ("network misconfiguration", "network config", "eni"), OPS_REMEDIATIONS),
    EventCategory("lifecycle_script", ("lifecycle script", "lifecycle-script", "bootstrap", "lcs"), NODE_LIFECYCLE),
    EventCategory(
        "capacity",
        ("insufficient capacity", "capacity reservation", "failed to provision", "insufficientinstancecapacity"),
        CLUSTER_INSTANCE_GROUPS,
    ),
    EventCategory(
        "hardware", ("hardware failure", "hardware fault", "unhealthy", "health check failed"), NODE_HARDWARE
    ),
    EventCategory("replacement", ("replacement", "replace"), NODE_HARDWARE),
    EventCategory("reboot", ("reboot",), NODE_HARDWARE),
    EventCategory("rollback", ("rollback", "rolled back", "patching", "software update"), CLUSTER_STATUS),
)
_OTHER = EventCategory("other", (), CLUSTER_EVENTS)


def categorise(event: ClusterEvent) -> EventCategory:
    """The infrastructure signal an event description belongs to."""
    text = event.description.lower()
    for category in EVENT_CATEGORIES:
        if any(keyword in text for keyword in category.keywords):
            return category
    return _OTHER


def _is_failure(event: ClusterEvent) -> bool:
    # EventLevel is optional in the API model: without it, the description decides.
    if event.level:
        return event.level.lower() == "error"
    text = event.description.lower()
    return any(word in text for word in ("error", "fail", "timeout", "rollback"))


@check(
    id="cluster.events",
    title="HyperPod cluster events (infrastructure signals)",
    priority=Priority.P1,
    reference=CLUSTER_EVENTS,
    source="control_plane",
    reads=(LIST_CLUSTER_EVENTS,),
)
def cluster_events(inv: Inventory) -> Iterator[Finding]:
    """Error-level events fail, Warn-level events warn, grouped by category and resource."""
    cp = inv.control_plane
    if not cp.events_supported:
        mode = cp.cluster.node_provisioning_mode if cp.cluster else None
        yield cluster_events.info(
            "cluster events not read: this cluster has none to list",
            detail=f"DescribeCluster gives NodeProvisioningMode {mode or 'unset'}; HyperPod keeps structured cluster "
            f"events (ListClusterEvents) only for clusters in {CONTINUOUS_PROVISIONING} mode, so the call was "
            "skipped: infrastructure signals come from node status, logs and probes instead",
        )
        return
    if cp.events is None:
        return
    groups: dict[tuple[str, str, str], list[ClusterEvent]] = defaultdict(list)
    for event in cp.events:
        level = "error" if _is_failure(event) else (event.level or "info").lower()
        resource = event.instance_id or event.instance_group or "cluster"
        groups[(categorise(event).name, level, resource)].append(event)
    reported = 0
    for (category_name, level, resource_id), events in sorted(groups.items()):
        if level not in ("error", "warn"):
            continue
        category = categorise(events[0])
        ordered = sorted(events, key=lambda e: e.event_time)
        resources = []
        first = ordered[0]
        if first.instance_id:
            resources.append(Resource(kind="node", id=first.instance_id))
        if first.instance_group:
            resources.append(Resource(kind="instance_group", id=first.instance_group))
        status = Status.FAIL if level == "error" else Status.WARN
        reported += 1
        yield cluster_events.finding(
            status,
            f"{len(events)} {level} event(s) [{category_name}] on {resource_id}",
            priority=Priority.P1 if status is Status.FAIL else Priority.P2,
            reference=category.reference,
            detail=ordered[-1].description[:300],
            evidence=[
                f"{e.event_time.isoformat()} {e.level or 'level-unknown'} {e.description[:200]}" for e in ordered[-5:]
            ],
            resources=resources,
            fields={
                "signature": category_name,
                "count": len(events),
                "first_seen": ordered[0].event_time.isoformat(),
                "last_seen": ordered[-1].event_time.isoformat(),
            },
        )
    if reported == 0:
        note = "" if cp.events_complete else " (partial: the listing was interrupted)"
        yield cluster_events.passed(
            f"no warning or error cluster events in the window{note}",
            detail="events carry infrastructure state only; NCCL and GPU faults show in logs and probes",
        )
