"""The synthetic scale scenario and the bounds the sweep benchmark reports."""

from __future__ import annotations

import pytest

from hyperpod_nccl import thresholds
from hyperpod_nccl.monitor import ASL_PATH
from hyperpod_nccl.monitor.settings import (
    DEFAULT_MAP_MAX_CONCURRENCY,
    LOG_FILTER_RATE_ENV,
    PROBE_BATCH_CONCURRENCY,
    PROBE_BATCH_SIZE,
    START_SESSION_RATE_ENV,
    MonitorSettings,
    batch_targets,
    batches_at_once,
)
from hyperpod_nccl_sim.aws import EmulatedLimits
from hyperpod_nccl_sim.synthetic import TimeScale, lower_bound_seconds, serial_seconds, synthetic_scenario


def test_eks_scenario_has_n_identical_p5_nodes_each_probe_stalling_s() -> None:
    scenario = synthetic_scenario(300, 2.5)
    assert scenario.cluster.orchestrator == "eks"
    assert len(scenario.node_keys()) == 300
    assert {g.instance_type for g in scenario.cluster.instance_groups} == {"ml.p5.48xlarge"}
    assert len({scenario.instance_id(k) for k in scenario.node_keys()}) == 300
    assert len({scenario.hostname(k) for k in scenario.node_keys()}) == 300
    behaviour = scenario.node_behaviours.for_node("worker:299") if scenario.node_behaviours else None
    assert behaviour is not None and not behaviour.unreachable
    assert [f.stall_seconds for f in behaviour.session_faults] == [2.5]
    assert scenario.nodes == [] and scenario.faults == []  # healthy: no overrides, no API faults
    # A warm-up sweep before the measured one: each node's second session stalls as long.
    twice = synthetic_scenario(4, 2.5, sweeps=2).node_behaviours
    assert twice is not None and [f.stall_seconds for f in twice.defaults.session_faults] == [2.5, 2.5]


def test_slurm_scenario_adds_one_controller() -> None:
    scenario = synthetic_scenario(8, 0.0, orchestrator="slurm")
    groups = {g.name: g for g in scenario.cluster.instance_groups}
    assert groups["controller"].slurm_node_type == "Controller" and groups["controller"].count == 1
    assert groups["worker"].slurm_node_type == "Compute" and groups["worker"].count == 8
    assert scenario.node_behaviours is not None and scenario.node_behaviours.slurm is not None
    assert scenario.node_behaviours.defaults.session_faults == []  # zero latency: no stall


@pytest.mark.parametrize(("nodes", "latency"), [(0, 1.0), (4, -1.0)])
def test_scenario_rejects_impossible_sizes(nodes: int, latency: float) -> None:
    with pytest.raises(ValueError):
        synthetic_scenario(nodes, latency)


def test_bound_and_serial_times() -> None:
    assert lower_bound_seconds(1024, 2.0) == pytest.approx(1024 / 3 + 2.0)
    # Where the concurrency binds, the probes take whole rounds: 1,024 nodes of 20 s, 16 at once.
    assert lower_bound_seconds(1024, 20.0, probes_at_once=16) == pytest.approx(64 * 20.0)
    # One round: all 16 start within the rate's 16 / 3 s and end one probe later.
    assert lower_bound_seconds(16, 20.0, probes_at_once=16) == pytest.approx(16 / 3 + 20.0)
    assert lower_bound_seconds(300, 2.0, rate_per_second=15.0, probes_at_once=64) == pytest.approx(20.0 + 2.0)
    assert serial_seconds(64, 2.0) == pytest.approx(128.0)
    assert serial_seconds(10, 500.0) == pytest.approx(1800.0)  # each node capped at the 180 s budget


def test_batches_cover_every_target_in_order() -> None:
    children = batches_at_once(DEFAULT_MAP_MAX_CONCURRENCY)
    large = [f"i-{n:017x}" for n in range(PROBE_BATCH_SIZE * children * 4 + 3)]
    batches = batch_targets(large)
    assert [i for batch in batches for i in batch] == large
    assert {len(b) for b in batches[:-1]} == {PROBE_BATCH_SIZE} and len(batches[-1]) == 3
    # A small cluster still fills every child execution the default concurrency runs at once.
    small = large[:16]
    assert len(batch_targets(small)) >= min(children, len(small))
    assert [i for batch in batch_targets(small) for i in batch] == small
    assert batch_targets([]) == []


def test_batches_at_once_covers_the_probes_at_once() -> None:
    assert batches_at_once(1) == 1
    assert batches_at_once(PROBE_BATCH_CONCURRENCY * 2) == 2
    assert batches_at_once(PROBE_BATCH_CONCURRENCY * 2 + 1) == 3


def test_the_definition_probes_a_batch_at_the_declared_concurrency() -> None:
    text = ASL_PATH.read_text()
    assert f'"MaxConcurrency": {PROBE_BATCH_CONCURRENCY},' in text


def test_time_scale_speeds_every_rate_alike_and_keeps_the_bursts() -> None:
    scale = TimeScale(5.0)
    limits, defaults = scale.emulated_limits(), EmulatedLimits()
    assert limits.rate_of("ssm:StartSession") == (3.0 * 5, defaults.start_session_burst)
    assert limits.rate_of("logs:FilterLogEvents") == (5.0 * 5, defaults.filter_log_events_burst)
    settings = MonitorSettings.from_env(scale.product_environment())
    assert settings.start_session_rate == thresholds.SSM_START_SESSION_PER_SECOND * 5
    assert settings.log_filter_rate == thresholds.LOG_FILTER_CALLS_PER_SECOND * 5
    assert set(scale.product_environment()) == {START_SESSION_RATE_ENV, LOG_FILTER_RATE_ENV}
    with pytest.raises(ValueError):
        TimeScale(0)
