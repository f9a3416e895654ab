"""On-node limits and shared memory: memlock, stack, /dev/shm, RemoveIPC, stale NCCL segments,
and the NCCL-versus-driver compatibility of the host."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from hyperpod_nccl import instance_types, suggested, thresholds
from hyperpod_nccl.checks import Check, check
from hyperpod_nccl.checks._node import node_label, node_resource, probed_nodes, ssm_target
from hyperpod_nccl.models.findings import Finding, Priority
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import NodeProbeData, NodeProbeResult, ProcessLimits
from hyperpod_nccl.probe.sections import NodeSection
from hyperpod_nccl.references import CLUSTER_LARGE, DBG_MEMLOCK_SHM, DBG_STALE_SHM, DBG_VERSION_MISMATCH, OPS_SLURM


def _gib(size: int) -> str:
    return f"{size / 2**30:.2f} GiB" if size >= 2**30 else f"{size / 2**20:.0f} MiB"


def _limited(probe: NodeProbeData) -> tuple[list[ProcessLimits], str] | None:
    """The processes whose limits are judged, and what they stand for: the job's own process when one
    runs; else slurmd and the container runtime, whose limits the next job starts with. None when the
    probe read no process limits (the SSM shell's `ulimit` is never judged: its limits are the SSM
    agent's, not a job's)."""
    if probe.process_limits is None:
        return None
    jobs = [p for p in probe.process_limits if p.role == "job"]
    if jobs:
        return jobs, "the running job"
    return [p for p in probe.process_limits if p.role != "job"], "what the next job inherits"


def _readings(probe: NodeProbeData, limit: Literal["memlock", "stack"]) -> tuple[list[ProcessLimits], str] | None:
    """The judged processes (`_limited`) whose `limit` was read, and what they stand for."""
    limited = _limited(probe)
    if limited is None:
        return None
    processes, basis = limited
    return [p for p in processes if p.unlimited(limit) or p.kib(limit) is not None], basis


def _not_read(check: Check, result: NodeProbeResult, probe: NodeProbeData, what: str) -> Finding:
    shell = "unlimited" if getattr(probe, f"{what}_unlimited") else f"{getattr(probe, f'{what}_kib')} KiB"
    return check.info(
        f"{what} of the jobs not read on {node_label(result)}: no job, slurmd or container runtime runs",
        detail=f"the SSM shell's own {what} ({shell}) is the SSM agent's, not a job's: not judged",
        resources=[node_resource(result)],
    )


@check(
    id="node.memlock",
    title="Locked-memory limit of the job's processes",
    priority=Priority.P0,
    reference=DBG_MEMLOCK_SHM,
    source="node_probes",
)
def memlock(inv: Inventory) -> Iterator[Finding]:
    """memlock of the running job (else of slurmd and the container runtime) below the threshold:
    ibv_reg_mr fails and NCCL falls back to TCP. Each process is named with its limit."""
    ok = 0
    for result, probe in probed_nodes(inv):
        if result.instance_type and instance_types.expected_efa(result.instance_type) is None:
            continue  # no EFA to register memory with (CPU, controller or non-EFA GPU nodes)
        readings = _readings(probe, "memlock")
        if readings is None:
            continue
        read, basis = readings
        if not read:
            yield _not_read(memlock, result, probe, "memlock")
            continue
        low = [p for p in read if not p.memlock_unlimited and (p.memlock_kib or 0) < thresholds.NODE_MIN_MEMLOCK_KIB]
        if not low:
            ok += 1
            continue
        lowest = min(p.memlock_kib or 0 for p in low)
        yield memlock.fail(
            f"memlock {lowest} KiB for {', '.join(p.label for p in low)} on {node_label(result)} ({basis})",
            priority=Priority.P0 if lowest == 0 else Priority.P1,
            detail=f"EFA memory registration needs >= {thresholds.NODE_MIN_MEMLOCK_KIB} KiB (or unlimited); set it "
            "for the service (systemd LimitMEMLOCK of slurmd / containerd / docker, or docker's default-ulimits), "
            "in limits.conf / the Slurm prolog, and IPC_LOCK in pods",
            evidence=[p.shown("memlock") for p in read],
            resources=[node_resource(result)],
            suggested_commands=[suggested.node_memlock_limit(inv.region, ssm_target(inv, result), inv.orchestrator)],
            fields={"memlock_kib": lowest, "processes": ",".join(p.command for p in low)},
        )
    if ok:
        yield memlock.passed(f"memlock large enough for the job's processes on {ok} node(s)")


@check(
    id="node.stack",
    title="Stack limit of the job's processes",
    priority=Priority.P1,
    reference=CLUSTER_LARGE,
    source="node_probes",
)
def stack(inv: Inventory) -> Iterator[Finding]:
    """Stack of the job's processes below 4 MiB fails; memlock and stack both unlimited warns (glibc
    then gives NCCL's threads a 2 MiB stack)."""
    for result, probe in probed_nodes(inv):
        readings = _readings(probe, "stack")
        if readings is None:
            continue
        read, basis = readings
        if not read:
            yield _not_read(stack, result, probe, "stack")
            continue
        small = [p for p in read if p.stack_kib is not None and p.stack_kib < thresholds.NODE_MIN_STACK_KIB]
        evidence = [p.shown("stack") for p in read]
        if small:
            yield stack.fail(
                f"stack {min(p.stack_kib or 0 for p in small)} KiB for {', '.join(p.label for p in small)} on "
                f"{node_label(result)} ({basis})",
                evidence=evidence,
                resources=[node_resource(result)],
            )
        elif any(p.stack_unlimited and p.memlock_unlimited for p in read):
            both = [p.label for p in read if p.stack_unlimited and p.memlock_unlimited]
            yield stack.warn(
                f"stack and memlock both unlimited for {', '.join(both)} on {node_label(result)}",
                priority=Priority.P2,
                detail="glibc then gives NCCL's threads a 2 MiB stack; prefer fixed limits",
                evidence=evidence,
                resources=[node_resource(result)],
            )


@check(
    id="node.open_files",
    title="Open-files limit of the job's processes",
    priority=Priority.P1,
    reference=DBG_MEMLOCK_SHM,
    source="node_probes",
)
def open_files(inv: Inventory) -> Iterator[Finding]:
    """Open files (soft RLIMIT_NOFILE) of the running job (else of slurmd and the container runtime):
    at or below the kernel's default of 1024 fails, below the floor warns. NCCL holds sockets per peer
    plus EFA and CUDA IPC descriptors, and past the limit fails with "Too many open files". Each
    process is named with its limit."""
    ok = 0
    for result, probe in probed_nodes(inv):
        limited = _limited(probe)
        if limited is None:
            continue
        processes, basis = limited
        read = [p for p in processes if p.open_files_unlimited or p.open_files is not None]
        if not read:
            continue  # node.memlock already says that no job, slurmd or container runtime runs
        low = [p for p in read if not p.open_files_unlimited and (p.open_files or 0) < thresholds.NODE_MIN_OPEN_FILES]
        if not low:
            ok += 1
            continue
        lowest = min(p.open_files or 0 for p in low)
        title = f"open files {lowest} for {', '.join(p.label for p in low)} on {node_label(result)} ({basis})"
        detail = (
            f"NCCL needs sockets per peer plus EFA and CUDA IPC descriptors: set the soft limit to "
            f">= {thresholds.NODE_MIN_OPEN_FILES} (systemd LimitNOFILE of slurmd / containerd / docker, docker's "
            "default-ulimits, limits.conf or `ulimit -n` in the Slurm prolog or job script)"
        )
        common: dict[str, object] = {
            "detail": detail,
            "evidence": [p.shown("open_files") for p in read],
            "resources": [node_resource(result)],
            "fields": {"open_files": lowest, "processes": ",".join(p.command for p in low)},
        }
        if lowest <= thresholds.NODE_DEFAULT_OPEN_FILES:
            yield open_files.fail(title, **common)
        else:
            yield open_files.warn(title, priority=Priority.P2, **common)
    if ok:
        yield open_files.passed(f"open-files limit large enough for the job's processes on {ok} node(s)")


@check(id="node.dev_shm", title="/dev/shm size", priority=Priority.P1, reference=DBG_MEMLOCK_SHM, source="node_probes")
def dev_shm(inv: Inventory) -> Iterator[Finding]:
    """< 1 GiB fails (NCCL's shared-memory transport), < 4 GiB warns, non-tmpfs warns, and a /dev/shm
    that is no mount of its own (it lives on another filesystem) warns."""
    for result, probe in probed_nodes(inv):
        size = probe.shm_size_bytes
        if size is None:
            continue
        if probe.shm_mount and probe.shm_mount != "/dev/shm":
            kind = f" ({probe.shm_fstype})" if probe.shm_fstype else ""
            yield dev_shm.warn(
                f"/dev/shm is not a mount of its own on {node_label(result)}: it lives on {probe.shm_mount}{kind}",
                detail=f"NCCL's shared-memory segments then share {probe.shm_mount}'s {_gib(size)} (and, off tmpfs, "
                "its disk); mount a tmpfs on /dev/shm",
                resources=[node_resource(result)],
                suggested_commands=[suggested.node_dev_shm(inv.region, ssm_target(inv, result), inv.orchestrator)],
                fields={"shm_bytes": size, "shm_mount": probe.shm_mount},
            )
        elif size < thresholds.NODE_MIN_SHM_BYTES:
            yield dev_shm.fail(
                f"/dev/shm is {_gib(size)} on {node_label(result)}",
                detail="NCCL's intra-node shared-memory buffers do not fit: bus errors or SHM transport failures",
                resources=[node_resource(result)],
                suggested_commands=[suggested.node_dev_shm(inv.region, ssm_target(inv, result), inv.orchestrator)],
                fields={"shm_bytes": size},
            )
        elif size < thresholds.NODE_RECOMMENDED_SHM_BYTES:
            yield dev_shm.warn(
                f"/dev/shm is {_gib(size)} on {node_label(result)} (4 GiB or more recommended)",
                priority=Priority.P2,
                resources=[node_resource(result)],
                suggested_commands=[suggested.node_dev_shm(inv.region, ssm_target(inv, result), inv.orchestrator)],
            )
        elif probe.shm_fstype and probe.shm_fstype != "tmpfs":
            yield dev_shm.warn(
                f"/dev/shm is {probe.shm_fstype}, not tmpfs, on {node_label(result)}",
                priority=Priority.P2,
                resources=[node_resource(result)],
            )


@check(id="node.remove_ipc", title="systemd RemoveIPC", priority=Priority.P2, reference=OPS_SLURM, source="node_probes")
def remove_ipc(inv: Inventory) -> Iterator[Finding]:
    """RemoveIPC=yes deletes a user's shared memory at logout, under running NCCL jobs.

    Unset means systemd's compiled-in default, yes. Root and system users are exempt, so an unset
    value matters where jobs run as regular users (Slurm); on EKS, pods run outside logind
    sessions and usually as root, so unset nodes are only listed for information.
    """
    unset = []
    for result, probe in probed_nodes(inv):
        if probe.remove_ipc and probe.remove_ipc.lower() in ("yes", "true", "1"):
            yield remove_ipc.warn(
                f"RemoveIPC={probe.remove_ipc} in logind.conf on {node_label(result)}",
                detail="set RemoveIPC=no (lifecycle script) so NCCL's /dev/shm segments survive logouts",
                resources=[node_resource(result)],
                suggested_commands=[suggested.node_remove_ipc(inv.region, ssm_target(inv, result))],
            )
        # grep exits 1 (no match) or 2 (a missing logind.conf.d); a timeout or a cut-off section
        # leaves no exit status and proves nothing.
        elif probe.remove_ipc is None and probe.section_rc(NodeSection.REMOVE_IPC) in (1, 2):
            unset.append(result)
    if not unset:
        return
    summary = f"RemoveIPC unset (systemd defaults to yes) on {len(unset)} node(s)"
    if inv.orchestrator == "slurm":
        yield remove_ipc.warn(
            summary,
            detail="Slurm jobs run as regular users, whose /dev/shm segments logind removes when their last "
            "session ends; set RemoveIPC=no in the lifecycle script",
            evidence=[node_label(result) for result in unset[:10]],
            resources=[node_resource(result) for result in unset],
            suggested_commands=[suggested.node_remove_ipc(inv.region, ssm_target(inv, unset[0]))],
        )
    else:
        yield remove_ipc.info(
            summary,
            detail="root and system users are exempt and pods run outside logind sessions; it matters only "
            "for jobs started from a login session as a regular user",
            resources=[node_resource(result) for result in unset],
        )


@check(
    id="node.stale_shm",
    title="Stale NCCL shared memory",
    priority=Priority.P2,
    reference=DBG_STALE_SHM,
    source="node_probes",
)
def stale_shm(inv: Inventory) -> Iterator[Finding]:
    """`/dev/shm/nccl-*` with no training process running: leftovers of a crashed run."""
    for result, probe in probed_nodes(inv):
        if probe.stale_shm_files and not probe.training_processes:
            yield stale_shm.warn(
                f"{len(probe.stale_shm_files)} stale /dev/shm/nccl-* segment(s) on {node_label(result)}",
                evidence=probe.stale_shm_files[:5],
                resources=[node_resource(result)],
                suggested_commands=[suggested.node_stale_shm(inv.region, ssm_target(inv, result))],
            )


def _version_tuple(version: str | None) -> tuple[int, ...]:
    if not version:
        return ()
    parts = []
    for part in version.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


@check(
    id="node.nccl_driver_compat",
    title="Host NCCL versus GPU driver",
    priority=Priority.P1,
    reference=DBG_VERSION_MISMATCH,
    source="node_probes",
)
def nccl_driver_compat(inv: Inventory) -> Iterator[Finding]:
    """NCCL >= 2.20 on a driver older than 525."""
    for result, probe in probed_nodes(inv):
        nccl = _version_tuple(probe.versions.nccl)
        driver = _version_tuple(probe.versions.driver)
        if nccl >= (2, 20) and driver and driver[0] < thresholds.NCCL_2_20_MIN_DRIVER_MAJOR:
            yield nccl_driver_compat.warn(
                f"NCCL {probe.versions.nccl} with driver {probe.versions.driver} on {node_label(result)}",
                resources=[node_resource(result)],
            )
