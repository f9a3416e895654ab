"""Wall time of a parallel SSM probe sweep against the simulated agent, next to the original
serial design and the bound set by the StartSession rate (3 per second)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hyperpod_nccl import thresholds
from hyperpod_nccl.probe import script
from hyperpod_nccl.simulation.node_behaviours import NodeBehaviour, SessionFaultSpec
from hyperpod_nccl.simulation.nodes import render_node_probe
from hyperpod_nccl.simulation.ssm_agent import SimulatedSsmAgent
from hyperpod_nccl.ssm.client import RateLimiter, SessionRunner, wrap_command

TITLE = "SSM probe sweep: parallel vs serial vs StartSession rate"
PROBE_LATENCY_SECONDS = 1.0
NODE_COUNTS = (64, 256)


class _AgentBackedSsm:
    """The two SSM calls the runner makes, answered by the simulated agent (no HTTP in between,
    so the measurement is the data channel and the pacing, not the emulation)."""

    def __init__(self, agent: SimulatedSsmAgent, output: bytes) -> None:
        self.agent = agent
        self.output = output

    def start_session(self, **kwargs: Any) -> dict[str, str]:
        faults = SessionFaultSpec(stall_seconds=PROBE_LATENCY_SECONDS)
        return self.agent.add_session(kwargs["Target"], self.output, faults)

    def terminate_session(self, **kwargs: Any) -> dict[str, str]:
        return {"SessionId": kwargs["SessionId"]}


def _sweep(nodes: int, agent: SimulatedSsmAgent, output: bytes) -> tuple[float, int]:
    limiter = RateLimiter(thresholds.SSM_START_SESSION_PER_SECOND, burst=int(thresholds.SSM_START_SESSION_PER_SECOND))
    runner = SessionRunner(ssm=_AgentBackedSsm(agent, output), limiter=limiter)
    command = wrap_command(script("node"))
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=thresholds.SSM_PROBE_WORKERS) as pool:
        results = list(
            pool.map(lambda i: runner.run(f"sagemaker-cluster:bench_worker-i-{i:017x}", command), range(nodes))
        )
    return time.monotonic() - started, sum(1 for r in results if r.exit_code == 0)


def run() -> str:
    """Measure each node count and return a markdown table."""
    output = (
        render_node_probe(NodeBehaviour(), "ml.p5.48xlarge", "ip-10-1-0-10.x", "worker:0") + "\n__RC__=0\n"
    ).encode()
    agent = SimulatedSsmAgent().start()
    rows = []
    try:
        for nodes in NODE_COUNTS:
            wall, ok = _sweep(nodes, agent, output)
            rate_bound = (nodes - thresholds.SSM_START_SESSION_PER_SECOND) / thresholds.SSM_START_SESSION_PER_SECOND
            rows.append(
                f"| {nodes} | {ok}/{nodes} | {wall:.1f} s | {max(rate_bound, 0) + PROBE_LATENCY_SECONDS:.1f} s "
                f"| {nodes * PROBE_LATENCY_SECONDS:.0f} s | {nodes * thresholds.SSM_NODE_BUDGET_SECONDS / 3600:.1f} h |"
            )
    finally:
        agent.stop()
    return (
        f"Each simulated probe takes {PROBE_LATENCY_SECONDS:.0f} s on the node and streams a {len(output) // 1024} KiB "
        f"p5 probe output through the real client and the protocol-faithful agent; "
        f"{thresholds.SSM_PROBE_WORKERS} workers, StartSession paced at "
        f"{thresholds.SSM_START_SESSION_PER_SECOND:.0f}/s (burst {thresholds.SSM_START_SESSION_PER_SECOND:.0f}).\n\n"
        "| nodes | complete | parallel (this tool) | StartSession-rate bound | original serial, same latency "
        "| original serial, worst case (180 s cap each) |\n|---|---|---|---|---|---|\n" + "\n".join(rows)
    )
