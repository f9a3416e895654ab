"""The Aggregate's memory budget, guarded in CI. `make bench` measures the Aggregate's peak over
stored sweeps (BENCHMARKS.md, *Memory*); what grows with the node count is every node's parsed probe
result, which the engine holds at once. A probe that reads more per node (more GPUs, more EFA
counters, a new section) grows it silently: the 2026-12-02 run measured 820 MB at 10,000 nodes, the
2026-12-07 run 1,242 MB, over the 1,024 MB then deployed. This projects the peak at the node count
the README promises from one parsed result of the largest node the simulation knows, and fails
before an account does."""

from __future__ import annotations

import tracemalloc

from hyperpod_nccl.models.node_probe import NodeProbeResult
from hyperpod_nccl.monitor.settings import LAMBDAS
from hyperpod_nccl.probe.parsers import parse_node_probe
from hyperpod_nccl_sim.node_behaviours import NodeBehaviour
from hyperpod_nccl_sim.nodes import render_node_probe
from tests.bench.bench_memory import CEILING_NODES

# The Aggregate's peak per node over the parsed results it holds (measured 2026-12-07: 118 KB a
# node at peak against 85 KB for this result as tracemalloc counts it): the engine's own findings,
# the diff and the allocator's slack on top. With it the projection at 10,000 nodes is within 2 %
# of the measured peak.
PEAK_PER_RESULT = 1.4
# The process before the handler runs (measured 94 MB on 2026-12-07), rounded up.
PROCESS_MB = 100
COPIES = 100


def _largest_node_result() -> NodeProbeResult:
    """A healthy ml.p5.48xlarge (8 GPUs, 32 EFA devices) as ProbeNode stores it."""
    output = render_node_probe(NodeBehaviour(), "ml.p5.48xlarge", "ip-10-1-0-11.us-west-2.compute.internal", "w:0")
    return NodeProbeResult(
        instance_id="i-0123456789abcdef0",
        reachable=True,
        instance_type="ml.p5.48xlarge",
        complete=True,
        output_bytes=len(output),
        probe=parse_node_probe(output),
    )


def _bytes_per_result(text: str) -> float:
    tracemalloc.start()
    try:
        copies = [NodeProbeResult.model_validate_json(text) for _ in range(COPIES)]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(copies) == COPIES
    return held / COPIES


def test_the_aggregate_of_the_promised_node_count_fits_its_memory() -> None:
    result = _largest_node_result()
    assert result.probe is not None and len(result.probe.efa_counters) == 32 and len(result.probe.gpus) == 8
    per_node_mb = _bytes_per_result(result.model_dump_json()) / 2**20
    projected_mb = PROCESS_MB + per_node_mb * PEAK_PER_RESULT * CEILING_NODES
    deployed_mb = LAMBDAS["aggregate"].memory_mb
    assert projected_mb <= deployed_mb, (
        f"{CEILING_NODES} nodes of {per_node_mb * 1024:.0f} KB each project the Aggregate to {projected_mb:.0f} MB, "
        f"over its {deployed_mb} MB: raise its memory in monitor/settings.py LAMBDAS or hold less per node"
    )
