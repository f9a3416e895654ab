"""Hostile input never crashes or stalls a parser: Flight Recorder dumps, RAS answers, JSON from
the cluster, and the classifier's line splitting on input without newlines.

Every payload here is small plain data that a job or a node can write; before the bounds, each
raised an exception other than the parser's own (RecursionError, TypeError, ValidationError),
took quadratic time, or grew memory with the input.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import time
import tracemalloc
from datetime import UTC, datetime, timedelta

import pytest

from hyperpod_nccl import thresholds
from hyperpod_nccl.bounded import UnreadableData, check_plain, loads_json
from hyperpod_nccl.checks.hang_attribution import hang_attribution
from hyperpod_nccl.classifier.catalog import Catalog, load_catalog
from hyperpod_nccl.classifier.scanner import MAX_LINE_BYTES, Scanner
from hyperpod_nccl.cli.commands.triage import scan_binary
from hyperpod_nccl.hang.flight_recorder import HostileDumpError, load_dump_data, load_dumps, parse_dump
from hyperpod_nccl.hang.ras import RasParseError, lagging_ranks, parse_ras_status
from hyperpod_nccl.incidents.report import load_history
from hyperpod_nccl.models.cluster import ControlPlaneInventory
from hyperpod_nccl.models.findings import Status
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.kubernetes import FAULT_DETAILS_ANNOTATION, K8sNode
from hyperpod_nccl.models.node_probe import FlightRecorderFile, NodeProbeData, NodeProbeInventory, NodeProbeResult
from hyperpod_nccl.probe.parsers import parse_dcgm_health
from hyperpod_nccl.ssm.codec import ClientMessage, PayloadType
from hyperpod_nccl_sim.hang_job import HungJob, flight_recorder_dump

PROTO = b"\x80\x02"


def _nested_lists(depth: int) -> bytes:
    """Pickle opcodes of `depth` nested lists: EMPTY_LIST pushed `depth` times, then APPENDs."""
    return b"]" * depth + b"a" * (depth - 1)


def _key(name: str) -> bytes:
    return b"X" + len(name).to_bytes(4, "little") + name.encode()  # BINUNICODE


def _dump_with_deep_input_sizes(depth: int) -> bytes:
    # {"rank": 0, "entries": [{"input_sizes": [[[…]]]}]}, written opcode by opcode (about 2 bytes per level)
    entry = b"}" + _key("input_sizes") + _nested_lists(depth) + b"s"
    return PROTO + b"}" + _key("rank") + b"K\x00s" + _key("entries") + b"]" + entry + b"as."


# ----------------------------------------------------------------------------- Flight Recorder
def test_a_5kb_nested_dump_is_one_unreadable_dump_not_a_recursion_error() -> None:
    data = _dump_with_deep_input_sizes(2500)
    assert len(data) < 6000
    dumps, refused = load_dumps([("node:/tmp/nccl_trace_rank_0", data)])
    assert dumps == []
    depth = thresholds.FLIGHT_RECORDER_MAX_DEPTH
    assert refused == {"node:/tmp/nccl_trace_rank_0": f"unreadable dump: nested deeper than {depth} levels"}


def test_a_real_dump_is_within_the_depth_limit() -> None:
    data = pickle.dumps(flight_recorder_dump(HungJob(), 3), protocol=2)
    assert parse_dump(data, source="/tmp/nccl_trace_rank_3").rank == 3


@pytest.mark.parametrize(
    "payload",
    [
        PROTO + b"]q\x00h\x00a.",  # a list that contains itself (memo GET): infinitely deep
        b"[" * 100_000,  # JSON: json.loads raises RecursionError
        b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    ],
    ids=["cyclic-pickle", "json-lists", "json-objects"],
)
def test_cycles_and_deep_json_are_refused_by_depth(payload: bytes) -> None:
    with pytest.raises(HostileDumpError, match=r"^unreadable dump x: nested deeper than \d+ levels$"):
        load_dump_data(payload, source="x")


def test_a_shared_reference_bomb_is_refused_by_the_element_count(monkeypatch: pytest.MonkeyPatch) -> None:
    # L1 = [L0] * 200, L2 = [L1] * 200, L3 = [L2] * 200: 8 million visits from a 2 KB pickle.
    monkeypatch.setattr(thresholds, "FLIGHT_RECORDER_MAX_OBJECTS", 100_000)
    lists = b"]q\x000"  # EMPTY_LIST, PUT 0, POP
    for level in range(3):
        # MARK, 200 GETs of the previous level, LIST, PUT as the next level, POP
        lists += b"(" + (b"h" + bytes([level])) * 200 + b"lq" + bytes([level + 1]) + b"0"
    data = PROTO + b"}" + _key("entries") + lists + b"h\x03s."  # {"entries": L3}
    with pytest.raises(HostileDumpError, match="more than 100000 elements"):
        load_dump_data(data)


def test_element_count_is_checked_before_a_large_pickle_or_json_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(thresholds, "FLIGHT_RECORDER_MAX_OBJECTS", 1000)
    # 5,000 ints followed by garbage: refused for its size before the unpickler meets the garbage.
    pickled = PROTO + b"(" + b"K\x01" * 5000 + b"\xff\xff"
    with pytest.raises(HostileDumpError, match="more than 1000 elements"):
        load_dump_data(pickled)
    with pytest.raises(HostileDumpError, match="more than 1000 elements"):
        load_dump_data(b"[" + b"0," * 5000)  # truncated JSON: never given to json.loads


def test_wrong_shapes_and_odd_numbers_are_read_or_refused_never_raised() -> None:
    base = flight_recorder_dump(HungJob(), 3)
    variants: list[dict[str, object]] = [
        {**base, "pg_config": [1, 2], "pg_status": "x", "entries": 5},
        {**base, "rank": "²", "entries": [{"input_sizes": 7, "record_id": float("nan"), "timeout_ms": float("inf")}]},
        {**base, "rank": "1" * 5000, "entries": [{"record_id": "--5", "op_id": "9" * 5000}]},
        {**base, "pg_config": {"0": {"name": "0", "ranks": "-" * 5000 + "1"}}},  # ast.literal_eval: RecursionError
        {**base, "pg_config": {"0": {"name": "0", "ranks": "~" * 5000 + "1"}}},
        {**base, "pg_config": {"0": {"name": "0", "ranks": "[0, 1, 2]"}}},
    ]
    for variant in variants:
        dumps, refused = load_dumps([("/tmp/nccl_trace_rank_3", pickle.dumps(variant, protocol=2))])
        assert len(dumps) + len(refused) == 1
    assert dumps[0].pg_config["0"].ranks == [0, 1, 2]
    assert load_dumps([("/tmp/nccl_trace_rank_" + "1" * 5000, pickle.dumps({"entries": []}))])[1]  # no rank
    odd = load_dumps([("/tmp/nccl_trace_rank_3", pickle.dumps(variants[1], protocol=2))])[0][0]
    assert odd.rank == 3 and odd.entries[0].record_id == 0 and odd.entries[0].timeout_ms is None


def test_only_unreadable_dumps_give_one_info_note_naming_why() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    dump = FlightRecorderFile(
        path="/tmp/nccl_trace_rank_0", rank=0, data_base64=base64.b64encode(_dump_with_deep_input_sizes(2500)).decode()
    )
    probe = NodeProbeData(flight_recorder_dumps=[dump])
    inventory = Inventory(
        cluster_name="ml",
        region="us-west-2",
        collected_at=now,
        window_start=now - timedelta(hours=2),
        window_end=now,
        control_plane=ControlPlaneInventory(nodes=[]),
        node_probes=NodeProbeInventory(
            probed_instance_ids=["i-1"], results=[NodeProbeResult(instance_id="i-1", reachable=True, probe=probe)]
        ),
    )
    [finding] = hang_attribution.run(inventory)
    assert finding.status == Status.INFO and "1 Flight Recorder dump(s) not analysed" in finding.title
    depth = thresholds.FLIGHT_RECORDER_MAX_DEPTH
    why = f"unreadable dump: nested deeper than {depth} levels"
    assert finding.evidence == [f"Flight Recorder dump not analysed (i-1:/tmp/nccl_trace_rank_0): {why}"]


# ----------------------------------------------------------------------------- NCCL RAS
def test_deep_or_mistyped_ras_json_is_a_parse_error() -> None:
    with pytest.raises(RasParseError, match="nested deeper"):
        parse_ras_status('{"communicators": ' + "[" * 100_000)
    odd = {"nccl_version": 2, "communicators": [{"hash": "a", "ranks": 5, "missing_ranks": {"x": 1}}]}
    status = parse_ras_status(json.dumps(odd))
    assert status.nccl_version is None and status.communicators[0].ranks == []
    typed = {"communicators": [{"hash": "a", "ranks": [{"rank": 1, "host": 7, "collective_counts": {"x": 1}}]}]}
    assert parse_ras_status(json.dumps(typed)).communicators[0].ranks[0].host is None


def test_a_huge_verbose_ras_answer_parses_in_linear_time() -> None:
    # 20,000 rank lines of one communicator, and 200,000 protocol lines before them: each was a
    # linear scan per line before (seconds to minutes), now a lookup.
    ranks = "\n".join(
        f"  Rank {r} has launched up to operation {5 if r else 4} -- GPU 0 managed by process {r} on node h{r}"
        for r in range(20_000)
    )
    text = (
        "SERVER PROTOCOL 2\n"
        + "OK\n" * 200_000
        + "NCCL version 2.26.2\n\n#0-0 (ab12) MISMATCH\n"
        + "  Communicator ranks have different AllReduce operation counts\n"
        + ranks
    )
    start = time.perf_counter()
    status = parse_ras_status(text)
    assert lagging_ranks(status) == {0: {"AllReduce": (4, 5)}}
    assert time.perf_counter() - start < 5.0  # the quadratic parse took minutes here


# ----------------------------------------------------------------------------- other JSON
def test_bounded_json_names_what_is_wrong() -> None:
    with pytest.raises(UnreadableData, match="exceeds the 10-byte cap"):
        loads_json("[" + "1," * 10 + "1]", max_bytes=10)
    with pytest.raises(UnreadableData, match="nested deeper than 3 levels"):
        loads_json("[[[[1]]]]", max_bytes=None, max_depth=3)
    with pytest.raises(UnreadableData, match="invalid JSON"):
        loads_json("{", max_bytes=None)
    assert loads_json('{"a": [1]}', max_bytes=100) == {"a": [1]}
    with pytest.raises(UnreadableData, match="unexpected type set"):
        check_plain({"a": {1}}, max_depth=4)


def test_other_cluster_json_is_bounded() -> None:
    deep = "[" * 100_000
    # DCGM health: falls back to the table reading instead of raising.
    assert parse_dcgm_health(deep) == (None, [])
    node = K8sNode(name="n", annotations={FAULT_DETAILS_ANNOTATION: deep})
    assert node.fault_details == [{"message": deep}]
    with pytest.raises(ValueError, match="nested deeper"):
        load_history(deep)
    message = ClientMessage(message_type="output_stream_data", payload_type=PayloadType.OUTPUT, payload=deep.encode())
    with pytest.raises(ValueError, match="nested deeper"):
        message.json()


# ----------------------------------------------------------------------------- classifier memory
PROGRESS = (b" 45%|####5     | 450/1000 [00:12<00:15, 36.1it/s]" * 20)[:1000] + b"\r"
FAILURE = b"NCCL WARN NET/Socket : Connect to 10.0.0.1<43210> failed : Connection refused\r"


class _Stream(io.RawIOBase):
    """`total` bytes of `chunk` repeated, produced as they are read (never held whole)."""

    def __init__(self, total: int, chunk: bytes, inject_at: int | None = None) -> None:
        self.left, self.inject_at, self.reads = total, inject_at, 0
        self.chunk = chunk * max(65536 // len(chunk), 1)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self.left <= 0:
            return 0
        self.reads += 1
        data = self.chunk + FAILURE if self.reads == self.inject_at else self.chunk
        data = data[: min(len(buffer), self.left)]
        buffer[: len(data)] = data
        self.left -= len(data)
        return len(data)


def _one_signature_catalog() -> Catalog:
    # The scanner's memory does not depend on the catalog; a one-signature catalog keeps 50 MB fast.
    full = load_catalog()
    signature = full.by_id("nccl_connect_failed")
    return Catalog(version=1, classes={signature.cls: full.classes[signature.cls]}, signatures=[signature])


@pytest.mark.parametrize(
    "chunk", [PROGRESS, PROGRESS.replace(b"\r", b"#")], ids=["cr-separated-progress-bars", "no-line-end-at-all"]
)
def test_50mb_without_newlines_keeps_memory_flat(chunk: bytes) -> None:
    total = 50 << 20
    scanner = Scanner(_one_signature_catalog())
    stream = _Stream(total, chunk, inject_at=300 if b"\r" in chunk else None)
    tracemalloc.start()
    try:
        scanner.feed_binary(stream)
        result = scanner.finish()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, f"peak {peak >> 20} MiB"
    assert result.bytes_scanned >= total  # the bytes past the line cap are counted, not kept
    if b"\r" in chunk:
        # `\r` ends a line: the failure between two redraws is found, and every redraw is a line.
        assert [hit.id for hit in result.hits] == ["nccl_connect_failed"]
        assert result.lines_scanned > total // len(PROGRESS)
    else:
        assert result.lines_scanned == 1


def test_crlf_split_between_blocks_is_one_line_end() -> None:
    scanner = Scanner()
    for piece in (b"a\r", b"\nb\r", b"\n", b"\nc\rd\n"):
        scanner.feed_bytes(piece)
    result = scanner.finish()
    assert result.lines_scanned == 5  # a, b, "", c, d
    assert result.bytes_scanned == len(b"a\r\nb\r\n\nc\rd\n")


def test_an_endless_line_keeps_only_its_head() -> None:
    scanner = Scanner()
    scanner.feed_bytes(b"NCCL WARN Connect to 10.0.0.1<1> failed " + b"x" * (3 * MAX_LINE_BYTES))
    assert len(scanner._pending) == MAX_LINE_BYTES
    result = scanner.finish()
    assert result.lines_scanned == 1 and result.hits


def test_triage_reads_a_stream_without_newlines_in_bounded_memory() -> None:
    total = 6 << 20
    tracemalloc.start()
    try:
        result = scan_binary(_Stream(total, PROGRESS, inject_at=40), "-")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, f"peak {peak >> 20} MiB"
    assert "nccl_connect_failed" in [hit.id for hit in result.hits]
