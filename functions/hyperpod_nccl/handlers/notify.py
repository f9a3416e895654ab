"""Notify state: publish what changed (or that the sweep could not run) to the alerts topic."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from hyperpod_nccl.handlers import connect_store, naming_aws_failures, powertools, sns_client
from hyperpod_nccl.monitor.payloads import SweepState
from hyperpod_nccl.monitor.settings import (
    METRIC_ALERTS_DROPPED,
    METRIC_DIMENSION_CLUSTER,
    METRIC_NOTIFICATIONS,
    MonitorSettings,
)
from hyperpod_nccl.monitor.states.notify import run_notify

logger, tracer, metrics = powertools("notify")


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Publish one sweep's notification and one message per changed incident, each at most once."""
    settings = MonitorSettings.from_env()
    state = SweepState.model_validate(event)
    logger.append_keys(sweep_id=state.sweep.sweep_id, cluster=state.sweep.cluster)
    store = connect_store(settings)
    sns = sns_client(settings)
    with naming_aws_failures("notify", store.table.meta.client, sns):
        output = run_notify(state, store, sns, topic_arn=settings.require_topic(), base_url=settings.reference_base_url)
    metrics.add_dimension(name=METRIC_DIMENSION_CLUSTER, value=state.sweep.cluster)
    # Incident messages are their own; alerts of earlier sweeps left unpublished go out first.
    sent = output.incident_messages + (1 if output.message_id else 0) + output.earlier_alerts
    metrics.add_metric(name=METRIC_NOTIFICATIONS, unit=MetricUnit.Count, value=sent)
    if output.dropped_alerts:
        metrics.add_metric(name=METRIC_ALERTS_DROPPED, unit=MetricUnit.Count, value=output.dropped_alerts)
    logger.info("notify", extra=output.model_dump())
    return output.model_dump(mode="json")
