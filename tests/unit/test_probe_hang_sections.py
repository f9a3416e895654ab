"""Parsing of the probe's hang-attribution sections (nccl_jobs, nccl_job_env, nccl_ras, flight_recorder)."""

from __future__ import annotations

import base64
import pickle

from hyperpod_nccl import thresholds
from hyperpod_nccl.hang.flight_recorder import HostileDumpError, load_dump_data
from hyperpod_nccl.probe.parsers import parse_node_probe
from hyperpod_nccl_sim.hang_job import HungJob, flight_recorder_pickle, ras_status_text


def _section(name: str, lines: list[str], rc: int = 0) -> str:
    return "\n".join([f"@@BEGIN {name}", *lines, f"@@END {name} rc={rc}"]) + "\n"


def test_jobs_env_ras_and_dumps_are_parsed() -> None:
    job = HungJob()
    data = flight_recorder_pickle(job, 13)
    output = (
        _section("nccl_jobs", ["   4113 python", "   4099 torchrun"])
        + _section("nccl_job_env", ["/proc/4113/environ:RANK=13", "/proc/4113/environ:LOCAL_RANK=5"])
        + _section("nccl_ras", ras_status_text(job, ["ip-10-1-0-1", "ip-10-1-0-2"]).splitlines())
        + _section(
            "flight_recorder",
            [
                f"file 1767225600.5 {len(data)} /proc/4113/root/tmp/nccl_trace_rank_13",
                base64.b64encode(data).decode(),
                f"file 1767225600.5 {thresholds.FLIGHT_RECORDER_MAX_BYTES + 1} /tmp/nccl_trace_rank_14",
                "QUJD",
            ],
        )
    )
    probe = parse_node_probe(output)
    by_pid = {j.pid: j for j in probe.nccl_jobs}
    assert by_pid[4113].rank == 13 and by_pid[4113].local_rank == 5 and by_pid[4099].rank is None
    assert probe.ras_status is not None and "Job summary" in probe.ras_status and probe.ras_error is None
    # The oversized dump is dropped; the other is kept encoded, never unpickled by the parser.
    assert [(d.rank, d.size_bytes) for d in probe.flight_recorder_dumps] == [(13, len(data))]
    assert base64.b64decode(probe.flight_recorder_dumps[0].data_base64) == data


def test_no_ras_service_is_a_reason_not_a_status() -> None:
    refused = _section("nccl_ras", ["nc: connect to localhost port 28028 (tcp) failed: Connection refused"], rc=1)
    probe = parse_node_probe(refused)
    assert probe.ras_status is None and probe.ras_error is not None and "refused" in probe.ras_error
    missing = parse_node_probe(_section("nccl_ras", ["bash: nc: command not found"], rc=127))
    assert missing.ras_status is None and missing.ras_error is not None and "nc is not installed" in missing.ras_error


def test_a_dump_carrying_code_is_refused_by_the_evaluation_loader() -> None:
    class Evil:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (print, ("pwned",))

    hostile = pickle.dumps({"entries": [Evil()]})
    probe = parse_node_probe(
        _section(
            "flight_recorder", [f"file 1.0 {len(hostile)} /tmp/nccl_trace_rank_0", base64.b64encode(hostile).decode()]
        )
    )
    raw = base64.b64decode(probe.flight_recorder_dumps[0].data_base64)
    try:
        load_dump_data(raw)
    except HostileDumpError:
        pass
    else:
        raise AssertionError("a dump with a global reference must be refused")


def test_the_job_choice_and_why_no_dump_was_read_are_parsed() -> None:
    chosen = _section(
        "nccl_job", ["pid=4113 uid=1000 comm=python candidates=3 why=lowest pid of the python/torchrun processes"]
    )
    skipped = "skipped: TORCH_NCCL_DEBUG_INFO_TEMP_FILE of pid 4113 not a plain absolute path (reading the default x)"
    probe = parse_node_probe(chosen + _section("flight_recorder", [skipped]))
    assert probe.nccl_job is not None
    assert (probe.nccl_job.pid, probe.nccl_job.uid, probe.nccl_job.command, probe.nccl_job.candidates) == (
        4113,
        1000,
        "python",
        3,
    )
    assert probe.flight_recorder_error == skipped and probe.flight_recorder_dumps == []
    unknown = parse_node_probe(_section("nccl_job", ["pid=7 uid=? comm=? candidates=1 why=x"]))
    assert unknown.nccl_job is not None and unknown.nccl_job.uid is None and unknown.nccl_job.command is None
    none = parse_node_probe(_section("nccl_job", ["none: no process carries NCCL or TORCH_NCCL settings"], rc=1))
    assert none.nccl_job is None and none.flight_recorder_error is None


def test_a_node_sending_more_dumps_than_the_probe_reads_is_not_believed_beyond_them() -> None:
    lines = []
    for rank in range(thresholds.FLIGHT_RECORDER_MAX_FILES + 5):
        lines += [f"file 1.0 3 /proc/1/root/tmp/nccl_trace_rank_{rank}", "QUJD"]
    dumps = parse_node_probe(_section("flight_recorder", lines)).flight_recorder_dumps
    assert [d.rank for d in dumps] == list(range(thresholds.FLIGHT_RECORDER_MAX_FILES))


def test_the_simulated_node_prints_the_probes_job_choice() -> None:
    from hyperpod_nccl_sim.node_behaviours import HungJobSpec, NodeBehaviours
    from hyperpod_nccl_sim.nodes import render_nccl_job
    from hyperpod_nccl_sim.scenario import load_scenario

    scenario = load_scenario("slurm-p5en")
    key = scenario.node_keys()[0]
    hung = NodeBehaviours(hung_job=HungJobSpec(nodes=[key]))
    probe = parse_node_probe(render_nccl_job(scenario, hung, key, 1767225600.0))
    assert probe.nccl_job is not None and probe.nccl_job.pid == min(j.pid for j in probe.nccl_jobs)
    idle = parse_node_probe(render_nccl_job(scenario, NodeBehaviours(), key, 1767225600.0))
    assert idle.nccl_job is None and idle.flight_recorder_error is not None
