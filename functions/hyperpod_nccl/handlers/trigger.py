"""Trigger: EventBridge Scheduler ticks and HyperPod EventBridge events start (or fold into) a
sweep; malformed or foreign events are rejected with a logged reason and start nothing."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from hyperpod_nccl.handlers import connect_store, naming_aws_failures, powertools, sfn_client
from hyperpod_nccl.monitor.events import Rejection, parse_trigger
from hyperpod_nccl.monitor.lock import start_sweep
from hyperpod_nccl.monitor.settings import METRIC_TRIGGERS_ACCEPTED, METRIC_TRIGGERS_REJECTED, MonitorSettings

logger, tracer, metrics = powertools("trigger")


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    """Validate the event and start one sweep per cluster it names."""
    settings = MonitorSettings.from_env()
    parsed = parse_trigger(event, settings.clusters)
    if isinstance(parsed, Rejection):
        logger.warning("event rejected", extra=parsed.model_dump())
        metrics.add_metric(name=METRIC_TRIGGERS_REJECTED, unit=MetricUnit.Count, value=1)
        return {"rejected": parsed.model_dump(), "outcomes": []}
    store = connect_store(settings)
    sfn = sfn_client(settings)
    outcomes = []
    for trigger in parsed:
        # A failure re-raised here fails the invocation. EventBridge (rule or Scheduler) does not
        # retry it: it invoked the function asynchronously and is done once Lambda accepted the
        # event. Lambda retries it (settings.TRIGGER_RETRY_ATTEMPTS times), then sends its record to
        # the on-failure destination (the failed-triggers queue, alarmed). A retry is idempotent:
        # same trigger id, same execution name (monitor.lock.start_sweep).
        with naming_aws_failures("trigger", store.table.meta.client, sfn):
            outcome = start_sweep(
                trigger,
                store,
                sfn,
                state_machine_arn=settings.require_state_machine(),
                history_seconds=settings.history_seconds,
            )
        logger.info("trigger handled", extra=outcome.model_dump())
        metrics.add_metric(name=METRIC_TRIGGERS_ACCEPTED, unit=MetricUnit.Count, value=1)
        outcomes.append(outcome.model_dump())
    return {"rejected": None, "outcomes": outcomes}
