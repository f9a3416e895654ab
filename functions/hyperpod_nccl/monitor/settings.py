"""The monitor's configuration surface: THE single source of Lambda environment-variable names,
the table of the monitor's Lambda functions (`LAMBDAS`), the typed settings each handler reads, the
DynamoDB table schema and the sweep's time budgets.

The CDK app (infra/) builds every function (its environment, memory, table grants and state machine
placeholder) from `LAMBDAS` and the table from `TABLE_SCHEMA`; the local emulation
(`hyperpod_nccl_sim.serverless`) reads the same two. A name or key changed here changes every side.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hyperpod_nccl import thresholds
from hyperpod_nccl.pacing import probes_to_keep_pace
from hyperpod_nccl.references import REFERENCES_URL

# --- environment-variable names --------------------------------------------------------------
FINDINGS_TABLE_ENV = "FINDINGS_TABLE_NAME"
ALERTS_TOPIC_ENV = "ALERTS_TOPIC_ARN"
STATE_MACHINE_ENV = "SWEEP_STATE_MACHINE_ARN"
REFERENCE_BASE_URL_ENV = "REFERENCE_BASE_URL"
NODE_COVERAGE_ENV = "NODE_COVERAGE"
CLUSTERS_ENV = "WATCHED_CLUSTERS"
HISTORY_DAYS_ENV = "HISTORY_RETENTION_DAYS"
# JSON object probe role -> name of the stack's own Session document for that role
# (`hyperpod_nccl.probe.documents`): ProbeNode starts its sessions with these and nothing else.
PROBE_DOCUMENTS_ENV = "PROBE_SESSION_DOCUMENTS"
# Optional, read by every handler, not set by infra: the SDK read timeout of the functions' AWS
# clients (unset: botocore's 60 s for the table, topic and state machine, the collectors' 30 s).
# The local emulation sets it low to turn a held call into a real client-side timeout.
SDK_READ_TIMEOUT_ENV = "AWS_SDK_READ_TIMEOUT_SECONDS"
# The account-wide rates the monitor paces itself at (per second; unset: thresholds.py's defaults),
# shared by every sandbox through the table (monitor/shared_pacer.py, docs/pacing.md), and the
# account id that names the pace's item (infra: the stack's account).
START_SESSION_RATE_ENV = "START_SESSION_PER_SECOND"
LOG_FILTER_RATE_ENV = "LOG_FILTER_CALLS_PER_SECOND"
ACCOUNT_ID_ENV = "MONITOR_ACCOUNT_ID"


def handler_path(module: str) -> str:
    """The Lambda handler string of a handler module, e.g. "hyperpod_nccl.handlers.discover.handler"."""
    return f"hyperpod_nccl.handlers.{module}.handler"


@dataclass(frozen=True)
class LambdaFunction:
    """One Lambda function of the monitor: every fact about it that the runtime, infra and the local
    emulation need. Each is one entry of `LAMBDAS`; nothing else lists the handlers."""

    # The handler module under `hyperpod_nccl.handlers` (snake case, e.g. "collect_logs").
    module: str
    # The variables above that its handler reads (infra sets exactly these). Powertools' own
    # variables (POWERTOOLS_SERVICE_NAME, ...) are Lambda defaults set by infra for every function.
    environment: tuple[str, ...]
    # The DynamoDB actions its code path makes on the table (infra grants exactly these;
    # tests/infra/test_probe_access.py derives them from the handlers' Store calls and fails on any
    # difference). Query includes the gsi1 index (Store.open_findings).
    table_actions: tuple[str, ...]
    # Lambda memory (MB); CPU scales with it.
    memory_mb: int
    # A Task of the sweep state machine, invoked through its placeholder `${<Name>FunctionArn}`
    # (the trigger is not: schedules and EventBridge rules call it).
    in_sweep: bool = True

    @property
    def name(self) -> str:
        """The module in PascalCase ("CollectLogs"): infra's construct id and the ASL placeholder's stem."""
        return "".join(part.capitalize() for part in self.module.split("_"))

    @property
    def asl_placeholder(self) -> str | None:
        """The placeholder of its ARN in sweep.asl.json, e.g. "CollectLogsFunctionArn"; None outside the sweep."""
        return f"{self.name}FunctionArn" if self.in_sweep else None

    @property
    def handler(self) -> str:
        """Its Lambda handler string (`handler_path`)."""
        return handler_path(self.module)


LAMBDAS: dict[str, LambdaFunction] = {
    function.module: function
    for function in (
        LambdaFunction(
            "trigger",
            environment=(FINDINGS_TABLE_ENV, STATE_MACHINE_ENV, CLUSTERS_ENV, HISTORY_DAYS_ENV),
            # start_sweep: the per-cluster lock (put/get, update on fold-in, delete on a failed start).
            table_actions=("GetItem", "PutItem", "UpdateItem", "DeleteItem"),
            memory_mb=256,
            in_sweep=False,
        ),
        LambdaFunction(
            "discover",
            # The StartSession rate sizes the probe Map's concurrency (`sized_batches_at_once`).
            environment=(FINDINGS_TABLE_ENV, NODE_COVERAGE_ENV, HISTORY_DAYS_ENV, START_SESSION_RATE_ENV),
            # run_discover: the sweep's reference and its targets in one batch; the previous full
            # sweep's probe time (a query of the cluster's sweep records) sizes the probe Map.
            table_actions=("PutItem", "BatchWriteItem", "Query"),
            memory_mb=512,
        ),
        LambdaFunction(
            "collect_logs",
            environment=(FINDINGS_TABLE_ENV, HISTORY_DAYS_ENV, LOG_FILTER_RATE_ENV, ACCOUNT_ID_ENV),
            # UpdateItem: the account's FilterLogEvents pace (Store.reserve_start, escalate_slowdown, push_back_start).
            table_actions=("GetItem", "PutItem", "UpdateItem"),
            memory_mb=512,
        ),
        LambdaFunction(
            "collect_kubernetes",
            environment=(FINDINGS_TABLE_ENV, HISTORY_DAYS_ENV),
            table_actions=("GetItem", "PutItem"),
            memory_mb=512,
        ),
        LambdaFunction(
            "probe_node",
            environment=(
                FINDINGS_TABLE_ENV,
                HISTORY_DAYS_ENV,
                PROBE_DOCUMENTS_ENV,
                START_SESSION_RATE_ENV,
                ACCOUNT_ID_ENV,
            ),
            # UpdateItem: the account's StartSession pace (Store.reserve_start, escalate_slowdown, push_back_start).
            table_actions=("GetItem", "PutItem", "UpdateItem"),
            # Waits on one SSM session; about 80-90 MB at rest (BENCHMARKS.md), plus about 4x the node's
            # answer while parsing and storing it, bounded by PROBE_NODE_OUTPUT_MAX_BYTES (16 MiB).
            # Billed per GB-s while waiting, so no more than that.
            memory_mb=256,
        ),
        LambdaFunction(
            "aggregate",
            environment=(FINDINGS_TABLE_ENV, HISTORY_DAYS_ENV, REFERENCE_BASE_URL_ENV),
            # run_aggregate: findings (in batches), their history, incidents, the sweep record and the lock.
            table_actions=("GetItem", "PutItem", "BatchWriteItem", "Query", "UpdateItem", "DeleteItem"),
            # It runs the whole check engine over every node's parsed probe result at once: about
            # 120 KB per node at peak over a 94 MB process (BENCHMARKS.md, Memory: 1,242 MB at
            # 10,000 nodes, measured 2026-12-07). 2,048 MB leaves Step Functions' 256 KiB state
            # (about 10,900 nodes) the limit that binds; one vCPU is 1,769 MB, so little is billed
            # beyond what the CPU time costs anyway. tests/unit/test_aggregate_memory_budget.py guards it.
            memory_mb=2048,
        ),
        LambdaFunction(
            "notify",
            environment=(FINDINGS_TABLE_ENV, ALERTS_TOPIC_ENV, REFERENCE_BASE_URL_ENV, HISTORY_DAYS_ENV),
            # run_notify: pending alerts (query, put, delete when sent) and the sweep's findings.
            table_actions=("GetItem", "PutItem", "Query", "DeleteItem"),
            memory_mb=256,
        ),
    )
}

# Views of `LAMBDAS` by fact, for readers that need one (edit `LAMBDAS`, never these).
HANDLER_MODULES: tuple[str, ...] = tuple(LAMBDAS)
FUNCTION_ENVIRONMENT: dict[str, tuple[str, ...]] = {f.module: f.environment for f in LAMBDAS.values()}
TABLE_ACTIONS: dict[str, tuple[str, ...]] = {f.module: f.table_actions for f in LAMBDAS.values()}
# ASL placeholder names of the state machine's functions (infra passes their ARNs as the state
# machine's DefinitionSubstitutions; the local emulation renders them into the definition).
ASL_FUNCTION_PLACEHOLDERS: dict[str, str] = {
    f.module: f.asl_placeholder for f in LAMBDAS.values() if f.asl_placeholder is not None
}


# --- Outputs of the monitor's stack the CLI's read side looks up (infra/constants.py re-exports them)
STACK_OUTPUT_TABLE = "FindingsTableName"
STACK_OUTPUT_TRIGGER_FUNCTION = "TriggerFunctionName"
# The watched clusters, as CLUSTERS_ENV holds them (JSON list of WatchedCluster).
STACK_OUTPUT_WATCHED_CLUSTERS = "WatchedClusters"


# --- DynamoDB single table (access patterns documented in monitor/store.py) -------------------
# The table's key and TTL attribute names: the schema below and monitor/store.py, which spells every
# key and item with them (tests/unit/test_store_owns_table.py: no other module spells them).
PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "expires_at"
GSI1 = "gsi1"
GSI1_PARTITION_KEY = "gsi1pk"
GSI1_SORT_KEY = "gsi1sk"
TABLE_SCHEMA: dict[str, object] = {
    "partition_key": {"name": PARTITION_KEY, "type": "S"},
    "sort_key": {"name": SORT_KEY, "type": "S"},
    "ttl_attribute": TTL_ATTRIBUTE,
    "global_secondary_indexes": [
        {
            "index_name": GSI1,
            "partition_key": {"name": GSI1_PARTITION_KEY, "type": "S"},
            "sort_key": {"name": GSI1_SORT_KEY, "type": "S"},
            "projection": "ALL",
        }
    ],
}

# --- time budgets ------------------------------------------------------------------------------
# One node's probe state, substituted as ${ProbeTimeoutSeconds} (and its Lambda's timeout): the
# design card's 180 s SSM budget, plus the time to store what arrived when that budget ran out (a
# node whose GPU tools hang still yields the sections before the hang). Equal to the budget, the
# Lambda was killed while the SSM client gave up, and the partial output was lost.
PROBE_STORE_MARGIN_SECONDS = 30
PROBE_TIMEOUT_SECONDS = int(thresholds.SSM_NODE_BUDGET_SECONDS) + PROBE_STORE_MARGIN_SECONDS
# What ProbeNode reads of one node's answer. Parsing and storing an answer peaks at about 4x its
# size on top of the ~85 MB the function needs anyway (measured with tracemalloc: 16 MiB -> 64 MiB),
# which fits ProbeNode's 256 MB (`LAMBDAS`); the CLI's 64 MiB would not.
PROBE_NODE_OUTPUT_MAX_BYTES = 16 << 20
# Default ceiling of node probes running at once (infra's mapMaxConcurrency, substituted as
# ${MapMaxConcurrency} in child executions: `batches_at_once`). Each sweep sizes its own concurrency
# below it from its cluster's probe times (`sized_batches_at_once`): probes start SSM sessions, whose
# StartSession rate is account-wide (3/s), so more than rate x probe seconds only makes Lambdas wait
# (billed time) without finishing sooner, and fewer leaves the rate unused. 64 lets the
# EXPECTED_PROBE_SECONDS probe reach the default rate (3/s x 20 s = 60 probes, 16 children).
DEFAULT_MAP_MAX_CONCURRENCY = 64
# Nodes per child execution of the probe Map (Discover batches the node ids), and how many of them
# its inline Map probes at once (its MaxConcurrency in sweep.asl.json). A child is an EXPRESS
# execution, stopped at aws_limits.EXPRESS_EXECUTION_MAX_SECONDS: its worst case, every node of the
# batch held for the whole probe state timeout, must end inside that limit (`express_child_worst_seconds`),
# so a batch is probed in one round. Bigger batches cost fewer parent state transitions but make more
# probe slots wait for the slowest node of their batch; 4 is between the two (8 two at a time was
# four rounds of up to 210 s, which Express stops at 300 s, during the second).
PROBE_BATCH_SIZE = 4
PROBE_BATCH_CONCURRENCY = 4
# What a child spends besides its probes: starting, invoking (a cold ProbeNode Lambda) and the
# ProbeNode state's Lambda retries (1 s, then 2 s).
EXPRESS_CHILD_OVERHEAD_SECONDS = 30


def express_child_worst_seconds(
    batch_size: int = PROBE_BATCH_SIZE,
    concurrency: int = PROBE_BATCH_CONCURRENCY,
    probe_seconds: int = PROBE_TIMEOUT_SECONDS,
) -> int:
    """The longest one child of the probe Map runs: every node of its batch held for the whole probe
    state timeout, `concurrency` at a time, plus the child's overhead."""
    rounds = -(-batch_size // concurrency)
    return rounds * probe_seconds + EXPRESS_CHILD_OVERHEAD_SECONDS


def batches_at_once(probes_at_once: int) -> int:
    """Child executions of the probe Map running at once for `probes_at_once` concurrent probes
    (substituted as ${MapMaxConcurrency}: the ceiling Discover sizes the Distributed Map's
    MaxConcurrencyPath under, `sized_batches_at_once`)."""
    return max(1, -(-probes_at_once // PROBE_BATCH_CONCURRENCY))


def batch_targets(instance_ids: list[str], children_at_once: int | None = None) -> list[list[str]]:
    """The probe Map's items: node ids in batches, in plan order.

    Batches of PROBE_BATCH_SIZE, smaller on small clusters so that there are enough of them to
    fill the `children_at_once` child executions the sweep runs at once (default: the default
    ceiling's; 16 nodes, 8 children: 8 batches of 2, not 4 of 4).
    """
    wanted = children_at_once or batches_at_once(DEFAULT_MAP_MAX_CONCURRENCY)
    size = min(PROBE_BATCH_SIZE, max(1, -(-len(instance_ids) // wanted)))
    return [instance_ids[i : i + size] for i in range(0, len(instance_ids), size)]


# Probe slots a child holds without probing: its batch's starts come one interval of the account's
# pace apart, and its first nodes' slots stay idle until its last node ends (the child's round), so
# rate x probe time slots leave the rate unused. Measured (64 nodes, 2 s probes, 3/s): sized by
# Little's law alone the sweep took 1.33x the bound, with one more child of slots 1.16x. The cost:
# a child invokes its batch's ProbeNodes together, so its later ones wait for their starts (billed
# Lambda time), and its finished ones' slots are the child's Express time until the last ends.
BATCH_IDLE_SLOTS = PROBE_BATCH_SIZE - 1


def sized_batches_at_once(
    rate_per_second: float, probe_seconds: float | None, max_batches_at_once: int, nodes: int | None = None
) -> int:
    """Child executions of the probe Map one sweep runs at once: enough probes at once to use
    the StartSession rate for probes of `probe_seconds` (rate x probe time, Little's law; None:
    EXPECTED_PROBE_SECONDS) plus the slots a batch leaves idle (`BATCH_IDLE_SLOTS`), in children
    of PROBE_BATCH_SIZE nodes, between 1 and the deployed ceiling `max_batches_at_once`. More would
    only wait for the rate (billed Lambda time).

    A cluster of `nodes` that the sized probes plus one probe time's starts would cover
    (`runs_in_one_round`) is probed all at once: sized by the rate alone, its last batches start
    only when the first children end, and the pace stands idle for that turnaround, which is most
    of what such a short sweep spends above its bound (16 nodes, 2 s probes, 3/s: 10.5 s of probe
    Map sized at 12 probes at once, 7.8 s all at once, bound 7.3 s). Waiting for the rate then costs
    each node at most one more probe time of billed Lambda time."""
    seconds = thresholds.EXPECTED_PROBE_SECONDS if probe_seconds is None else probe_seconds
    wanted = math.ceil((probes_to_keep_pace(rate_per_second, seconds) + BATCH_IDLE_SLOTS) / PROBE_BATCH_SIZE)
    if nodes is not None and runs_in_one_round(nodes, wanted, rate_per_second, seconds):
        wanted = max(wanted, math.ceil(nodes / PROBE_BATCH_SIZE))
    return max(1, min(max_batches_at_once, wanted))


def runs_in_one_round(nodes: int, batches_at_once: int, rate_per_second: float, probe_seconds: float) -> bool:
    """Whether `nodes` fit in the probes `batches_at_once` children run plus the starts one probe
    time of the account's rate allows: the cluster `sized_batches_at_once` probes all at once."""
    return nodes <= batches_at_once * PROBE_BATCH_SIZE + rate_per_second * probe_seconds


# Upper bound of one sweep execution (infra writes it into the definition as its top-level
# TimeoutSeconds); the per-cluster lock's lease outlives it so a crashed sweep never blocks its
# cluster for good.
SWEEP_TIMEOUT_SECONDS = 2 * 3600
LOCK_LEASE_SECONDS = SWEEP_TIMEOUT_SECONDS + 300


def execution_arn(state_machine_arn: str, execution_name: str) -> str:
    """The ARN of the execution named `execution_name` of a state machine, by Step Functions' rule
    (`...:stateMachine:<machine>` -> `...:execution:<machine>:<name>`); "*" gives the pattern of all
    its executions. A sweep's execution is named after the sweep, so it is found from its lock."""
    return state_machine_arn.replace(":stateMachine:", ":execution:") + f":{execution_name}"


# Per-sweep scratch items (collector outputs) are only needed until Aggregate has run.
SCRATCH_RETENTION_SECONDS = 2 * 24 * 3600
# A pace item (monitor/shared_pacer.py) says nothing once its `tat` and cooldown have passed; each
# reservation renews it, so it goes a day after the last sweep that used it.
PACE_RETENTION_SECONDS = 24 * 3600
# Alerts a failed Notify left unpublished are kept a week for the next sweeps to send, and so are
# the per-sweep markers that each message is published once (a marker outlives what it guards).
ALERT_RETENTION_SECONDS = 7 * 24 * 3600

# The sweep's other ASL placeholders (the functions' are `LambdaFunction.asl_placeholder`).
ASL_MAP_CONCURRENCY_PLACEHOLDER = "MapMaxConcurrency"
ASL_PROBE_TIMEOUT_PLACEHOLDER = "ProbeTimeoutSeconds"


class WatchedCluster(BaseModel):
    """One cluster the monitor sweeps on schedule.

    `id` is the last part of the cluster's ARN (`arn:aws:sagemaker:<region>:<account>:cluster/<id>`),
    assigned by HyperPod at creation. When every watched cluster has one, the functions' SageMaker
    reads are granted on exactly those clusters instead of `cluster/*` (StartSession names a
    HyperPod target, not a cluster ARN: it is held to the probe's own documents instead).

    `expectedNodes` (about how many nodes the cluster has) is for infra's check at synth that the
    sweeps of every watched cluster fit the schedule's cadence; the functions never read it.
    """

    model_config = ConfigDict(populate_by_name=True)

    name: str
    region: str
    id: str | None = Field(default=None, pattern=r"^[a-z0-9]{12}$")
    # Never dumped: the functions' environment and the schedules' input carry only what they read.
    expected_nodes: int | None = Field(default=None, ge=1, alias="expectedNodes", exclude=True)


class MonitorSettings(BaseModel):
    """Everything any handler may read from its environment; unset optional values keep defaults.

    Handlers call `MonitorSettings.from_env()` at the start of each invocation and fail loudly when a
    variable their function needs is missing (`require_*`).
    """

    table_name: str | None = None
    topic_arn: str | None = None
    state_machine_arn: str | None = None
    reference_base_url: str = REFERENCES_URL
    node_coverage: int | Literal["all"] = "all"
    clusters: list[WatchedCluster] = Field(default_factory=list)
    history_days: int = 90
    sdk_read_timeout: float | None = Field(default=None, gt=0)
    # Probe role -> the stack's Session document for it; empty: the AWS managed document.
    probe_documents: dict[str, str] = Field(default_factory=dict)
    # The account-wide rates the sandboxes share (docs/pacing.md) and the account they are of
    # ("local" where unset: a table belongs to one account, so its pace items are that account's).
    start_session_rate: float = Field(default=thresholds.SSM_START_SESSION_PER_SECOND, gt=0)
    log_filter_rate: float = Field(default=thresholds.LOG_FILTER_CALLS_PER_SECOND, gt=0)
    account_id: str = "local"

    @field_validator("node_coverage", mode="before")
    @classmethod
    def _coverage(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() != "all":
            return int(value)
        return "all" if isinstance(value, str) else value

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> MonitorSettings:
        """Read the variables above that are set: those of `LAMBDAS` and SDK_READ_TIMEOUT_ENV."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        mapping = {
            FINDINGS_TABLE_ENV: "table_name",
            ALERTS_TOPIC_ENV: "topic_arn",
            STATE_MACHINE_ENV: "state_machine_arn",
            REFERENCE_BASE_URL_ENV: "reference_base_url",
            NODE_COVERAGE_ENV: "node_coverage",
            HISTORY_DAYS_ENV: "history_days",
            SDK_READ_TIMEOUT_ENV: "sdk_read_timeout",
            START_SESSION_RATE_ENV: "start_session_rate",
            LOG_FILTER_RATE_ENV: "log_filter_rate",
            ACCOUNT_ID_ENV: "account_id",
        }
        for env_name, field_name in mapping.items():
            if env.get(env_name, "").strip():
                values[field_name] = env[env_name].strip()
        if env.get(CLUSTERS_ENV, "").strip():
            values["clusters"] = json.loads(env[CLUSTERS_ENV])
        if env.get(PROBE_DOCUMENTS_ENV, "").strip():
            values["probe_documents"] = json.loads(env[PROBE_DOCUMENTS_ENV])
        return cls.model_validate(values)

    def require_table(self) -> str:
        """The table name, or a clear error naming the missing variable."""
        if not self.table_name:
            raise ValueError(f"environment variable {FINDINGS_TABLE_ENV} is not set")
        return self.table_name

    def require_topic(self) -> str:
        """The alerts topic ARN, or a clear error naming the missing variable."""
        if not self.topic_arn:
            raise ValueError(f"environment variable {ALERTS_TOPIC_ENV} is not set")
        return self.topic_arn

    def require_state_machine(self) -> str:
        """The sweep state machine ARN, or a clear error naming the missing variable."""
        if not self.state_machine_arn:
            raise ValueError(f"environment variable {STATE_MACHINE_ENV} is not set")
        return self.state_machine_arn

    @property
    def history_seconds(self) -> int:
        """How long sweep records and fault history are kept (DynamoDB TTL)."""
        return self.history_days * 24 * 3600


# --- triggers ----------------------------------------------------------------------------------
# EventBridge Scheduler's target input for the trigger function. Scheduler fills the context
# attributes per invocation. A tick's trigger id is its schedule and scheduled time, the same for
# every attempt: Scheduler gives each attempt of a tick a new execution id (kept for the logs), so
# a tick it retries, like one Lambda retries, is idempotent.
SCHEDULE_SOURCE = "hyperpod-nccl.schedule"
SCHEDULE_TARGET_INPUT: dict[str, str] = {
    "source": SCHEDULE_SOURCE,
    "id": "<aws.scheduler.execution-id>",
    "schedule": "<aws.scheduler.schedule-arn>",
    "time": "<aws.scheduler.scheduled-time>",
}
# Lambda's asynchronous invocation of the trigger (EventBridge rules and Scheduler invoke it so, and
# consider the event delivered once Lambda has queued it): a function error is retried this many
# times (Lambda's default, written out so that infra deploys and the emulation enforces one number),
# then the invocation record goes to the failed-triggers queue. The trigger is idempotent by event
# id (`monitor.lock.start_sweep`), so a retry starts nothing a previous attempt started.
TRIGGER_RETRY_ATTEMPTS = 2
# Lambda timeout of the trigger (it validates an event and starts one execution); the only
# function outside the state machine, so no task's TimeoutSeconds sets it (infra and the emulation).
TRIGGER_TIMEOUT_SECONDS = 30
# An event Lambda could not run for this long (its invocations throttled) goes to the same queue
# rather than starting a sweep an hour late: the queue's alarm says so, and schedule ticks go on.
TRIGGER_MAX_EVENT_AGE_SECONDS = 3600
# The HyperPod events the trigger reads (monitor/events.py parses them; the rules below select them).
HYPERPOD_SOURCE = "aws.sagemaker"
CLUSTER_EVENT = "SageMaker HyperPod Cluster Event"
NODE_HEALTH_EVENT = "SageMaker HyperPod Cluster Node Health Event"
STATE_CHANGE_EVENT = "SageMaker HyperPod Cluster State Change"
ACTIONABLE_EVENT_LEVELS = ("Warn", "Error")
# EventBridge rule patterns (one per detail type) the trigger function accepts. EventLevel is
# optional in the API model: an event without one is let through (level unknown), not filtered out.
HYPERPOD_EVENT_PATTERNS: list[dict[str, object]] = [
    {
        "source": [HYPERPOD_SOURCE],
        "detail-type": [CLUSTER_EVENT],
        "detail": {"EventDetails": {"EventLevel": [*ACTIONABLE_EVENT_LEVELS, {"exists": False}]}},
    },
    {
        "source": [HYPERPOD_SOURCE],
        "detail-type": [NODE_HEALTH_EVENT],
        "detail": {"HealthSummary": {"HealthStatus": ["Unhealthy"]}},
    },
    {
        "source": [HYPERPOD_SOURCE],
        "detail-type": [STATE_CHANGE_EVENT],
    },
]

# --- metrics (Powertools EMF; infra alarms and dashboards read these names) --------------------
METRICS_NAMESPACE = "HyperPodNccl"
METRIC_FINDINGS = {"P0": "FindingsP0", "P1": "FindingsP1", "P2": "FindingsP2"}
METRIC_NODES_PROBED = "NodesProbed"
METRIC_NODES_UNREACHABLE = "NodesUnreachable"
METRIC_SWEEP_DURATION = "SweepDurationSeconds"
METRIC_SWEEP_FAILED = "SweepFailed"
METRIC_SWEEPS_COMPLETED = "SweepsCompleted"
METRIC_NOTIFICATIONS = "NotificationsSent"
# Earlier alerts SNS refused for good and Notify dropped (each with an ALERT_DROPPED# record).
METRIC_ALERTS_DROPPED = "AlertsDropped"
METRIC_TRIGGERS_REJECTED = "TriggersRejected"
METRIC_TRIGGERS_ACCEPTED = "TriggersAccepted"
METRIC_DIMENSION_CLUSTER = "Cluster"
