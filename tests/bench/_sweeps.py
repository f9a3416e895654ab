"""Measured sweeps shared by the sweep, cost and memory benchmarks (one run per size and path per
`make bench`: a 1024-node sweep takes minutes, so the benchmarks read each other's runs).

The CLI path runs `hyperpod-nccl bench sweep` in a subprocess (its peak RSS is its own); the state
machine path runs in this process so the cost benchmark can read the execution history, the
handlers' timed invocations and the table the sweep wrote.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tracemalloc
from dataclasses import dataclass, field
from typing import Any

from hyperpod_nccl.monitor.settings import PROBE_BATCH_SIZE
from hyperpod_nccl_sim.synthetic import SweepMeasurement, measure_sweep

PROBE_LATENCY_SECONDS = 2.0
# The size the memory benchmark reads the aggregate step's peak at.
MEMORY_NODES = 1024
# Powertools writes one INFO line per invocation (about this size, JSON with the Lambda context).
LAMBDA_LOG_LINE_BYTES = 600
# An Express child logs, per node, the ProbeNode task's events (entered, scheduled, started,
# succeeded, exited) plus the inline Map iteration's two.
CHILD_EVENTS_PER_NODE = 7


@dataclass
class StateMachineRun:
    """What a state-machine sweep consumed, counted from the run."""

    measurement: SweepMeasurement
    parent_transitions: int
    parent_event_bytes: int
    parent_events: int
    child_seconds: list[float]
    lambda_seconds: dict[str, float]
    lambda_invocations: dict[str, int]
    table_item_bytes: list[int]
    notifications: int
    aggregate_peak_mb: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


_cli: dict[int, SweepMeasurement] = {}
_state_machine: dict[int, StateMachineRun] = {}


def cli_sweep(nodes: int) -> SweepMeasurement:
    """The CLI path at `nodes`, run once (in a subprocess, so its RSS is its own)."""
    if nodes not in _cli:
        command = [
            sys.executable,
            "-m",
            "hyperpod_nccl.cli.main",
            "bench",
            "sweep",
            "--nodes",
            str(nodes),
            "--probe-latency",
            str(PROBE_LATENCY_SECONDS),
            "--format",
            "json",
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=dict(os.environ))
        if not done.stdout.strip():
            raise RuntimeError(f"bench sweep failed: {done.stderr[-2000:]}")
        _cli[nodes] = SweepMeasurement.model_validate(json.loads(done.stdout.strip().splitlines()[-1]))
    return _cli[nodes]


def state_machine_sweep(nodes: int) -> StateMachineRun:
    """The state machine path at `nodes`, run once, with everything the cost model counts."""
    if nodes not in _state_machine:
        captured: dict[str, Any] = {}
        os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
        measurement = measure_sweep(
            nodes, PROBE_LATENCY_SECONDS, path="state-machine", on_run=lambda m, r: captured.update(_count(m, r))
        )
        _state_machine[nodes] = StateMachineRun(measurement=measurement, **captured)
    return _state_machine[nodes]


def _count(monitor: Any, run: Any) -> dict[str, Any]:
    """Read the finished run: history, timed invocations, the table, and the aggregate's memory."""
    events = run.events
    transitions = sum(1 for e in events if e["type"].endswith("StateEntered"))
    event_bytes = sum(len(json.dumps(_without_data(e), default=str)) for e in events)
    batches: list[list[str]] = []
    for event in events:
        output = (event.get("lambdaFunctionSucceededEventDetails") or {}).get("output")
        if output and '"batches"' in output:
            batches = json.loads(output).get("batches", [])
    probes = monitor.calls_of(run, "probe_node")
    by_node = {c.event.get("instance_id"): c for c in probes}
    child_seconds = []
    for batch in batches:
        calls = [by_node[i] for i in batch if i in by_node]
        if calls:
            child_seconds.append(max(c.started + c.seconds for c in calls) - min(c.started for c in calls))
    seconds: dict[str, float] = {}
    invocations: dict[str, int] = {}
    for module in {c.module for c in monitor.calls}:
        calls = monitor.calls_of(run, module)
        seconds[module] = sum(c.seconds for c in calls)
        invocations[module] = len(calls)
    table = monitor.client("dynamodb")
    sizes: list[int] = []
    for page in table.get_paginator("scan").paginate(TableName="hyperpod-nccl-monitor"):
        sizes += [len(json.dumps(item, default=len)) for item in page["Items"]]
    return {
        "parent_transitions": transitions,
        "parent_event_bytes": event_bytes,
        "parent_events": len(events),
        "child_seconds": child_seconds,
        "lambda_seconds": seconds,
        "lambda_invocations": invocations,
        "table_item_bytes": sizes,
        "notifications": len(run.notifications),
        # Only the memory benchmark's size: the rest need not pay for a second evaluation.
        "aggregate_peak_mb": _aggregate_peak_mb(monitor, run) if len(probes) >= MEMORY_NODES else 0.0,
    }


def _without_data(event: dict[str, Any]) -> dict[str, Any]:
    """An event as Step Functions logs it without execution data (the deployed logging level)."""
    stripped: dict[str, Any] = {}
    for key, value in event.items():
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in ("input", "output", "parameters")}
        stripped[key] = value
    return stripped


def _aggregate_peak_mb(monitor: Any, run: Any) -> float:
    """Python allocations at peak while the aggregate step rebuilds this sweep's inventory from
    the stored partials and evaluates every check (what its Lambda does besides writing)."""
    from hyperpod_nccl.engine import build_result
    from hyperpod_nccl.monitor.payloads import SweepRef
    from hyperpod_nccl.monitor.states.aggregate import build_inventory
    from hyperpod_nccl.monitor.store import Store

    resource = monitor.emulation.session(monitor.region).resource(
        "dynamodb", endpoint_url=monitor.emulation.endpoint_url, region_name=monitor.region
    )
    store = Store(resource.Table("hyperpod-nccl-monitor"))
    ref = SweepRef.model_validate(store.sweep_request(run.execution_arn.rsplit(":", 1)[-1]))
    tracemalloc.start()
    built = build_inventory(store, ref)
    if built is not None:
        inventory, degraded = built
        build_result(inventory, degraded, ref.started_at)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 1024 / 1024


def children(nodes: int) -> int:
    """Child executions of a sweep of `nodes` (one per batch)."""
    return math.ceil(nodes / PROBE_BATCH_SIZE)
