"""Lambda entry points of the serverless monitor, one module per function, each exposing
`handler(event, context)` (see `hyperpod_nccl.monitor.settings.FUNCTION_ENVIRONMENT` for the
modules and the environment each reads). Handlers are thin: parse the input, call one
`hyperpod_nccl.monitor.sweep` function, return a small model. Business logic lives in monitor/.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

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
