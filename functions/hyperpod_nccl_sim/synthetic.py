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
from typing import Any, Literal

from pydantic import BaseModel, Field

from hyperpod_nccl import thresholds
from hyperpod_nccl_sim.node_behaviours import NodeBehaviour, NodeBehaviours, SessionFaultSpec
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
) -> Scenario:
    """A healthy cluster of `nodes` `instance_type` nodes; each node's first probe session
    takes `probe_latency_seconds` longer than streaming its output (the agent stalls mid-output).

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
    # One stalled session per node: a sweep starts exactly one session per node.
    latency = [SessionFaultSpec(stall_seconds=probe_latency_seconds)] if probe_latency_seconds else []
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


def lower_bound_seconds(nodes: int, probe_latency_seconds: float) -> float:
    """No sweep can beat this: every session start waits for the account's StartSession rate,
    and the last node started still needs one probe."""
    return nodes / thresholds.SSM_START_SESSION_PER_SECOND + probe_latency_seconds


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


def measure_sweep(
    nodes: int,
    probe_latency_seconds: float,
    *,
    path: SweepPath = "cli",
    orchestrator: Literal["eks", "slurm"] = "eks",
    concurrency: int | None = None,
    on_run: Any = None,
) -> SweepMeasurement:
    """Start a synthetic cluster, sweep every node once through `path` and time it.

    Only the sweep is timed (not the emulation's start-up or seeding); API calls are the ones the
    emulation received during the sweep. `concurrency` is the state machine's probes at once
    (mapMaxConcurrency; default the deployed default). `on_run`, if given, receives the state machine path's
    `(LocalMonitor, SweepRun)` before the simulation stops (the cost benchmark reads the history).
    """
    from hyperpod_nccl_sim.runtime import SimulatedCluster

    scenario = synthetic_scenario(nodes, probe_latency_seconds, orchestrator=orchestrator)
    with SimulatedCluster(scenario) as simulation:
        calls = simulation.emulation.faults.calls
        if path == "cli":
            measured = _measure_cli(simulation, calls)
        else:
            measured = (*_measure_state_machine(simulation, calls, concurrency, on_run), peak_rss_mb())
    wall, call_log, probed, unreachable, status, peak = measured
    by_operation = _count(call_log)
    return SweepMeasurement(
        nodes=nodes,
        path=path,
        probe_latency_s=probe_latency_seconds,
        wall_s=round(wall, 3),
        bound_s=round(lower_bound_seconds(len(scenario.node_keys()), probe_latency_seconds), 3),
        serial_s=round(serial_seconds(len(scenario.node_keys()), probe_latency_seconds), 3),
        api_calls=sum(by_operation.values()),
        api_calls_by_operation=by_operation,
        nodes_probed=probed,
        nodes_unreachable=unreachable,
        status=status,
        peak_rss_mb=round(peak, 1),
    )


def _measure_cli(simulation: Any, calls: list[str]) -> tuple[float, list[str], int, int, str, float]:
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
    command = [sys.executable, "-c", _CLI_CHILD, scenario.cluster.name, scenario.region]
    del calls[:]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    call_log = list(calls)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"the CLI sweep failed: {done.stderr[-2000:]}")
    child = json.loads(done.stdout.strip().splitlines()[-1])
    return (
        float(child["wall_s"]),
        call_log,
        int(child["nodes_probed"]),
        int(child["nodes_unreachable"]),
        "SUCCEEDED",
        float(child["peak_rss_mb"]),
    )


# The child process of `_measure_cli`: `diagnose --sample-nodes all` through the engine, timed
# from the first AWS call to the result (interpreter start-up excluded).
_CLI_CHILD = """
import json, sys, time
from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.engine import diagnose
from hyperpod_nccl.models.findings import Scope
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl_sim.synthetic import peak_rss_mb
cluster, region = sys.argv[1], sys.argv[2]
request = DiagnoseRequest(cluster=cluster, region=region, scope=Scope(sample_nodes="all"))
aws = AwsClients(region=region)
started = time.monotonic()
result = diagnose(request, aws)
wall = time.monotonic() - started
print(json.dumps({"wall_s": wall, "nodes_probed": result.coverage.nodes_probed,
                  "nodes_unreachable": result.coverage.nodes_unreachable, "peak_rss_mb": peak_rss_mb()}))
"""


def _measure_state_machine(
    simulation: Any, calls: list[str], concurrency: int | None, on_run: Any
) -> tuple[float, list[str], int, int, str]:
    from hyperpod_nccl.monitor.settings import DEFAULT_MAP_MAX_CONCURRENCY
    from hyperpod_nccl_sim.serverless import LocalMonitor

    with LocalMonitor(simulation, map_concurrency=concurrency or DEFAULT_MAP_MAX_CONCURRENCY) as monitor:
        del calls[:]
        started = time.monotonic()
        run = monitor.sweep(timeout=_state_machine_timeout(len(simulation.scenario.node_keys())))
        wall = time.monotonic() - started
        call_log = list(calls)
        aggregate = (run.output or {}).get("aggregate") or {}
        if on_run is not None:
            on_run(monitor, run)
    return wall, call_log, int(aggregate.get("nodes_probed", 0)), int(aggregate.get("nodes_unreachable", 0)), run.status


def _state_machine_timeout(nodes: int) -> float:
    """Generous: ten times the bound plus start-up, so a slow machine reports a time, not a hang."""
    return 120.0 + 10 * nodes / thresholds.SSM_START_SESSION_PER_SECOND
