"""Sweep orchestration: what each state of the sweep state machine does, plus the trigger that
starts it. Handlers parse their input and call exactly one function here.

Flow (monitor/sweep.asl.json): Discover -> Collect (CloudWatch scan | Kubernetes | Map of one
state per node) -> Aggregate -> Notify (only on change) -> FollowUp (folded triggers).
Collector outputs live in the table under the sweep's partition; the state carries only ids.

Per-cluster lock: the trigger takes `CLUSTER#C / LOCK` with a conditional write and a lease
(a crashed sweep cannot block its cluster past the lease). A trigger arriving while the lock
is held is appended to the lock's `pending` list ("folded"); Aggregate consumes pending
triggers atomically and the same execution sweeps once more, or releases the lock. A trigger
finding the lock held by an execution that has already ended (its lock could not be released)
takes it over with the folded triggers, so one failed release costs one sweep, not the lease.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hyperpod_nccl.checks import discover as registered_checks
from hyperpod_nccl.collectors import resolve_orchestrator
from hyperpod_nccl.collectors.aws import AwsClients, error_message
from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.collectors.control_plane import collect_control_plane
from hyperpod_nccl.collectors.kubernetes import collect_kubernetes
from hyperpod_nccl.collectors.logs import collect_logs
from hyperpod_nccl.collectors.node_probes import assemble, plan_probes, probe_node
from hyperpod_nccl.engine import applicable_checks, build_result
from hyperpod_nccl.errors import DiagnosisAborted
from hyperpod_nccl.models.cluster import ControlPlaneInventory
from hyperpod_nccl.models.findings import DegradedSource, Finding, Scope, SweepResult
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.kubernetes import KubernetesInventory
from hyperpod_nccl.models.logs import LogInventory
from hyperpod_nccl.models.node_probe import NodeProbeInventory, NodeProbeResult, ProbePlan, ProbeTarget
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.monitor import task_timeouts
from hyperpod_nccl.monitor.diff import OpenFinding, SweepDiff, compute_changes, open_counts
from hyperpod_nccl.monitor.events import TriggerRequest
from hyperpod_nccl.monitor.failures import describe_aws_failure
from hyperpod_nccl.monitor.incidents import load_incident_sweep, record_incidents
from hyperpod_nccl.monitor.notify import (
    PERMANENT_PUBLISH_ERRORS,
    Alert,
    build_alert,
    build_incident_alert,
    sns_message,
    undeliverable_alert,
)
from hyperpod_nccl.monitor.settings import (
    LOCK_LEASE_SECONDS,
    PROBE_NODE_OUTPUT_MAX_BYTES,
    SCRATCH_RETENTION_SECONDS,
    batch_targets,
)
from hyperpod_nccl.monitor.store import (
    Store,
    cluster_key,
    epoch,
    finding_history_key,
    open_index_key,
    sweep_key,
)

_log = logging.getLogger(__name__)

CONTROL_PLANE = "CONTROL_PLANE"
PLAN = "PLAN"
LOGS = "LOGS"
KUBERNETES = "KUBERNETES"
RESULT = "RESULT"
DIFF = "DIFF"
# A node's probe result: blob `PROBE#<instance id>#<chunk>` under the sweep.
PROBE = "PROBE#"
# At most this much of one node's probe result is stored (JSON bytes, before compression): the
# storage's own bound, whatever the collector read (ProbeNode reads at most
# settings.PROBE_NODE_OUTPUT_MAX_BYTES of a node; raw Flight Recorder dumps past this are dropped).
PROBE_RESULT_MAX_BYTES = 6 << 20
# Alerts a failed Notify left unpublished: `CLUSTER#C / ALERT_PENDING#<sweep id>`, kept a week.
ALERT_PENDING = "ALERT_PENDING#"
PENDING_ALERT_SECONDS = 7 * 24 * 3600
# A pending alert SNS refused permanently (even as a short stand-in): `CLUSTER#C / ALERT_DROPPED#<sweep id>`.
ALERT_DROPPED = "ALERT_DROPPED#"
LOCK = "LOCK"
# The IAM actions the last sweep was denied: `CLUSTER#C / PERMISSION_GAPS` (a new one alerts once).
PERMISSION_GAPS = "PERMISSION_GAPS"
DEFAULT_SINCE_SECONDS = 7200
_LOCK_RACE_ATTEMPTS = 5
# A lock whose execution does not exist this long after it was taken belongs to a trigger that
# failed between taking it and starting the execution (StartExecution takes well under a second).
START_GRACE_SECONDS = 300


class SweepRef(BaseModel):
    """The only thing the state machine carries about a sweep (ids and scope, never results)."""

    sweep_id: str
    execution: str
    cluster: str
    region: str
    node: str | None = None
    triggers: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)
    started_at: datetime
    since_seconds: int = DEFAULT_SINCE_SECONDS
    follow_up: int = 0
    follow_up_of: str | None = None
    # The earlier sweep of this execution whose Aggregate did not finish: a follow-up sweep
    # carries it so that the execution still ends FAILED (sweep.asl.json, state Done).
    after_failure: str | None = None


# How Step Functions names a Lambda task stopped at its timeout: the function's own timeout
# (Lambda ends the invocation: errorType Sandbox.Timedout) or the state's (States.Timeout).
SANDBOX_TIMED_OUT = "Sandbox.Timedout"
TIMEOUT_ERRORS = frozenset({SANDBOX_TIMED_OUT, "States.Timeout"})
_TIMED_OUT_AFTER = re.compile(r"timed out after (\d+(?:\.\d+)?) seconds")


class TaskFailure(BaseModel):
    """A Step Functions Catch result."""

    model_config = ConfigDict(extra="allow")

    Error: str = "States.TaskFailed"
    Cause: str = ""

    @property
    def message(self) -> str:
        """The failure in one line: a Lambda task's cause is its error JSON, whose message (from
        handlers.AwsCallFailed: the failed action and the fix) is what an operator needs."""
        try:
            cause = json.loads(self.Cause)
        except ValueError:
            cause = None
        if isinstance(cause, dict) and cause.get("errorMessage"):
            return f"{cause.get('errorType', self.Error)}: {cause['errorMessage']}"[:500]
        return f"{self.Error}: {self.Cause[:500]}"


class DiscoverOutput(BaseModel):
    """What Discover puts in the state: whether collection can go on and the node ids to probe."""

    discovered: bool
    targets: list[str] = Field(default_factory=list)
    batches: list[list[str]] = Field(default_factory=list, description="the probe Map's items (targets in batches)")
    orchestrator: str = "unknown"
    reason: str | None = None


class ProbeItem(BaseModel):
    """One Map item: one node of one sweep."""

    sweep_id: str
    cluster: str
    region: str
    instance_id: str


class StepOutput(BaseModel):
    """A collector state's tiny result (the data itself is in the table)."""

    source: str
    collected: bool
    degraded: int = 0


class ProbeOutput(BaseModel):
    """A node state's tiny result."""

    instance_id: str
    reachable: bool


class AggregateOutput(BaseModel):
    """Aggregate's result: whether to notify, and the follow-up sweep if triggers were folded."""

    sweep_id: str
    status: Literal["complete", "partial", "failed"]
    notify: bool
    follow_up: bool = False
    next: SweepRef | None = None
    changes: int = 0
    incident_changes: int = 0
    open_by_priority: dict[str, int] = Field(default_factory=dict)
    nodes_probed: int = 0
    nodes_unreachable: int = 0
    duration_seconds: float = 0.0


class SweepState(BaseModel):
    """The state machine's state as Aggregate and Notify receive it."""

    model_config = ConfigDict(extra="ignore")

    sweep: SweepRef
    discover: DiscoverOutput | None = None
    failure: TaskFailure | None = None
    aggregate: AggregateOutput | None = None
    aggregate_error: TaskFailure | None = None


class NotifyOutput(BaseModel):
    """Notify's result."""

    published: bool
    message_id: str | None = None
    reason: str = ""
    incident_messages: int = Field(default=0, description="incident messages published by this attempt")
    earlier_alerts: int = Field(default=0, description="messages of earlier sweeps that had stayed unpublished")
    dropped_alerts: int = Field(default=0, description="earlier alerts SNS refused for good, dropped with a record")


class TriggerOutcome(BaseModel):
    """What the trigger did with one request."""

    trigger_id: str
    cluster: str
    status: Literal["started", "folded", "duplicate"]
    sweep_id: str


# --- shared helpers --------------------------------------------------------------------------


def request_for(ref: SweepRef, coverage: int | Literal["all"]) -> DiagnoseRequest:
    """The engine request of a sweep: the cluster, the node a trigger named, the coverage."""
    scope = Scope(node=ref.node, sample_nodes=coverage, since_seconds=ref.since_seconds)
    return DiagnoseRequest(cluster=ref.cluster, region=ref.region, scope=scope)


def context_for(ref: SweepRef, aws: AwsClients, coverage: int | Literal["all"]) -> CollectionContext:
    """Every state of one sweep shares its start time, so windows agree across Lambdas."""
    return CollectionContext(request=request_for(ref, coverage), aws=aws, now=ref.started_at)


def _expiry(ref: SweepRef, seconds: int) -> int:
    return epoch(ref.started_at) + seconds


def _store_degraded(store: Store, ref: SweepRef, step: str, degraded: Iterable[DegradedSource]) -> int:
    items = [d.model_dump(mode="json") for d in degraded]
    store.put_scratch(ref.sweep_id, f"DEGRADED#{step}", items, now=ref.started_at)
    return len(items)


def _load_control_plane(store: Store, sweep_id: str) -> ControlPlaneInventory | None:
    text = store.get_blob(sweep_key(sweep_id), CONTROL_PLANE)
    return None if text is None else ControlPlaneInventory.model_validate_json(text)


def _load_ref(store: Store, sweep_id: str) -> SweepRef:
    raw = store.get_scratch(sweep_id, "REQUEST")
    if raw is None:
        raise LookupError(f"sweep {sweep_id} has no stored request (Discover did not run)")
    return SweepRef.model_validate(raw)


# --- states ----------------------------------------------------------------------------------


def run_discover(ref: SweepRef, store: Store, aws: AwsClients, coverage: int | Literal["all"]) -> DiscoverOutput:
    """Discover: the control plane and the probe plan, stored; the node ids, returned."""
    store.put_scratch(ref.sweep_id, "REQUEST", ref.model_dump(mode="json"), now=ref.started_at)
    ctx = context_for(ref, aws, coverage)
    try:
        control_plane = collect_control_plane(ctx)
    except DiagnosisAborted as aborted:
        reason = f"{aborted.message}; fix: {aborted.fix}"
        store.put_scratch(ref.sweep_id, "ABORTED", {"reason": reason}, now=ref.started_at)
        return DiscoverOutput(discovered=False, reason=reason)
    cluster = control_plane.cluster
    orchestrator = resolve_orchestrator(ctx, cluster.orchestrator if cluster else "unknown")
    if cluster is not None and cluster.orchestrator != orchestrator:
        control_plane = control_plane.model_copy(
            update={"cluster": cluster.model_copy(update={"orchestrator": orchestrator})}
        )
    plan = plan_probes(ctx, control_plane)
    pk = sweep_key(ref.sweep_id)
    expires = _expiry(ref, 2 * 24 * 3600)
    store.put_blob(pk, CONTROL_PLANE, control_plane.model_dump_json(), expires_at=expires)
    store.put_blob(pk, PLAN, plan.model_dump_json(), expires_at=expires)
    store.put_many(
        [
            {"pk": pk, "sk": f"TARGET#{t.instance_id}", "json": t.model_dump_json(), "expires_at": expires}
            for t in plan.targets
        ]
    )
    _store_degraded(store, ref, "discover", ctx.degraded)
    targets = [t.instance_id for t in plan.targets]
    return DiscoverOutput(
        discovered=True, targets=targets, batches=batch_targets(targets), orchestrator=str(orchestrator)
    )


def run_collect_logs(ref: SweepRef, store: Store, aws: AwsClients, coverage: int | Literal["all"]) -> StepOutput:
    """CloudWatch scan state: collect_logs over the stored control plane; result stored."""
    return _run_collector(ref, store, aws, coverage, "logs", LOGS)


def run_collect_kubernetes(ref: SweepRef, store: Store, aws: AwsClients, coverage: int | Literal["all"]) -> StepOutput:
    """Kubernetes state: collect_kubernetes over the stored control plane; result stored."""
    return _run_collector(ref, store, aws, coverage, "kubernetes", KUBERNETES)


def _run_collector(
    ref: SweepRef, store: Store, aws: AwsClients, coverage: int | Literal["all"], source: str, blob: str
) -> StepOutput:
    control_plane = _load_control_plane(store, ref.sweep_id)
    if control_plane is None:
        raise LookupError(f"sweep {ref.sweep_id} has no stored control plane (Discover did not run)")
    ctx = context_for(ref, aws, coverage)
    collector = collect_logs if source == "logs" else collect_kubernetes
    collected: BaseModel | None = collector(ctx, control_plane)
    text = "null" if collected is None else collected.model_dump_json()
    store.put_blob(sweep_key(ref.sweep_id), blob, text, expires_at=_expiry(ref, 2 * 24 * 3600))
    count = _store_degraded(store, ref, source, ctx.degraded)
    return StepOutput(source=source, collected=collected is not None, degraded=count)


def run_probe_node(
    item: ProbeItem,
    store: Store,
    aws: AwsClients,
    coverage: int | Literal["all"],
    probe_documents: dict[str, str] | None = None,
) -> ProbeOutput:
    """One node's state: probe it (never raises) and store the result under the sweep.

    `probe_documents` are the stack's Session documents by probe role (settings.PROBE_DOCUMENTS_ENV);
    a role without one uses the AWS managed document (the function's role may not allow it)."""
    ref = _load_ref(store, item.sweep_id)
    stored = store.get(sweep_key(item.sweep_id), f"TARGET#{item.instance_id}")
    if stored is None:
        result = NodeProbeResult(
            instance_id=item.instance_id, reachable=False, error="node was not in the sweep's plan"
        )
    else:
        ctx = context_for(ref, aws, coverage)
        ctx.probe_output_max_bytes = PROBE_NODE_OUTPUT_MAX_BYTES
        ctx.probe_documents = dict(probe_documents or {})
        result = probe_node(ctx, ProbeTarget.model_validate_json(stored["json"]))
        if ctx.degraded:
            _store_degraded(store, ref, f"probe#{item.instance_id}", ctx.degraded)
    store_probe_result(store, ref, result)
    return ProbeOutput(instance_id=item.instance_id, reachable=result.reachable)


def bounded_probe_result(result: NodeProbeResult, max_bytes: int = PROBE_RESULT_MAX_BYTES) -> NodeProbeResult:
    """`result` with at most `max_bytes` of JSON. Only raw Flight Recorder dumps are ever dropped,
    oldest first, each one marked (`not_stored`, shown with the hang evidence); every parsed
    section the checks read is kept."""
    if result.probe is None or len(result.model_dump_json().encode()) <= max_bytes:
        return result
    dumps = [d.model_copy() for d in result.probe.flight_recorder_dumps]
    probe = result.probe.model_copy(update={"flight_recorder_dumps": dumps})
    bounded = result.model_copy(update={"probe": probe})
    size = len(bounded.model_dump_json().encode())
    for dump in sorted(dumps, key=lambda d: d.modified_epoch or 0.0):
        if size <= max_bytes:
            break
        size -= len(dump.data_base64)
        dump.not_stored = (
            f"flight recorder dump truncated: {dump.size_bytes} bytes not stored (the monitor keeps at most "
            f"{max_bytes // (1 << 20)} MiB of one node's probe result); read it on the node"
        )
        dump.data_base64 = ""
    return bounded


def store_probe_result(store: Store, ref: SweepRef, result: NodeProbeResult) -> None:
    """A node's result as a compressed blob in chunks under the item limit (a node with real Flight
    Recorder dumps returns megabytes); what did not fit the bound is named as a degraded source."""
    bounded = bounded_probe_result(result)
    dropped = [d for d in (bounded.probe.flight_recorder_dumps if bounded.probe else []) if d.not_stored]
    if dropped:
        why = DegradedSource(
            source=f"node probe {result.instance_id}",
            reason=f"flight recorder dump truncated: {len(dropped)} dump(s) over the per-node storage bound not stored",
            fix="read the dumps on the node (TORCH_NCCL_DEBUG_INFO_TEMP_FILE) or run the CLI's diagnose on it",
            partial=True,
        )
        _store_degraded(store, ref, f"store#{result.instance_id}", [why])
    expires = epoch(ref.started_at) + SCRATCH_RETENTION_SECONDS
    store.put_blob(
        sweep_key(ref.sweep_id), f"{PROBE}{result.instance_id}", bounded.model_dump_json(), expires_at=expires
    )


def load_probe_results(store: Store, sweep_id: str) -> dict[str, NodeProbeResult]:
    """The stored node results of a sweep by instance id, read with one query (blobs, and the plain
    JSON items of a sweep started before probe results were chunked)."""
    results: dict[str, NodeProbeResult] = {}
    for raw in store.scratch_items(sweep_id, PROBE):
        result = NodeProbeResult.model_validate(raw)
        results[result.instance_id] = result
    for text in store.blobs(sweep_key(sweep_id), PROBE).values():
        try:
            result = NodeProbeResult.model_validate_json(text)
        except ValidationError:
            continue  # unreadable: the node counts as not stored, like a probe that never finished
        results[result.instance_id] = result
    return results


# --- aggregate -------------------------------------------------------------------------------


def _missing(source: str, why: str) -> DegradedSource:
    return DegradedSource(
        source=source,
        reason=why,
        fix="see the sweep execution's history in Step Functions and the function's logs; the next sweep retries",
        partial=True,
    )


def _load_optional(store: Store, sweep_id: str, blob: str, model: type[BaseModel]) -> tuple[bool, Any]:
    text = store.get_blob(sweep_key(sweep_id), blob)
    if text is None:
        return False, None
    return True, None if text == "null" else model.model_validate_json(text)


def build_inventory(store: Store, ref: SweepRef) -> tuple[Inventory, list[DegradedSource]] | None:
    """The Inventory of a sweep from the table, and every degraded source (None without a
    control plane: discovery never completed)."""
    control_plane = _load_control_plane(store, ref.sweep_id)
    if control_plane is None:
        return None
    pk = sweep_key(ref.sweep_id)
    plan_text = store.get_blob(pk, PLAN)
    plan = ProbePlan.model_validate_json(plan_text) if plan_text else ProbePlan()
    degraded = [
        DegradedSource.model_validate(d) for batch in store.scratch_items(ref.sweep_id, "DEGRADED#") for d in batch
    ]
    logs_done, logs = _load_optional(store, ref.sweep_id, LOGS, LogInventory)
    if not logs_done:
        degraded.append(_missing("CloudWatch scan", "the CloudWatch scan state failed or timed out"))
    kube_done, kube = _load_optional(store, ref.sweep_id, KUBERNETES, KubernetesInventory)
    if not kube_done:
        degraded.append(_missing("Kubernetes", "the Kubernetes state failed or timed out"))
    stored = load_probe_results(store, ref.sweep_id)
    results = []
    for target in plan.targets:
        result = stored.get(target.instance_id)
        if result is None:
            result = NodeProbeResult(
                instance_id=target.instance_id,
                reachable=False,
                error="the node's probe state failed or timed out before storing a result",
            )
        results.append(result)
    node_probes: NodeProbeInventory | None = assemble(plan, results) if plan.targets or plan.skipped else None
    cluster = control_plane.cluster
    now = ref.started_at
    inventory = Inventory(
        cluster_name=cluster.name if cluster else ref.cluster,
        region=ref.region,
        orchestrator=cluster.orchestrator if cluster else "unknown",
        scope=request_for(ref, "all").scope,
        collected_at=now,
        window_start=now - timedelta(seconds=ref.since_seconds),
        window_end=now,
        control_plane=control_plane,
        logs=logs,
        node_probes=node_probes,
        kubernetes=kube,
    )
    return inventory, degraded


def re_evaluation_rule(inventory: Inventory) -> Any:
    """A predicate: was this previously open finding evaluated again in this sweep?

    Its check must have run; a node-probe finding also needs one of its nodes probed (an
    unreachable or unsampled node says nothing about whether its fault is gone)."""
    ran = {c.meta.id for c in applicable_checks(inventory)}
    checks = registered_checks()
    probed = set(inventory.node_probes.probed_instance_ids) if inventory.node_probes else set()

    def re_evaluated(finding: Finding) -> bool:
        if finding.check_id not in ran:
            return False
        meta = checks[finding.check_id].meta
        nodes = [r.id for r in finding.resources if r.kind == "node"]
        if meta.source == "node_probes" and nodes:
            return any(n in probed for n in nodes)
        if inventory.scope.node and nodes:
            return inventory.scope.node in nodes
        return True

    return re_evaluated


def _previous_open(store: Store, ref: SweepRef) -> list[OpenFinding]:
    found = []
    for item in store.open_findings(ref.region, ref.cluster):
        found.append(
            OpenFinding(
                fingerprint=item["sk"].split("#", 1)[1],
                finding=Finding.model_validate_json(item["finding"]),
                first_seen=datetime.fromisoformat(item["first_seen"]),
                last_seen=datetime.fromisoformat(item["last_seen"]),
                occurrences=int(item.get("occurrences", 1)),
            )
        )
    return found


def _permission_gaps(store: Store, ref: SweepRef, degraded: list[DegradedSource]) -> tuple[list[str], set[str]]:
    """(actions denied now and not in the last sweep, the set to remember). A lost permission is
    told once, when it is lost; throttling and outages come and go and stay in the sweep record."""
    item = store.get(cluster_key(ref.region, ref.cluster), PERMISSION_GAPS)
    known: set[str] = set(json.loads(item["actions"])) if item else set()
    denied = {d.missing_action for d in degraded if d.missing_action}
    # A node-scoped sweep reads less: it can add gaps but not clear the others.
    remembered = denied if ref.node is None else denied | known
    return sorted(denied - known), remembered


def _store_diff(store: Store, diff: SweepDiff, history_seconds: int) -> SweepDiff:
    """Store the diff once; a retried Aggregate reuses the first attempt's diff (whose updates
    it may already have applied) instead of computing an empty one."""
    pk = sweep_key(diff.sweep_id)
    if store.put_blob(
        pk, DIFF, diff.model_dump_json(), expires_at=epoch(diff.started_at) + history_seconds, only_if_new=True
    ):
        return diff
    text = store.get_blob(pk, DIFF)
    return diff if text is None else SweepDiff.model_validate_json(text)


def _persist_findings(store: Store, ref: SweepRef, result: SweepResult, diff: SweepDiff, history_seconds: int) -> None:
    """Findings history, occurrences and node/GPU fault history; each write conditional on the
    sweep id, so a retry adds nothing."""
    ck = cluster_key(ref.region, ref.cluster)
    now = (result.finished_at or ref.started_at).isoformat()
    stamp = ref.started_at.isoformat()
    expires = epoch(ref.started_at) + history_seconds
    current: dict[str, Finding] = {}
    for finding in result.issues:
        current.setdefault(finding.fingerprint, finding)
    # Per-node and per-GPU fault history: one item per resource (10,000 for a finding naming every
    # node), written in batches; each key names the sweep and the finding, so a retry rewrites
    # the same items.
    faults: list[dict[str, Any]] = []
    for fingerprint, finding in current.items():
        priority = finding.priority.value if finding.priority else "none"
        inline, body = store.put_finding_body(ref.region, ref.cluster, fingerprint, finding, ref.sweep_id, expires)
        store.update_if(
            ck,
            f"FINDING#{fingerprint}",
            UpdateExpression=(
                "SET finding = :finding, finding_body = :body, check_id = :check, priority = :priority, "
                "title = :title, #state = :open, last_seen = :now, last_sweep_id = :sweep, gsi1pk = :openpk, "
                "gsi1sk = :opensk, first_seen = if_not_exists(first_seen, :now) ADD occurrences :one "
                "REMOVE resolved_at"
            ),
            ConditionExpression="attribute_not_exists(last_sweep_id) OR last_sweep_id <> :sweep",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={
                ":finding": inline,
                ":body": body,
                ":check": finding.check_id,
                ":priority": priority,
                ":title": finding.title,
                ":open": "open",
                ":now": now,
                ":sweep": ref.sweep_id,
                ":openpk": open_index_key(ref.region, ref.cluster),
                ":opensk": f"{priority}#{fingerprint}",
                ":one": 1,
            },
        )
        store.put_new(
            {
                "pk": finding_history_key(ref.region, ref.cluster, fingerprint),
                "sk": f"OCC#{stamp}#{ref.sweep_id}",
                "priority": priority,
                "status": finding.status.value,
                "expires_at": expires,
            }
        )
        faults.extend(
            {
                "pk": f"{'NODE' if resource.kind == 'node' else 'GPU'}#{resource.id}",
                "sk": f"FAULT#{stamp}#{ref.sweep_id}#{fingerprint}",
                "check_id": finding.check_id,
                "priority": priority,
                "title": finding.title,
                "cluster": ref.cluster,
                "region": ref.region,
                "expires_at": expires,
            }
            for resource in finding.resources
            if resource.kind in ("node", "gpu")
        )
    if faults:
        store.put_many(faults)
    for change in diff.of_kind("resolved"):
        store.update_if(
            ck,
            f"FINDING#{change.fingerprint}",
            UpdateExpression=(
                "SET #state = :resolved, resolved_at = :now, resolved_sweep_id = :sweep REMOVE gsi1pk, gsi1sk"
            ),
            ConditionExpression="#state = :open",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={
                ":resolved": "resolved",
                ":open": "open",
                ":now": now,
                ":sweep": ref.sweep_id,
            },
        )


def _record_sweep(
    store: Store,
    ref: SweepRef,
    status: str,
    diff: SweepDiff,
    finished_at: datetime,
    history_seconds: int,
) -> float:
    duration = max(0.0, (finished_at - ref.started_at).total_seconds())
    store.put(
        {
            "pk": cluster_key(ref.region, ref.cluster),
            "sk": f"SWEEP#{ref.started_at.isoformat()}#{ref.sweep_id}",
            "sweep_id": ref.sweep_id,
            "execution": ref.execution,
            "status": status,
            "started_at": ref.started_at.isoformat(),
            "finished_at": finished_at.isoformat(),
            "duration_seconds": str(round(duration, 3)),
            "coverage": diff.coverage.model_dump_json(),
            "open_by_priority": json.dumps(diff.open_by_priority),
            "changes": len(diff.changes),
            "degraded_sources": json.dumps([d.model_dump(mode="json") for d in diff.degraded_sources]),
            "triggers": ref.triggers,
            "node": ref.node or "",
            "failure": diff.failure or "",
            "expires_at": epoch(ref.started_at) + history_seconds,
        }
    )
    return duration


def aggregate_failure_text(error: TaskFailure) -> str:
    """What the sweep record and the alert say of an Aggregate task that did not finish: how
    long it ran when it was stopped at its timeout, else the error that escaped it."""
    if error.Error not in TIMEOUT_ERRORS:
        return f"Aggregate failed: {error.message}"
    # Lambda's cause names its timeout; a state timeout has none (then the definition's, which
    # is also the function's: monitor.task_timeouts).
    match = _TIMED_OUT_AFTER.search(error.Cause)
    seconds = float(match.group(1)) if match else float(task_timeouts()["aggregate"])
    return (
        f"Aggregate timed out after {seconds:g} s ({error.Error}): the aggregate function was stopped before it "
        "finished; see its logs and the execution's history"
    )


def _failure_text(state: SweepState) -> str | None:
    if state.discover is not None and not state.discover.discovered:
        return state.discover.reason or "discovery failed"
    if state.failure is not None and state.discover is None:
        return f"Discover failed: {state.failure.message}"
    return None


def run_aggregate(
    state: SweepState,
    store: Store,
    *,
    history_seconds: int,
    now: datetime | None = None,
) -> AggregateOutput:
    """Aggregate: inventory from the table, the CLI's engine, history, diff, lock hand-over.

    Whatever fails on the way (a table read, a findings update, a bug in a check) still ends
    with a stored sweep record marked failed naming the cause, a diff Notify reports, and the
    lock handed over; only a failure of those last writes themselves escapes.

    Given `state.aggregate_error` (state RecordAggregateFailure: the Aggregate task was killed
    at its timeout, or an error escaped it), it only records why the sweep failed
    (`_aggregate_did_not_finish`)."""
    now = now or datetime.now(UTC)
    if state.aggregate_error is not None:
        return _aggregate_did_not_finish(state, state.aggregate_error, store, history_seconds=history_seconds, now=now)
    try:
        return _aggregate(state, store, history_seconds=history_seconds, now=now)
    except Exception as error:  # noqa: BLE001 - recorded below; re-raised if even that fails
        failure = f"Aggregate failed: {describe_aws_failure('aggregate', error, (store.table.meta.client,))}"
        return _aggregate_failed(state, store, failure, history_seconds=history_seconds, now=now)


def _failed_diff(ref: SweepRef, failure: str, now: datetime) -> SweepDiff:
    return SweepDiff(
        sweep_id=ref.sweep_id, cluster=ref.cluster, region=ref.region, started_at=ref.started_at,
        finished_at=now, failure=failure,
    )  # fmt: skip


def _aggregate_did_not_finish(
    state: SweepState, error: TaskFailure, store: Store, *, history_seconds: int, now: datetime
) -> AggregateOutput:
    """The Aggregate of this sweep was stopped anywhere on its way. Before its diff was stored it
    had written nothing of the findings; after, the diff is its write-ahead record, and the
    findings writes it had started are completed from it (each is conditional on the sweep id,
    so what was already written is not counted twice): the table then matches what the alert
    announces, and the next sweep announces nothing twice. The sweep is on record as failed
    first, so that even if this too is stopped, the record and the alert say why."""
    ref = state.sweep
    failure = aggregate_failure_text(error)
    _record_sweep(store, ref, "failed", _failed_diff(ref, failure, now), now, history_seconds)
    pk = sweep_key(ref.sweep_id)
    diff_text, result_text = store.get_blob(pk, DIFF), store.get_blob(pk, RESULT)
    if diff_text is not None and result_text is not None:
        diff = SweepDiff.model_validate_json(diff_text)
        if diff.failure is None:
            result = SweepResult.model_validate_json(result_text)
            _, gaps = _permission_gaps(store, ref, diff.degraded_sources)
            _apply_diff(store, ref, result, diff, gaps, history_seconds)
    # A follow-up sweep of triggers folded in meanwhile still runs; the execution ends FAILED.
    marked = ref.model_copy(update={"after_failure": ref.after_failure or ref.sweep_id})
    return _aggregate_failed(
        state.model_copy(update={"sweep": marked}), store, failure, history_seconds=history_seconds, now=now
    )


def _apply_diff(
    store: Store, ref: SweepRef, result: SweepResult, diff: SweepDiff, gaps: set[str], history_seconds: int
) -> None:
    """The table writes a stored diff stands for: the permissions denied now, the findings."""
    store.put({"pk": cluster_key(ref.region, ref.cluster), "sk": PERMISSION_GAPS, "actions": json.dumps(sorted(gaps))})
    _persist_findings(store, ref, result, diff, history_seconds)


def _aggregate_failed(
    state: SweepState, store: Store, failure: str, *, history_seconds: int, now: datetime
) -> AggregateOutput:
    ref = state.sweep
    failed = _failed_diff(ref, failure, now)
    stored = _store_diff(store, failed, history_seconds)
    if stored is not failed:
        # The diff was stored before the failure (its changes may be partly applied): keep its
        # changes for Notify, and say that the sweep did not complete.
        stored = stored.model_copy(update={"failure": failure})
        store.put_blob(
            sweep_key(ref.sweep_id), DIFF, stored.model_dump_json(), expires_at=epoch(ref.started_at) + history_seconds
        )
    duration = _record_sweep(store, ref, "failed", stored, now, history_seconds)
    follow = finish_sweep(store, ref, now)
    return AggregateOutput(
        sweep_id=ref.sweep_id, status="failed", notify=True, follow_up=follow is not None, next=follow,
        changes=len(stored.changes), duration_seconds=duration,
    )  # fmt: skip


def _aggregate(state: SweepState, store: Store, *, history_seconds: int, now: datetime) -> AggregateOutput:
    ref = state.sweep
    failure = _failure_text(state)
    built = None if failure else build_inventory(store, ref)
    if built is None:
        failure = failure or "discovery stored no control plane"
        diff = SweepDiff(
            sweep_id=ref.sweep_id, cluster=ref.cluster, region=ref.region, started_at=ref.started_at,
            finished_at=now, failure=failure,
        )  # fmt: skip
        diff = _store_diff(store, diff, history_seconds)
        duration = _record_sweep(store, ref, "failed", diff, now, history_seconds)
        follow = finish_sweep(store, ref, now)
        return AggregateOutput(
            sweep_id=ref.sweep_id, status="failed", notify=True, follow_up=follow is not None, next=follow,
            duration_seconds=duration,
        )  # fmt: skip
    inventory, degraded = built
    if state.failure is not None:
        degraded.append(_missing("collectors", f"the Collect state failed: {state.failure.Error}"))
    result = build_result(inventory, degraded, ref.started_at)
    store.put_blob(
        sweep_key(ref.sweep_id), RESULT, result.model_dump_json(), expires_at=epoch(ref.started_at) + history_seconds
    )
    new_gaps, gaps = _permission_gaps(store, ref, result.degraded_sources)
    changes, kept_open = compute_changes(
        _previous_open(store, ref), result.findings, re_evaluated=re_evaluation_rule(inventory)
    )
    diff = SweepDiff(
        sweep_id=ref.sweep_id,
        cluster=ref.cluster,
        region=ref.region,
        cluster_arn=result.cluster_arn,
        started_at=ref.started_at,
        finished_at=result.finished_at,
        changes=changes,
        open_by_priority=open_counts(result.findings),
        coverage=result.coverage,
        degraded_sources=result.degraded_sources,
        kept_open=kept_open,
        new_permission_gaps=new_gaps,
    )
    diff = _store_diff(store, diff, history_seconds)
    _apply_diff(store, ref, result, diff, gaps, history_seconds)
    # Incidents join the same result and inventory the CLI's `incidents` joins; a finding kept
    # open (its node unprobed this time) keeps its incident open too.
    incidents = record_incidents(
        store,
        sweep_id=ref.sweep_id,
        region=ref.region,
        started_at=ref.started_at,
        result=result,
        inventory=inventory,
        open_fingerprints={f.fingerprint for f in result.issues} | set(diff.kept_open),
        cluster_wide=ref.node is None,
        history_seconds=history_seconds,
    )
    status: Literal["complete", "partial"] = "partial" if result.degraded_sources else "complete"
    duration = _record_sweep(store, ref, status, diff, now, history_seconds)
    follow = finish_sweep(store, ref, now)
    return AggregateOutput(
        sweep_id=ref.sweep_id,
        status=status,
        notify=diff.worth_notifying or bool(incidents.changes) or alerts_pending(store, ref),
        follow_up=follow is not None,
        next=follow,
        changes=len(diff.changes),
        incident_changes=len(incidents.changes),
        open_by_priority=diff.open_by_priority,
        nodes_probed=result.coverage.nodes_probed,
        nodes_unreachable=result.coverage.nodes_unreachable,
        duration_seconds=duration,
    )


# --- notify ----------------------------------------------------------------------------------


def run_notify(state: SweepState, store: Store, sns: Any, *, topic_arn: str, base_url: str) -> NotifyOutput:
    """Notify: publish the stored diff once (a retried Notify does not publish twice).

    An alert still unpublished when this attempt fails (an SNS outage outlasting the task's
    retries fails the execution) is kept as pending under the cluster; the next sweep's Notify
    publishes it, once (the same per-sweep markers), so no alert is lost.

    Order and isolation: earlier pending alerts go first, oldest first, then this sweep's. None
    blocks another. An earlier alert that fails again stays pending when the failure may pass
    (outage, throttling, a permission to fix) and is dropped with a record when it cannot (SNS
    refuses that very message): either way this sweep's alert is still published. A message SNS
    refuses outright is replaced by a short stand-in saying so (`_publish`), so a refusal reaches
    the channel instead of retrying for a week."""
    ref = state.sweep
    failure = aggregate_failure_text(state.aggregate_error) if state.aggregate_error else None
    ck = cluster_key(ref.region, ref.cluster)
    own = f"{ALERT_PENDING}{ref.sweep_id}"
    pending = _pending_alerts(store, ck)
    earlier = dropped = 0
    for item in sorted((i for i in pending if i["sk"] != own), key=_pending_order):
        sent, gone = _publish_pending(item, store, sns, topic_arn=topic_arn, base_url=base_url)
        earlier, dropped = earlier + sent, dropped + gone
    try:
        output = _publish_sweep(ref, _diff_to_notify(store, ref, failure), store, sns, topic_arn, base_url)
    except Exception:
        _keep_pending(store, ref, failure)
        raise
    if any(item["sk"] == own for item in pending):
        store.delete(ck, own)  # an earlier attempt of this Notify had left it
    return output.model_copy(update={"earlier_alerts": earlier, "dropped_alerts": dropped})


def _pending_order(item: dict[str, Any]) -> str:
    """Oldest sweep first; an unreadable item sorts first and is dropped there."""
    try:
        return SweepRef.model_validate_json(item["ref"]).started_at.isoformat()
    except (ValidationError, KeyError, TypeError):
        return ""


def _permanent(error: BaseException) -> bool:
    """A publish failure that every retry of the same message gets again: SNS refused the message
    itself (too long, an invalid parameter), or the pending item cannot be read."""
    if isinstance(error, ClientError):
        return error.response.get("Error", {}).get("Code") in PERMANENT_PUBLISH_ERRORS
    return isinstance(error, ValidationError | KeyError)


def _publish(sns: Any, topic_arn: str, alert: Alert) -> dict[str, Any]:
    """Publish `alert` (fitted to SNS's limits by `sns_message`); when SNS still refuses that
    message permanently, publish its short stand-in instead (`undeliverable_alert`)."""
    try:
        response: dict[str, Any] = sns.publish(TopicArn=topic_arn, **sns_message(alert))
    except ClientError as error:
        if not _permanent(error):
            raise
        reason = error_message(error)
        _log.warning("SNS refused an alert; publishing its stand-in", extra={"reason": reason})
        response = sns.publish(TopicArn=topic_arn, **sns_message(undeliverable_alert(alert, reason)))
    return response


def _diff_to_notify(store: Store, ref: SweepRef, failure: str | None) -> SweepDiff:
    text = store.get_blob(sweep_key(ref.sweep_id), DIFF)
    if text is not None:
        stored = SweepDiff.model_validate_json(text)
        # A diff stored by an Aggregate that was then stopped does not know it failed.
        return stored if failure is None or stored.failure else stored.model_copy(update={"failure": failure})
    return SweepDiff(
        sweep_id=ref.sweep_id, cluster=ref.cluster, region=ref.region, started_at=ref.started_at,
        failure=failure or "Aggregate failed: no diff stored",
    )  # fmt: skip


def _keep_pending(store: Store, ref: SweepRef, failure: str | None) -> None:
    """Remember that this sweep's alerts may be unpublished (best effort: when the table is what
    fails, the execution's failure and its alarm are what remains)."""
    with contextlib.suppress(Exception):  # the publish error is the one to report
        store.put(
            {
                "pk": cluster_key(ref.region, ref.cluster),
                "sk": f"{ALERT_PENDING}{ref.sweep_id}",
                "ref": ref.model_dump_json(),
                "failure": failure or "",
                "expires_at": epoch(ref.started_at) + PENDING_ALERT_SECONDS,
            }
        )


def _publish_pending(item: dict[str, Any], store: Store, sns: Any, *, topic_arn: str, base_url: str) -> tuple[int, int]:
    """Publish what an earlier sweep could not (each message once), then forget it: (messages
    sent, alerts dropped). Never raises, so that no earlier alert blocks a later one: a failure
    that may pass leaves it pending for the next sweep; a permanent one drops it, with a record
    under the cluster (`ALERT_DROPPED#<sweep id>`) and a warning in the function's log."""
    try:
        ref = SweepRef.model_validate_json(item["ref"])
        diff = _diff_to_notify(store, ref, item.get("failure") or None).model_copy(update={"delivered_late": True})
        output = _publish_sweep(ref, diff, store, sns, topic_arn, base_url)
    except Exception as error:  # noqa: BLE001 - kept or dropped below, never raised
        reason = error_message(error)
        if not _permanent(error):
            _log.warning("an earlier alert is still unpublished; kept for the next sweep", extra={"reason": reason})
            return 0, 0
        _log.error("an earlier alert can never be published; dropped", extra={"reason": reason, "key": item["sk"]})
        with contextlib.suppress(ClientError, BotoCoreError):  # the log line above remains
            store.put(
                {
                    "pk": item["pk"],
                    "sk": ALERT_DROPPED + str(item["sk"]).removeprefix(ALERT_PENDING),
                    "reason": reason[:1000],
                    "ref": str(item.get("ref", ""))[:10_000],
                    "expires_at": int(item.get("expires_at") or 0),
                }
            )
            store.delete(item["pk"], item["sk"])
        return 0, 1
    store.delete(item["pk"], item["sk"])
    return output.incident_messages + (1 if output.message_id else 0), 0


def _pending_alerts(store: Store, ck: str) -> list[dict[str, Any]]:
    """Alerts earlier Notify attempts left unpublished; none when the table cannot be read (they
    stay stored for the next sweep: reading them must not cost this sweep its own alert)."""
    try:
        return list(store.query(ck, ALERT_PENDING))
    except (ClientError, BotoCoreError):
        return []


def alerts_pending(store: Store, ref: SweepRef) -> bool:
    """An earlier sweep of the cluster left alerts unpublished (Notify must run)."""
    return bool(_pending_alerts(store, cluster_key(ref.region, ref.cluster)))


def _publish_sweep(
    ref: SweepRef, diff: SweepDiff, store: Store, sns: Any, topic_arn: str, base_url: str
) -> NotifyOutput:
    incident_messages = _publish_incidents(ref, store, sns, topic_arn=topic_arn, base_url=base_url)
    if not diff.worth_notifying:
        reason = f"{incident_messages} incident messages" if incident_messages else "nothing changed"
        return NotifyOutput(published=incident_messages > 0, reason=reason, incident_messages=incident_messages)
    marker: dict[str, Any] = {
        "pk": sweep_key(ref.sweep_id),
        "sk": "NOTIFIED",
        "expires_at": epoch(ref.started_at) + 7 * 24 * 3600,
    }
    if not store.put_new(marker):
        return NotifyOutput(
            published=incident_messages > 0,
            reason="already published for this sweep",
            incident_messages=incident_messages,
        )
    try:
        response = _publish(sns, topic_arn, build_alert(diff, base_url))
    except Exception:
        store.delete(marker["pk"], marker["sk"])  # let the Retry publish it
        raise
    return NotifyOutput(
        published=True,
        message_id=response.get("MessageId"),
        reason=f"{len(diff.changes)} changes",
        incident_messages=incident_messages,
    )


def _publish_incidents(ref: SweepRef, store: Store, sns: Any, *, topic_arn: str, base_url: str) -> int:
    """One message per new, changed or resolved incident, each at most once per sweep (a marker
    per incident: a Retry after a failed publish sends only what was not sent)."""
    sweep = load_incident_sweep(store, ref.sweep_id)
    if sweep is None:
        return 0
    published = 0
    for change in sorted(sweep.changes, key=lambda c: (c.incident.priority.rank, c.incident.id)):
        marker: dict[str, Any] = {
            "pk": sweep_key(ref.sweep_id),
            "sk": f"NOTIFIED#INCIDENT#{change.incident.id}",
            "expires_at": epoch(ref.started_at) + 7 * 24 * 3600,
        }
        if not store.put_new(marker):
            continue
        try:
            _publish(sns, topic_arn, build_incident_alert(sweep, change, base_url))
        except Exception:
            store.delete(marker["pk"], marker["sk"])
            raise
        published += 1
    return published


# --- lock and triggers -----------------------------------------------------------------------


def _lock_ref(lock: dict[str, Any]) -> SweepRef | None:
    raw = lock.get("ref")
    return SweepRef.model_validate_json(raw) if raw else None


def _merge_pending(ref: SweepRef, pending: list[TriggerRequest], now: datetime) -> SweepRef:
    nodes = {p.node for p in pending}
    node = nodes.pop() if len(nodes) == 1 else None  # several nodes or a cluster-wide trigger: sweep all
    n = ref.follow_up + 1
    return SweepRef(
        sweep_id=f"{ref.execution}-f{n}",
        execution=ref.execution,
        cluster=ref.cluster,
        region=ref.region,
        node=node,
        triggers=[p.trigger_id for p in pending],
        reasons=[p.reason for p in pending],
        started_at=now,
        since_seconds=ref.since_seconds,
        follow_up=n,
        follow_up_of=ref.sweep_id,
        after_failure=ref.after_failure,
    )


def finish_sweep(store: Store, ref: SweepRef, now: datetime) -> SweepRef | None:
    """Hand the lock over: to a follow-up sweep of the triggers folded in meanwhile, or release it.

    Conditional on the pending list being exactly what was read, so a trigger folded in at the
    same moment is never lost. Idempotent: a retry finds the follow-up it already created."""
    ck = cluster_key(ref.region, ref.cluster)
    for _ in range(_LOCK_RACE_ATTEMPTS):
        lock = store.get(ck, LOCK)
        if lock is None:
            return None
        holder = _lock_ref(lock)
        if lock.get("sweep_id") != ref.sweep_id:
            # Already handed over by a previous attempt of this Aggregate, or lost to lease expiry.
            return holder if holder is not None and holder.follow_up_of == ref.sweep_id else None
        pending = [TriggerRequest.model_validate_json(p) for p in lock.get("pending", [])]
        # A failed condition means a trigger folded itself in meanwhile: read the lock again.
        if not pending:
            if store.delete_if(
                ck,
                LOCK,
                ConditionExpression="sweep_id = :me AND (attribute_not_exists(pending) OR size(pending) = :zero)",
                ExpressionAttributeValues={":me": ref.sweep_id, ":zero": 0},
            ):
                return None
            continue
        follow = _merge_pending(ref, pending, now)
        handed_over = store.update_if(
            ck,
            LOCK,
            UpdateExpression="SET sweep_id = :next, #ref = :ref, lease_expires_at = :lease, pending = :empty",
            ConditionExpression="sweep_id = :me AND size(pending) = :count",
            ExpressionAttributeNames={"#ref": "ref"},
            ExpressionAttributeValues={
                ":next": follow.sweep_id,
                ":ref": follow.model_dump_json(),
                ":lease": epoch(now) + LOCK_LEASE_SECONDS,
                ":empty": [],
                ":me": ref.sweep_id,
                ":count": len(pending),
            },
        )
        if handed_over is not None:
            return follow
    raise RuntimeError(f"lock of {ref.cluster} kept changing; retry")


def _mark_trigger(store: Store, trigger: TriggerRequest, status: str, sweep_id: str, expires: int) -> None:
    store.put(
        {
            "pk": cluster_key(trigger.region, trigger.cluster),
            "sk": f"TRIGGER#{trigger.trigger_id}",
            "status": status,
            "sweep_id": sweep_id,
            "kind": trigger.kind,
            "reason": trigger.reason[:1000],
            "node": trigger.node or "",
            "received_at": trigger.received_at.isoformat(),
            "expires_at": expires,
        }
    )


def start_sweep(
    trigger: TriggerRequest,
    store: Store,
    sfn: Any,
    *,
    state_machine_arn: str,
    history_seconds: int,
    since_seconds: int = DEFAULT_SINCE_SECONDS,
) -> TriggerOutcome:
    """Start a sweep for one trigger, fold it into the running sweep, or drop it as a replay."""
    ck = cluster_key(trigger.region, trigger.cluster)
    now = trigger.received_at
    expires = epoch(now) + history_seconds
    seen = store.get(ck, f"TRIGGER#{trigger.trigger_id}")
    if seen is not None and seen.get("status") in ("started", "folded"):
        return TriggerOutcome(
            trigger_id=trigger.trigger_id,
            cluster=trigger.cluster,
            status="duplicate",
            sweep_id=seen.get("sweep_id", ""),
        )
    ref = SweepRef(
        sweep_id=trigger.sweep_id,
        execution=trigger.sweep_id,
        cluster=trigger.cluster,
        region=trigger.region,
        node=trigger.node,
        triggers=[trigger.trigger_id],
        reasons=[trigger.reason],
        started_at=now,
        since_seconds=since_seconds,
    )
    for _ in range(_LOCK_RACE_ATTEMPTS):
        if store.put_if(
            _lock_item(ck, ref, now, pending=[]),
            ConditionExpression="attribute_not_exists(pk) OR lease_expires_at < :now OR sweep_id = :me",
            ExpressionAttributeValues={":now": epoch(now), ":me": ref.sweep_id},
        ):
            _start_execution(sfn, state_machine_arn, ref, store, ck)
            _mark_trigger(store, trigger, "started", ref.sweep_id, expires)
            return TriggerOutcome(
                trigger_id=trigger.trigger_id, cluster=trigger.cluster, status="started", sweep_id=ref.sweep_id
            )
        held = store.get(ck, LOCK)
        if held is not None and _abandoned(sfn, state_machine_arn, held, now):
            if not _take_over(store, ck, ref, held, now):
                continue  # someone else moved the lock meanwhile: look again
            _start_execution(sfn, state_machine_arn, ref, store, ck)
            _mark_trigger(store, trigger, "started", ref.sweep_id, expires)
            return TriggerOutcome(
                trigger_id=trigger.trigger_id, cluster=trigger.cluster, status="started", sweep_id=ref.sweep_id
            )
        folded = store.update_if(
            ck,
            LOCK,
            UpdateExpression="SET pending = list_append(if_not_exists(pending, :empty), :trigger)",
            ConditionExpression="attribute_exists(pk) AND lease_expires_at >= :now",
            ExpressionAttributeValues={
                ":empty": [],
                ":trigger": [trigger.model_dump_json()],
                ":now": epoch(now),
            },
        )
        if folded is None:
            continue  # the lock was released or expired in between: try to take it
        lock = folded
        _mark_trigger(store, trigger, "folded", str(lock.get("sweep_id", "")), expires)
        return TriggerOutcome(
            trigger_id=trigger.trigger_id,
            cluster=trigger.cluster,
            status="folded",
            sweep_id=str(lock.get("sweep_id", "")),
        )
    raise RuntimeError(f"lock of {trigger.cluster} kept changing; retry")


def _abandoned(sfn: Any, state_machine_arn: str, lock: dict[str, Any], now: datetime) -> bool:
    """True when the lock's sweep can no longer release it: its execution has ended (a failed
    Aggregate or Notify, an aborted execution) or never started (its trigger failed after taking
    the lock, and START_GRACE_SECONDS have passed). Folding a trigger into such a lock would
    lose it and leave the cluster unswept until the lease expires."""
    holder = _lock_ref(lock)
    if holder is None:
        return False
    execution_arn = state_machine_arn.replace(":stateMachine:", ":execution:") + f":{holder.execution}"
    try:
        status = sfn.describe_execution(executionArn=execution_arn).get("status")
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "ExecutionDoesNotExist":
            return False  # cannot tell: fold, as if the sweep were running
        taken_at = int(lock.get("lease_expires_at", 0)) - LOCK_LEASE_SECONDS
        return epoch(now) - taken_at > START_GRACE_SECONDS
    except BotoCoreError:
        return False
    return status != "RUNNING"


def _lock_item(ck: str, ref: SweepRef, now: datetime, *, pending: list[Any]) -> dict[str, Any]:
    """The cluster's lock held by `ref`'s sweep, with the triggers folded into it so far."""
    return {
        "pk": ck,
        "sk": LOCK,
        "sweep_id": ref.sweep_id,
        "ref": ref.model_dump_json(),
        "lease_expires_at": epoch(now) + LOCK_LEASE_SECONDS,
        "pending": pending,
    }


def _take_over(store: Store, ck: str, ref: SweepRef, lock: dict[str, Any], now: datetime) -> bool:
    """Take an abandoned lock, keeping the triggers folded into it (this sweep's Aggregate hands
    them to a follow-up sweep). False when the lock changed since it was read."""
    return store.put_if(
        _lock_item(ck, ref, now, pending=list(lock.get("pending", []))),
        ConditionExpression="sweep_id = :holder",
        ExpressionAttributeValues={":holder": lock.get("sweep_id", "")},
    )


def _start_execution(sfn: Any, arn: str, ref: SweepRef, store: Store, ck: str) -> None:
    try:
        sfn.start_execution(
            stateMachineArn=arn, name=ref.execution, input=json.dumps({"sweep": ref.model_dump(mode="json")})
        )
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ExecutionAlreadyExists":
            # Same deterministic name: this trigger's sweep exists. If it already ended, the
            # lock just taken would guard nothing: give it back.
            execution_arn = arn.replace(":stateMachine:", ":execution:") + f":{ref.execution}"
            status = sfn.describe_execution(executionArn=execution_arn).get("status")
            if status != "RUNNING":
                _release(store, ck, ref.sweep_id)
            return
        # Give the lock back so the next trigger is not blocked until the lease expires.
        _release(store, ck, ref.sweep_id)
        raise


def _release(store: Store, ck: str, sweep_id: str) -> None:
    store.delete_if(ck, LOCK, ConditionExpression="sweep_id = :me", ExpressionAttributeValues={":me": sweep_id})
