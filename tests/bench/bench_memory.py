"""Memory at 1024 nodes: the aggregate step over a 1024-node sweep's stored partials, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.bench._sweeps import MEMORY_NODES, cli_sweep, state_machine_sweep

TITLE = "Memory at 1024 nodes"
NODES = MEMORY_NODES
LIMIT_MB = 256
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


def run() -> str:
    """Measure and report against the 256 MB limit."""
    aggregate = state_machine_sweep(NODES)
    cli = cli_sweep(NODES)
    aggregate_base = _baseline_mb("aggregate")
    probe_base = _baseline_mb("probe_node")
    aggregate_total = aggregate_base + aggregate.aggregate_peak_mb
    rows = [
        f"| aggregate step (handler process + peak allocations rebuilding and evaluating the {NODES}-node "
        f"inventory from the table) | {aggregate_base:.0f} + {aggregate.aggregate_peak_mb:.0f} = "
        f"**{aggregate_total:.0f} MB** | {'ok' if aggregate_total < LIMIT_MB else 'OVER'} |",
        f"| CLI `diagnose --sample-nodes all` at {NODES} nodes (peak RSS of its own process; the emulation "
        f"and the simulated agents run in another) | **{cli.peak_rss_mb:.0f} MB** | "
        f"{'ok' if cli.peak_rss_mb < LIMIT_MB else 'OVER'} |",
        f"| probe_node handler process before a probe (sizes its Lambda memory) | {probe_base:.0f} MB | - |",
    ]
    return (
        f"Limit: {LIMIT_MB} MB.\n\n| what | peak | < {LIMIT_MB} MB |\n|---|---:|---|\n"
        + "\n".join(rows)
        + "\n\nThe aggregate figure is the peak RSS of a process that imported the handler and created its clients "
        "(VmHWM) plus the tracemalloc peak of `build_inventory` and `build_result` over the stored "
        "partials of a real 1024-node sweep. The CLI figure is the VmHWM of the process that ran the engine, "
        "exactly as `hyperpod-nccl diagnose` runs against AWS."
    )
