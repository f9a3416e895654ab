"""Aggregate state: the CLI's engine over the stored inventory; findings history, diff, lock."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from hyperpod_nccl.handlers import connect_store, naming_aws_failures, powertools
from hyperpod_nccl.monitor.payloads import SweepState
from hyperpod_nccl.monitor.settings import (
    METRIC_DIMENSION_CLUSTER,
    METRIC_FINDINGS,
    METRIC_NODES_PROBED,
    METRIC_NODES_UNREACHABLE,
    METRIC_SWEEP_DURATION,
    METRIC_SWEEP_FAILED,
    METRIC_SWEEPS_COMPLETED,
    MonitorSettings,
)
from hyperpod_nccl.monitor.states.aggregate import run_aggregate

logger, tracer, metrics = powertools("aggregate")


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Aggregate one sweep and publish its metrics."""
    settings = MonitorSettings.from_env()
    state = SweepState.model_validate(event)
    logger.append_keys(sweep_id=state.sweep.sweep_id, cluster=state.sweep.cluster)
    store = connect_store(settings)
    with naming_aws_failures("aggregate", store.table.meta.client):
        output = run_aggregate(state, store, history_seconds=settings.history_seconds)
    metrics.add_dimension(name=METRIC_DIMENSION_CLUSTER, value=state.sweep.cluster)
    for priority, name in METRIC_FINDINGS.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=output.open_by_priority.get(priority, 0))
    metrics.add_metric(name=METRIC_NODES_PROBED, unit=MetricUnit.Count, value=output.nodes_probed)
    metrics.add_metric(name=METRIC_NODES_UNREACHABLE, unit=MetricUnit.Count, value=output.nodes_unreachable)
    metrics.add_metric(name=METRIC_SWEEP_DURATION, unit=MetricUnit.Seconds, value=output.duration_seconds)
    metrics.add_metric(name=METRIC_SWEEP_FAILED, unit=MetricUnit.Count, value=int(output.status == "failed"))
    metrics.add_metric(name=METRIC_SWEEPS_COMPLETED, unit=MetricUnit.Count, value=int(output.status != "failed"))
    logger.info("aggregated", extra=output.model_dump(mode="json", exclude={"next"}))
    return output.model_dump(mode="json")
