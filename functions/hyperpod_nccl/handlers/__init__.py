"""Lambda entry points of the serverless monitor, one module per function, each exposing
`handler(event, context)` (see `hyperpod_nccl.monitor.settings.FUNCTION_ENVIRONMENT` for the
modules and the environment each reads). Handlers are thin: parse the input, call one
`hyperpod_nccl.monitor.sweep` function, return a small model. Business logic lives in monitor/.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from pydantic import BaseModel

from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.monitor.settings import METRICS_NAMESPACE
from hyperpod_nccl.redaction import install_log_scrubber

SERVICE = "hyperpod-nccl-monitor"


def powertools(function: str) -> tuple[Logger, Tracer, Metrics]:
    """Logger, Tracer and Metrics for one function (Powertools env variables still override).

    Also installs the log scrubber, so no secret-shaped token reaches CloudWatch Logs."""
    install_log_scrubber()
    logger = Logger(service=SERVICE, child=False)
    logger.append_keys(function=function)
    return logger, Tracer(service=SERVICE), Metrics(namespace=METRICS_NAMESPACE, service=SERVICE)


class CollectorInput(BaseModel):
    """`{"sweep": SweepRef}`: what the state machine gives each collector state."""

    sweep: Any


def run_collector(event: dict[str, Any], logger: Logger, collect: Callable[..., BaseModel]) -> dict[str, Any]:
    """The body of a collector state (CloudWatch scan, Kubernetes): run `collect` for the sweep,
    which stores its inventory in the table, and return the small summary it produces."""
    from hyperpod_nccl.monitor.settings import MonitorSettings
    from hyperpod_nccl.monitor.store import Store
    from hyperpod_nccl.monitor.sweep import SweepRef

    settings = MonitorSettings.from_env()
    sweep = SweepRef.model_validate(CollectorInput.model_validate(event).sweep)
    logger.append_keys(sweep_id=sweep.sweep_id, cluster=sweep.cluster)
    store = Store.connect(settings.require_table())
    output = collect(sweep, store, AwsClients(region=sweep.region), settings.node_coverage)
    logger.info("collected", extra=output.model_dump())
    return output.model_dump(mode="json")
