"""Limits of the processes that matter (issue 17, point 3): memlock, stack and open files of the job's
process, slurmd and the container runtime from /proc/<pid>/limits, each named; the SSM shell's own
`ulimit` is the SSM agent's and never judged."""

from __future__ import annotations

from pathlib import Path

from hyperpod_nccl import thresholds
from hyperpod_nccl.checks import discover
from hyperpod_nccl.models.findings import Priority, Status
from hyperpod_nccl.models.node_probe import NodeProbeData, ProcessLimits
from hyperpod_nccl.probe.parsers import parse_node_probe
from hyperpod_nccl.probe.sections import NodeSection, begin_line, end_line
from tests.builders import probed_node

CHECKS = discover()


def _limits(memlock: str, stack: str = "8388608") -> list[str]:
    # fs/proc/base.c proc_pid_limits(): "%-25s %-20s %-20s %-10s" (name, soft, hard, units)
    return [
        f"{'Max stack size':<25} {stack:<20} {'unlimited':<20} {'bytes':<10}",
        f"{'Max open files':<25} {'1048576':<20} {'1048576':<20} {'files':<10}",
        f"{'Max locked memory':<25} {memlock:<20} {memlock:<20} {'bytes':<10}",
    ]


def _probe(lines: list[str]) -> NodeProbeData:
    section = NodeSection.PROCESS_LIMITS
    return parse_node_probe("\n".join([begin_line(section), *lines, end_line(section, 0)]) + "\n")


def _memlock(probe: NodeProbeData, instance_type: str = "ml.p5.48xlarge"):  # type: ignore[no-untyped-def]
    return CHECKS["node.memlock"].run(probed_node(probe, instance_type=instance_type))


def test_each_process_is_read_from_the_kernels_layout() -> None:
    probe = _probe(["job 7300 python", *_limits("unlimited"), "daemon 812 containerd", *_limits("65536", "unlimited")])
    assert probe.process_limits == [
        ProcessLimits(
            role="job",
            pid=7300,
            command="python",
            memlock_unlimited=True,
            stack_kib=8192,
            open_files=1048576,
            hard={"stack": "unlimited", "open_files": "1048576", "memlock": "unlimited"},
        ),
        ProcessLimits(
            role="container_runtime",
            pid=812,
            command="containerd",
            memlock_kib=64,
            stack_unlimited=True,
            open_files=1048576,
            hard={"stack": "unlimited", "open_files": "1048576", "memlock": "64 KiB"},
        ),
    ]


def test_the_running_jobs_limit_is_what_counts() -> None:
    # dockerd at 64 KiB, but the job runs with unlimited memlock: the job's own limit decides
    probe = _probe(["job 7300 python", *_limits("unlimited"), "daemon 900 dockerd", *_limits("65536")])
    assert [f.status for f in _memlock(probe)] == [Status.PASS]
    # the job itself at 64 KiB: a failure naming the process
    probe = _probe(["job 7300 python", *_limits("65536"), "daemon 812 containerd", *_limits("unlimited")])
    (finding,) = _memlock(probe)
    assert (finding.status, finding.priority) == (Status.FAIL, Priority.P1)
    assert "python (pid 7300)" in finding.title and "(the running job)" in finding.title


def test_without_a_job_the_daemons_predict_what_the_next_job_gets() -> None:
    # dockerd at 8 MiB, inherited by every container it starts (the broken node)
    (finding,) = _memlock(_probe(["daemon 900 dockerd", *_limits(str(8 * 2**20))]))
    assert finding.status is Status.FAIL and "dockerd (pid 900)" in finding.title
    assert "what the next job inherits" in finding.title


def test_the_ssm_shells_own_limit_is_never_judged() -> None:
    # the shell's ulimit -l is 64 KiB (the SSM agent's), the job's processes are unlimited: healthy
    shell_low = _probe(["daemon 812 containerd", *_limits("unlimited")]).model_copy(update={"memlock_kib": 64})
    assert [f.status for f in _memlock(shell_low)] == [Status.PASS]
    # nothing runs that starts jobs: said, not passed
    (finding,) = _memlock(_probe([]).model_copy(update={"memlock_kib": 64}))
    assert finding.status is Status.INFO and "not judged" in finding.detail


def test_rows_under_a_process_of_no_role_are_nobodys() -> None:
    # a header the probe would never print (sshd) must not lend its rows to the process before it
    probe = _probe(["job 7300 python", *_limits("unlimited"), "daemon 900 sshd", *_limits("0", "1024")])
    (job,) = probe.process_limits or []
    assert (job.command, job.memlock_unlimited, job.stack_kib) == ("python", True, 8192)


# --- Open files (real /proc/<pid>/limits rows; provenance: tests/data/probe/README.md) -------------

DATA = Path(__file__).resolve().parents[1] / "data" / "probe"


def _open_files(probe: NodeProbeData):  # type: ignore[no-untyped-def]
    return CHECKS["node.open_files"].run(probed_node(probe))


def test_a_job_at_the_kernels_default_of_1024_open_files_fails() -> None:
    # the stalled mpirun of open-mpi/ompi#7728: soft 1024, hard 2048
    probe = parse_node_probe((DATA / "process_limits_job_open_files_1024.txt").read_text(encoding="utf-8"))
    (job,) = probe.process_limits or []
    assert (job.open_files, job.open_files_unlimited, job.memlock_kib, job.stack_kib) == (1024, False, None, None)
    (finding,) = _open_files(probe)
    assert (finding.status, finding.priority) == (Status.FAIL, Priority.P1)
    assert finding.title.startswith("open files 1024 for python (pid 594)") and "(the running job)" in finding.title
    assert finding.evidence == ["python (pid 594) [job]: open files 1024 (hard 2048)"]
    assert str(thresholds.NODE_MIN_OPEN_FILES) in finding.detail


def test_dockerd_at_65536_open_files_passes_while_its_memlock_fails() -> None:
    # docker/docker-ce-packaging#111: dockerd with 65536 files (the floor) but 64 KiB memlock
    probe = parse_node_probe((DATA / "process_limits_dockerd_65536.txt").read_text(encoding="utf-8"))
    (dockerd,) = probe.process_limits or []
    assert (dockerd.role, dockerd.open_files, dockerd.memlock_kib, dockerd.stack_kib) == (
        "container_runtime",
        65536,
        64,
        8192,
    )
    assert [f.status for f in _open_files(probe)] == [Status.PASS]
    assert [f.status for f in _memlock(probe)] == [Status.FAIL]


def test_open_files_between_the_default_and_the_floor_warn_per_process() -> None:
    low = f"{'Max open files':<25} {'8192':<20} {'524288':<20} {'files':<10}"
    probe = _probe(["daemon 812 containerd", low, "daemon 640 slurmd", *_limits("unlimited")])
    (finding,) = _open_files(probe)
    assert (finding.status, finding.priority) == (Status.WARN, Priority.P2)
    assert "containerd (pid 812)" in finding.title and "slurmd" not in finding.title
    assert "what the next job inherits" in finding.title
    assert finding.evidence == [
        "containerd (pid 812) [container_runtime]: open files 8192 (hard 524288)",
        "slurmd (pid 640) [slurmd]: open files 1048576",
    ]


def test_open_files_unlimited_or_not_read_raise_nothing() -> None:
    unlimited = f"{'Max open files':<25} {'unlimited':<20} {'unlimited':<20} {'files':<10}"
    assert [f.status for f in _open_files(_probe(["job 7300 python", unlimited]))] == [Status.PASS]
    # no process that runs jobs: node.memlock says so, open files adds nothing
    assert _open_files(_probe([])) == []
