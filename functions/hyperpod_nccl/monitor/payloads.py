"""What the sweep state machine carries between its states: ids and scope, never results (those
are in the table under the sweep's partition), and each state's small result.

`SweepRef` is the sweep; `TaskFailure` is a Step Functions Catch result, and
`aggregate_failure_text` what the record and the alert say of an Aggregate task that did not
finish. Every other model is one state's input or output (monitor/sweep.asl.json).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hyperpod_nccl.monitor import task_timeouts

DEFAULT_SINCE_SECONDS = 7200


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


class FirstRound(BaseModel):
    """How the probe Map's first round orders its starts (`ProbeItem.first_round_start`).

    The first round's children start together, so without an order their nodes' reservations of
    the shared pace interleave: every child then holds its slots until its last node, reserved near
    the end of the round, ends, and the pace stands idle until the first children end and make
    room (256 nodes of 20 s probes, 64 at once: about one probe time past the bound). Each node of
    the first round reserves no sooner than its rank's turn at the pace instead, batch by batch,
    so the first children end one probe after their starts and the next ones take the pace on."""

    model_config = ConfigDict(frozen=True)

    paced_from: float = Field(description="epoch seconds: when Discover sized the sweep (rank 0's turn)")
    batch_size: int = Field(ge=1, description="nodes per batch (the last may have fewer)")
    batches: int = Field(ge=1, description="the children the first round starts together (batches_at_once)")


class DiscoverOutput(BaseModel):
    """What Discover puts in the state: whether collection can go on and the node ids to probe.

    Each id is in the state once, in `batches` (the probe Map's items): at 10,000 nodes they are
    most of the 256 KiB a state may carry (tests/unit/test_state_payloads.py). Collect replaces this
    with `{"discovered": true}`, so Aggregate and the states after it never carry the ids."""

    discovered: bool
    batches: list[list[str]] = Field(default_factory=list, description="the probe Map's items: node ids in batches")
    nodes: int = Field(default=0, description="how many node ids `batches` holds")
    # Read by the probe Map's MaxConcurrencyPath, "the maximum concurrency dynamically from the state
    # input" (AWS CDK's DistributedMap docs, for the ASL field of that name); not an integer >= 0,
    # the execution fails with States.Runtime (moto 5.2.5's MaxConcurrencyPath), and 0 would be
    # unlimited: hence ge=1.
    batches_at_once: int = Field(
        default=1, ge=1, description="the probe Map's child executions at once (its MaxConcurrencyPath)"
    )
    first_round: FirstRound | None = Field(default=None, description="the order of the first round's starts")
    orchestrator: str = "unknown"
    reason: str | None = None


class ProbeItem(BaseModel):
    """One Map item: one node of one sweep, with its place in the probe Map (the batch's index,
    its own in the batch) for the first round's order of starts."""

    sweep_id: str
    cluster: str
    region: str
    instance_id: str
    batch: int | None = Field(default=None, ge=0, description="the batch's index among the Map's items")
    position: int | None = Field(default=None, ge=0, description="the node's index in its batch")
    first_round: FirstRound | None = None

    def first_round_start(self, interval: float) -> float | None:
        """Epoch seconds before which this node does not reserve its start: its rank's turn at
        the pace (`interval` seconds a start) when its batch is one of the first round's, else
        None (later batches start as earlier ones end, already in order)."""
        first = self.first_round
        if first is None or self.batch is None or self.position is None or self.batch >= first.batches:
            return None
        return first.paced_from + (self.batch * first.batch_size + self.position) * interval


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
