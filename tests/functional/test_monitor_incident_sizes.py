"""An incident naming 10,000 nodes in the monitor's table: under DynamoDB's 400 KB item limit
(which the emulation enforces on UpdateItem as AWS does), read back whole, and its message fits SNS.

Built as test_monitor_sizes.py builds its 10,000-node cases: the sweep's findings directly (a
watchdog timeout logged on every node of one job) folded by the verdict as Aggregate folds them,
stored through the monitor's own functions.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hyperpod_nccl.models.findings import Finding, Priority, Resource, Status, SweepResult
from hyperpod_nccl.models.inventory import ControlPlaneInventory, Inventory
from hyperpod_nccl.monitor.alert_messages import (
    SNS_MESSAGE_MAX_BYTES,
    build_incident_alert,
    sns_message,
    sns_message_bytes,
)
from hyperpod_nccl.monitor.incident_tracking import _persist, load_incident_sweep, load_stored, record_incidents
from hyperpod_nccl.monitor.store import DYNAMODB_ITEM_MAX_BYTES, INCIDENT_INLINE_MAX_BYTES, cluster_key, incident_sk
from hyperpod_nccl.references import DBG_TIMEOUT_RENDEZVOUS
from hyperpod_nccl.verdict import build_verdict
from hyperpod_nccl_sim.serverless import LocalMonitor
from tests.functional.test_monitor_sizes import HISTORY_SECONDS, REGION, STARTED, deployed  # noqa: F401
from tests.functional.test_monitor_sweep import _store, monitor  # noqa: F401

CLUSTER = "ml-incident-sizes"
NODES = 10_000


def _node(n: int) -> Resource:
    return Resource(kind="node", id=f"i-{n:017x}", name=f"ip-10-{n // 65536}-{n // 256 % 256}-{n % 256}")


def _watchdog(n: int) -> Finding:
    """The watchdog timeout node n's ranks logged: a witness of the job's hang."""
    return Finding(
        check_id="logs.signatures",
        status=Status.FAIL,
        priority=Priority.P1,
        title=f"NCCL watchdog timeout on {_node(n).id}",
        detail="Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE)",
        resources=[_node(n)],
        reference=DBG_TIMEOUT_RENDEZVOUS,
        fields={"signature": "watchdog_timeout", "first_seen": (STARTED - timedelta(minutes=5)).isoformat()},
    )


def _sweep(findings: list[Finding]) -> tuple[SweepResult, Inventory]:
    inventory = Inventory(
        cluster_name=CLUSTER, region=REGION, collected_at=STARTED, window_start=STARTED - timedelta(hours=2),
        window_end=STARTED, control_plane=ControlPlaneInventory(nodes=[]),
    )  # fmt: skip
    result = SweepResult(
        cluster_name=CLUSTER, region=REGION, started_at=STARTED, finished_at=STARTED,
        window_start=inventory.window_start, window_end=STARTED, findings=findings,
        verdict=build_verdict(findings, inventory),
    )  # fmt: skip
    return result, inventory


def _item_bytes(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB counts it, near enough: names plus values (strings, binary)."""
    total = 0
    for name, value in item.items():
        data = value.value if hasattr(value, "value") else value
        total += len(name.encode()) + len(data if isinstance(data, bytes) else str(data).encode())
    return total


def test_an_incident_naming_10000_nodes_stays_under_the_item_limit_and_reads_back_whole(
    deployed: LocalMonitor,  # noqa: F811
) -> None:
    store = _store(deployed)
    result, inventory = _sweep([_watchdog(n) for n in range(NODES)])
    sweep = record_incidents(
        store, sweep_id="sweep-inc-10k", region=REGION, started_at=STARTED, result=result, inventory=inventory,
        open_fingerprints={f.fingerprint for f in result.findings}, cluster_wide=True, history_seconds=HISTORY_SECONDS,
    )  # fmt: skip
    [incident] = sweep.incidents  # one hang, nothing found that explains it: one root cause
    assert incident.id == result.verdict.root_causes[0].id and incident.findings_folded == NODES
    assert len(incident.affected.nodes) == NODES and len(incident.timeline) == NODES
    assert len(incident.model_dump_json()) > DYNAMODB_ITEM_MAX_BYTES  # one item could not hold it

    item = store.get(cluster_key(REGION, CLUSTER), incident_sk(incident.id))
    assert item is not None and _item_bytes(item) < DYNAMODB_ITEM_MAX_BYTES
    assert len(str(item["incident"]).encode()) <= INCIDENT_INLINE_MAX_BYTES and item["incident_body"]
    assert item["title"] == incident.title and item["priority"] == incident.priority.value
    stored = load_stored(store, REGION, CLUSTER)
    assert stored[incident.id].incident == incident and stored[incident.id].status == "open"  # whole
    again = load_incident_sweep(store, sweep.sweep_id)
    assert again is not None and again.incidents == [incident]

    # Its message fits SNS and counts the nodes it does not list.
    [change] = sweep.changes
    arguments = sns_message(build_incident_alert(sweep, change, "https://example.invalid/references"))
    assert sns_message_bytes(arguments) <= SNS_MESSAGE_MAX_BYTES
    assert f"… and {NODES - 10} more" in arguments["Message"]
    deployed.client("sns").publish(TopicArn=deployed.topic_arn, **arguments)  # AWS takes it

    # Written again small, the item holds it inline and names no body any more.
    small = incident.model_copy(
        update={"timeline": incident.timeline[:3], "finding_fingerprints": incident.finding_fingerprints[:3]}
    )
    small = small.model_copy(update={"affected": incident.affected.model_copy(update={"nodes": ["i-1"]})})
    _persist(store, REGION, CLUSTER, "sweep-inc-small", [small], [], expires_at=2_000_000_000)
    item = store.get(cluster_key(REGION, CLUSTER), incident_sk(incident.id))
    assert item is not None and "incident_body" not in item
    assert load_stored(store, REGION, CLUSTER)[incident.id].incident == small
