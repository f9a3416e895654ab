"""What starts a sweep: an EventBridge Scheduler schedule per watched cluster, and EventBridge rules for
the HyperPod events of the stack's region. Both call the trigger function, which validates the event,
folds it into a running sweep or starts one execution named after the event (idempotent replays).

Patterns and the schedule's input come from the runtime (`hyperpod_nccl.monitor.settings`), so the
rules never let through what the trigger would reject for its shape, and vice versa.

Nothing between an event and its sweep is dropped unseen. Rules and Scheduler invoke the trigger
asynchronously: they retry only their own call to Lambda (their retry policy), and once Lambda has
queued the event they are done with it. Lambda then runs the trigger and retries a function error
`TRIGGER_RETRY_ATTEMPTS` times. Whatever fails for good lands in one queue, the failed-triggers queue,
with an alarm on its depth: Lambda's on-failure destination (an invocation record: the event as
`requestPayload`, the error as `responsePayload`), and the rules' and the schedules' dead-letter queue
(the event or tick itself, with the error in the message attributes).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import jsii
from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from hyperpod_nccl.monitor.settings import (
    HYPERPOD_EVENT_PATTERNS,
    SCHEDULE_TARGET_INPUT,
    TRIGGER_MAX_EVENT_AGE_SECONDS,
    TRIGGER_RETRY_ATTEMPTS,
    WatchedCluster,
)
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
# How long a rule keeps handing an event to Lambda when its Invoke call fails (Lambda down or
# throttling the call), retrying up to EventBridge's maximum number of times within that age: Lambda
# keeps an event it accepted for the same hour (settings.TRIGGER_MAX_EVENT_AGE_SECONDS).
_MAX_EVENT_AGE = Duration.seconds(TRIGGER_MAX_EVENT_AGE_SECONDS)
# EventBridge's (rules and Scheduler) most retries of one delivery; the event age bounds them first.
_DELIVERY_RETRY_ATTEMPTS = 185
# Failed triggers are kept as long as SQS keeps a message, for whoever answers the alarm.
_FAILED_TRIGGER_RETENTION = Duration.days(14)
_QUEUE_SUFFIX = "-failed-triggers"
_SQS_QUEUE_NAME_MAX = 80
# What a sender needs of an SSE-KMS queue's key (SQS's developer guide); EventBridge's guide asks
# the same of the key policy for a rule's dead letters.
_SEND_KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")


def event_pattern(pattern: Mapping[str, Any]) -> events.EventPattern:
    """The CDK form of an EventBridge pattern written as JSON (`detail-type`, not `detail_type`)."""
    unknown = sorted(set(pattern) - set(_PATTERN_FIELDS))
    if unknown:
        raise ValueError(f"event pattern keys infra cannot express: {', '.join(unknown)}")
    return events.EventPattern(**{_PATTERN_FIELDS[key]: value for key, value in pattern.items()})


@jsii.implements(lambda_.IDestination)
class QueueDestination:
    """An SQS queue as an asynchronous invocation's destination, granting the function exactly what
    Lambda needs to send the record with the function's role: sqs:SendMessage on the queue and, the
    queue being KMS-encrypted, kms:GenerateDataKey and kms:Decrypt on its key (CDK's own
    SqsDestination grants every send-side action, kms:ReEncrypt* and queue reads included)."""

    def __init__(self, queue: sqs.IQueue, key: kms.IKey) -> None:
        self._queue = queue
        self._key = key

    def bind(self, scope: Construct, fn: lambda_.IFunction, *, type: Any = None) -> lambda_.DestinationConfig:
        """Grant the send and name the queue (called by CDK when the function's config is built)."""
        self._queue.grant(fn, "sqs:SendMessage")
        self._key.grant(fn, *_SEND_KEY_ACTIONS)
        return lambda_.DestinationConfig(destination=self._queue.queue_arn)


def failed_triggers_queue_name(stack_name: str) -> str:
    """The failed-triggers queue's fixed name, `<stack>-failed-triggers`, within SQS's 80 characters
    (a long stack name is cut and keeps a digest of itself, so two stacks never share the queue)."""
    name = f"{stack_name}{_QUEUE_SUFFIX}"
    if len(name) <= _SQS_QUEUE_NAME_MAX:
        return name
    digest = hashlib.sha256(stack_name.encode()).hexdigest()[:8]
    return f"{stack_name[: _SQS_QUEUE_NAME_MAX - len(_QUEUE_SUFFIX) - 9]}-{digest}{_QUEUE_SUFFIX}"


def schedule_input(cluster: WatchedCluster) -> dict[str, Any]:
    """The trigger input of one cluster's schedule: the runtime's template, scoped to that cluster."""
    return {**SCHEDULE_TARGET_INPUT, "clusters": [cluster.model_dump()]}


class SweepTriggers(Construct):
    """Schedules and HyperPod event rules, all targeting the trigger function, and the queue (with
    its KMS key's grant to EventBridge) where every trigger that failed for good is kept."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        trigger: lambda_.IFunction,
        clusters: Sequence[WatchedCluster],
        sweep_rate_minutes: int,
        key: kms.IKey,
        stack_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.failed_triggers = self._failed_triggers_queue(key, failed_triggers_queue_name(stack_name))
        # Lambda's asynchronous invocation: retries (the trigger is idempotent by event id), then
        # the invocation record to the queue, sent with the trigger's role: it may send to this
        # queue only (and use its key for that).
        trigger.configure_async_invoke(
            on_failure=QueueDestination(self.failed_triggers, key),
            retry_attempts=TRIGGER_RETRY_ATTEMPTS,
            max_event_age=Duration.seconds(TRIGGER_MAX_EVENT_AGE_SECONDS),
        )
        self.schedules: list[scheduler.Schedule] = []
        schedule_role = self._schedule_role(key) if clusters else None
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
                        role=schedule_role,
                        # Scheduler retries its Invoke call until the next tick is due (a retried
                        # tick keeps its trigger id), then dead-letters the tick.
                        retry_attempts=_DELIVERY_RETRY_ATTEMPTS,
                        max_event_age=Duration.minutes(max(1, min(sweep_rate_minutes, 24 * 60))),
                        dead_letter_queue=self.failed_triggers,
                    ),
                )
            )
        if self.schedules:
            # The Scheduler target grants invoke on the function and its versions (`<arn>:*`).
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
                    # The target's dead-letter queue gets a queue policy statement for this rule only
                    # (events.amazonaws.com, aws:SourceArn).
                    targets=[
                        events_targets.LambdaFunction(
                            trigger,
                            retry_attempts=_DELIVERY_RETRY_ATTEMPTS,
                            max_event_age=_MAX_EVENT_AGE,
                            dead_letter_queue=self.failed_triggers,
                        )
                    ],
                )
            )

    def _failed_triggers_queue(self, key: kms.IKey, queue_name: str) -> sqs.Queue:
        """The failed-triggers queue: a standard queue (no destination or dead-letter queue of these
        services may be FIFO), encrypted with the stack's key, SSL only. Its name is fixed so that
        the key policy can name the queue without depending on it (the queue depends on the key)."""
        stack = Stack.of(self)
        queue_arn = stack.format_arn(service="sqs", resource=queue_name, arn_format=ArnFormat.NO_RESOURCE_NAME)
        # EventBridge writes a rule's dead letters as itself, and SQS encrypts them with the queue's
        # key on its behalf: AWS's EventBridge guide asks for kms:Decrypt and kms:GenerateDataKey
        # in the key policy, here only for this queue's messages (SQS's encryption context).
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowEventBridgeToDeadLetterFailedTriggers",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=list(_SEND_KEY_ACTIONS),
                resources=["*"],
                conditions={"StringEquals": {"kms:EncryptionContext:aws:sqs:arn": queue_arn}},
            )
        )
        queue = sqs.Queue(
            self,
            "FailedTriggers",
            queue_name=queue_name,
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            enforce_ssl=True,
            retention_period=_FAILED_TRIGGER_RETENTION,
        )
        nag.acknowledge(
            queue,
            "AwsSolutions-SQS3",
            "This queue is itself the dead-letter queue of the trigger: Lambda's on-failure destination and"
            " the EventBridge rules' and schedules' dead-letter queue, which cdk-nag does not recognise as such.",
        )
        return queue

    def _schedule_role(self, key: kms.IKey) -> iam.Role:
        """The role the schedules invoke the trigger with, and dead-letter a tick with (the target
        grants the invoke and the send; the queue's key is granted here: SQS encrypts the message
        with it on the sender's behalf)."""
        stack = Stack.of(self)
        role = iam.Role(
            self,
            "ScheduleRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": stack.account}}
            ),
            description="hyperpod-nccl-monitor schedules: invoke the trigger, dead-letter a failed tick",
        )
        key.grant(role, *_SEND_KEY_ACTIONS)
        return role
