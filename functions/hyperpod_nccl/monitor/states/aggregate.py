"""State Aggregate: the sweep's Inventory from the table, the CLI's engine, the permission gaps,
the diff against the open findings, the findings and fault history written, the sweep recorded and
the lock handed over (`monitor.lock.finish_sweep`).

Also the recovery of a failed Aggregate (state RecordAggregateFailure): the sweep recorded as
failed, naming why, and the writes of a stored diff completed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel

from hyperpod_nccl.checks import discover as registered_checks
from hyperpod_nccl.collectors.node_probes import assemble, rate_limited_source, session_seconds
from hyperpod_nccl.engine import applicable_checks, build_result, unread_by
from hyperpod_nccl.models.findings import DegradedSource, Finding, SweepResult
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.kubernetes import KubernetesInventory
from hyperpod_nccl.models.logs import LogInventory
from hyperpod_nccl.models.node_probe import NodeProbeInventory, NodeProbeResult, ProbePlan
from hyperpod_nccl.monitor.code_version import code_version
from hyperpod_nccl.monitor.diff import OpenFinding, SweepDiff, compute_changes, open_counts
from hyperpod_nccl.monitor.failures import describe_aws_failure
from hyperpod_nccl.monitor.incident_tracking import record_incidents
from hyperpod_nccl.monitor.lock import finish_sweep
from hyperpod_nccl.monitor.payloads import AggregateOutput, SweepRef, SweepState, TaskFailure, aggregate_failure_text
from hyperpod_nccl.monitor.states.notify import alerts_pending
from hyperpod_nccl.monitor.states.probe_node import load_probe_results
from hyperpod_nccl.monitor.states.shared import load_control_plane, request_for
from hyperpod_nccl.monitor.store import DIFF, KUBERNETES, LOGS, PLAN, RESULT, Store, epoch, fingerprint_of
from hyperpod_nccl.pacing import probe_seconds_percentile


def _missing(source: str, why: str) -> DegradedSource:
    return DegradedSource(
        source=source,
        reason=why,
        fix="see the sweep execution's history in Step Functions and the function's logs; the next sweep retries",
        partial=True,
    )


def _load_optional(store: Store, sweep_id: str, blob: str, model: type[BaseModel]) -> tuple[bool, Any]:
    text = store.sweep_blob(sweep_id, blob)
    if text is None:
        return False, None
    return True, None if text == "null" else model.model_validate_json(text)


def build_inventory(store: Store, ref: SweepRef) -> tuple[Inventory, list[DegradedSource]] | None:
    """The Inventory of a sweep from the table, and every degraded source (None without a
    control plane: discovery never completed)."""
    control_plane = load_control_plane(store, ref.sweep_id)
    if control_plane is None:
        return None
    plan_text = store.sweep_blob(ref.sweep_id, PLAN)
    plan = ProbePlan.model_validate_json(plan_text) if plan_text else ProbePlan()
    degraded = store.degraded_sources(ref.sweep_id)
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
    paced_out = rate_limited_source(results)
    if paced_out is not None:
        degraded.append(paced_out)
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


def re_evaluation_rule(inventory: Inventory, degraded: list[DegradedSource]) -> Any:
    """A predicate: was this previously open finding evaluated again in this sweep?

    Its check must have run and read all it reads (a check whose input a degraded source left
    unread, its PASS a SKIP this sweep, says nothing about whether the fault is gone); a
    node-probe finding also needs one of its nodes probed (an unreachable or unsampled node says
    nothing either)."""
    ran = {c.meta.id for c in applicable_checks(inventory) if not unread_by(c.meta.reads, degraded)}
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
                fingerprint=fingerprint_of(item),
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
    known = store.permission_gaps(ref.region, ref.cluster)
    denied = {d.missing_action for d in degraded if d.missing_action}
    # A node-scoped sweep reads less: it can add gaps but not clear the others.
    remembered = denied if ref.node is None else denied | known
    return sorted(denied - known), remembered


def _store_diff(store: Store, diff: SweepDiff, history_seconds: int) -> SweepDiff:
    """Store the diff once; a retried Aggregate reuses the first attempt's diff (whose updates
    it may already have applied) instead of computing an empty one."""
    if store.put_sweep_blob(
        diff.sweep_id,
        DIFF,
        diff.model_dump_json(),
        expires_at=epoch(diff.started_at) + history_seconds,
        only_if_new=True,
    ):
        return diff
    text = store.sweep_blob(diff.sweep_id, DIFF)
    return diff if text is None else SweepDiff.model_validate_json(text)


def _persist_findings(store: Store, ref: SweepRef, result: SweepResult, diff: SweepDiff, history_seconds: int) -> None:
    """Findings history, occurrences and node/GPU fault history; each write conditional on the
    sweep id or keyed by it, so a retry adds nothing."""
    now = (result.finished_at or ref.started_at).isoformat()
    expires = epoch(ref.started_at) + history_seconds
    current: dict[str, Finding] = {}
    for finding in result.issues:
        current.setdefault(finding.fingerprint, finding)
    for fingerprint, finding in current.items():
        store.record_finding_seen(ref, fingerprint, finding, seen_at=now, expires_at=expires)
        store.add_occurrence(ref, fingerprint, finding, expires_at=expires)
    store.add_fault_history(ref, current, expires_at=expires)
    for change in diff.of_kind("resolved"):
        store.mark_finding_resolved(ref, change.fingerprint, resolved_at=now)


def _record_sweep(
    store: Store,
    ref: SweepRef,
    status: str,
    diff: SweepDiff,
    finished_at: datetime,
    history_seconds: int,
    probe_seconds: float | None = None,
) -> float:
    duration = max(0.0, (finished_at - ref.started_at).total_seconds())
    store.record_sweep(
        ref, status=status, diff=diff, finished_at=finished_at, duration_seconds=duration,
        expires_at=epoch(ref.started_at) + history_seconds, code_version=code_version(), probe_seconds=probe_seconds,
    )  # fmt: skip
    return duration


def sweep_probe_seconds(inventory: Inventory) -> float | None:
    """The high percentile of the sweep's probe times (pacing.probe_seconds_percentile), recorded
    with the sweep for the next one's Discover to size its probe concurrency from; None when no
    probe ran. Taken here, where every result is read anyway, so that Discover reads one number
    instead of every node's stored result. A result without a duration (its node was never probed)
    or whose session never started (the rate left it none: its time was waiting, not probing) is
    left out; so is a node whose probe stored nothing (killed at the state's timeout). The time a
    probe waited for its start (`paced_seconds`) is not probe time: counted in, a sweep sized too
    wide waits longer per probe and would size the next one as wide again (`session_seconds`)."""
    results = inventory.node_probes.results if inventory.node_probes else []
    return probe_seconds_percentile(held for r in results if (held := session_seconds(r)) is not None)


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
    diff_text, result_text = store.sweep_blob(ref.sweep_id, DIFF), store.sweep_blob(ref.sweep_id, RESULT)
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
    store.record_permission_gaps(ref.region, ref.cluster, gaps)
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
        store.put_sweep_blob(
            ref.sweep_id, DIFF, stored.model_dump_json(), expires_at=epoch(ref.started_at) + history_seconds
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
    store.put_sweep_blob(
        ref.sweep_id, RESULT, result.model_dump_json(), expires_at=epoch(ref.started_at) + history_seconds
    )
    new_gaps, gaps = _permission_gaps(store, ref, result.degraded_sources)
    changes, kept_open = compute_changes(
        _previous_open(store, ref), result.findings, re_evaluated=re_evaluation_rule(inventory, result.degraded_sources)
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
    duration = _record_sweep(store, ref, status, diff, now, history_seconds, sweep_probe_seconds(inventory))
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
