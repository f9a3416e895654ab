"""What a job's environment would leave unexplained after a hang (not a check module: no `@check`).

Shared by the environment audits of pod specs (`k8s.nccl_env`), of the Slurm environment files
(`slurm.nccl_env`) and of the training processes seen on probed nodes (`node.nccl_job_env`), so
the three say the same thing about the same variables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hyperpod_nccl.references import DBG_FLIGHT_RECORDER, OPS_NCCL_ENV, Reference

# The spellings PyTorch's c10d reads as true in a boolean variable (compared lower-cased).
_TRUE = frozenset({"1", "t", "true", "y", "yes"})

FLIGHT_RECORDER_SETTINGS = (
    "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 "
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/fsx/fr/<job>/rank_ (shared storage survives a node replacement)"
)


@dataclass(frozen=True)
class DebugGap:
    """A diagnostic setting a job runs without, and what it would have caught."""

    variable: str
    title: str
    detail: str
    reference: Reference


def _trace_buffer_size(env: Mapping[str, str]) -> int:
    raw = env.get("TORCH_NCCL_TRACE_BUFFER_SIZE", "").strip()
    return int(raw) if raw.isdigit() else 0


def flight_recorder_enabled(env: Mapping[str, str]) -> bool:
    """Flight Recorder records collectives (buffer > 0) and writes them when the watchdog fires."""
    dump = env.get("TORCH_NCCL_DUMP_ON_TIMEOUT", "").strip().lower()
    return _trace_buffer_size(env) > 0 and dump in _TRUE


def debug_gaps(env: Mapping[str, str], *, pytorch: bool = True) -> list[DebugGap]:
    """Flight Recorder off (PyTorch jobs only) and NCCL_DEBUG unset: each costs the on-call
    engineer the evidence that names the culprit of the next hang.

    `env` holds plain values (a variable set from a Secret or elsewhere counts as set only when
    its name is present: callers pass an empty string for it).
    """
    gaps: list[DebugGap] = []
    if pytorch and not flight_recorder_enabled(env):
        missing = "TORCH_NCCL_TRACE_BUFFER_SIZE" if _trace_buffer_size(env) <= 0 else "TORCH_NCCL_DUMP_ON_TIMEOUT"
        gaps.append(
            DebugGap(
                missing,
                "PyTorch Flight Recorder is not enabled",
                f"{missing} is not set to enable it. After an NCCL watchdog timeout, every rank would "
                "have dumped its last collectives; those dumps name the rank (and so the pod and node) "
                "that never entered or never completed the collective that hung, with its process group "
                "and sequence number — which hang.attribution reads. "
                f"Enable for the next run: {FLIGHT_RECORDER_SETTINGS}",
                DBG_FLIGHT_RECORDER,
            )
        )
    if "NCCL_DEBUG" not in env:
        gaps.append(
            DebugGap(
                "NCCL_DEBUG",
                "NCCL_DEBUG is not set: recommend NCCL_DEBUG=WARN",
                "Without it NCCL prints nothing when a connection or transport fails. At WARN (negligible "
                "cost, unlike INFO) the job log carries the NCCL WARN lines that name the failing peer, "
                "network plugin or libfabric/EFA error, which the log checks classify.",
                OPS_NCCL_ENV,
            )
        )
    return gaps
