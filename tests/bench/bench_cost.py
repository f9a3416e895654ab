"""Cost model: what a sweep costs in AWS, from a real local run of the state machine.

Counted: state transitions (the execution history), child executions and their durations, every
Lambda invocation and its duration (timed by the emulation's Lambda), the items the sweep wrote to
DynamoDB, notifications. Priced with `tests.bench.pricing` (dated list prices) and the
functions' memory from `hyperpod_nccl.monitor.settings.LAMBDAS`.
"""

from __future__ import annotations

import math

from hyperpod_nccl.monitor.settings import DEFAULT_MAP_MAX_CONCURRENCY, LAMBDAS, PROBE_BATCH_SIZE
from tests.bench import pricing
from tests.bench._sweeps import (
    CHILD_EVENTS_PER_NODE,
    LAMBDA_LOG_LINE_BYTES,
    PROBE_LATENCY_SECONDS,
    StateMachineRun,
    state_machine_sweep,
)

TITLE = "Cost per sweep and per month (15-minute cadence)"
SIZES = (16, 256, 1024)
CADENCE_SECONDS = 15 * 60
TARGET_NODES = 256
TARGET_MONTHLY_USD = 30.0
# Measured here on a full core; a Lambda function below 1,769 MB gets a fraction of a vCPU, so
# CPU-bound steps are billed at twice the local time (the probe's time is waiting, taken as is).
CPU_BOUND_FACTOR = 2.0
# The design this issue replaced: inline Map in the Standard parent, 20 probes at once, 256 MB.
INLINE_MAP_CONCURRENCY = 20
INLINE_PROBE_MEMORY_MB = 256


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
    invocations = sum(run.lambda_invocations.values())
    child_logs = nodes * CHILD_EVENTS_PER_NODE * (run.parent_event_bytes / max(1, run.parent_events))
    if design == "inline":
        return pricing.SweepUsage(
            standard_transitions=run.parent_transitions - 1 + nodes,  # each ProbeNode in the parent
            lambdas=lambdas,
            dynamodb_write_units=_write_units(run),
            dynamodb_read_units=_read_units(run),
            sns_publishes=run.notifications,
            log_bytes=int(run.parent_event_bytes + child_logs + invocations * LAMBDA_LOG_LINE_BYTES),
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
        log_bytes=int(run.parent_event_bytes + child_logs + invocations * LAMBDA_LOG_LINE_BYTES),
    )


def run() -> str:
    """Run the state machine at each size, count, price and report."""
    rows = []
    verdict = ""
    for nodes in SIZES:
        counted = state_machine_sweep(nodes)
        used = usage(counted)
        cost = pricing.cost_of(used)
        before = pricing.cost_of(usage(counted, design="inline"))
        probe = next((fn for fn in used.lambdas if fn.function == "probe_node"), None)
        rows.append(
            f"| {nodes} | {used.standard_transitions} | {used.express.executions} "
            f"({sum(counted.child_seconds):.0f} s) | {sum(f.invocations for f in used.lambdas)} "
            f"| {probe.billed_seconds / max(1, probe.invocations) if probe else 0:.2f} s "
            f"| {used.dynamodb_write_units:.0f} / {used.dynamodb_read_units:.0f} "
            f"| {counted.measurement.api_calls} | {used.log_bytes / 1024:.0f} KB "
            f"| ${cost.total:.4f} | **${cost.monthly(CADENCE_SECONDS):.2f}** | ${before.monthly(CADENCE_SECONDS):.2f} |"
        )
        if nodes == TARGET_NODES:
            met = cost.monthly(CADENCE_SECONDS) < TARGET_MONTHLY_USD
            verdict = (
                f"Target: a {TARGET_NODES}-node cluster swept every 15 minutes under ${TARGET_MONTHLY_USD:.0f}/month: "
                f"**{'met' if met else 'MISSED'}** (${cost.monthly(CADENCE_SECONDS):.2f}; the replaced inline-Map "
                f"design: ${before.monthly(CADENCE_SECONDS):.2f}).\n\n"
                + _breakdown(cost, f"{TARGET_NODES} nodes, per month")
            )
    memory = ", ".join(f"{f.module} {f.memory_mb} MB" for f in LAMBDAS.values())
    return (
        f"Each size is one real sweep of a synthetic healthy cluster (probe latency {PROBE_LATENCY_SECONDS:g} s) "
        "through the deployed state machine definition in the emulation. Design: Standard parent; the probe Map "
        f"is a Distributed Map whose EXPRESS child executions each probe a batch of up to {PROBE_BATCH_SIZE} "
        f"nodes two at a time, {DEFAULT_MAP_MAX_CONCURRENCY} probes at once. "
        "Prices: `tests/bench/pricing.py` "
        f"({pricing.PRICES_REGION} list prices checked {pricing.PRICES_CHECKED_ON}, no free tier); "
        f"{pricing.sweeps_per_month(CADENCE_SECONDS):.0f} sweeps a month.\n\n"
        "| nodes | Standard transitions | Express children (total time) | Lambda invocations | probe billed time "
        "each | DynamoDB WRU / RRU | AWS calls | logs | per sweep | per month | inline-Map design per month |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        + "\n".join(rows)
        + "\n\n"
        + verdict
        + "\n\nHow the numbers are made: transitions are the `*StateEntered` events of the parent's history plus "
        "one per child execution started (the emulation keeps no history for children; AWS bills no transitions "
        "inside EXPRESS children). A child's duration is the span of its nodes' probe invocations, rounded up to "
        "100 ms, at 64 MB. Lambda time is every invocation's measured duration for `probe_node` (it waits on the "
        f"SSM session and the StartSession rate) and {CPU_BOUND_FACTOR:g}x the local time for the CPU-bound "
        f"steps; memory from `infra/constants.py` ({memory}). DynamoDB units are estimated from the items the sweep "
        "left in the table (1 KB per write unit, 4 KB per read unit) plus one unit per conditional update, delete "
        "and single-item read. Logs: the parent's history events as Step Functions logs them "
        "(level ALL, without execution data, as deployed), "
        f"{CHILD_EVENTS_PER_NODE} child events per node at the same average size, one application log line per "
        "invocation. X-Ray: one trace per sweep. The inline-Map column prices the same run as the replaced design "
        f"would have: every ProbeNode a Standard transition, {INLINE_MAP_CONCURRENCY} probes at once "
        f"({INLINE_MAP_CONCURRENCY}/3 s of billed waiting each, Little's law) at {INLINE_PROBE_MEMORY_MB} MB.\n\n"
        "The probe Lambda's billed time is (probes at once) / (3 session starts per second) whenever that exceeds "
        "the probe itself: raise `mapMaxConcurrency` only to about 3 x the real probe time in seconds."
    )


def _breakdown(cost: pricing.SweepCost, title: str) -> str:
    month = pricing.sweeps_per_month(CADENCE_SECONDS)
    parts = {
        "Step Functions Standard": cost.step_functions_standard,
        "Step Functions Express": cost.step_functions_express,
        "Lambda compute": cost.lambda_compute,
        "Lambda requests": cost.lambda_requests,
        "DynamoDB": cost.dynamodb,
        "SNS": cost.sns,
        "CloudWatch Logs": cost.logs,
        "X-Ray": cost.xray,
    }
    lines = "\n".join(f"| {name} | ${value * month:.2f} |" for name, value in parts.items())
    return f"| {title} | USD |\n|---|---:|\n{lines}"
