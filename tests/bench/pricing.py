"""What one monitor sweep costs in AWS: public list prices (one place, dated) and the arithmetic
that turns a sweep's counted usage into dollars per sweep and per month.

Prices are US East (N. Virginia) / US West (Oregon) on-demand list prices, without free tiers
(the free tiers are account-wide and shared with everything else the account runs), as published
on the pages named beside each constant. Checked 2026-11-30; prices change, re-check before quoting.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

PRICES_CHECKED_ON = "2026-11-30"
PRICES_REGION = "us-east-1 / us-west-2"

# "AWS Step Functions Pricing", Standard Workflows: $0.025 per 1,000 state transitions (retries
# count). A Distributed Map is charged one transition per child execution it starts; Inline Map
# iterations are not charged, the states inside them are ("Transitions" in the developer guide).
SFN_STANDARD_PER_TRANSITION = 0.025 / 1000
# Same page, Express Workflows: $1.00 per million requests; duration $0.00001667 per GB-second for
# the first 1,000 GB-hours a month, memory billed in 64 MB chunks, duration rounded up to 100 ms.
SFN_EXPRESS_PER_REQUEST = 1.00 / 1_000_000
SFN_EXPRESS_PER_GB_SECOND = 0.00001667
SFN_EXPRESS_MEMORY_CHUNK_MB = 64
SFN_EXPRESS_DURATION_STEP_SECONDS = 0.1
# "AWS Lambda Pricing", Arm (Graviton2): $0.0000133334 per GB-second (first 7.5 billion GB-s a
# month) and $0.20 per million requests; duration rounded up to 1 ms.
LAMBDA_ARM_PER_GB_SECOND = 0.0000133334
LAMBDA_PER_REQUEST = 0.20 / 1_000_000
# "Amazon DynamoDB Pricing for On-Demand Capacity" (after the November 2024 reduction): $0.625 per
# million write request units (1 WRU per 1 KB written) and $0.125 per million read request units
# (1 RRU per 4 KB strongly consistent read, half for eventually consistent).
DYNAMODB_PER_WRITE_UNIT = 0.625 / 1_000_000
DYNAMODB_PER_READ_UNIT = 0.125 / 1_000_000
# "Amazon SNS Pricing": $0.50 per million publish requests (each 64 KB chunk is one request).
SNS_PER_PUBLISH = 0.50 / 1_000_000
# "Amazon CloudWatch Pricing", Logs: $0.50 per GB ingested (Standard log class).
LOGS_PER_GB_INGESTED = 0.50
# "AWS X-Ray Pricing": $5.00 per million traces recorded (both the state machine and the
# functions trace actively; one sweep is one trace).
XRAY_PER_TRACE_RECORDED = 5.00 / 1_000_000

SECONDS_PER_MONTH = 30 * 24 * 3600


def sweeps_per_month(cadence_seconds: int) -> float:
    """Scheduled sweeps in a 30-day month at one sweep every `cadence_seconds`."""
    return SECONDS_PER_MONTH / cadence_seconds


class LambdaUsage(BaseModel):
    """One function's invocations in one sweep."""

    function: str
    invocations: int
    billed_seconds: float = Field(description="summed duration of every invocation")
    memory_mb: int


class ExpressUsage(BaseModel):
    """The Express child executions of one sweep."""

    executions: int
    billed_seconds: float = Field(description="summed duration, each rounded up to 100 ms")
    memory_mb: int = SFN_EXPRESS_MEMORY_CHUNK_MB


class SweepUsage(BaseModel):
    """Everything one sweep consumed that AWS bills (counted from a run, or modelled)."""

    standard_transitions: int
    express: ExpressUsage = Field(default_factory=lambda: ExpressUsage(executions=0, billed_seconds=0.0))
    lambdas: list[LambdaUsage] = Field(default_factory=list)
    dynamodb_write_units: float = 0.0
    dynamodb_read_units: float = 0.0
    sns_publishes: int = 0
    log_bytes: int = 0
    traces: int = 1


class SweepCost(BaseModel):
    """Dollars per sweep, by service."""

    step_functions_standard: float
    step_functions_express: float
    lambda_compute: float
    lambda_requests: float
    dynamodb: float
    sns: float
    logs: float
    xray: float

    @property
    def total(self) -> float:
        """The whole sweep."""
        return (
            self.step_functions_standard
            + self.step_functions_express
            + self.lambda_compute
            + self.lambda_requests
            + self.dynamodb
            + self.sns
            + self.logs
            + self.xray
        )

    def monthly(self, cadence_seconds: int) -> float:
        """A month of sweeps at `cadence_seconds`."""
        return self.total * sweeps_per_month(cadence_seconds)


def express_billed_seconds(seconds: float) -> float:
    """One Express execution's duration as billed (rounded up to the next 100 ms)."""
    steps = -(-round(seconds * 1000) // round(SFN_EXPRESS_DURATION_STEP_SECONDS * 1000))
    return max(1, steps) * SFN_EXPRESS_DURATION_STEP_SECONDS


def express_billed_memory_mb(used_mb: float) -> int:
    """Express memory as billed: whole 64 MB chunks."""
    chunks = max(1, -(-int(used_mb) // SFN_EXPRESS_MEMORY_CHUNK_MB))
    return chunks * SFN_EXPRESS_MEMORY_CHUNK_MB


def cost_of(usage: SweepUsage) -> SweepCost:
    """Price one sweep's usage."""
    gb_seconds = sum(fn.billed_seconds * fn.memory_mb / 1024 for fn in usage.lambdas)
    requests = sum(fn.invocations for fn in usage.lambdas)
    express = usage.express
    return SweepCost(
        step_functions_standard=usage.standard_transitions * SFN_STANDARD_PER_TRANSITION,
        step_functions_express=express.executions * SFN_EXPRESS_PER_REQUEST
        + express.billed_seconds * express.memory_mb / 1024 * SFN_EXPRESS_PER_GB_SECOND,
        lambda_compute=gb_seconds * LAMBDA_ARM_PER_GB_SECOND,
        lambda_requests=requests * LAMBDA_PER_REQUEST,
        dynamodb=usage.dynamodb_write_units * DYNAMODB_PER_WRITE_UNIT
        + usage.dynamodb_read_units * DYNAMODB_PER_READ_UNIT,
        sns=usage.sns_publishes * SNS_PER_PUBLISH,
        logs=usage.log_bytes / 1024**3 * LOGS_PER_GB_INGESTED,
        xray=usage.traces * XRAY_PER_TRACE_RECORDED,
    )
