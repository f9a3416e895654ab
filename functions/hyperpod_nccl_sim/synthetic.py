"""Synthetic scenarios for scale benchmarks: a healthy HyperPod cluster of N accelerator nodes
whose every probe takes a fixed, known time.

The shipped scenarios are small and full of faults (they exercise the checks); a sweep-scale
benchmark needs the opposite: many identical healthy nodes, so that the measured wall time is
the orchestration (pacing, concurrency, state machine) and nothing else.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, Field

from hyperpod_nccl import reads, thresholds
from hyperpod_nccl.monitor.settings import LOG_FILTER_RATE_ENV, START_SESSION_RATE_ENV
from hyperpod_nccl_sim.node_behaviours import NodeBehaviour, NodeBehaviours, SessionFaultSpec
from hyperpod_nccl_sim.runtime import restore_environment, set_environment
from hyperpod_nccl_sim.scenario import ClusterSpec, InstanceGroupSpec, Scenario, SecurityGroupSpec

SYNTHETIC_INSTANCE_TYPE = "ml.p5.48xlarge"
WORKER_GROUP = "worker"
CONTROLLER_GROUP = "controller"


def synthetic_scenario(
    nodes: int,
    probe_latency_seconds: float,
    *,
    orchestrator: Literal["eks", "slurm"] = "eks",
    instance_type: str = SYNTHETIC_INSTANCE_TYPE,
    sweeps: int = 1,
) -> Scenario:
    """A healthy cluster of `nodes` `instance_type` nodes; each node's first `sweeps` probe
    sessions take `probe_latency_seconds` longer than streaming their output (the agent stalls
    mid-output).

    Slurm clusters get one extra controller node (a Slurm cluster has one; the sweep probes it
    with the controller script), so `nodes` counts the accelerator nodes in both cases.
    """
    if nodes < 1:
        raise ValueError("a synthetic cluster needs at least one node")
    if probe_latency_seconds < 0:
        raise ValueError("probe latency cannot be negative")
    groups = [
        InstanceGroupSpec(
            name=WORKER_GROUP,
            instance_type=instance_type,
            count=nodes,
            slurm_node_type="Compute" if orchestrator == "slurm" else None,
        )
    ]
    if orchestrator == "slurm":
        groups.insert(
            0,
            InstanceGroupSpec(
                name=CONTROLLER_GROUP, instance_type="ml.m5.4xlarge", count=1, slurm_node_type="Controller"
            ),
        )
    # One stalled session per node and sweep: a sweep starts exactly one session per node (a
    # throttled StartSession starts none), and a later session would answer at once.
    latency = [SessionFaultSpec(stall_seconds=probe_latency_seconds)] * sweeps if probe_latency_seconds else []
    behaviours = NodeBehaviours(defaults=NodeBehaviour(session_faults=latency))
    if orchestrator == "slurm":
        from hyperpod_nccl_sim.node_behaviours import SlurmControllerBehaviour

        behaviours.slurm = SlurmControllerBehaviour()
    name = f"synthetic-{orchestrator}-{nodes}"
    return Scenario(
        name=name,
        description=f"Synthetic healthy {orchestrator.upper()} cluster of {nodes} {instance_type} nodes, "
        f"each probe taking {probe_latency_seconds:g} s (scale benchmark).",
        cluster=ClusterSpec(name=name, orchestrator=orchestrator, instance_groups=groups),
        security_groups=[SecurityGroupSpec(key="cluster", name=f"hyperpod-{name}")],
        node_behaviours=behaviours,
    )


# --- measuring one sweep ---------------------------------------------------------------------------

SweepPath = Literal["cli", "state-machine"]
# Calls the benchmark itself makes to watch the execution; not part of the sweep.
_HARNESS_OPERATIONS = {
    "states:DescribeExecution",
    "states:GetExecutionHistory",
    "states:ListExecutions",
    # The local monitor reads the topic back through a queue (SNS -> SQS): not the sweep's.
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
}
# Services the sweep calls to look at the cluster (the rest is the monitor's own plumbing).
CLUSTER_SERVICES = ("sagemaker", "ec2", "logs", "eks", "ssm", "sts")


class SweepMeasurement(BaseModel):
    """One measured sweep of a synthetic cluster (`hyperpod-nccl bench sweep --format json`)."""

    nodes: int
    path: str
    probe_latency_s: float
    wall_s: float
    bound_s: float
    serial_s: float
    api_calls: int
    api_calls_by_operation: dict[str, int] = Field(default_factory=dict)
    nodes_probed: int
    nodes_unreachable: int
    status: str = "SUCCEEDED"
    peak_rss_mb: float = Field(
        default=0.0,
        description="peak RSS of the sweeping process: the CLI's own process; for the state machine, the "
        "process that also runs the emulation and every handler",
    )
    time_scale: float = Field(
        default=1.0,
        description="k: every rate (the emulation's and the product's) ran k times faster and every probe k "
        "times shorter; wall_s and bound_s are in those scaled seconds (`measure_sweep`)",
    )
    probes_at_once: int = Field(default=0, description="the concurrency the bound's probe term uses")
    start_session_accepted: int = Field(default=0, description="StartSession calls the emulated rate let through")
    start_session_throttled: int = Field(default=0, description="StartSession calls the emulated rate throttled")
    probe_throttles: int = Field(default=0, description="throttles the probes met (their results' `throttles`)")
    probe_retries: int = Field(default=0, description="StartSession retries the probes made (`retries`)")
    paced_seconds: float = Field(default=0.0, description="seconds the probes waited for their starts, summed")
    nodes_skipped: int = Field(default=0, description="nodes not probed (the rate left them no start)")
    warm_up_wall_s: float | None = Field(
        default=None, description="state machine: the cluster's first sweep, run before the measured one"
    )
    warm_up_probes_at_once: int | None = Field(default=None, description="what Discover chose for that first sweep")
    probe_phase_s: float | None = Field(
        default=None,
        description="state machine: how long its probe Map ran (the rest of wall_s is the stages before and "
        "after it: trigger, Discover, Aggregate, Notify)",
    )

    @property
    def throttled_share(self) -> float:
        """Share of the StartSession calls the emulated account rate throttled."""
        total = self.start_session_accepted + self.start_session_throttled
        return self.start_session_throttled / total if total else 0.0

    @property
    def ratio_to_bound(self) -> float:
        """How far from the lower bound the sweep was (1.0 = at the bound)."""
        return self.wall_s / self.bound_s if self.bound_s else 0.0

    def cluster_calls(self) -> dict[str, int]:
        """Calls to the services that describe the cluster (control plane, logs, SSM)."""
        return {op: n for op, n in self.api_calls_by_operation.items() if op.split(":", 1)[0] in CLUSTER_SERVICES}


def peak_rss_mb() -> float:
    """This process's peak resident set size in MB.

    Linux's VmHWM belongs to the address space, so it starts afresh at exec; getrusage's
    ru_maxrss survives exec and would report the parent's size in a child spawned by a big process.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def lower_bound_seconds(
    nodes: int,
    probe_latency_seconds: float,
    *,
    rate_per_second: float = thresholds.SSM_START_SESSION_PER_SECOND,
    probes_at_once: int | None = None,
) -> float:
    """No sweep can beat this: every session start waits for the account's StartSession rate and
    the last node started still needs one probe (N / rate + probe), and no more than
    `probes_at_once` probes run together (None: as many as the rate allows), so the probes take at
    least ceil(N / concurrency) rounds of one probe each.

    Issue 15 writes the bound max(N / rate, N x probe / concurrency) + probe; where the concurrency
    binds, that counts the last probe twice (16 nodes of 20 s probes, 16 at once, finish in one
    probe, not two), so it is not a lower bound: this one is never above it and differs from it
    by under one probe per ceil(N / concurrency) rounds."""
    starts = nodes / rate_per_second + probe_latency_seconds
    rounds = -(-nodes // probes_at_once) * probe_latency_seconds if probes_at_once else 0.0
    return max(starts, rounds)


def serial_seconds(nodes: int, probe_latency_seconds: float) -> float:
    """The original design: one node after another, each within the 180 s SSM budget."""
    return nodes * min(probe_latency_seconds, float(thresholds.SSM_NODE_BUDGET_SECONDS))


def _count(calls: list[str]) -> dict[str, int]:
    counted: dict[str, int] = {}
    for call in calls:
        if call in _HARNESS_OPERATIONS:
            continue
        counted[call] = counted.get(call, 0) + 1
    return dict(sorted(counted.items()))


@dataclass
class _Swept:
    """What one path's sweep measured, before it becomes a `SweepMeasurement`."""

    wall_s: float
    calls: list[str]
    probed: int
    unreachable: int
    skipped: int
    status: str
    peak_rss_mb: float
    probes_at_once: int
    start_session: tuple[int, int] = (0, 0)
    throttles: int = 0
    retries: int = 0
    paced_seconds: float = 0.0
    warm_up_wall_s: float | None = None
    warm_up_probes_at_once: int | None = None
    probe_phase_s: float | None = None


@dataclass(frozen=True)
class TimeScale:
    """k: the sweep runs k times faster than AWS allows, honestly (`measure_sweep`)."""

    k: float = 1.0

    def __post_init__(self) -> None:
        if self.k <= 0:
            raise ValueError("the time scale must be positive")

    @property
    def start_session_rate(self) -> float:
        """StartSession per second, the emulation's and the product's pace alike."""
        return thresholds.SSM_START_SESSION_PER_SECOND * self.k

    @property
    def log_filter_rate(self) -> float:
        """The product's FilterLogEvents pace."""
        return thresholds.LOG_FILTER_CALLS_PER_SECOND * self.k

    def emulated_limits(self) -> Any:
        """The emulation's account-wide rates, each k times AWS's; the bursts are counts of calls,
        not times, so they stay as they are."""
        from hyperpod_nccl_sim.aws import EmulatedLimits

        defaults = EmulatedLimits()
        return replace(
            defaults,
            start_session_per_second=(defaults.start_session_per_second or 0) * self.k,
            filter_log_events_per_second=(defaults.filter_log_events_per_second or 0) * self.k,
        )

    def product_environment(self) -> dict[str, str]:
        """The monitor's paces (its functions' environment), k times the defaults."""
        return {START_SESSION_RATE_ENV: repr(self.start_session_rate), LOG_FILTER_RATE_ENV: repr(self.log_filter_rate)}


def measure_sweep(
    nodes: int,
    probe_latency_seconds: float,
    *,
    path: SweepPath = "cli",
    orchestrator: Literal["eks", "slurm"] = "eks",
    concurrency: int | None = None,
    on_run: Any = None,
    time_scale: float = 1.0,
    warm_up: bool = False,
) -> SweepMeasurement:
    """Start a synthetic cluster, sweep every node once through `path` and time it, against the
    emulation's account-wide rates (StartSession 3/s, FilterLogEvents 5/s).

    Only the sweep is timed (not the emulation's start-up or seeding); API calls are the ones the
    emulation received during the sweep. `concurrency` is the state machine's ceiling of probes at
    once (mapMaxConcurrency; default the deployed default), under which Discover sizes each sweep.
    `on_run`, if given, receives the state machine path's `(LocalMonitor, SweepRun)` of the measured
    sweep before the simulation stops (the cost benchmark reads the history). `warm_up` (state
    machine only) sweeps the cluster once first, untimed, so that the measured sweep is sized from a
    previous sweep's probe times, as every sweep of a cluster but its first is.

    `time_scale` k runs the sweep k times faster than AWS would allow, honestly: the emulation's
    rates and the product's paces are k times AWS's (bursts unchanged: they count calls), each
    probe takes `probe_latency_seconds / k`, and the bound is in the same scaled seconds. Budgets
    and timeouts are not scaled (they never bind on a healthy cluster); neither are the fixed costs
    (Lambda dispatch, the emulation, DynamoDB), so the ratio to the bound is pessimistic.
    """
    from hyperpod_nccl_sim.runtime import SimulatedCluster

    scale = TimeScale(time_scale)
    latency = probe_latency_seconds / scale.k
    scenario = synthetic_scenario(nodes, latency, orchestrator=orchestrator, sweeps=2 if warm_up else 1)
    with SimulatedCluster(scenario, limits=scale.emulated_limits()) as simulation:
        calls = simulation.emulation.faults.calls
        if path == "cli":
            swept = _measure_cli(simulation, calls, scale)
        else:
            swept = _measure_state_machine(simulation, calls, concurrency, on_run, scale, warm_up)
    by_operation = _count(swept.calls)
    node_count = len(scenario.node_keys())
    bound = lower_bound_seconds(
        node_count, latency, rate_per_second=scale.start_session_rate, probes_at_once=swept.probes_at_once
    )
    return SweepMeasurement(
        nodes=nodes,
        path=path,
        probe_latency_s=probe_latency_seconds,
        wall_s=round(swept.wall_s, 3),
        bound_s=round(bound, 3),
        serial_s=round(serial_seconds(node_count, latency), 3),
        api_calls=sum(by_operation.values()),
        api_calls_by_operation=by_operation,
        nodes_probed=swept.probed,
        nodes_unreachable=swept.unreachable,
        nodes_skipped=swept.skipped,
        status=swept.status,
        peak_rss_mb=round(swept.peak_rss_mb, 1),
        time_scale=scale.k,
        probes_at_once=swept.probes_at_once,
        start_session_accepted=swept.start_session[0],
        start_session_throttled=swept.start_session[1],
        probe_throttles=swept.throttles,
        probe_retries=swept.retries,
        paced_seconds=round(swept.paced_seconds, 3),
        warm_up_wall_s=None if swept.warm_up_wall_s is None else round(swept.warm_up_wall_s, 3),
        warm_up_probes_at_once=swept.warm_up_probes_at_once,
        probe_phase_s=None if swept.probe_phase_s is None else round(swept.probe_phase_s, 3),
    )


def _start_sessions(emulation: Any) -> tuple[int, int]:
    """StartSession calls the emulated account rate has let through and throttled so far."""
    usage = emulation.rate_usage(reads.START_SESSION).values()
    return sum(u.accepted for u in usage), sum(u.throttled for u in usage)


def _since(before: tuple[int, int], after: tuple[int, int]) -> tuple[int, int]:
    return after[0] - before[0], after[1] - before[1]


def _measure_cli(simulation: Any, calls: list[str], scale: TimeScale) -> _Swept:
    """The CLI's sweep in its own process against this process's emulation, as an operator runs
    it against AWS: its wall time and peak memory are its own, not the emulation's."""
    from hyperpod_nccl_sim.aws import FAKE_ACCESS_KEY, FAKE_SECRET_KEY

    scenario = simulation.scenario
    env = dict(os.environ)
    env.update(
        {
            "AWS_ENDPOINT_URL": simulation.emulation.endpoint_url,
            "AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_KEY,
            "AWS_DEFAULT_REGION": scenario.region,
            "AWS_MAX_ATTEMPTS": "2",
        }
    )
    env.pop("AWS_PROFILE", None)
    env.pop("AWS_SESSION_TOKEN", None)
    command = [
        sys.executable,
        "-c",
        _CLI_CHILD,
        scenario.cluster.name,
        scenario.region,
        repr(scale.start_session_rate),
        repr(scale.log_filter_rate),
    ]
    del calls[:]
    before = _start_sessions(simulation.emulation)
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    call_log = list(calls)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"the CLI sweep failed: {done.stderr[-2000:]}")
    child = json.loads(done.stdout.strip().splitlines()[-1])
    return _Swept(
        wall_s=float(child["wall_s"]),
        calls=call_log,
        probed=int(child["nodes_probed"]),
        unreachable=int(child["nodes_unreachable"]),
        skipped=int(child["nodes_skipped"]),
        status="SUCCEEDED",
        peak_rss_mb=float(child["peak_rss_mb"]),
        probes_at_once=int(child["probes_at_once"]),
        start_session=_since(before, _start_sessions(simulation.emulation)),
        throttles=int(child["throttles"]),
        retries=int(child["retries"]),
        paced_seconds=float(child["paced_seconds"]),
    )


# The child process of `_measure_cli`: `diagnose --sample-nodes all` through the engine (as
# `engine.diagnose` runs it, keeping the inventory to count the probes' throttles), at the given
# StartSession and FilterLogEvents paces (`--start-session-rate`), timed from the first AWS call to
# the result (interpreter start-up excluded).
_CLI_CHILD = """
import json, sys, time
from hyperpod_nccl.collectors import collect
from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.engine import build_result
from hyperpod_nccl.models.findings import Scope
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.pacing import filter_log_events_limiter
from hyperpod_nccl_sim.synthetic import peak_rss_mb
cluster, region, start_rate, filter_rate = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
scope = Scope(sample_nodes="all")
request = DiagnoseRequest(cluster=cluster, region=region, scope=scope, start_session_rate=start_rate)
aws = AwsClients(region=region)
started = time.monotonic()
ctx = CollectionContext(request=request, aws=aws, filter_pacer=filter_log_events_limiter(filter_rate))
inventory = collect(ctx)
result = build_result(inventory, ctx.degraded, ctx.now)
wall = time.monotonic() - started
probes = inventory.node_probes.results if inventory.node_probes else []
coverage = result.coverage
print(json.dumps({"wall_s": wall, "nodes_probed": coverage.nodes_probed,
                  "nodes_unreachable": coverage.nodes_unreachable, "nodes_skipped": coverage.nodes_skipped,
                  "peak_rss_mb": peak_rss_mb(),
                  "throttles": sum(r.throttles for r in probes), "retries": sum(r.retries for r in probes),
                  "paced_seconds": sum(r.paced_seconds for r in probes),
                  "probes_at_once": (inventory.node_probes.probes_at_once or 0) if inventory.node_probes else 0}))
"""


def _measure_state_machine(
    simulation: Any, calls: list[str], concurrency: int | None, on_run: Any, scale: TimeScale, warm_up: bool
) -> _Swept:
    from hyperpod_nccl.monitor.settings import DEFAULT_MAP_MAX_CONCURRENCY
    from hyperpod_nccl.pacing import cooldown_seconds
    from hyperpod_nccl_sim.serverless import LocalMonitor

    nodes = len(simulation.scenario.node_keys())
    timeout = _state_machine_timeout(nodes, scale)
    # The functions' environment is this process's at each invocation (sim/sandboxes.py).
    saved = set_environment(scale.product_environment())
    try:
        with LocalMonitor(simulation, map_concurrency=concurrency or DEFAULT_MAP_MAX_CONCURRENCY) as monitor:
            first: tuple[float, int] | None = None
            if warm_up:
                throttled_before = _start_sessions(simulation.emulation)[1]
                started = time.monotonic()
                run = monitor.sweep(timeout=timeout)
                first = (time.monotonic() - started, _probes_at_once(run))
                if _start_sessions(simulation.emulation)[1] > throttled_before:
                    # Recurring throttles slow the shared pace for a cooldown that the next scheduled
                    # sweep, a cadence later, never meets: back to back, the warm-up's would slow it.
                    time.sleep(cooldown_seconds(scale.start_session_rate))
            del calls[:]
            before = _start_sessions(simulation.emulation)
            started = time.monotonic()
            run = monitor.sweep(timeout=timeout)
            wall = time.monotonic() - started
            call_log = list(calls)
            start_session = _since(before, _start_sessions(simulation.emulation))
            aggregate = (run.output or {}).get("aggregate") or {}
            probes = _stored_probe_results(monitor, run)
            if on_run is not None:
                on_run(monitor, run)
    finally:
        restore_environment(saved)
    probed, unreachable = int(aggregate.get("nodes_probed", 0)), int(aggregate.get("nodes_unreachable", 0))
    return _Swept(
        wall_s=wall,
        calls=call_log,
        probed=probed,
        unreachable=unreachable,
        # Aggregate's output counts these two; every other node was not probed (or the sweep failed).
        skipped=nodes - probed - unreachable,
        status=run.status,
        peak_rss_mb=peak_rss_mb(),
        probes_at_once=_probes_at_once(run),
        start_session=start_session,
        throttles=sum(r.throttles for r in probes),
        retries=sum(r.retries for r in probes),
        paced_seconds=sum(r.paced_seconds for r in probes),
        warm_up_wall_s=first[0] if first else None,
        warm_up_probes_at_once=first[1] if first else None,
        probe_phase_s=next((v.seconds for v in run.states if v.name == PROBE_MAP_STATE), None),
    )


# The sweep definition's probe Map (sweep.asl.json): the part of a sweep the bound describes.
PROBE_MAP_STATE = "ProbeNodes"


def _probes_at_once(run: Any) -> int:
    """The probes a sweep ran at once, as its Discover chose: `batches_at_once` child executions,
    each probing up to PROBE_BATCH_CONCURRENCY nodes of its batch together."""
    from hyperpod_nccl.monitor.settings import PROBE_BATCH_CONCURRENCY

    for event in run.events:
        output = (event.get("lambdaFunctionSucceededEventDetails") or {}).get("output")
        if output and '"batches_at_once"' in output:
            discovered = json.loads(output)
            batch = max((len(b) for b in discovered.get("batches", [])), default=0)
            return int(discovered["batches_at_once"]) * min(batch, PROBE_BATCH_CONCURRENCY)
    return 0


def _stored_probe_results(monitor: Any, run: Any) -> list[Any]:
    """The node results the sweep's ProbeNode invocations stored in the table."""
    from hyperpod_nccl.monitor.settings import FINDINGS_TABLE_ENV
    from hyperpod_nccl.monitor.states.probe_node import load_probe_results
    from hyperpod_nccl.monitor.store import Store

    resource = monitor.emulation.session(monitor.region).resource(
        "dynamodb", endpoint_url=monitor.emulation.endpoint_url, region_name=monitor.region
    )
    store = Store(resource.Table(os.environ[FINDINGS_TABLE_ENV]))
    return list(load_probe_results(store, run.execution_arn.rsplit(":", 1)[-1]).values())


def _state_machine_timeout(nodes: int, scale: TimeScale) -> float:
    """Generous: ten times the bound plus start-up, so a slow machine reports a time, not a hang."""
    return 120.0 + 10 * nodes / scale.start_session_rate
