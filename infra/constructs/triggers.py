"""What starts a sweep: an EventBridge Scheduler schedule per watched cluster, and EventBridge rules for
the HyperPod events of the stack's region. Both call the trigger function, which validates the event,
folds it into a running sweep or starts one execution named after the event (idempotent replays).

Patterns and the schedule's input come from the runtime (`hyperpod_nccl.monitor.settings`), so the
rules never let through what the trigger would reject for its shape, and vice versa.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from constructs import Construct

from hyperpod_nccl.monitor.settings import HYPERPOD_EVENT_PATTERNS, SCHEDULE_TARGET_INPUT, WatchedCluster
from infra import nag

# EventBridge pattern keys as JSON spells them -> the EventPattern field names of the CDK.
_PATTERN_FIELDS = {
    "source": "source",
    "detail-type": "detail_type",
    "detail": "detail",
    "account": "account",
    "region": "region",
    "resources": "resources",
}
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9]")
# An event that could not reach the trigger within this age is stale: the next schedule tick covers it.
_MAX_EVENT_AGE = Duration.hours(1)


def event_pattern(pattern: Mapping[str, Any]) -> events.EventPattern:
    """The CDK form of an EventBridge pattern written as JSON (`detail-type`, not `detail_type`)."""
    unknown = sorted(set(pattern) - set(_PATTERN_FIELDS))
    if unknown:
        raise ValueError(f"event pattern keys infra cannot express: {', '.join(unknown)}")
    return events.EventPattern(**{_PATTERN_FIELDS[key]: value for key, value in pattern.items()})


def schedule_input(cluster: WatchedCluster) -> dict[str, Any]:
    """The trigger input of one cluster's schedule: the runtime's template, scoped to that cluster."""
    return {**SCHEDULE_TARGET_INPUT, "clusters": [cluster.model_dump()]}


class SweepTriggers(Construct):
    """Schedules and HyperPod event rules, all targeting the trigger function."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        trigger: lambda_.IFunction,
        clusters: Sequence[WatchedCluster],
        sweep_rate_minutes: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.schedules: list[scheduler.Schedule] = []
        for cluster in clusters:
            construct_name = _UNSAFE_ID.sub("", f"{cluster.name.title()}{cluster.region.title()}")
            self.schedules.append(
                scheduler.Schedule(
                    self,
                    f"Sweep{construct_name}",
                    description=f"hyperpod-nccl-monitor: sweep {cluster.name} ({cluster.region})",
                    schedule=scheduler.ScheduleExpression.rate(Duration.minutes(sweep_rate_minutes)),
                    target=scheduler_targets.LambdaInvoke(
                        trigger,
                        input=scheduler.ScheduleTargetInput.from_object(schedule_input(cluster)),
                        # A missed tick is covered by the next; retrying late would only stack sweeps.
                        retry_attempts=0,
                        max_event_age=Duration.minutes(max(1, min(sweep_rate_minutes, 60))),
                    ),
                )
            )
        if self.schedules:
            # The Scheduler target grants invoke on the function and its versions (`<arn>:*`), and
            # creates that role once per stack.
            nag.acknowledge_wildcard_resources(
                Stack.of(self),
                [f"{trigger.function_arn}:*"],
                "EventBridge Scheduler may invoke the trigger function (and its versions) only.",
            )
        self.rules: list[events.Rule] = []
        for index, pattern in enumerate(HYPERPOD_EVENT_PATTERNS):
            detail_types = pattern.get("detail-type") or [f"pattern {index}"]
            title = str(detail_types[0]) if isinstance(detail_types, list) else str(detail_types)
            self.rules.append(
                events.Rule(
                    self,
                    _UNSAFE_ID.sub("", title.replace("SageMaker HyperPod ", "").title()) or f"Rule{index}",
                    description=f"hyperpod-nccl-monitor: sweep on {title}",
                    event_pattern=event_pattern(pattern),
                    targets=[events_targets.LambdaFunction(trigger, retry_attempts=2, max_event_age=_MAX_EVENT_AGE)],
                )
            )
