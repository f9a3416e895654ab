"""`bench_cost.longer_probes`: what the month costs at the sizing assumption's probe time, and the
longest probe the $30 target allows, from a run's figures (only the items billed by the probe's
duration scale)."""

from __future__ import annotations

import re

import pytest

from hyperpod_nccl.thresholds import EXPECTED_PROBE_SECONDS
from tests.bench.bench_cost import TARGET_MONTHLY_USD, longer_probes


def _dollars(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"\*\*\$(\d+\.\d{2})\*\*", text)]


def test_only_the_probe_bound_items_scale_with_the_probe() -> None:
    # 3 s billed a probe (1 s of it beyond a 2 s probe); $10 of a $25 month is billed by the probe.
    text = longer_probes((25.0, 15.0), (10.0, 5.0), 3.0, 1.0, 1800)
    scale = (EXPECTED_PROBE_SECONDS + 1.0) / 3.0
    assert _dollars(text) == [pytest.approx(15.0 + 10.0 * scale, abs=0.01), pytest.approx(10.0 + 5.0 * scale, abs=0.01)]


def test_the_longest_probe_is_where_the_month_meets_the_target() -> None:
    text = longer_probes((25.0, 15.0), (10.0, 5.0), 3.0, 1.0, 1800)
    fast, slow = (float(x) for x in re.findall(r"(\d+\.\d) s every", text))
    # At that probe time the 15-minute month costs the target (to the rounding of the printed value).
    assert 15.0 + 10.0 * (fast + 1.0) / 3.0 == pytest.approx(TARGET_MONTHLY_USD, abs=0.2)
    assert 10.0 + 5.0 * (slow + 1.0) / 3.0 == pytest.approx(TARGET_MONTHLY_USD, abs=0.2)
