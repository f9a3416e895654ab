"""The development rounds' fresh-source record (tests/bench/results/fresh_sources.json) is coherent:
a round cannot have detected more lines than it had, nor found more in the right section than it
detected, and each names the catalog commit it scored with."""

from __future__ import annotations

import json
import re

from tests.bench.bench_classifier import FRESH_SOURCES, fresh_sources


def test_every_round_counts_within_what_it_collected() -> None:
    rounds = json.loads(FRESH_SOURCES.read_text(encoding="utf-8"))["rounds"]
    assert rounds
    for r in rounds:
        assert 0 <= r["right_section"] <= r["detected"] <= r["failure"], r["round"]
        assert 0 <= r["flagged"] <= r["healthy"], r["round"]
        assert r["sources"] > 0 and re.fullmatch(r"[0-9a-f]{7,40}", r["catalog"]), r["round"]


def test_the_table_totals_the_rounds() -> None:
    rounds = json.loads(FRESH_SOURCES.read_text(encoding="utf-8"))["rounds"]
    failure = sum(r["failure"] for r in rounds)
    detected = sum(r["detected"] for r in rounds)
    total = fresh_sources().splitlines()[-1]
    assert total.startswith("| **all** |") and f"| {failure} | {detected / failure:.1%} |" in total
