"""What one monitor sweep costs in AWS: public list prices (one place, dated) and the arithmetic
that turns a sweep's counted usage into dollars per sweep and per month.

Prices are US East (N. Virginia) / US West (Oregon) on-demand list prices, without free tiers
(the free tiers are account-wide and shared with everything else the account runs), as published
on the pages named beside each constant. The per-sweep prices were checked 2026-11-30, the stack's
other billed items (`PRICES_CHECKED_ON`) 2026-12-02, each read through the `search` tool's stored
copies of the pages: where only a third-party copy or summary of a page was found, the comment
says so. Prices change, re-check before quoting.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

PRICES_CHECKED_ON = "2026-12-02"
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

# "AWS Lambda standardizes billing for INIT phase" (AWS Compute Blog, read in a stored copy
# 2026-12-02): from August 1, 2025 the INIT phase of on-demand invocations of ZIP functions on
# managed runtimes is billed like the INVOKE phase (same GB-second price, at the configured memory).
LAMBDA_INIT_BILLED = True
# "Amazon SNS Pricing" (aws.amazon.com/sns/pricing, not found in the stored pages; the figure as
# widely quoted): e-mail/e-mail-JSON deliveries $2.00 per 100,000. Deliveries to AWS Chatbot (Amazon
# Q Developer in chat applications) carry no SNS or Chatbot charge beyond the publish (assumed).
SNS_PER_EMAIL_DELIVERY = 2.00 / 100_000
# "Amazon CloudWatch Pricing" (aws.amazon.com/cloudwatch/pricing; the stored copies found were
# third-party summaries that quote these figures): custom metrics $0.30 per metric-month (first
# 10,000; prorated by the hour a metric is emitted), standard-resolution alarms $0.10 per alarm
# metric-month, high-resolution (period under 60 s) $0.30, an alarm on a metric math expression
# billed per metric it reads; dashboards $3.00 per dashboard-month (3 free per account, up to 50
# metrics each); Logs: $0.50 per GB ingested (Standard class; Lambda and Step Functions logs are
# vended logs, whose first pricing tier is the same $0.50), $0.03 per GB-month stored.
CLOUDWATCH_PER_METRIC_MONTH = 0.30
CLOUDWATCH_PER_STANDARD_ALARM_METRIC = 0.10
CLOUDWATCH_PER_HIGH_RESOLUTION_ALARM_METRIC = 0.30
CLOUDWATCH_HIGH_RESOLUTION_BELOW_SECONDS = 60
CLOUDWATCH_PER_DASHBOARD_MONTH = 3.00
CLOUDWATCH_FREE_DASHBOARDS = 3
LOGS_PER_GB_MONTH_STORED = 0.03
# "AWS Key Management Service Pricing" (aws.amazon.com/kms/pricing, stored copy read 2026-12-02):
# "Each AWS KMS key that you create in KMS costs $1/month"; "If you enable automatic key rotation,
# each newly generated backing key costs an additional $1/month" (AWS's April 2024 change caps that
# at the second rotation: not in the stored copy, unverified). AWS managed keys (aws/dynamodb) have
# no monthly fee. Requests: $0.03 per 10,000 symmetric requests (the stored copy stops before the
# request table; the figure as the third-party summaries found quote it), charged also when an AWS
# service makes them on the account's behalf.
KMS_PER_KEY_MONTH = 1.00
KMS_PER_ROTATION_MONTH = 1.00
KMS_MAX_BILLED_ROTATIONS = 2
KMS_PER_REQUEST = 0.03 / 10_000
# "Amazon SNS Developer Guide", Key management, "Estimating AWS KMS costs" (stored copy read
# 2026-12-02): R = B / D * (2 * P), "Amazon SNS reuses a data key for up to 5 minutes", P the
# publishing principals. SQS's KmsDataKeyReusePeriodSeconds defaults to 300 s (the queue's template
# sets none): one GenerateDataKey per principal per reuse period that it sends in.
SNS_DATA_KEY_REUSE_SECONDS = 300
SQS_DATA_KEY_REUSE_SECONDS = 300
# "Amazon DynamoDB Developer Guide", encryption at rest (not in the stored pages; unverified here):
# DynamoDB caches each principal's table key and calls KMS Decrypt again after five minutes of
# inactivity, so a principal idle between sweeps costs one request per sweep.
DYNAMODB_TABLE_KEY_CACHE_SECONDS = 300
# "Amazon DynamoDB Pricing for On-Demand Capacity" (aws.amazon.com/dynamodb/pricing/on-demand; the
# stored copy found stops before the storage table, figures as AWS has published them since 2024,
# unverified here): Standard table class storage $0.25 per GB-month, continuous backups (PITR)
# $0.20 per GB-month of table size; each item is stored with 100 bytes of index overhead.
DYNAMODB_PER_GB_MONTH = 0.25
DYNAMODB_PITR_PER_GB_MONTH = 0.20
DYNAMODB_ITEM_OVERHEAD_BYTES = 100
# "Amazon EventBridge Pricing", Scheduler (aws.amazon.com/eventbridge/pricing; AWS's page not in the
# stored pages, the figures as third-party summaries read 2026-12-02 quote them): $1.00 per million
# scheduled invocations after 14 million free a month; AWS service events delivered to the default
# bus, which the rules match, are free.
SCHEDULER_PER_INVOCATION = 1.00 / 1_000_000

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


class MonthlyItem(BaseModel):
    """One billed item of the stack for a month: what it costs and how that was counted."""

    name: str
    usd: float
    basis: str = Field(description="the counted quantity and its price, in words")


def kms_key_month(rotations: int = 0) -> float:
    """A customer managed key's monthly fee after `rotations` automatic rotations."""
    return KMS_PER_KEY_MONTH + KMS_PER_ROTATION_MONTH * min(rotations, KMS_MAX_BILLED_ROTATIONS)


def alarm_month(metrics: int, period_seconds: int) -> float:
    """An alarm's monthly charge: one alarm metric per metric it reads, at its resolution."""
    high = period_seconds < CLOUDWATCH_HIGH_RESOLUTION_BELOW_SECONDS
    return metrics * (CLOUDWATCH_PER_HIGH_RESOLUTION_ALARM_METRIC if high else CLOUDWATCH_PER_STANDARD_ALARM_METRIC)


def dashboards_month(dashboards: int, *, free_left: int = 0) -> float:
    """Dashboards beyond the account's free ones (`free_left` of the 3 not used by anything else)."""
    return max(0, dashboards - free_left) * CLOUDWATCH_PER_DASHBOARD_MONTH


def sns_kms_requests(publishes: float, publishers: int, seconds: float) -> float:
    """KMS requests SNS makes for an encrypted topic in `seconds`: two per publishing principal per
    data-key reuse period in which it publishes (SNS's formula, capped by the publishes made)."""
    periods = seconds / SNS_DATA_KEY_REUSE_SECONDS
    return 2 * publishers * min(publishes, periods)
