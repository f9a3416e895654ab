"""Nodes x cadence at synth: the scheduled sweeps of every watched cluster share the account's
StartSession rate, so a configuration whose sweeps cannot finish within the schedule's cadence
fails synthesis with the numbers and the fixes, instead of deploying sweeps that overlap."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from hyperpod_nccl import thresholds
from hyperpod_nccl.thresholds import EXPECTED_PROBE_SECONDS
from infra.app import build_app
from infra.config import DEFAULT_EXPECTED_NODES, StageConfig

pytestmark = pytest.mark.infra

RATE = thresholds.SSM_START_SESSION_PER_SECOND


def _cluster(name: str, nodes: int | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "region": "us-west-2"}
    if nodes is not None:
        entry["expectedNodes"] = nodes
    return entry


def _config(**context: Any) -> StageConfig:
    return StageConfig.from_context(context.get)


def _fitting_nodes(minutes: int) -> int:
    """The most nodes the rate can start in one cadence, less the one probe a sweep ends with."""
    return int((minutes * 60 - EXPECTED_PROBE_SECONDS) * RATE)


def test_the_bound_is_the_issues_formula() -> None:
    config = _config(clusters=[_cluster("a", 600), _cluster("b", 300)], mapMaxConcurrency=64, sweepRateMinutes=30)
    by_rate, by_concurrency = 900 / RATE, 600 * EXPECTED_PROBE_SECONDS / 64
    assert config.sweep_seconds() == pytest.approx(max(by_rate, by_concurrency) + EXPECTED_PROBE_SECONDS)
    # Few probes at once make concurrency the bound.
    slow = _config(clusters=[_cluster("a", 600)], mapMaxConcurrency=4, sweepRateMinutes=60)
    assert slow.sweep_seconds() == pytest.approx(600 * EXPECTED_PROBE_SECONDS / 4 + EXPECTED_PROBE_SECONDS)


def test_sweeps_that_fit_the_cadence_synthesize_and_one_node_more_does_not() -> None:
    fits = _fitting_nodes(15)
    # Split across two clusters: they share the account's rate, so their nodes add up.
    assert _config(clusters=[_cluster("a", fits - 100), _cluster("b", 100)], sweepRateMinutes=15)
    with pytest.raises(ValidationError) as raised:
        _config(clusters=[_cluster("a", fits - 100), _cluster("b", 101)], sweepRateMinutes=15)
    message = str(raised.value)
    # The numbers and every fix are named.
    assert f"{fits + 1} nodes per sweep (a {fits - 100}, b 101" in message
    assert "sweepRateMinutes=15 (900 s)" in message and f"{RATE:g} StartSession calls/s" in message
    assert f"at least {math.ceil((fits + 1) / RATE / 60 + EXPECTED_PROBE_SECONDS / 60)})" in message
    for fix in ("longer sweepRateMinutes", "higher StartSession rate", "nodeCoverage", "mapMaxConcurrency"):
        assert fix in message


def test_node_coverage_and_a_longer_cadence_are_fixes() -> None:
    clusters = [_cluster("a", 5_000)]
    with pytest.raises(ValidationError, match="sweeps would overlap"):
        _config(clusters=clusters, sweepRateMinutes=15)
    covered = _config(clusters=clusters, sweepRateMinutes=15, nodeCoverage=1_000)
    assert covered.nodes_per_sweep(covered.clusters[0]) == 1_000
    assert _config(clusters=clusters, sweepRateMinutes=30)


def test_a_cluster_without_expected_nodes_counts_the_default() -> None:
    config = _config(clusters=[_cluster("a")])
    assert config.nodes_per_sweep(config.clusters[0]) == DEFAULT_EXPECTED_NODES
    # Enough unsized clusters on the shortest cadence overrun it, and the message says so.
    many = math.ceil(_fitting_nodes(5) / DEFAULT_EXPECTED_NODES) + 1
    with pytest.raises(ValidationError, match=f"{DEFAULT_EXPECTED_NODES} when unset"):
        _config(clusters=[_cluster(f"c{n}") for n in range(many)], sweepRateMinutes=5)
    # The functions' environment and the schedules never carry the count.
    assert "expected" not in str(_config(clusters=[_cluster("a", 10)]).clusters[0].model_dump())


def test_synthesis_itself_refuses_overlapping_sweeps(tmp_path: Any) -> None:
    context = {"clusters": [_cluster("a", 10_000)], "sweepRateMinutes": 15, "aws:cdk:bundling-stacks": []}
    with pytest.raises(ValidationError, match="sweeps would overlap"):
        build_app(context, outdir=str(tmp_path), cdk_json=None)


def test_the_check_uses_the_configured_start_session_rate() -> None:
    # 2,500 nodes fit 15 minutes at the default 3/s; at a configured 1/s they take 2,520 s.
    assert _config(clusters=[_cluster("a", 2500)], sweepRateMinutes=15)
    with pytest.raises(ValidationError) as raised:
        _config(clusters=[_cluster("a", 2500)], sweepRateMinutes=15, startSessionRate=1)
    assert "1 StartSession calls/s" in str(raised.value)
    # A higher rate, the fix the message names, lets more nodes fit.
    assert _config(clusters=[_cluster("a", 5000)], sweepRateMinutes=15, startSessionRate=6, mapMaxConcurrency=128)
