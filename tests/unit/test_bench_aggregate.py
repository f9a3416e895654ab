"""The memory benchmark's helpers: which nodes are unhealthy, a probe result cloned to another node,
and the per-node slope and node ceiling read from the measured Aggregates."""

from __future__ import annotations

import pytest

from hyperpod_nccl.models.node_probe import NodeProbeResult
from tests.bench._aggregate_sweep import AggregateMeasurement, cloned_result, unhealthy_keys
from tests.bench.bench_memory import nodes_within, per_node_mb

TEMPLATE = "i-0aaaaaaaaaaaaaaaa"
OTHER = "i-0bbbbbbbbbbbbbbbb"


def _measured(nodes: int, peak: float) -> AggregateMeasurement:
    return AggregateMeasurement(
        nodes=nodes, unhealthy=0, peak_rss_mb=peak, wall_s=1.0, status="complete", findings_open=0
    )


def test_unhealthy_keys_are_the_share_spread_over_the_cluster() -> None:
    keys = [f"worker:{i}" for i in range(1000)]
    chosen = unhealthy_keys(keys, 0.02)
    assert len(chosen) == 20
    assert len(set(chosen)) == 20
    assert chosen[0] == "worker:0" and chosen[1] == "worker:50" and chosen[-1] == "worker:950"


def test_a_small_cluster_still_has_one_unhealthy_node() -> None:
    assert unhealthy_keys(["worker:0", "worker:1"], 0.02) == ["worker:0"]
    assert unhealthy_keys([], 0.02) == []


def test_a_cloned_result_names_the_new_node_everywhere() -> None:
    template = NodeProbeResult(
        instance_id=TEMPLATE,
        instance_group="worker",
        reachable=False,
        error=f"StartSession failed for {TEMPLATE}",
        duration_seconds=2.5,
    )
    clone = cloned_result(template, OTHER)
    assert clone.instance_id == OTHER
    assert clone.error == f"StartSession failed for {OTHER}"
    assert TEMPLATE not in clone.model_dump_json()
    assert clone.model_copy(update={"instance_id": TEMPLATE, "error": template.error}) == template


def test_the_per_node_slope_is_read_between_the_smallest_and_largest_sweep() -> None:
    measured = [_measured(4096, 400.0), _measured(1024, 160.0), _measured(2048, 999.0)]
    assert per_node_mb(measured) == pytest.approx(240.0 / 3072)
    assert per_node_mb([_measured(1024, 160.0)]) == 0.0


def test_the_node_ceiling_is_extrapolated_from_the_largest_sweep() -> None:
    # 0.1 MB per node over a 50 MB process: 1024 MB is reached 774 / 0.1 nodes past the 2000 measured.
    measured = [_measured(1000, 150.0), _measured(2000, 250.0)]
    assert nodes_within(measured, 1024) == 9740
    # Flat (or a single size): nothing to extrapolate from.
    assert nodes_within([_measured(1000, 100.0)], 1024) == 1000
