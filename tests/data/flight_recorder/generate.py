"""Regenerate the Flight Recorder and RAS fixtures: `.venv/bin/python tests/data/flight_recorder/generate.py`.

Only plain data goes into the pickles (see hyperpod_nccl_sim/hang_job.py); the hostile
fixtures are built in the tests themselves, never stored.
"""

from __future__ import annotations

from pathlib import Path

from hyperpod_nccl_sim.hang_job import (
    HungJob,
    flight_recorder_pickle,
    ras_status_json,
    ras_status_text,
)

HERE = Path(__file__).resolve().parent
RAS = HERE.parent / "ras"
# RAS prints node addresses numerically (inet_ntop), not host names.
HOSTS = ["10.1.0.11", "10.1.0.12"]


def main() -> None:
    """Write one dump per rank of a 16-rank job whose rank 13 never enqueued ALLREDUCE #1580."""
    job = HungJob()
    hung = HERE / "hung_rank13"
    hung.mkdir(exist_ok=True)
    for rank in range(job.world_size):
        (hung / f"nccl_trace_rank_{rank}").write_bytes(flight_recorder_pickle(job, rank))
    RAS.mkdir(exist_ok=True)
    (RAS / "status_hung_rank13.json").write_text(ras_status_json(job, HOSTS) + "\n")
    (RAS / "status_hung_rank13.txt").write_text(ras_status_text(job, HOSTS))


if __name__ == "__main__":
    main()
