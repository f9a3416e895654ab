"""Flight Recorder: the restricted loader refuses code, the parser reads the documented layout,
and the analyzer names the rank that never entered the collective."""

from __future__ import annotations

import builtins
import copyreg
import json
import os
import pickle
from pathlib import Path

import pytest

from hyperpod_nccl import thresholds
from hyperpod_nccl.hang.flight_recorder import (
    HostileDumpError,
    analyze,
    load_dump_data,
    load_dumps,
    parse_dump,
    rank_from_filename,
)
from hyperpod_nccl_sim.hang_job import HungJob, flight_recorder_dump

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "flight_recorder" / "hung_rank13"


class _Gadget:
    """Pickles into "call `function` with `args`" — what a hostile dump would carry."""

    def __init__(self, function: object, *args: object) -> None:
        self.function = function
        self.args = args

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return self.function, self.args


def _fixture_files() -> list[tuple[str, bytes]]:
    return [(str(p), p.read_bytes()) for p in sorted(FIXTURES.iterdir())]


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_os_system_gadget_is_refused_without_running(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "pwned"
    hostile = pickle.dumps({"entries": [_Gadget(os.system, f"touch {marker}")]}, protocol=protocol)
    with pytest.raises(HostileDumpError, match="unreadable dump rank_3: refused global"):
        parse_dump(hostile, source="rank_3")
    assert not marker.exists()


def test_eval_gadget_is_refused_without_running(tmp_path: Path) -> None:
    marker = tmp_path / "evaluated"
    code = f"open({str(marker)!r}, 'w').write('x')"
    hostile = pickle.dumps(_Gadget(builtins.eval, code), protocol=2)
    with pytest.raises(HostileDumpError, match=r"refused global \w+\.eval"):
        load_dump_data(hostile)
    assert not marker.exists()


def test_handwritten_global_reduce_opcodes_are_refused(tmp_path: Path) -> None:
    # Protocol-0 text: GLOBAL os.system, MARK, a string, TUPLE, REDUCE — no Python class involved.
    marker = tmp_path / "opcode"
    hostile = b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR."
    with pytest.raises(HostileDumpError):
        load_dump_data(hostile)
    assert not marker.exists()


def test_extension_registry_opcode_is_refused(tmp_path: Path) -> None:
    # EXT1 resolves through copyreg's registry and then find_class: it must be refused as well.
    marker = tmp_path / "ext"
    copyreg.add_extension(os.system.__module__, "system", 0xF0)
    try:
        hostile = pickle.dumps(_Gadget(os.system, f"touch {marker}"), protocol=2)
        assert b"\x82\xf0" in hostile  # EXT1 0xF0 really is in the stream
        with pytest.raises(HostileDumpError):
            load_dump_data(hostile)
    finally:
        copyreg.remove_extension(os.system.__module__, "system", 0xF0)
    assert not marker.exists()


def test_persistent_id_is_refused() -> None:
    hostile = b"\x80\x02P0\n."  # PROTO 2, PERSID "0", STOP
    with pytest.raises(HostileDumpError):
        load_dump_data(hostile)


def test_truncated_oversized_empty_and_non_dict_dumps_are_refused() -> None:
    good = (FIXTURES / "nccl_trace_rank_0").read_bytes()
    with pytest.raises(HostileDumpError):
        load_dump_data(good[: len(good) // 2])
    with pytest.raises(HostileDumpError, match="cap"):
        load_dump_data(good, max_bytes=100)
    with pytest.raises(HostileDumpError, match="empty"):
        load_dump_data(b"")
    with pytest.raises(HostileDumpError, match="not a dict"):
        load_dump_data(pickle.dumps([1, 2, 3]))
    with pytest.raises(HostileDumpError, match="not a Flight Recorder dump"):
        parse_dump(pickle.dumps({"hello": "world"}), source="rank_1")
    assert len(good) < thresholds.FLIGHT_RECORDER_MAX_BYTES


def test_refused_dumps_are_reported_not_raised() -> None:
    files = [*_fixture_files()[:2], ("/tmp/nccl_trace_rank_99", b"cos\nsystem\n(S'true'\ntR.")]
    dumps, refused = load_dumps(files)
    assert [d.rank for d in dumps] == [0, 1]
    assert "refused global os.system" in refused["/tmp/nccl_trace_rank_99"]


def test_fixture_dump_fields_follow_the_documented_layout() -> None:
    dump = parse_dump((FIXTURES / "nccl_trace_rank_13").read_bytes(), source=str(FIXTURES / "nccl_trace_rank_13"))
    assert dump.rank == 13
    assert dump.version == "2.7" and dump.comm_lib_version == "2.26.2"
    assert dump.pg_config["0"].desc == "default_pg"
    assert dump.pg_config["0"].ranks == list(range(16))  # parsed from the string "[0, 1, ...]"
    assert dump.pg_status["0"].last_completed_collective == 1579
    last = dump.entries[-1]
    assert (last.collective_seq_id, last.state, last.op, last.pg_desc) == (1579, "completed", "ALLREDUCE", "default_pg")
    assert last.frames[0].startswith("all_reduce at torch/distributed/distributed_c10d.py")


def test_json_form_is_accepted() -> None:
    document = flight_recorder_dump(HungJob(), 2)
    document["rank"] = 2
    dump = parse_dump(json.dumps(document).encode())
    assert dump.rank == 2 and dump.entries[-1].collective_seq_id == 1580


def test_rank_from_filename() -> None:
    assert rank_from_filename("/fsx/fr/job/rank_37") == 37
    assert rank_from_filename("nccl_trace_rank_5.json") == 5
    assert rank_from_filename("trace") is None


def test_analyzer_names_the_rank_that_never_entered() -> None:
    dumps, refused = load_dumps(_fixture_files())
    analysis = analyze(dumps, refused)
    assert refused == {}
    assert len(analysis.divergences) == 1
    divergence = analysis.divergences[0]
    assert divergence.divergent_seq == 1580 and divergence.op == "ALLREDUCE"
    assert divergence.never_entered == [13]
    assert divergence.started_not_completed == [r for r in range(16) if r != 13]
    assert divergence.verdict == "never_entered" and divergence.culprits == [13]
    assert divergence.last_seq_by_rank[13] == 1579


def test_missing_dump_is_reported_apart_and_dumped_ranks_still_judged() -> None:
    files = [f for f in _fixture_files() if not f[0].endswith("_13")]
    analysis = analyze(load_dumps(files)[0])
    # Without rank 13's dump every dumped rank started #1580: all stuck inside, rank 13 has no dump.
    divergence = analysis.divergences[0]
    assert divergence.ranks_without_dump == [13]
    assert divergence.never_entered == []
    assert divergence.verdict == "stuck_inside"


def test_completed_everywhere_means_no_divergence() -> None:
    job = HungJob(world_size=4, ranks_per_node=2, hung_rank=99)
    documents = []
    for rank in range(4):
        document = flight_recorder_dump(job, rank)
        for entry in document["entries"]:  # type: ignore[union-attr]
            entry["state"] = "completed"
        document["pg_status"]["0"]["last_completed_collective"] = job.hung_seq  # type: ignore[index]
        documents.append(parse_dump(pickle.dumps(document), rank=rank))
    assert analyze(documents).divergences == []


def test_desync_is_detected_when_ops_differ_at_the_same_sequence() -> None:
    job = HungJob(world_size=4, ranks_per_node=2, hung_rank=99)
    documents = []
    for rank in range(4):
        document = flight_recorder_dump(job, rank)
        if rank == 1:
            document["entries"][-1]["profiling_name"] = "nccl:broadcast"  # type: ignore[index]
        documents.append(parse_dump(pickle.dumps(document), rank=rank))
    divergence = analyze(documents).divergences[0]
    assert divergence.verdict == "desync"
    assert divergence.mismatched_ops == {1: "nccl:broadcast"}
