"""Environment of the training ranks actually running on probed nodes: the settings a job script
or launcher applied, which neither the pod spec nor the Slurm environment files show."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._debug_env import DebugGap, debug_gaps
from hyperpod_nccl.checks._node import node_label, node_resource, probed_nodes
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.references import DBG_FLIGHT_RECORDER

_MAX_EVIDENCE = 20


def _ranks(unsorted: list[int]) -> str:
    """`ranks 0-7` / `rank 3` / `ranks 0, 2, 5` for evidence lines."""
    ranks = sorted(unsorted)
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ", ".join(map(str, ranks))


@check(
    id="node.nccl_job_env",
    title="Flight Recorder and NCCL_DEBUG in the running training ranks",
    priority=Priority.P2,
    reference=DBG_FLIGHT_RECORDER,
    source="node_probes",
)
def nccl_job_env(inv: Inventory) -> Iterator[Finding]:
    """One recommendation (INFO, P2) per setting that ranks on probed nodes run without, naming
    the nodes and ranks; read from each process's own environment (`/proc/<pid>/environ`)."""
    # Only processes with RANK are torch.distributed ranks; a stray python process is not a job.
    gaps: dict[str, tuple[DebugGap, list[Resource], list[str]]] = {}
    seen: list[Resource] = []
    for result, probe in probed_nodes(inv):
        missing: dict[str, tuple[DebugGap, list[int]]] = {}
        ranks = [(p.rank, p.env) for p in probe.nccl_jobs if p.rank is not None]
        if ranks:
            seen.append(node_resource(result))
        for rank, env in ranks:
            for gap in debug_gaps(env):
                missing.setdefault(gap.variable, (gap, []))[1].append(rank)
        for variable, (gap, without) in missing.items():
            _, nodes, evidence = gaps.setdefault(variable, (gap, [], []))
            nodes.append(node_resource(result))
            evidence.append(f"{node_label(result)}: {_ranks(without)} run without it")
    for variable, (gap, nodes, evidence) in sorted(gaps.items()):
        yield nccl_job_env.info(
            f"{gap.title} in the training processes of {len(nodes)} node(s)",
            priority=Priority.P2,
            reference=gap.reference,
            detail=gap.detail,
            evidence=evidence[:_MAX_EVIDENCE],
            resources=nodes,
            fields={"signature": variable, "nodes": len(nodes)},
        )
    if seen and not gaps:
        yield nccl_job_env.passed(
            f"training ranks on {len(seen)} node(s) run with Flight Recorder and NCCL_DEBUG set", resources=seen
        )
