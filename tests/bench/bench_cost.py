"""Cost model: what the deployed stack costs in AWS a month, from a real local run of the state
machine and the synthesized template.

Counted from an emulated sweep: state transitions (the execution history), child executions and
their durations, every Lambda invocation and its duration (timed by the emulation's Lambda), its
cold starts, the bytes each function logged and the EMF metric series it defined (at the deployed
log level), the items the sweep wrote to DynamoDB with their size, index key and TTL, the AWS calls
(StartSession, FilterLogEvents: the shared pacer's writes), notifications. Counted from the
synthesized template: every resource that AWS bills for existing (the KMS key, the alarms and the
metrics they read, the dashboard, the log groups' retention) and the functions' memory and
architecture. Priced with `tests.bench.pricing` (dated list prices). Every resource type of the
template is either billed here or listed as free (`BILLED_RESOURCE_TYPES`, `UNBILLED_RESOURCE_TYPES`;
tests/infra/test_cost_model_coverage.py keeps the lists complete).
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperpod_nccl.monitor.settings import (
    DEFAULT_MAP_MAX_CONCURRENCY,
    LAMBDAS,
    METRIC_DIMENSION_CLUSTER,
    PROBE_BATCH_CONCURRENCY,
    PROBE_BATCH_SIZE,
)
from hyperpod_nccl.thresholds import EXPECTED_PROBE_SECONDS
from tests.bench import pricing
from tests.bench._sweeps import (
    CHILD_EVENTS_PER_NODE,
    DEPLOYED_LOG_LEVEL,
    PROBE_LATENCY_SECONDS,
    StateMachineRun,
    state_machine_sweep,
)

TITLE = "Cost per sweep and per month (15-minute cadence)"
SIZES = (16, 256, 1024)
CADENCE_SECONDS = 15 * 60
TARGET_NODES = 256
TARGET_MONTHLY_USD = 30.0
# The items billed by each probe's duration (the report reads them back by these names).
PROBE_COMPUTE_ITEM = "Lambda compute: probe_node (start-slot wait included)"
EXPRESS_CHILDREN_ITEM = "Step Functions Express (children)"
# Measured here on a full core; a Lambda function below 1,769 MB gets a fraction of a vCPU, so
# CPU-bound steps are billed at twice the local time (the probe's time is waiting, taken as is).
CPU_BOUND_FACTOR = 2.0
# The design this issue replaced: inline Map in the Standard parent, 20 probes at once, 256 MB.
INLINE_MAP_CONCURRENCY = 20
INLINE_PROBE_MEMORY_MB = 256
# The shared pacer's conditional UpdateItem on its bucket item: 1-2 per StartSession and per
# FilterLogEvents call (a reservation, and a second write when AWS throttled). Worst case taken.
PACING_WRITES_PER_CALL = 2
# DynamoDB deletes an expired item "typically within a few days" of its TTL (Developer Guide,
# "Time to Live"; not verified in the stored pages): it stays stored, and billed, that long.
TTL_DELETE_LAG_SECONDS = 2 * 24 * 3600
# The handlers' cold import as the cold-start benchmark measured it (CPU seconds with byte code,
# read from BENCHMARKS.md); this value where that section has no row for a handler.
FALLBACK_INIT_SECONDS = 1.0
BENCHMARKS_PAGE = Path(__file__).resolve().parents[2] / "BENCHMARKS.md"
# The stack the model prices: one watched cluster in the stack's region, every other value the
# deployed default (cdk.json's context is not read, so a local edit of it does not change the model).
BENCH_CLUSTER = {"name": "bench-cluster", "region": "us-east-1"}

# Every CloudFormation type the stack deploys that AWS bills, and the model's item that prices it.
BILLED_RESOURCE_TYPES = {
    "AWS::StepFunctions::StateMachine": "Step Functions Standard (transitions)",
    "AWS::Lambda::Function": "Lambda compute: the other functions",
    "AWS::DynamoDB::GlobalTable": "DynamoDB writes (table)",
    "AWS::KMS::Key": "KMS key (customer managed)",
    "AWS::SNS::Topic": "SNS publishes",
    "AWS::SNS::Subscription": "SNS e-mail deliveries",
    "AWS::Logs::LogGroup": "CloudWatch Logs ingestion",
    "AWS::CloudWatch::Alarm": "CloudWatch alarms",
    "AWS::CloudWatch::Dashboard": "CloudWatch dashboard",
    "AWS::Scheduler::Schedule": "EventBridge Scheduler invocations",
    "AWS::SQS::Queue": "SQS failed-triggers queue",
    "AWS::Events::Rule": "EventBridge rules (AWS service events)",
}
# Types that cost nothing by themselves (their use is billed under another line, if at all).
UNBILLED_RESOURCE_TYPES = {
    "AWS::IAM::Role": "IAM is free",
    "AWS::IAM::Policy": "IAM is free",
    "AWS::Lambda::Permission": "a resource policy",
    "AWS::Lambda::LayerVersion": "code storage, free up to 75 GB per region",
    "AWS::Lambda::EventInvokeConfig": "configuration; its retries are invocations, its destination the SQS queue",
    "AWS::SNS::TopicPolicy": "a resource policy",
    "AWS::SQS::QueuePolicy": "a resource policy",
    "AWS::SSM::Document": "Session Manager documents are free; sessions to HyperPod nodes carry no SSM charge",
    "AWS::Chatbot::SlackChannelConfiguration": "AWS Chatbot has no charge (the SNS publish is billed)",
    "AWS::CDK::Metadata": "CDK bookkeeping",
}


EMAIL_PROTOCOLS = ("email", "email-json")


@dataclass
class Alarm:
    """One alarm of the template: how many metrics it reads and at which period."""

    name: str
    metrics: int
    period_seconds: int


@dataclass
class StackInventory:
    """What the synthesized template deploys that the model prices."""

    resource_types: set[str]
    memory_mb: dict[str, int]
    architectures: set[str]
    alarms: list[Alarm]
    dashboards: int
    customer_keys: int
    key_rotation: bool
    log_retention_days: int
    email_subscriptions: int
    schedules: int
    lambda_tracing: bool
    state_machine_tracing: bool


def synthesized_template(sweep_rate_minutes: int) -> dict[str, Any]:
    """The stack's template as `make synth` builds it (assets not bundled), with one watched cluster."""
    from infra.app import build_app

    context = {
        "aws:cdk:bundling-stacks": [],
        "stackName": "HpncCost",
        "account": "111122223333",
        "region": BENCH_CLUSTER["region"],
        "clusters": [BENCH_CLUSTER],
        "sweepRateMinutes": sweep_rate_minutes,
    }
    with tempfile.TemporaryDirectory(prefix="cost-synth-") as outdir:
        build_app(context, outdir=outdir, cdk_json=None).synth()
        return json.loads((Path(outdir) / "HpncCost.template.json").read_text())


def inventory(template: dict[str, Any]) -> StackInventory:
    """Count the billed resources of a synthesized template."""
    resources = template["Resources"].values()

    def of(kind: str) -> list[dict[str, Any]]:
        return [r.get("Properties", {}) for r in resources if r["Type"] == kind]

    memory: dict[str, int] = {}
    architectures: set[str] = set()
    for function in of("AWS::Lambda::Function"):
        module = str(function.get("Handler", "")).split(".")[-2]
        memory[module] = int(function.get("MemorySize", 128))
        architectures.update(function.get("Architectures", ["x86_64"]))
    alarms = []
    for alarm in of("AWS::CloudWatch::Alarm"):
        stats = [q["MetricStat"] for q in alarm.get("Metrics", []) if "MetricStat" in q]
        periods = [int(s["Period"]) for s in stats] or [int(alarm.get("Period", 60))]
        alarms.append(Alarm(name=str(alarm.get("AlarmName")), metrics=max(1, len(stats)), period_seconds=min(periods)))
    keys = of("AWS::KMS::Key")
    retention = [int(g.get("RetentionInDays", 3653)) for g in of("AWS::Logs::LogGroup")]
    return StackInventory(
        resource_types={r["Type"] for r in resources},
        memory_mb=memory,
        architectures=architectures,
        alarms=alarms,
        dashboards=len(of("AWS::CloudWatch::Dashboard")),
        customer_keys=len(keys),
        key_rotation=all(k.get("EnableKeyRotation", False) for k in keys),
        log_retention_days=max(retention, default=3653),
        email_subscriptions=sum(1 for s in of("AWS::SNS::Subscription") if s.get("Protocol") in EMAIL_PROTOCOLS),
        schedules=len(of("AWS::Scheduler::Schedule")),
        lambda_tracing=any(f.get("TracingConfig", {}).get("Mode") == "Active" for f in of("AWS::Lambda::Function")),
        state_machine_tracing=any(
            s.get("TracingConfiguration", {}).get("Enabled") for s in of("AWS::StepFunctions::StateMachine")
        ),
    )


def default_cadence_seconds() -> int:
    """The deployed default sweep cadence (`sweepRateMinutes`, infra/config.py)."""
    from infra.config import StageConfig

    return StageConfig().sweep_rate_minutes * 60


def _write_units(run: StateMachineRun) -> float:
    """Each item the sweep left in the table, written once at its size (1 KB units), plus one
    unit for every conditional update or delete (lock, findings)."""
    ops = run.measurement.api_calls_by_operation
    rewrites = ops.get("dynamodb:UpdateItem", 0) + ops.get("dynamodb:DeleteItem", 0)
    return sum(math.ceil(size / 1024) for size in run.table_item_bytes) + rewrites


def _read_units(run: StateMachineRun) -> float:
    """Single-item reads (4 KB units) plus Aggregate's queries over everything the sweep stored."""
    ops = run.measurement.api_calls_by_operation
    return ops.get("dynamodb:GetItem", 0) + math.ceil(sum(run.table_item_bytes) / 4096)


def _paced_calls(run: StateMachineRun) -> int:
    """The calls the shared pacer paces: every StartSession and FilterLogEvents of the sweep."""
    ops = run.measurement.api_calls_by_operation
    return ops.get("ssm:StartSession", run.measurement.nodes) + ops.get("logs:FilterLogEvents", 0)


def pacing_write_units(run: StateMachineRun) -> float:
    """The shared pacer's conditional writes, worst case (`PACING_WRITES_PER_CALL` per paced call);
    none where the run's own UpdateItem count already holds them (the pacer ran in the emulation:
    then they are in `_write_units`). A failed conditional write is billed too."""
    if run.measurement.api_calls_by_operation.get("dynamodb:UpdateItem", 0) >= _paced_calls(run):
        return 0.0
    return float(PACING_WRITES_PER_CALL * _paced_calls(run))


def index_write_units(run: StateMachineRun) -> float:
    """Writes to the secondary index: every item carrying its key is written there again (projection ALL)."""
    return float(sum(math.ceil(size / 1024) for size in run.index_item_bytes))


def log_bytes(run: StateMachineRun) -> int:
    """One sweep's CloudWatch Logs ingestion: the state machine's history events as Step Functions
    logs them, its children's events, and what every function logged (EMF documents included)."""
    child_logs = run.measurement.nodes * CHILD_EVENTS_PER_NODE * (run.parent_event_bytes / max(1, run.parent_events))
    functions = sum(run.log_bytes_by_function.values()) + run.metric_log_bytes
    return int(run.parent_event_bytes + child_logs + functions)


def usage(run: StateMachineRun, *, design: str = "distributed") -> pricing.SweepUsage:
    """One sweep's billable usage, as counted (design "distributed") or as the replaced inline-Map
    design would have used it (same run, its probes in the parent and at its concurrency)."""
    nodes = run.measurement.nodes
    lambdas = []
    for module, seconds in sorted(run.lambda_seconds.items()):
        memory = LAMBDAS[module].memory_mb
        billed = seconds if module == "probe_node" else seconds * CPU_BOUND_FACTOR
        if module == "probe_node" and design == "inline":
            # Little's law: with C probes in flight at 3 starts/s, each probe lives C/3 s.
            billed = max(seconds, run.lambda_invocations[module] * INLINE_MAP_CONCURRENCY / 3.0)
            memory = INLINE_PROBE_MEMORY_MB
        lambdas.append(
            pricing.LambdaUsage(
                function=module, invocations=run.lambda_invocations[module], billed_seconds=billed, memory_mb=memory
            )
        )
    if design == "inline":
        return pricing.SweepUsage(
            standard_transitions=run.parent_transitions - 1 + nodes,  # each ProbeNode in the parent
            lambdas=lambdas,
            dynamodb_write_units=_write_units(run),
            dynamodb_read_units=_read_units(run),
            sns_publishes=run.notifications,
            log_bytes=log_bytes(run),
        )
    express = pricing.ExpressUsage(
        executions=len(run.child_seconds),
        billed_seconds=sum(pricing.express_billed_seconds(s) for s in run.child_seconds),
        memory_mb=pricing.express_billed_memory_mb(50 + 0.1),  # 50 MB base + a few KB of definition/data
    )
    return pricing.SweepUsage(
        # One transition per child execution the Distributed Map starts, plus the parent's states.
        standard_transitions=run.parent_transitions + express.executions,
        express=express,
        lambdas=lambdas,
        dynamodb_write_units=_write_units(run),
        dynamodb_read_units=_read_units(run),
        sns_publishes=run.notifications,
        log_bytes=log_bytes(run),
        # Worst case: each EXPRESS child's probes start traces of their own besides the parent's.
        traces=1 + express.executions,
    )


def init_seconds_by_handler(page: Path = BENCHMARKS_PAGE) -> dict[str, float]:
    """Each handler's cold import (CPU seconds with byte code) from the cold-start section of the page."""
    text = page.read_text(encoding="utf-8") if page.exists() else ""
    section = text.split("## Lambda cold start", 1)[-1] if "## Lambda cold start" in text else ""
    rows = re.findall(r"^\| `(\w+)` \| [\d.]+ \| \*\*([\d.]+)\*\* \|", section.split("\n## ", 1)[0], re.MULTILINE)
    return {name: float(seconds) for name, seconds in rows}


def cold_starts(run: StateMachineRun) -> dict[str, int]:
    """Cold starts per handler in one sweep: as the emulation's sandboxes counted them, else one
    sandbox per function and one per probe in flight (a sweep every 15 minutes or more is taken to
    find no sandbox left warm: Lambda keeps idle ones for an undocumented time)."""
    if run.cold_starts:
        return dict(run.cold_starts)
    return {module: (DEFAULT_MAP_MAX_CONCURRENCY if module == "probe_node" else 1) for module in run.lambda_seconds}


def stored_bytes(run: StateMachineRun, cadence_seconds: int) -> float:
    """The table's size at steady state: an item with a TTL is kept for its TTL (plus the deletion
    lag) while a new one comes every sweep; one without is overwritten each sweep. Index items are
    stored again in the index."""
    total = 0.0
    for size, lifetime in run.item_lifetimes:
        kept = size + pricing.DYNAMODB_ITEM_OVERHEAD_BYTES
        total += kept if lifetime is None else kept * (lifetime + TTL_DELETE_LAG_SECONDS) / cadence_seconds
    share = sum(run.index_item_bytes) / max(1, sum(run.table_item_bytes))
    return total * (1 + share)


def monthly_items(run: StateMachineRun, stack: StackInventory, cadence_seconds: int) -> list[pricing.MonthlyItem]:
    """Every billed item of the stack for a month of sweeps of `run`'s cluster at `cadence_seconds`."""
    if stack.architectures != {"arm64"}:
        raise ValueError(f"the model prices arm64 functions only, the template has {sorted(stack.architectures)}")
    # The invocations are priced at LAMBDAS' memory: it must be what the template deploys.
    differ = {m: mb for m, mb in stack.memory_mb.items() if m in LAMBDAS and LAMBDAS[m].memory_mb != mb}
    if differ:
        raise ValueError(f"the template's memory differs from hyperpod_nccl.monitor.settings.LAMBDAS: {differ}")
    sweeps = pricing.sweeps_per_month(cadence_seconds)
    used = usage(run)
    cost = pricing.cost_of(used)
    item = pricing.MonthlyItem
    probe_gb_seconds = sum(f.billed_seconds * f.memory_mb / 1024 for f in used.lambdas if f.function == "probe_node")
    init = init_seconds_by_handler()
    colds = cold_starts(run)
    init_gb_seconds = sum(
        count * init.get(module, FALLBACK_INIT_SECONDS) * CPU_BOUND_FACTOR * stack.memory_mb.get(module, 128) / 1024
        for module, count in colds.items()
    )
    dynamodb_principals = sum(count for module, count in colds.items() if LAMBDAS[module].table_actions)
    notifications = run.notifications * sweeps
    kms_requests = dynamodb_principals * sweeps + pricing.sns_kms_requests(notifications, 1, pricing.SECONDS_PER_MONTH)
    month_bytes = used.log_bytes * sweeps
    stored = stored_bytes(run, cadence_seconds)
    series = len(run.metric_series)
    alarm_metrics = sum(a.metrics for a in stack.alarms)
    high = sum(a.metrics for a in stack.alarms if a.period_seconds < pricing.CLOUDWATCH_HIGH_RESOLUTION_BELOW_SECONDS)
    gb = 1024**3
    lines = [
        item(
            name="Step Functions Standard (transitions)",
            usd=cost.step_functions_standard * sweeps,
            basis=f"{used.standard_transitions} a sweep",
        ),
        item(
            name=EXPRESS_CHILDREN_ITEM,
            usd=cost.step_functions_express * sweeps,
            basis=(
                f"{used.express.executions} a sweep, {used.express.billed_seconds:.0f} s at {used.express.memory_mb} MB"
            ),
        ),
        item(
            name=PROBE_COMPUTE_ITEM,
            usd=probe_gb_seconds * pricing.LAMBDA_ARM_PER_GB_SECOND * sweeps,
            basis=f"{probe_gb_seconds:.0f} GB-s a sweep, arm64",
        ),
        item(
            name="Lambda compute: the other functions",
            usd=cost.lambda_compute * sweeps - probe_gb_seconds * pricing.LAMBDA_ARM_PER_GB_SECOND * sweeps,
            basis=f"{sum(f.billed_seconds * f.memory_mb / 1024 for f in used.lambdas) - probe_gb_seconds:.0f} GB-s "
            "a sweep, arm64",
        ),
        item(
            name="Lambda INIT (cold starts)",
            usd=init_gb_seconds * pricing.LAMBDA_ARM_PER_GB_SECOND * sweeps if pricing.LAMBDA_INIT_BILLED else 0.0,
            basis=f"{sum(colds.values())} cold starts a sweep, {init_gb_seconds:.1f} GB-s",
        ),
        item(
            name="Lambda requests",
            usd=cost.lambda_requests * sweeps,
            basis=f"{sum(f.invocations for f in used.lambdas)} a sweep",
        ),
        item(
            name="DynamoDB writes (table)",
            usd=used.dynamodb_write_units * pricing.DYNAMODB_PER_WRITE_UNIT * sweeps,
            basis=f"{used.dynamodb_write_units:.0f} WRU a sweep",
        ),
        item(
            name="DynamoDB writes (secondary index)",
            usd=index_write_units(run) * pricing.DYNAMODB_PER_WRITE_UNIT * sweeps,
            basis=f"{index_write_units(run):.0f} WRU a sweep",
        ),
        item(
            name="DynamoDB pacing writes (StartSession, FilterLogEvents)",
            usd=pacing_write_units(run) * pricing.DYNAMODB_PER_WRITE_UNIT * sweeps,
            basis=(
                f"{pacing_write_units(run):.0f} WRU a sweep ({PACING_WRITES_PER_CALL} per paced call)"
                if pacing_write_units(run)
                else "measured: in the table writes"
            ),
        ),
        item(
            name="DynamoDB reads",
            usd=used.dynamodb_read_units * pricing.DYNAMODB_PER_READ_UNIT * sweeps,
            basis=f"{used.dynamodb_read_units:.0f} RRU a sweep",
        ),
        item(
            name="DynamoDB storage + PITR",
            usd=stored / gb * (pricing.DYNAMODB_PER_GB_MONTH + pricing.DYNAMODB_PITR_PER_GB_MONTH),
            basis=f"{stored / 1024**2:.0f} MB at steady state (TTLs as written)",
        ),
        item(
            name="KMS key (customer managed)",
            usd=stack.customer_keys * pricing.kms_key_month(0),
            basis=f"{stack.customer_keys} key{', rotated yearly' if stack.key_rotation else ''} (first year)",
        ),
        item(
            name="KMS requests",
            usd=kms_requests * pricing.KMS_PER_REQUEST,
            basis=f"{kms_requests:.0f} a month (DynamoDB table key per sandbox and sweep; SNS data keys)",
        ),
        item(name="SNS publishes", usd=cost.sns * sweeps, basis=f"{run.notifications} a sweep"),
        item(
            name="SNS e-mail deliveries",
            usd=notifications * stack.email_subscriptions * pricing.SNS_PER_EMAIL_DELIVERY,
            basis=f"{stack.email_subscriptions} e-mail subscriptions",
        ),
        item(
            name="CloudWatch Logs ingestion",
            usd=month_bytes / gb * pricing.LOGS_PER_GB_INGESTED,
            basis=f"{used.log_bytes / 1024:.0f} KB a sweep",
        ),
        item(
            name="CloudWatch Logs storage",
            usd=month_bytes / gb * stack.log_retention_days / 30 * pricing.LOGS_PER_GB_MONTH_STORED,
            basis=f"{stack.log_retention_days} days retained, uncompressed",
        ),
        item(
            name="CloudWatch custom metrics (EMF)",
            usd=series * pricing.CLOUDWATCH_PER_METRIC_MONTH,
            basis=f"{series} metric series",
        ),
        item(
            name="CloudWatch alarms",
            usd=sum(pricing.alarm_month(a.metrics, a.period_seconds) for a in stack.alarms),
            basis=f"{len(stack.alarms)} alarms reading {alarm_metrics} metrics ({high} high-resolution)",
        ),
        item(
            name="CloudWatch dashboard",
            usd=pricing.dashboards_month(stack.dashboards, free_left=0),
            basis=f"{stack.dashboards} (the account's 3 free ones taken as used)",
        ),
        item(
            name="X-Ray traces",
            usd=cost.xray * sweeps if stack.lambda_tracing or stack.state_machine_tracing else 0.0,
            basis=f"{used.traces} a sweep (worst case)",
        ),
        item(
            name="EventBridge Scheduler invocations",
            usd=stack.schedules * sweeps * pricing.SCHEDULER_PER_INVOCATION,
            basis=f"{stack.schedules} schedule{'s' if stack.schedules != 1 else ''}, one tick a sweep each",
        ),
        item(name="EventBridge rules (AWS service events)", usd=0.0, basis="free on the default bus"),
        item(
            name="SQS failed-triggers queue",
            usd=0.0,
            basis="no message when no trigger fails; its alarm reads SQS's free metrics",
        ),
        item(name="Data transfer", usd=0.0, basis="none billed: same region, no VPC/NAT, inbound free"),
    ]
    return lines


def run() -> str:
    """Run the state machine at each size, count, price and report."""
    default_cadence = default_cadence_seconds()
    stack = inventory(synthesized_template(CADENCE_SECONDS // 60))
    default_stack = inventory(synthesized_template(default_cadence // 60))
    rows = []
    verdict = ""
    for nodes in SIZES:
        counted = state_machine_sweep(nodes)
        used = usage(counted)
        cost = pricing.cost_of(used)
        month = sum(i.usd for i in monthly_items(counted, stack, CADENCE_SECONDS))
        before = pricing.cost_of(usage(counted, design="inline"))
        probe = next((fn for fn in used.lambdas if fn.function == "probe_node"), None)
        rows.append(
            f"| {nodes} | {used.standard_transitions} | {used.express.executions} "
            f"({sum(counted.child_seconds):.0f} s) | {sum(f.invocations for f in used.lambdas)} "
            f"| {probe.billed_seconds / max(1, probe.invocations) if probe else 0:.2f} s "
            f"| {used.dynamodb_write_units:.0f} / {used.dynamodb_read_units:.0f} "
            f"| {counted.measurement.api_calls} | {used.log_bytes / 1024:.0f} KB "
            f"| ${cost.total:.4f} | **${month:.2f}** | ${before.monthly(CADENCE_SECONDS):.2f} |"
        )
        if nodes == TARGET_NODES:
            verdict = _verdict(counted, stack, default_stack, default_cadence)
    return (
        f"Each size is one real sweep of a synthetic healthy cluster (probe latency {PROBE_LATENCY_SECONDS:g} s) "
        "through the deployed state machine definition in the emulation. Design: Standard parent; the probe Map "
        f"is a Distributed Map whose EXPRESS child executions each probe a batch of up to {PROBE_BATCH_SIZE} "
        f"nodes {PROBE_BATCH_CONCURRENCY} at a time, {DEFAULT_MAP_MAX_CONCURRENCY} probes at once. "
        "Prices: `tests/bench/pricing.py` "
        f"({pricing.PRICES_REGION} list prices checked {pricing.PRICES_CHECKED_ON}, no free tier); "
        f'{pricing.sweeps_per_month(CADENCE_SECONDS):.0f} sweeps a month. "Per sweep" is what one sweep '
        'consumes; "per month" is every billed item of the stack (the table below), fixed ones included.\n\n'
        "| nodes | Standard transitions | Express children (total time) | Lambda invocations | probe billed time "
        "each | DynamoDB WRU / RRU | AWS calls | logs | per sweep | per month, all items | inline-Map design "
        "per month (sweep items only) |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n\n" + verdict
    )


def longer_probes(
    totals: tuple[float, float],
    probe_bound_usd: tuple[float, float],
    probe_seconds: float,
    probe_wait: float,
    default_cadence: int,
) -> str:
    """What the month costs when each probe takes `EXPECTED_PROBE_SECONDS` (the sizing assumption)
    instead of the run's `PROBE_LATENCY_SECONDS`, and the longest probe the target allows: the items
    billed by the probe's duration (`probe_bound_usd`: the probe function and the Express children,
    at the 15-minute and the default cadence) scale with it, the rest stays. Scaled, not measured."""
    scale = (EXPECTED_PROBE_SECONDS + probe_wait) / probe_seconds
    fast, slow = (total - bound + bound * scale for total, bound in zip(totals, probe_bound_usd, strict=True))

    def longest(total: float, bound: float) -> float:
        return max(0.0, (TARGET_MONTHLY_USD - (total - bound)) / bound * probe_seconds - probe_wait)

    return (
        f"The probe's own time on a real node is not measured here ({PROBE_LATENCY_SECONDS:g} s in this run; the "
        f"monitor sizes for {EXPECTED_PROBE_SECONDS:g} s, `EXPECTED_PROBE_SECONDS`), and the probe function and "
        f"the Express children are billed for it: scaled from this run (not measured), {EXPECTED_PROBE_SECONDS:g} s "
        f"probes cost **${fast:.2f}** a month every 15 minutes and **${slow:.2f}** every {default_cadence // 60} "
        f"minutes. The target holds for probes up to about {longest(totals[0], probe_bound_usd[0]):.1f} s every "
        f"15 minutes and {longest(totals[1], probe_bound_usd[1]):.1f} s every {default_cadence // 60} minutes."
    )


def _verdict(run: StateMachineRun, stack: StackInventory, default_stack: StackInventory, default_cadence: int) -> str:
    """The item table at the target size for both cadences, the target's verdict and the assumptions."""
    fast = monthly_items(run, stack, CADENCE_SECONDS)
    slow = monthly_items(run, default_stack, default_cadence)
    fast_total, slow_total = sum(i.usd for i in fast), sum(i.usd for i in slow)
    met = fast_total < TARGET_MONTHLY_USD
    ranked = sorted(fast, key=lambda i: i.usd, reverse=True)[:3]
    dominant = ", ".join(f"{i.name} ${i.usd:.2f}" for i in ranked)
    table = "\n".join(
        f"| {a.name} | {a.basis} | ${a.usd:.2f} | ${b.usd:.2f} |" for a, b in zip(fast, slow, strict=True)
    )
    per_function = ", ".join(
        f"{name} {size / max(1, run.lambda_invocations.get(name, 1)):.0f} B"
        for name, size in sorted(run.log_bytes_by_function.items())
    )
    per_cluster = sum(1 for series in run.metric_series if any(key == METRIC_DIMENSION_CLUSTER for key, _ in series[2]))
    init = init_seconds_by_handler()
    measured_init = ", ".join(f"{k} {v:.2f} s" for k, v in sorted(init.items())) or "none measured"
    probe_calls = run.lambda_invocations.get("probe_node", 0)
    probe_wait = run.lambda_seconds.get("probe_node", 0.0) / max(1, probe_calls) - PROBE_LATENCY_SECONDS
    probe_line = next(i for i in fast if i.name == PROBE_COMPUTE_ITEM)
    probe_seconds = max(1e-9, run.lambda_seconds.get("probe_node", 0.0) / max(1, probe_calls))
    waiting = (
        f"Of the probe function's ${probe_line.usd:.2f}, {max(0.0, probe_wait) / probe_seconds:.0%} is time beyond the "
        f"{PROBE_LATENCY_SECONDS:g} s probe itself ({probe_wait:.1f} s of {probe_seconds:.1f} s a probe): the wait "
        "for its start at the account's 3/s and the session's setup, billed. Measured on a sweep after an earlier "
        "one of the same cluster, so its probes at once were sized from that sweep's probe time (a first sweep "
        f"after deploy sizes for {EXPECTED_PROBE_SECONDS:g} s probes, runs wider and waits longer: about "
        f"{DEFAULT_MAP_MAX_CONCURRENCY}/3 s a probe at its ceiling of {DEFAULT_MAP_MAX_CONCURRENCY})."
    )

    def billed_by_probe(items: list[pricing.MonthlyItem]) -> float:
        return sum(i.usd for i in items if i.name in (PROBE_COMPUTE_ITEM, EXPRESS_CHILDREN_ITEM))

    billed = (billed_by_probe(fast), billed_by_probe(slow))
    longer = longer_probes((fast_total, slow_total), billed, probe_seconds, probe_wait, default_cadence)
    return (
        f"Target: a {TARGET_NODES}-node cluster swept every 15 minutes under ${TARGET_MONTHLY_USD:.0f}/month, every "
        f"billed item included: **{'met' if met else 'MISSED'}** at {PROBE_LATENCY_SECONDS:g} s probes "
        f"(${fast_total:.2f}; at the default cadence of "
        f"{default_cadence // 60} minutes: ${slow_total:.2f}). Largest items: {dominant}. {waiting} {longer}\n\n"
        f"| {TARGET_NODES} nodes, per month | counted (15-minute cadence) | every 15 minutes "
        f"| every {default_cadence // 60} minutes (default) |\n|---|---|---:|---:|\n{table}\n"
        f"| **total** | | **${fast_total:.2f}** | **${slow_total:.2f}** |\n\n"
        "Assumptions and how the numbers are made:\n\n"
        "- Resources: counted in the synthesized template (one watched cluster, defaults otherwise); "
        "`BILLED_RESOURCE_TYPES` names the item of each billed type, `UNBILLED_RESOURCE_TYPES` why the others "
        "cost nothing; `tests/infra/test_cost_model_coverage.py` fails on a type in neither.\n"
        "- Transitions: the `*StateEntered` events of the parent's history plus one per child execution started "
        "(AWS bills no transitions inside EXPRESS children). A child's duration is the span of its nodes' probe "
        "invocations, rounded up to 100 ms, at 64 MB.\n"
        f"- Lambda: every invocation's measured duration for `probe_node` (it includes the wait for its start "
        f"slot and the session's setup: {probe_wait:.2f} s a probe on average beyond the {PROBE_LATENCY_SECONDS:g} s "
        "the simulated probe takes, as measured) "
        f"and {CPU_BOUND_FACTOR:g}x the local time for the CPU-bound steps; memory and arm64 from the template. "
        "INIT is billed since August 2025 (AWS Compute Blog): each cold start is billed the handler's cold "
        f"import as the cold-start section measured it ({measured_init}; else {FALLBACK_INIT_SECONDS:g} s) "
        f"x{CPU_BOUND_FACTOR:g} like the other CPU-bound steps (an upper bound if, as reported outside AWS's "
        "documentation, INIT gets more CPU than the memory share), at the function's memory; every sandbox "
        "of a sweep is taken to start cold "
        f"({sum(cold_starts(run).values())} a sweep, counted by the emulation's sandboxes where it counts them).\n"
        "- DynamoDB: each item the sweep left written once at its size (1 KB units) plus one unit per "
        "conditional update or delete, again for the secondary index when the item carries its key; reads are "
        "single-item reads plus Aggregate's queries over the sweep's items (4 KB units). The shared pacer's "
        f"conditional writes: {PACING_WRITES_PER_CALL} per StartSession and per FilterLogEvents call (worst case, "
        "a failed condition is billed too), unless the run's own UpdateItem count already holds them. Storage: "
        "each item for its TTL as written plus 2 days of deletion lag, 100 bytes of overhead each, PITR on.\n"
        "- KMS: the customer managed key of the topic and the failed-triggers queue, $1 in its first year, $2 in "
        "its second, $3 after its second yearly rotation. Requests: DynamoDB's table key (AWS managed, no monthly "
        "fee) decrypted once per sandbox per sweep (worst case: per principal would be fewer); SNS two data-key "
        "requests per publishing principal per 5-minute reuse period with a publish; the SQS queue "
        "(KmsDataKeyReusePeriodSeconds default 300 s) and alarm actions call KMS only when a trigger fails or "
        "an alarm changes state: none in a month without failures.\n"
        f"- Logs: measured at the deployed level ({DEPLOYED_LOG_LEVEL}, JSON, EMF metrics on): bytes per "
        f"invocation {per_function or 'none measured'}; EMF documents {run.metric_log_bytes} B a sweep; the "
        "parent's history events as Step Functions logs them (level ALL, without execution data), "
        f"{CHILD_EVENTS_PER_NODE} child events per node at the same average size. Lambda's platform lines "
        "(start, report) are not sent at the template's system log level WARN (Lambda Developer Guide, "
        '"Log-level filtering": they are INFO). Storage: a month of '
        "ingestion kept for the retention, uncompressed (an upper bound: AWS bills compressed bytes).\n"
        "- Metrics: the distinct metric x dimension series the sweep's EMF documents defined "
        f"({len(run.metric_series)}, {per_cluster} of them per watched cluster: each more cluster adds "
        f"${per_cluster * pricing.CLOUDWATCH_PER_METRIC_MONTH:.2f} a month), "
        "each billed a full month (emitted every hour at either cadence); TriggersRejected and AlertsDropped are "
        "emitted only when they happen (prorated by the hour, not counted). Alarms: one alarm metric per metric "
        "an alarm reads (a metric-math alarm reads three), standard resolution unless its period is under 60 s. "
        "Dashboard: billed, taking the account's 3 free dashboards as used by something else.\n"
        "- X-Ray (tracing is on): one trace per sweep plus one per EXPRESS child (worst case). Scheduler: one "
        "tick per sweep; EventBridge rules on AWS service events and the SQS queue cost nothing without "
        "events or failures. No data transfer is billed: the functions run outside a VPC (no NAT), call "
        "regional endpoints, and inbound data is free; a watched cluster in another region would add "
        "inter-region transfer for the probe output, not modelled.\n"
        f"- The inline-Map column prices the same run as the replaced design would have: every ProbeNode a "
        f"Standard transition, {INLINE_MAP_CONCURRENCY} probes at once ({INLINE_MAP_CONCURRENCY}/3 s of billed "
        f"waiting each, Little's law) at {INLINE_PROBE_MEMORY_MB} MB; its per-sweep items only.\n\n"
        "The probe Lambda's billed time is (probes at once) / (3 session starts per second) whenever that exceeds "
        "the probe itself: raise `mapMaxConcurrency` only to about 3 x the real probe time in seconds."
    )
