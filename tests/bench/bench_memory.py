"""Memory: the Aggregate over stored sweeps of 1,024, 4,096 and 10,000 nodes against its deployed
Lambda memory, and the CLI at 1,024 nodes."""

from __future__ import annotations

import json
import subprocess
import sys

from hyperpod_nccl.monitor.settings import LAMBDAS
from tests.bench._aggregate_sweep import UNHEALTHY_SHARE, AggregateMeasurement, measure_aggregate
from tests.bench._sweeps import MEMORY_NODES, cli_sweep

TITLE = "Memory"
AGGREGATE_NODES = (1024, 4096, 10_000)
# The node count the README promises the monitor handles: its Aggregate must fit there.
CEILING_NODES = 10_000
CLI_NODES = MEMORY_NODES
# What the CLI's process may use on an operator's machine or a small CI runner: a target, not a limit.
CLI_TARGET_MB = 256
# What a Lambda process holds before the handler runs: the runtime, boto3, pydantic, the package.
_BASELINE = (
    "import json\n"
    "import hyperpod_nccl.handlers.{module}\n"
    "import boto3\n"
    "from hyperpod_nccl_sim.synthetic import peak_rss_mb\n"
    "boto3.client('dynamodb', region_name='us-east-1'); boto3.client('ssm', region_name='us-east-1')\n"
    "print(json.dumps(peak_rss_mb()))\n"
)


def _baseline_mb(module: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _BASELINE.format(module=module)], capture_output=True, text=True, check=True
    )
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def per_node_mb(measured: list[AggregateMeasurement]) -> float:
    """The Aggregate's memory per node: the slope of peak RSS between the smallest and largest size."""
    low, high = min(measured, key=lambda m: m.nodes), max(measured, key=lambda m: m.nodes)
    if high.nodes == low.nodes:
        return 0.0
    return (high.peak_rss_mb - low.peak_rss_mb) / (high.nodes - low.nodes)


def nodes_within(measured: list[AggregateMeasurement], limit_mb: float) -> int:
    """The node count at which the Aggregate's peak reaches `limit_mb`, extrapolated linearly from
    the largest measured size (`per_node_mb`)."""
    high = max(measured, key=lambda m: m.nodes)
    slope = per_node_mb(measured)
    if slope <= 0:
        return high.nodes
    return high.nodes + int((limit_mb - high.peak_rss_mb) / slope)


def run() -> str:
    """Measure the Aggregate at each size and the CLI at 1,024 nodes; report against the deployed memory."""
    aggregate_mb = LAMBDAS["aggregate"].memory_mb
    probe_mb = LAMBDAS["probe_node"].memory_mb
    aggregate_base = _baseline_mb("aggregate")
    probe_base = _baseline_mb("probe_node")
    measured = [measure_aggregate(nodes) for nodes in AGGREGATE_NODES]
    cli = cli_sweep(CLI_NODES)
    rows = [
        f"| Aggregate, {m.nodes:,} nodes ({m.unhealthy} unhealthy, {m.findings_open} findings open) | "
        f"{aggregate_base:.0f} | **{m.peak_rss_mb:.0f} MB** | {m.wall_s:.1f} s | {m.cpu_s:.1f} s | "
        f"{'ok' if m.peak_rss_mb < aggregate_mb else 'OVER'} ({aggregate_mb} MB) |"
        for m in measured
    ]
    rows.append(
        f"| CLI `diagnose --sample-nodes all`, {CLI_NODES:,} nodes (its own process; the emulation and the "
        f"simulated agents run in another) | - | **{cli.peak_rss_mb:.0f} MB** | - | - | "
        f"{'ok' if cli.peak_rss_mb < CLI_TARGET_MB else 'OVER'} ({CLI_TARGET_MB} MB target) |"
    )
    rows.append(
        f"| probe_node handler process before a probe | {probe_base:.0f} | - | - | - | ({probe_mb} MB deployed) |"
    )
    at_ceiling = next(m for m in measured if m.nodes == CEILING_NODES)
    verdict = (
        f"**Met**: the Aggregate of a {CEILING_NODES:,}-node sweep peaks at {at_ceiling.peak_rss_mb:.0f} MB "
        f"of its {aggregate_mb} MB"
        if at_ceiling.peak_rss_mb < aggregate_mb
        else f"**MISSED**: the Aggregate of a {CEILING_NODES:,}-node sweep peaks at "
        f"{at_ceiling.peak_rss_mb:.0f} MB, over its {aggregate_mb} MB"
    )
    return (
        f"Deployed memory (`monitor/settings.py: LAMBDAS`, which infra deploys): Aggregate {aggregate_mb} MB, "
        f"ProbeNode {probe_mb} MB.\n\n"
        "| what | process before the handler (MB) | peak RSS | wall | CPU | within |\n|---|---:|---:|---:|---:|---|\n"
        + "\n".join(rows)
        + f"\n\n{verdict}; it grows by about {per_node_mb(measured) * 1024:.0f} KB per node, so it reaches "
        f"{aggregate_mb} MB at about {round(nodes_within(measured, aggregate_mb), -2):,} nodes.\n\n"
        "Each Aggregate row is the peak RSS (VmHWM) of a fresh process that imported the handler and ran "
        "`run_aggregate` (the handler's code: inventory from the table, the engine, the diff, the findings, "
        "fault history and incident writes, the sweep record) over a sweep stored in the emulation's table; "
        "the baseline column is a process that only imported the handler and created its clients, shown "
        "beside it, not subtracted. The sweep is stored by the sweep's own states run over a synthetic "
        "cluster of N ml.p5.48xlarge nodes: Discover (control plane, probe plan), the CloudWatch scan and "
        f"Kubernetes collectors; {UNHEALTHY_SHARE:.0%} of the nodes are unhealthy (an Xid 79 and an "
        "uncorrected ECC error). Two nodes, one healthy and one unhealthy, are probed over the emulated SSM; "
        "every other node's result is its kind's with the node's id in place, stored as ProbeNode stores it "
        "(a compressed blob, `store_probe_result`). Wall time includes the emulated DynamoDB's latency "
        "(a local HTTP server, shared with the benchmark's other work), not Lambda's; CPU is the process's "
        "own time in `run_aggregate` (Lambda gives 1,769 MB one vCPU and a smaller size a share of one: "
        "AWS Lambda's memory configuration guide). Measured with this machine's Python (the page's header), "
        "not the Lambda runtime's; object sizes differ a little between versions. The CLI figure is the "
        "VmHWM of the process that ran the engine, exactly as `hyperpod-nccl diagnose` runs against AWS."
    )
