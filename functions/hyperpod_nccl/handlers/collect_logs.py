"""CloudWatch scan state: scan the cluster's log group, store the log inventory."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel

from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.handlers import powertools
from hyperpod_nccl.monitor.settings import MonitorSettings
from hyperpod_nccl.monitor.store import Store
from hyperpod_nccl.monitor.sweep import SweepRef, run_collect_logs

logger, tracer, metrics = powertools("collect_logs")


class CollectorInput(BaseModel):
    """`{"sweep": SweepRef}` from the state machine."""

    sweep: SweepRef


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Run the collector for one sweep; the result goes to the table, a summary is returned."""
    settings = MonitorSettings.from_env()
    request = CollectorInput.model_validate(event)
    logger.append_keys(sweep_id=request.sweep.sweep_id, cluster=request.sweep.cluster)
    store = Store.connect(settings.require_table())
    output = run_collect_logs(request.sweep, store, AwsClients(region=request.sweep.region), settings.node_coverage)
    logger.info("collected", extra=output.model_dump())
    return output.model_dump(mode="json")
