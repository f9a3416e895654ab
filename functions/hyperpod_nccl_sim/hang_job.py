"""A hung NCCL job as the nodes would show it: Flight Recorder dumps and an NCCL RAS status.

Used by the simulated nodes of the ``hung-job`` scenario and by the fixture generator of
tests/data/flight_recorder/. Everything here is plain data shaped like the real formats
(PyTorch FlightRecorder.hpp keys; NCCL src/ras/client_support.cc output), so the product parses
it with exactly the code that parses real dumps.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass

# Collectives in the ring buffer of each simulated rank (the real default keeps 2000).
ENTRIES_PER_RANK = 6
BASE_TIME_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
STEP_NS = 250_000_000


@dataclass(frozen=True)
class HungJob:
    """A data-parallel job whose `hung_rank` never enqueued collective `hung_seq`."""

    world_size: int = 16
    ranks_per_node: int = 8
    hung_rank: int = 13
    hung_seq: int = 1580
    pg_name: str = "0"
    pg_desc: str = "default_pg"
    timeout_ms: int = 600_000
    start_ns: int = BASE_TIME_NS
    # Ranks whose processes NCCL RAS considers dead; None: the hung rank's alone.
    dead_ranks: tuple[int, ...] | None = None

    def node_of(self, rank: int) -> int:
        """Block layout: ranks 0..7 on node 0, 8..15 on node 1."""
        return rank // self.ranks_per_node

    @property
    def dead(self) -> tuple[int, ...]:
        """The ranks RAS reports dead, in rank order."""
        return tuple(sorted(set(self.dead_ranks))) if self.dead_ranks is not None else (self.hung_rank,)

    def pid(self, rank: int) -> int:
        """The process id of `rank` (one process per rank)."""
        return 4100 + rank


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def flight_recorder_dump(job: HungJob, rank: int) -> dict[str, object]:
    """One rank's dump as PyTorch writes it (version 2.x layout, plain data only)."""
    last = job.hung_seq - 1 if rank == job.hung_rank else job.hung_seq
    entries: list[dict[str, object]] = []
    for offset, seq in enumerate(range(last - ENTRIES_PER_RANK + 1, last + 1)):
        created = job.start_ns + offset * STEP_NS
        hung = seq == job.hung_seq
        entries.append(
            {
                "frames": [
                    {"name": "all_reduce", "filename": "torch/distributed/distributed_c10d.py", "line": 2950},
                    {"name": "train_step", "filename": "train.py", "line": 212},
                ],
                "record_id": seq - 1,
                "pg_id": 0,
                "process_group": (job.pg_name, job.pg_desc),
                "collective_seq_id": seq,
                "p2p_seq_id": 0,
                "op_id": seq,
                "profiling_name": "nccl:all_reduce",
                "time_created_ns": created,
                "input_sizes": [[4096, 4096]],
                "input_dtypes": ["BFloat16"],
                "output_sizes": [[4096, 4096]],
                "output_dtypes": ["BFloat16"],
                "state": "started" if hung else "completed",
                "time_discovered_started_ns": created + 1_000_000 if hung else None,
                "time_discovered_completed_ns": None if hung else created + 90_000_000,
                "retired": not hung,
                "timeout_ms": job.timeout_ms,
                "is_p2p": False,
            }
        )
    completed = job.hung_seq - 1
    return {
        "version": "2.7",
        "comm_lib_version": "2.26.2",
        "pg_config": {
            job.pg_name: {"name": job.pg_name, "desc": job.pg_desc, "ranks": str(list(range(job.world_size)))}
        },
        "pg_status": {
            job.pg_name: {
                "last_enqueued_collective": last,
                "last_started_collective": last,
                "last_completed_collective": completed,
            }
        },
        "entries": entries,
    }


def flight_recorder_pickle(job: HungJob, rank: int) -> bytes:
    """The dump pickled the way PyTorch's pickler writes it (protocol 2, no globals)."""
    return pickle.dumps(flight_recorder_dump(job, rank), protocol=2)


def ras_status_json(job: HungJob, hosts: list[str], comm_hash: str = "0x5f3c8e21a4d09b77") -> str:
    """``ncclras -f json`` during the hang: the dead ranks' processes do not answer (considered dead)."""
    ranks = []
    missing = []
    for rank in range(job.world_size):
        host = hosts[job.node_of(rank) % len(hosts)]
        base = {"rank": rank, "host": host, "pid": job.pid(rank), "cuda_dev": rank % job.ranks_per_node}
        base["nvml_dev"] = base["cuda_dev"]
        if rank in job.dead:
            missing.append({**base, "status": {"unresponsive": True, "considered_dead": True}})
            continue
        counts = {"Broadcast": 2, "Reduce": 0, "AllGather": 12, "ReduceScatter": 0, "AllReduce": job.hung_seq}
        ranks.append(
            {
                **base,
                "status": {
                    "init_state": 0,
                    "async_error": 0,
                    "finalize_called": False,
                    "destroy_flag": False,
                    "abort_flag": False,
                },
                "collective_counts": counts,
            }
        )
    document = {
        "nccl_version": "2.26.2",
        "cuda_runtime_version": 12080,
        "cuda_driver_version": 12080,
        "timestamp": "2026-01-01T02:05:40Z",
        "communicators_count": 1,
        "communicators": [
            {
                "hash": comm_hash,
                "secondary_hash": "0x1a2b:0x3c4d",
                "size": job.world_size,
                "ranks_count": len(ranks),
                "missing_ranks_count": len(missing),
                "ranks": ranks,
                "missing_ranks": missing,
            }
        ],
        "ras": {"collection_time_sec": 5.012, "timeouts_count": 1},
    }
    return json.dumps(document, indent=2)


def ras_status_text(job: HungJob, hosts: list[str], comm_hash: str = "5f3c8e21a4d09b77") -> str:
    """``ncclras`` (text) during the hang, with the Errors/Warnings sections NCCL prints."""

    def host_of(rank: int) -> str:
        return hosts[job.node_of(rank) % len(hosts)]

    def gpu_of(rank: int) -> int:
        return rank % job.ranks_per_node

    hung_host = host_of(job.hung_rank)
    nodes = len({job.node_of(r) for r in range(job.world_size)})
    dead = job.dead
    # NCCL lists the dead processes by host and pid; the missing ranks by rank.
    dead_lines = [
        f"  Process {job.pid(rank)} on node {host_of(rank)} managing GPU {gpu_of(rank)}"
        for rank in sorted(dead, key=lambda r: (host_of(r), job.pid(r)))
    ]
    missing_lines = [
        f"  Rank {rank} -- GPU {gpu_of(rank)} managed by process {job.pid(rank)} on node {host_of(rank)}"
        for rank in dead
    ]
    answered = job.world_size - len(dead)
    lines = [
        "NCCL version 2.26.2 compiled with CUDA 12.8",
        "CUDA runtime version 12080, driver version 12080",
        "",
        "Job summary",
        "===========",
        "",
        "  Nodes  Processes         GPUs  Processes     GPUs",
        "(total)   per node  per process    (total)  (total)",
        f"{nodes:7d}  {job.ranks_per_node:9d}  {1:11d}  {job.world_size:9d}  {job.world_size:7d}",
        "",
        "Gathering data about the RAS network (timeout 5s)... obtained a result in 5.012s",
        f" Warning: missing data from {_plural(len(dead), 'process', 'processes')}"
        f" (received from {answered}, expected {job.world_size})",
        "",
        "Gathering data about the NCCL communicators (timeout 5s)... (5.020s)",
        "=============",
        "",
        "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors",
        "    #  in group  per comm  per node  per comm  in group",
        f"    0         1  {nodes:8d}  {job.ranks_per_node:8d}  {job.world_size:8d}  {job.world_size:8d}"
        "   RUNNING  INCOMPLETE,MISMATCH",
        "",
        "Errors",
        "======",
        "",
        "DEAD",
        f"  {_plural(len(dead), 'job process is', 'job processes are')} considered dead"
        " (unreachable via the RAS network)",
        *dead_lines,
        "",
        f"#0-0 ({comm_hash}) INCOMPLETE",
        f"  Missing communicator data from {_plural(len(dead), 'rank', 'ranks')}",
        *missing_lines,
        "",
        "Warnings",
        "========",
        "",
        "TIMEOUT",
        "  Encountered 1 communication timeout while gathering communicator data",
        "",
        f"#0-0 ({comm_hash}) MISMATCH",
        "  Communicator ranks have different AllReduce operation counts",
        f"  {job.world_size - 2} ranks have launched up to operation {job.hung_seq}",
        f"  Rank {(job.hung_rank + 1) % job.world_size} has launched up to operation {job.hung_seq - 1} -- GPU "
        f"{gpu_of(job.hung_rank + 1)} managed by process {job.pid(job.hung_rank + 1)} on node {hung_host}",
        "",
    ]
    return "\n".join(lines)
