"""The per-cluster sweep lock and the trigger that takes it.

The trigger takes the cluster's lock with a conditional write and a lease (a crashed sweep cannot
block its cluster past the lease). A trigger arriving while the lock is held is appended to the
lock's `pending` list ("folded"); Aggregate consumes pending triggers atomically (`finish_sweep`)
and the same execution sweeps once more, or releases the lock. A trigger finding the lock held by
an execution that has already ended (its lock could not be released) takes it over with the folded
triggers, so one failed release costs one sweep, not the lease.

This module decides who may take, fold into, hand over and release the lock; each step is one
`Store` method, which holds the DynamoDB condition that makes it safe against the others.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_nccl.aws_errors import error_code
from hyperpod_nccl.monitor.events import TriggerRequest
from hyperpod_nccl.monitor.payloads import DEFAULT_SINCE_SECONDS, SweepRef, TriggerOutcome
from hyperpod_nccl.monitor.settings import LOCK_LEASE_SECONDS, execution_arn
from hyperpod_nccl.monitor.store import Store, epoch

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

_LOCK_RACE_ATTEMPTS = 5
# A lock whose execution does not exist this long after it was taken belongs to a trigger that
# failed between taking it and starting the execution (StartExecution takes well under a second).
START_GRACE_SECONDS = 300


def _lease(now: datetime) -> int:
    """When a lock taken or handed over at `now` expires (epoch seconds)."""
    return epoch(now) + LOCK_LEASE_SECONDS


def _lock_ref(lock: dict[str, Any]) -> SweepRef | None:
    raw = lock.get("ref")
    return SweepRef.model_validate_json(raw) if raw else None


def _merge_pending(ref: SweepRef, pending: list[TriggerRequest], now: datetime) -> SweepRef:
    # A trigger folded in twice (a retried invocation whose first fold was not recorded) counts once.
    pending = list({p.trigger_id: p for p in pending}.values())
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
    for _ in range(_LOCK_RACE_ATTEMPTS):
        lock = store.lock(ref.region, ref.cluster)
        if lock is None:
            return None
        holder = _lock_ref(lock)
        if lock.get("sweep_id") != ref.sweep_id:
            # Already handed over by a previous attempt of this Aggregate, or lost to lease expiry.
            return holder if holder is not None and holder.follow_up_of == ref.sweep_id else None
        pending = [TriggerRequest.model_validate_json(p) for p in lock.get("pending", [])]
        # A failed condition means a trigger folded itself in meanwhile: read the lock again.
        if not pending:
            if store.release_lock_if_idle(ref.region, ref.cluster, ref.sweep_id):
                return None
            continue
        follow = _merge_pending(ref, pending, now)
        if store.hand_over_lock(ref.sweep_id, follow, folded=len(pending), lease_expires_at=_lease(now)):
            return follow
    raise RuntimeError(f"lock of {ref.cluster} kept changing; retry")


def start_sweep(
    trigger: TriggerRequest,
    store: Store,
    sfn: SFNClient,
    *,
    state_machine_arn: str,
    history_seconds: int,
    since_seconds: int = DEFAULT_SINCE_SECONDS,
) -> TriggerOutcome:
    """Start a sweep for one trigger, fold it into the running sweep, or drop it as a replay.

    Idempotent by event id, as Lambda's asynchronous retries and EventBridge's at-least-once
    delivery need: the execution is named after the trigger (`TriggerRequest.sweep_id`), a handled
    trigger is recorded, and a trigger whose own execution already holds the lock or exists is a
    duplicate even when the attempt that started it failed before recording it. Such a retry
    neither takes the lock again (which would drop the triggers folded in since) nor folds itself
    into its own sweep (which would sweep it twice)."""
    now = trigger.received_at
    expires = epoch(now) + history_seconds
    seen = store.trigger_seen(trigger.region, trigger.cluster, trigger.trigger_id)
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

    def started(*, new: bool) -> TriggerOutcome:
        store.record_trigger_seen(trigger, status="started", sweep_id=ref.sweep_id, expires_at=expires)
        return TriggerOutcome(
            trigger_id=trigger.trigger_id,
            cluster=trigger.cluster,
            status="started" if new else "duplicate",
            sweep_id=ref.sweep_id,
        )

    for _ in range(_LOCK_RACE_ATTEMPTS):
        held = store.lock(trigger.region, trigger.cluster)
        holder = _lock_ref(held) if held is not None else None
        if held is not None and holder is not None and holder.execution == ref.execution:
            # An earlier attempt of this trigger took the lock. Its execution may not have started
            # (that attempt failed in between): start it by its name, which starts nothing twice.
            # A follow-up sweep of the same execution holding it means the sweep has run already.
            first = held.get("sweep_id") == ref.sweep_id
            return started(new=first and _start_execution(sfn, state_machine_arn, ref, store))
        if store.take_lock(ref, now=now, lease_expires_at=_lease(now)):
            # An execution of this name that exists already is this trigger's sweep: not new.
            return started(new=_start_execution(sfn, state_machine_arn, ref, store))
        if held is None:
            continue  # taken in between: look again
        if _abandoned(sfn, state_machine_arn, held, now):
            if not _take_over(store, ref, held, now):
                continue  # someone else moved the lock meanwhile: look again
            return started(new=_start_execution(sfn, state_machine_arn, ref, store))
        if _execution_status(sfn, state_machine_arn, ref.execution) not in (None, _NO_EXECUTION):
            # This trigger's sweep ran (an earlier attempt started it) and another holds the lock now.
            return started(new=False)
        lock = store.fold_trigger_into_lock(trigger, now=now)
        if lock is None:
            continue  # the lock was released or expired in between: try to take it
        holder_id = str(lock.get("sweep_id", ""))
        store.record_trigger_seen(trigger, status="folded", sweep_id=holder_id, expires_at=expires)
        return TriggerOutcome(
            trigger_id=trigger.trigger_id, cluster=trigger.cluster, status="folded", sweep_id=holder_id
        )
    raise RuntimeError(f"lock of {trigger.cluster} kept changing; retry")


# `_execution_status` of an execution Step Functions does not know.
_NO_EXECUTION = "DOES_NOT_EXIST"


def _execution_status(sfn: SFNClient, state_machine_arn: str, name: str) -> str | None:
    """The status of the execution `name` ("RUNNING", "SUCCEEDED", ...), `_NO_EXECUTION` when
    there is none, None when Step Functions could not tell (the call failed)."""
    try:
        status = sfn.describe_execution(executionArn=execution_arn(state_machine_arn, name)).get("status")
    except ClientError as error:
        return _NO_EXECUTION if error_code(error) == "ExecutionDoesNotExist" else None
    except BotoCoreError:
        return None
    return str(status)


def _abandoned(sfn: SFNClient, state_machine_arn: str, lock: dict[str, Any], now: datetime) -> bool:
    """True when the lock's sweep can no longer release it: its execution has ended (a failed
    Aggregate or Notify, an aborted execution) or never started (its trigger failed after taking
    the lock, and START_GRACE_SECONDS have passed). Folding a trigger into such a lock would
    lose it and leave the cluster unswept until the lease expires."""
    holder = _lock_ref(lock)
    if holder is None:
        return False
    status = _execution_status(sfn, state_machine_arn, holder.execution)
    if status is None:
        return False  # cannot tell: fold, as if the sweep were running
    if status == _NO_EXECUTION:
        taken_at = int(lock.get("lease_expires_at", 0)) - LOCK_LEASE_SECONDS
        return epoch(now) - taken_at > START_GRACE_SECONDS
    return status != "RUNNING"


def _take_over(store: Store, ref: SweepRef, lock: dict[str, Any], now: datetime) -> bool:
    """Take an abandoned lock, keeping the triggers folded into it (this sweep's Aggregate hands
    them to a follow-up sweep). False when the lock changed since it was read."""
    return store.take_over_lock(
        ref, holder=lock.get("sweep_id", ""), pending=list(lock.get("pending", [])), lease_expires_at=_lease(now)
    )


def _start_execution(sfn: SFNClient, arn: str, ref: SweepRef, store: Store) -> bool:
    """Start `ref`'s execution: True when this call started it, False when it existed already
    (same deterministic name: an earlier attempt of the trigger started it)."""
    try:
        sfn.start_execution(
            stateMachineArn=arn, name=ref.execution, input=json.dumps({"sweep": ref.model_dump(mode="json")})
        )
    except ClientError as error:
        if error_code(error) == "ExecutionAlreadyExists":
            # This trigger's sweep exists. If it already ended, the lock just taken would guard
            # nothing: give it back.
            status = _execution_status(sfn, arn, ref.execution)
            if status is not None and status != "RUNNING":
                store.release_lock(ref.region, ref.cluster, ref.sweep_id)
            return False
        # Give the lock back so the next trigger is not blocked until the lease expires.
        store.release_lock(ref.region, ref.cluster, ref.sweep_id)
        raise
    return True
