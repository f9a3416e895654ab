"""Kubernetes state: read the EKS objects, store the Kubernetes inventory."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from hyperpod_nccl.handlers import powertools, run_collector
from hyperpod_nccl.monitor.states.collect import run_collect_kubernetes

logger, tracer, metrics = powertools("collect_kubernetes")


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Run the collector for one sweep; the result goes to the table, a summary is returned."""
    return run_collector(event, logger, run_collect_kubernetes)
