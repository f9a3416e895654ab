"""Watching the watcher: alarms when sweeps fail or stop running or a trigger failed for good, and a
dashboard of what sweeps find.

The alarms read Step Functions' own execution metrics, so they fire even when the monitor's code
never gets to emit anything. The dashboard graphs the metrics the handlers emit through Powertools
(EMF) under the runtime's namespace and metric names.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from hyperpod_nccl.monitor.settings import (
    METRIC_DIMENSION_CLUSTER,
    METRIC_FINDINGS,
    METRIC_NODES_PROBED,
    METRIC_NODES_UNREACHABLE,
    METRIC_NOTIFICATIONS,
    METRIC_SWEEP_DURATION,
    METRIC_SWEEP_FAILED,
    METRIC_SWEEPS_COMPLETED,
    METRIC_TRIGGERS_ACCEPTED,
    METRIC_TRIGGERS_REJECTED,
    METRICS_NAMESPACE,
    WatchedCluster,
)
from infra.constants import MAX_ALARM_PERIOD_SECONDS, POWERTOOLS_SERVICE_NAME

# Alarm evaluation for failures: short enough to page within minutes of a failed sweep.
_FAILURE_PERIOD = Duration.minutes(5)


# The alarms' construct ids; their names are `<prefix>-<id>` (fixed, see `alarm_names`).
SWEEPS_FAILING, SWEEPS_STOPPED, TRIGGERS_FAILED = "SweepsFailing", "SweepsStopped", "TriggersFailed"


def alarm_names(prefix: str) -> list[str]:
    """The fixed names of the monitor's alarms: the topic and its key admit CloudWatch on behalf of
    exactly these (a Ref to the alarm would make the key depend on the alarm, a cycle)."""
    return [f"{prefix}-{alarm}" for alarm in (SWEEPS_FAILING, SWEEPS_STOPPED, TRIGGERS_FAILED)]


def missed_sweep_period_seconds(*, sweep_rate_minutes: int, missed_sweeps: int) -> int:
    """The window in which at least one sweep must succeed: `missed_sweeps` x the rate, capped at a day."""
    return min(sweep_rate_minutes * 60 * missed_sweeps, MAX_ALARM_PERIOD_SECONDS)


class MonitorObservability(Construct):
    """Three alarms (sweeps failing, sweeps stopped, triggers failed) notifying the alerts topic, and
    a dashboard."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        state_machine: sfn.StateMachine,
        functions: dict[str, lambda_.Function],
        topic: sns.ITopic,
        failed_triggers: sqs.IQueue,
        clusters: Sequence[WatchedCluster],
        sweep_rate_minutes: int,
        missed_sweeps: int,
        dashboard_name: str,
        alarm_name_prefix: str,
    ) -> None:
        super().__init__(scope, construct_id)
        action = cloudwatch_actions.SnsAction(topic)
        failed = cloudwatch.MathExpression(
            expression="failed + timedout + aborted",
            using_metrics={
                "failed": state_machine.metric_failed(period=_FAILURE_PERIOD, statistic="Sum"),
                "timedout": state_machine.metric_timed_out(period=_FAILURE_PERIOD, statistic="Sum"),
                "aborted": state_machine.metric_aborted(period=_FAILURE_PERIOD, statistic="Sum"),
            },
            label="Sweeps failed, timed out or aborted",
            period=_FAILURE_PERIOD,
        )
        self.sweeps_failing = cloudwatch.Alarm(
            self,
            SWEEPS_FAILING,
            alarm_name=alarm_names(alarm_name_prefix)[0],
            alarm_description=(
                "A HyperPod NCCL sweep execution failed, timed out or was aborted: the monitor did not"
                " finish checking a cluster. Open the execution in the Step Functions console."
            ),
            metric=failed,
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.sweeps_failing.add_alarm_action(action)
        period = missed_sweep_period_seconds(sweep_rate_minutes=sweep_rate_minutes, missed_sweeps=missed_sweeps)
        self.sweeps_stopped = cloudwatch.Alarm(
            self,
            SWEEPS_STOPPED,
            alarm_name=alarm_names(alarm_name_prefix)[1],
            alarm_description=(
                f"No HyperPod NCCL sweep succeeded in {period // 60} minutes although one is scheduled every"
                f" {sweep_rate_minutes} minutes: the schedule, the trigger or the state machine is broken."
            ),
            metric=state_machine.metric_succeeded(period=Duration.seconds(period), statistic="Sum"),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            # No data means no execution at all: exactly what this alarm is for.
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
        )
        self.sweeps_stopped.add_alarm_action(action)
        # Without watched clusters nothing is scheduled, so silence is expected.
        if not clusters:
            self.sweeps_stopped.node.default_child.actions_enabled = False  # type: ignore[union-attr]
        # One message is one event or tick that started no sweep after every retry: page on the first.
        self.triggers_failed = cloudwatch.Alarm(
            self,
            TRIGGERS_FAILED,
            alarm_name=alarm_names(alarm_name_prefix)[2],
            alarm_description=(
                f"A HyperPod event or schedule tick started no sweep after every retry: its record is in the SQS"
                f" queue {failed_triggers.queue_name} (a Lambda invocation record holds the event as"
                " requestPayload and the trigger's error as responsePayload; an EventBridge or Scheduler"
                " dead letter is the event itself, its error in the message attributes). Fix the cause,"
                " re-send the event to the trigger function (aws lambda invoke --invocation-type Event),"
                " then delete the message."
            ),
            metric=failed_triggers.metric_approximate_number_of_messages_visible(
                period=_FAILURE_PERIOD, statistic="Maximum"
            ),
            threshold=0,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            # SQS sends no data for an idle, empty queue: nothing failed.
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.triggers_failed.add_alarm_action(action)

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=dashboard_name)
        self.dashboard.add_widgets(
            cloudwatch.AlarmStatusWidget(
                title="Monitor health",
                alarms=[self.sweeps_failing, self.sweeps_stopped, self.triggers_failed],
                width=24,
                height=3,
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Sweep executions",
                left=[
                    state_machine.metric_succeeded(statistic="Sum"),
                    state_machine.metric_failed(statistic="Sum"),
                    state_machine.metric_timed_out(statistic="Sum"),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Function errors",
                left=[fn.metric_errors(statistic="Sum", label=name) for name, fn in functions.items()],
                width=12,
            ),
        )
        for cluster in clusters:
            self.dashboard.add_widgets(*self._cluster_widgets(cluster.name))
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Triggers accepted / rejected (malformed or foreign events)",
                left=[
                    self._metric(METRIC_TRIGGERS_ACCEPTED, cluster=None),
                    self._metric(METRIC_TRIGGERS_REJECTED, cluster=None),
                ],
                width=24,
            )
        )

    @staticmethod
    def _metric(name: str, *, cluster: str | None, statistic: str = "Sum") -> cloudwatch.Metric:
        """A metric the handlers emit; Powertools adds the `service` dimension to every one."""
        dimensions = {"service": POWERTOOLS_SERVICE_NAME}
        if cluster is not None:
            dimensions[METRIC_DIMENSION_CLUSTER] = cluster
        return cloudwatch.Metric(
            namespace=METRICS_NAMESPACE, metric_name=name, dimensions_map=dimensions, statistic=statistic
        )

    def _cluster_widgets(self, cluster: str) -> list[cloudwatch.IWidget]:
        return [
            cloudwatch.GraphWidget(
                title=f"{cluster}: findings by priority",
                left=[
                    self._metric(metric, cluster=cluster, statistic="Maximum") for metric in METRIC_FINDINGS.values()
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title=f"{cluster}: nodes probed / unreachable",
                left=[
                    self._metric(METRIC_NODES_PROBED, cluster=cluster, statistic="Maximum"),
                    self._metric(METRIC_NODES_UNREACHABLE, cluster=cluster, statistic="Maximum"),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title=f"{cluster}: sweep duration (s)",
                left=[self._metric(METRIC_SWEEP_DURATION, cluster=cluster, statistic="Maximum")],
                width=8,
            ),
            # A sweep that ran but could not read the cluster counts as failed here; the sweep itself
            # notifies about it, so it is graphed rather than alarmed twice.
            cloudwatch.GraphWidget(
                title=f"{cluster}: sweeps completed / could not run / notifications sent",
                left=[
                    self._metric(METRIC_SWEEPS_COMPLETED, cluster=cluster),
                    self._metric(METRIC_SWEEP_FAILED, cluster=cluster),
                    self._metric(METRIC_NOTIFICATIONS, cluster=cluster),
                ],
                width=24,
            ),
        ]
