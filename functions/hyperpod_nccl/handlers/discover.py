"""Discover state: the cluster, its nodes, orchestrator and probe plan (stored); node ids returned."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, Field

from hyperpod_nccl.handlers import collector_clients, connect_store, naming_aws_failures, powertools
from hyperpod_nccl.monitor.payloads import SweepRef
from hyperpod_nccl.monitor.settings import DEFAULT_MAP_MAX_CONCURRENCY, MonitorSettings, batches_at_once
from hyperpod_nccl.monitor.states.discover import run_discover

logger, tracer, metrics = powertools("discover")


class DiscoverInput(BaseModel):
    """`{"sweep": SweepRef, "max_batches_at_once": n}` from the state machine: the deployed ceiling
    of the probe Map's child executions at once (${MapMaxConcurrency}); absent in an execution
    started by an older definition, which had the default's."""

    sweep: SweepRef
    max_batches_at_once: int = Field(default=batches_at_once(DEFAULT_MAP_MAX_CONCURRENCY), ge=1)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Run Discover for one sweep."""
    settings = MonitorSettings.from_env()
    request = DiscoverInput.model_validate(event)
    logger.append_keys(sweep_id=request.sweep.sweep_id, cluster=request.sweep.cluster)
    store = connect_store(settings)
    aws = collector_clients(settings, request.sweep.region)
    with naming_aws_failures("discover", store.table.meta.client):
        output = run_discover(
            request.sweep, store, aws, settings.node_coverage, request.max_batches_at_once, settings.start_session_rate
        )
    logger.info(
        "discovered",
        extra={"targets": output.nodes, "discovered": output.discovered, "batches_at_once": output.batches_at_once},
    )
    return output.model_dump(mode="json")
