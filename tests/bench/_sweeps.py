"""Measured sweeps shared by the sweep, cost and memory benchmarks (one run per size and path per
`make bench`: a 1024-node sweep takes minutes, so the benchmarks read each other's runs).

The CLI path runs `hyperpod-nccl bench sweep` in a subprocess (its peak RSS is its own); the state
machine path runs in this process so the cost benchmark can read the execution history, the
handlers' timed invocations and the table the sweep wrote.
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hyperpod_nccl.monitor.settings import GSI1_PARTITION_KEY, PROBE_BATCH_SIZE, TTL_ATTRIBUTE
from hyperpod_nccl_sim.serverless import FUNCTION_PREFIX
from hyperpod_nccl_sim.synthetic import SweepMeasurement, measure_sweep

PROBE_LATENCY_SECONDS = 2.0
# The secondary index's partition key: an item that carries it is also written to the index.
INDEX_KEY = GSI1_PARTITION_KEY
# The size the memory benchmark reads the aggregate step's peak at.
MEMORY_NODES = 1024
# What a handler logs is measured (`LogMeter`) at the deployed application log level: the functions'
# LoggingConfig is JSON at INFO (infra/constructs/functions.py), and Powertools EMF metrics are on.
DEPLOYED_LOG_LEVEL = "INFO"
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
    # Items the sweep left that carry the secondary index's key (each written and stored twice).
    index_item_bytes: list[int] = field(default_factory=list)
    # Each item's size and how long its TTL keeps it (None: no TTL, overwritten by the next sweep).
    item_lifetimes: list[tuple[int, float | None]] = field(default_factory=list)
    # Cold starts by handler module, as the emulation's sandboxes counted them (empty: not counted).
    cold_starts: dict[str, int] = field(default_factory=dict)
    # Bytes each function logged (its JSON log lines), by the function Powertools names in each record.
    log_bytes_by_function: dict[str, int] = field(default_factory=dict)
    # Bytes of EMF metric documents (they are log lines of the emitting function's log group).
    metric_log_bytes: int = 0
    # Distinct (namespace, metric, dimension set and values) the EMF documents defined.
    metric_series: set[tuple[str, str, tuple[tuple[str, str], ...]]] = field(default_factory=set)
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
        os.environ["POWERTOOLS_LOG_LEVEL"] = DEPLOYED_LOG_LEVEL
        os.environ["POWERTOOLS_METRICS_DISABLED"] = "false"
        with LogMeter.installed() as meter:
            # The steady state: a scheduled sweep after an earlier one of the same cluster, whose
            # measured probe time sized its concurrency (a first sweep after deploy sizes for
            # thresholds.EXPECTED_PROBE_SECONDS and waits longer for its starts).
            measurement = measure_sweep(
                nodes,
                PROBE_LATENCY_SECONDS,
                path="state-machine",
                on_run=lambda m, r: captured.update(_count(m, r)),
                warm_up=True,
            )
        _state_machine[nodes] = StateMachineRun(
            measurement=measurement,
            log_bytes_by_function=dict(meter.bytes_by_function),
            metric_log_bytes=meter.metric_bytes,
            metric_series=set(meter.metric_series),
            **captured,
        )
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
    indexed: list[int] = []
    kept: list[tuple[int, float | None]] = []
    scanned_at = time.time()
    for page in table.get_paginator("scan").paginate(TableName="hyperpod-nccl-monitor"):
        for item in page["Items"]:
            size = len(json.dumps(item, default=len))
            sizes.append(size)
            if INDEX_KEY in item:
                indexed.append(size)
            expires = item.get(TTL_ATTRIBUTE, {}).get("N")
            kept.append((size, max(0.0, float(expires) - scanned_at) if expires else None))
    cold: dict[str, int] = {}
    for call in invocations_of_run(monitor, run):
        if getattr(call, "cold", False):
            cold[call.module] = cold.get(call.module, 0) + 1
    return {
        "parent_transitions": transitions,
        "parent_event_bytes": event_bytes,
        "parent_events": len(events),
        "child_seconds": child_seconds,
        "lambda_seconds": seconds,
        "lambda_invocations": invocations,
        "table_item_bytes": sizes,
        "index_item_bytes": indexed,
        "item_lifetimes": kept,
        "cold_starts": cold,
        "notifications": len(run.notifications),
        # Only the memory benchmark's size: the rest need not pay for a second evaluation.
        "aggregate_peak_mb": _aggregate_peak_mb(monitor, run) if len(probes) >= MEMORY_NODES else 0.0,
    }


def invocations_of_run(monitor: Any, run: Any) -> list[Any]:
    """Every invocation the emulation timed for this run, of every handler."""
    return [call for module in sorted({c.module for c in monitor.calls}) for call in monitor.calls_of(run, module)]


class LogMeter(io.TextIOBase):
    """Stands in for stdout while a sweep runs and counts what the functions log, as CloudWatch Logs
    would ingest it: each JSON line by the function Powertools names in every record, EMF metric
    documents (`_aws`) apart, with the metric series they define. The emulation forwards what each
    sandbox writes to this process's stdout; those lines are counted, not printed. Anything else
    (the emulation's own output) is passed through."""

    def __init__(self, passthrough: Any) -> None:
        super().__init__()
        self._passthrough = passthrough
        self._pending = ""
        self._lock = threading.Lock()
        self.bytes_by_function: dict[str, int] = {}
        self.metric_bytes = 0
        self.metric_series: set[tuple[str, str, tuple[tuple[str, str], ...]]] = set()

    @classmethod
    @contextmanager
    def installed(cls) -> Iterator[LogMeter]:
        """`sys.stdout` replaced by a meter for the duration of the block."""
        meter = cls(sys.stdout)
        sys.stdout = meter
        try:
            yield meter
        finally:
            sys.stdout = meter._passthrough
            meter.flush()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            lines = (self._pending + text).split("\n")
            self._pending = lines.pop()
            for line in lines:
                self._count(line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                self._count(self._pending)
                self._pending = ""
        self._passthrough.flush()

    def _count(self, line: str) -> None:
        record: Any = None
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except ValueError:
                record = None
        if not isinstance(record, dict):
            self._passthrough.write(line + "\n")
            return
        size = len(line.encode()) + 1
        metadata = record.get("_aws")
        directives = metadata.get("CloudWatchMetrics") if isinstance(metadata, dict) else None
        if directives:
            self.metric_bytes += size
            for directive in directives:
                for dimensions in directive.get("Dimensions", []):
                    labels = tuple(sorted((key, str(record.get(key))) for key in dimensions))
                    for metric in directive.get("Metrics", []):
                        self.metric_series.add((directive.get("Namespace", ""), metric["Name"], labels))
            return
        # Powertools' Lambda-context keys name the function (the emulation names it FUNCTION_PREFIX + module).
        function = str(record.get("function") or record.get("function_name") or "unattributed")
        function = function.removeprefix(FUNCTION_PREFIX)
        self.bytes_by_function[function] = self.bytes_by_function.get(function, 0) + size


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
