"""The per-cluster sweep lock and the trigger that takes it.

The trigger takes `CLUSTER#C / LOCK` with a conditional write and a lease (a crashed sweep cannot
block its cluster past the lease). A trigger arriving while the lock is held is appended to the
lock's `pending` list ("folded"); Aggregate consumes pending triggers atomically (`finish_sweep`)
and the same execution sweeps once more, or releases the lock. A trigger finding the lock held by
an execution that has already ended (its lock could not be released) takes it over with the folded
triggers, so one failed release costs one sweep, not the lease.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_nccl.monitor.events import TriggerRequest
from hyperpod_nccl.monitor.payloads import DEFAULT_SINCE_SECONDS, SweepRef, TriggerOutcome
from hyperpod_nccl.monitor.settings import LOCK_LEASE_SECONDS
from hyperpod_nccl.monitor.store import LOCK, Store, cluster_key, epoch

_LOCK_RACE_ATTEMPTS = 5
# A lock whose execution does not exist this long after it was taken belongs to a trigger that
# failed between taking it and starting the execution (StartExecution takes well under a second).
START_GRACE_SECONDS = 300


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
