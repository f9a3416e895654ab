"""NCCL RAS status: both formats parse to the same facts (missing/dead ranks, lagging counts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hyperpod_nccl.hang.ras import (
    MAJORITY_RANK,
    RasParseError,
    dead_or_missing_ranks,
    lagging_ranks,
    parse_ras_status,
)

RAS = Path(__file__).resolve().parents[1] / "data" / "ras"


def test_json_status_names_the_dead_rank_and_its_host() -> None:
    status = parse_ras_status((RAS / "status_hung_rank13.json").read_text())
    assert status.format == "json" and status.nccl_version == "2.26.2"
    assert len(status.communicators) == 1
    comm = status.communicators[0]
    assert comm.size == 16 and len(comm.ranks) == 15
    missing = dead_or_missing_ranks(status)
    assert list(missing) == [13]
    assert missing[13].considered_dead and missing[13].host == "10.1.0.12" and missing[13].pid == 4113
    assert lagging_ranks(status) == {}
    assert status.timeouts == 1 and not status.healthy


def test_json_lagging_ranks_compare_against_the_highest_count() -> None:
    document = json.loads((RAS / "status_hung_rank13.json").read_text())
    document["communicators"][0]["ranks"][3]["collective_counts"]["AllReduce"] = 1577
    document["communicators"][0]["missing_ranks"] = []
    status = parse_ras_status(json.dumps(document))
    assert lagging_ranks(status) == {3: {"AllReduce": (1577, 1580)}}


def test_text_status_reads_dead_incomplete_and_mismatch_sections() -> None:
    status = parse_ras_status((RAS / "status_hung_rank13.txt").read_text())
    assert status.format == "text" and status.nccl_version == "2.26.2"
    assert [(p.pid, p.host) for p in status.dead_processes] == [(4113, "10.1.0.12")]
    comm = status.communicators[0]
    assert comm.hash == "5f3c8e21a4d09b77"
    assert set(comm.errors) == {"INCOMPLETE", "MISMATCH"}
    missing = dead_or_missing_ranks(status)
    assert list(missing) == [13] and missing[13].considered_dead
    # The majority is only summarised; rank 14 trails it by one operation.
    assert lagging_ranks(status) == {14: {"AllReduce": (1579, 1580)}}
    assert any(r.rank == MAJORITY_RANK for r in comm.ranks)
    assert status.timeouts == 1


def test_protocol_transcript_prefix_is_ignored() -> None:
    body = (RAS / "status_hung_rank13.json").read_text()
    status = parse_ras_status("SERVER PROTOCOL 2\nOK\n" + body)
    assert list(dead_or_missing_ranks(status)) == [13]


def test_healthy_status_has_no_facts() -> None:
    document = json.loads((RAS / "status_hung_rank13.json").read_text())
    document["communicators"][0]["missing_ranks"] = []
    status = parse_ras_status(json.dumps(document))
    assert status.healthy


@pytest.mark.parametrize("text", ["", "hello world", "{not json", '{"communicators": 3}'])
def test_garbage_is_a_parse_error(text: str) -> None:
    with pytest.raises(RasParseError):
        parse_ras_status(text)
