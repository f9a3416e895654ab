"""The Aggregate state over a stored sweep of N nodes, without probing N nodes (at the account's
StartSession rate a 10,000-node sweep takes most of an hour).

`stored_sweep` starts a synthetic cluster of N nodes in the emulation and runs the sweep's own states
up to the probes, in this process, over the monitor's table: Discover (the control plane and probe
plan of N nodes), the CloudWatch scan and Kubernetes collectors. The probes are the one shortcut: one
healthy node and one unhealthy node (an Xid and an uncorrected ECC error, a share `UNHEALTHY_SHARE`
of the nodes) are probed for real over the emulated SSM, and every other node's result is that
template's with the node's id in place of the template's, stored the way ProbeNode stores it
(`store_probe_result`), in batches. `measure_aggregate` then runs `run_aggregate` (what the handler
runs) over that sweep in a fresh process, so that its peak RSS is the Aggregate's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from hyperpod_nccl.models.node_probe import NodeProbeResult
from hyperpod_nccl.monitor.payloads import DiscoverOutput, SweepRef
from hyperpod_nccl.monitor.store import Store
from hyperpod_nccl_sim.node_behaviours import NodeBehaviour, XidSpec
from hyperpod_nccl_sim.scenario import Scenario
from hyperpod_nccl_sim.synthetic import synthetic_scenario

# A realistic share of a large cluster's nodes with a hardware fault at one sweep.
UNHEALTHY_SHARE = 0.02
# What an unhealthy node shows: an Xid 79 (GPU fallen off the bus) and an uncorrected ECC error.
UNHEALTHY = NodeBehaviour(xids=[XidSpec(gpu=2, code=79)], ecc_uncorrected_gpus=[5])


class AggregateMeasurement(BaseModel):
    """One Aggregate over a stored sweep, measured in its own process."""

    nodes: int
    unhealthy: int
    peak_rss_mb: float
    wall_s: float
    # The process's CPU time in run_aggregate (user + system): what Lambda's share of a vCPU runs.
    cpu_s: float = 0.0
    status: str
    findings_open: int
    seed_s: float = 0.0


def unhealthy_keys(node_keys: list[str], share: float = UNHEALTHY_SHARE) -> list[str]:
    """`share` of `node_keys` (at least one), spread evenly over the list (every k-th node)."""
    if not node_keys:
        return []
    count = max(1, round(len(node_keys) * share))
    step = len(node_keys) / count
    return [node_keys[int(i * step)] for i in range(count)]


def cloned_result(template: NodeProbeResult, instance_id: str) -> NodeProbeResult:
    """`template`'s result as node `instance_id`'s: every mention of the template's id (its
    instance id, and the names built from it) replaced by `instance_id`'s."""
    text = template.model_dump_json().replace(template.instance_id, instance_id)
    return NodeProbeResult.model_validate_json(text)


class _ItemRecorder:
    """A stand-in for the table that keeps the items written to it (the Store's encoding, kept for
    one batched write)."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    # `Item`: boto3's keyword, as Store calls it.
    def put_item(self, Item: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.items.append(Item)
        return {}


def scenario_with_unhealthy(nodes: int) -> tuple[Scenario, list[str]]:
    """A synthetic healthy cluster of `nodes` whose `unhealthy_keys` nodes behave `UNHEALTHY`."""
    scenario = synthetic_scenario(nodes, 0.0)
    sick = unhealthy_keys(scenario.node_keys())
    behaviours = scenario.node_behaviours
    if behaviours is None:  # synthetic_scenario always gives every node its latency behaviour
        raise RuntimeError("a synthetic scenario without node behaviours")
    behaviours.nodes.update(dict.fromkeys(sick, UNHEALTHY))
    return scenario, sick


@contextmanager
def stored_sweep(nodes: int) -> Iterator[tuple[Any, SweepRef, DiscoverOutput, int]]:
    """The emulation holding a sweep of `nodes` as ProbeNode would have left it (module docstring):
    yields (the LocalMonitor, the sweep's ref, Discover's output, the unhealthy node count)."""
    from hyperpod_nccl.monitor.payloads import ProbeItem
    from hyperpod_nccl.monitor.states.collect import run_collect_kubernetes, run_collect_logs
    from hyperpod_nccl.monitor.states.discover import run_discover
    from hyperpod_nccl.monitor.states.probe_node import load_probe_results, run_probe_node, store_probe_result
    from hyperpod_nccl_sim.runtime import SimulatedCluster
    from hyperpod_nccl_sim.serverless import TABLE_NAME, LocalMonitor

    scenario, sick = scenario_with_unhealthy(nodes)
    with SimulatedCluster(scenario) as simulation, LocalMonitor(simulation) as monitor:
        resource = monitor.emulation.session(monitor.region).resource(
            "dynamodb", endpoint_url=monitor.emulation.endpoint_url, region_name=monitor.region
        )
        store = Store(resource.Table(TABLE_NAME))
        aws = simulation.clients()
        sweep_id = f"bench-aggregate-{nodes}"
        ref = SweepRef(
            sweep_id=sweep_id,
            execution=sweep_id,
            cluster=scenario.cluster.name,
            region=scenario.region,
            started_at=datetime.now(UTC),
        )
        discovered = run_discover(ref, store, aws, "all")
        run_collect_logs(ref, store, aws, "all")
        run_collect_kubernetes(ref, store, aws, "all")
        healthy_key = next(key for key in scenario.node_keys() if key not in sick)
        healthy_id, sick_id = simulation.instance_id(healthy_key), simulation.instance_id(sick[0])
        for instance_id in (healthy_id, sick_id):
            run_probe_node(
                ProbeItem(sweep_id=sweep_id, cluster=ref.cluster, region=ref.region, instance_id=instance_id),
                store,
                aws,
                "all",
                monitor.probe_documents,
            )
        probed = load_probe_results(store, sweep_id)
        healthy_template, sick_template = probed[healthy_id], probed[sick_id]
        for template in (healthy_template, sick_template):
            if not template.reachable or template.probe is None:
                raise RuntimeError(f"the template probe of {template.instance_id} failed: {template.error}")
        sick_ids = {simulation.instance_id(key) for key in sick}
        recorder = _ItemRecorder()
        recording = Store(recorder)  # type: ignore[arg-type]
        for batch in discovered.batches:
            for instance_id in batch:
                if instance_id in (healthy_id, sick_id):
                    continue
                template = sick_template if instance_id in sick_ids else healthy_template
                store_probe_result(recording, ref, cloned_result(template, instance_id))
        store._put_many(recorder.items)
        yield monitor, ref, discovered, len(sick)


_AGGREGATE_CHILD = """
import json, resource, sys, time
import hyperpod_nccl.handlers.aggregate
from hyperpod_nccl.handlers import connect_store
from hyperpod_nccl.monitor.payloads import SweepState
from hyperpod_nccl.monitor.settings import MonitorSettings
from hyperpod_nccl.monitor.states.aggregate import run_aggregate
from hyperpod_nccl_sim.synthetic import peak_rss_mb
settings = MonitorSettings.from_env()
store = connect_store(settings)
state = SweepState.model_validate_json(sys.stdin.read())
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
started, cpu_started = time.monotonic(), cpu()
output = run_aggregate(state, store, history_seconds=settings.history_seconds)
wall, cpu_s = time.monotonic() - started, cpu() - cpu_started
print(json.dumps({"wall_s": wall, "cpu_s": cpu_s, "peak_rss_mb": peak_rss_mb(), "status": output.status,
                  "findings_open": sum(output.open_by_priority.values())}))
"""


def measure_aggregate(nodes: int) -> AggregateMeasurement:
    """Seed a sweep of `nodes` (`stored_sweep`) and run its Aggregate in a fresh process."""
    from hyperpod_nccl.monitor.payloads import SweepState

    seeding = time.monotonic()
    with stored_sweep(nodes) as (_monitor, ref, discovered, unhealthy):
        seeded = time.monotonic() - seeding
        state = SweepState(sweep=ref, discover=discovered)
        done = subprocess.run(
            [sys.executable, "-c", _AGGREGATE_CHILD],
            input=state.model_dump_json(),
            capture_output=True,
            text=True,
            check=False,
            env=dict(os.environ),
        )
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"the Aggregate failed: {done.stderr[-3000:]}")
    child = json.loads(done.stdout.strip().splitlines()[-1])
    return AggregateMeasurement(
        nodes=nodes,
        unhealthy=unhealthy,
        peak_rss_mb=round(float(child["peak_rss_mb"]), 1),
        wall_s=round(float(child["wall_s"]), 2),
        cpu_s=round(float(child["cpu_s"]), 2),
        status=str(child["status"]),
        findings_open=int(child["findings_open"]),
        seed_s=round(seeded, 1),
    )


if __name__ == "__main__":
    for size in map(int, sys.argv[1:]):
        print(measure_aggregate(size).model_dump_json(), flush=True)
