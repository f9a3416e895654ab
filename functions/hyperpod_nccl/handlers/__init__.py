"""Lambda entry points of the serverless monitor, one module per function, each exposing
`handler(event, context)` (see `hyperpod_nccl.monitor.settings.FUNCTION_ENVIRONMENT` for the
modules and the environment each reads). Handlers are thin: parse the input, call one
`hyperpod_nccl.monitor.states` function (the trigger: `monitor.lock.start_sweep`), return a small
model. Business logic lives in monitor/.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from botocore.config import Config
from pydantic import BaseModel

from hyperpod_nccl.aws_errors import AWS_CALL_ERRORS
from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.monitor.failures import describe_aws_failure, remember_operations
from hyperpod_nccl.monitor.settings import METRICS_NAMESPACE, MonitorSettings
from hyperpod_nccl.redaction import install_log_scrubber

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_stepfunctions import SFNClient

    from hyperpod_nccl.monitor.store import Store

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
    from hyperpod_nccl.monitor.payloads import SweepRef

    settings = MonitorSettings.from_env()
    sweep = SweepRef.model_validate(CollectorInput.model_validate(event).sweep)
    logger.append_keys(sweep_id=sweep.sweep_id, cluster=sweep.cluster)
    store = connect_store(settings)
    with naming_aws_failures(collect.__name__.removeprefix("run_"), store.table.meta.client):
        output = collect(sweep, store, collector_clients(settings, sweep.region), settings.node_coverage, settings)
    logger.info("collected", extra=output.model_dump())
    return output.model_dump(mode="json")


# --- AWS clients of the functions, and what their failures say --------------------------------


def sdk_config(settings: MonitorSettings) -> Config:
    """botocore configuration of the functions' own clients (table, topic, state machine)."""
    if settings.sdk_read_timeout is None:
        return Config(user_agent_extra="hyperpod-nccl")
    return Config(read_timeout=settings.sdk_read_timeout, user_agent_extra="hyperpod-nccl")


def connect_store(settings: MonitorSettings) -> Store:
    """The monitor's table (FINDINGS_TABLE_NAME), with the functions' client configuration."""
    from hyperpod_nccl.monitor.store import Store

    store = Store.connect(settings.require_table(), config=sdk_config(settings))
    remember_operations(store.table.meta.client)
    return store


def sns_client(settings: MonitorSettings) -> SNSClient:
    """The alerts topic's client, with the functions' configuration."""
    import boto3

    client = boto3.client("sns", config=sdk_config(settings))
    remember_operations(client)
    return client


def sfn_client(settings: MonitorSettings) -> SFNClient:
    """The sweep state machine's client, with the functions' configuration."""
    import boto3

    client = boto3.client("stepfunctions", config=sdk_config(settings))
    remember_operations(client)
    return client


def collector_clients(settings: MonitorSettings, region: str) -> AwsClients:
    """The collectors' clients for one sweep (their errors become degraded sources)."""
    if settings.sdk_read_timeout is None:  # AwsClients' own default
        return AwsClients(region=region)
    return AwsClients(region=region, read_timeout=settings.sdk_read_timeout)


class AwsCallFailed(RuntimeError):
    """One of the function's own AWS calls (table, topic, state machine) failed after the SDK's
    retries. The message names the IAM action and the fix; Step Functions shows it as the
    task's error `AwsCallFailed` and its cause."""


@contextmanager
def naming_aws_failures(function: str, *clients: Any) -> Iterator[None]:
    """Re-raise an AWS error escaping the function as `AwsCallFailed` naming the action and the
    fix. `clients` are the function's own clients (to tell which service an operation is of)."""
    try:
        yield
    except AWS_CALL_ERRORS as error:
        raise AwsCallFailed(describe_aws_failure(function, error, clients)) from error
