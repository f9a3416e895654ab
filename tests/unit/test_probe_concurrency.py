"""The probe Map's concurrency, sized per sweep: as many probes at once as the StartSession rate
keeps busy for the cluster's probe time (rate x the previous full sweep's p90, Little's law), in
child executions of PROBE_BATCH_SIZE nodes, between 1 and the deployed ceiling. No sockets."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import cast

import pytest
from botocore.exceptions import ClientError

from hyperpod_nccl import thresholds
from hyperpod_nccl.collectors.node_probes import (
    NOT_STARTED_KINDS,
    probe_workers_ceiling,
    probes_at_once,
    session_seconds,
)
from hyperpod_nccl.handlers.discover import DiscoverInput
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import NodeProbeInventory, NodeProbeResult
from hyperpod_nccl.monitor.payloads import FirstRound, ProbeItem, SweepRef
from hyperpod_nccl.monitor.settings import (
    BATCH_IDLE_SLOTS,
    DEFAULT_MAP_MAX_CONCURRENCY,
    PROBE_BATCH_SIZE,
    batch_targets,
    batches_at_once,
    runs_in_one_round,
    sized_batches_at_once,
)
from hyperpod_nccl.monitor.states.aggregate import sweep_probe_seconds
from hyperpod_nccl.monitor.states.discover import probe_concurrency
from hyperpod_nccl.monitor.store import Store
from hyperpod_nccl.pacing import PROBE_SECONDS_PERCENTILE, probe_seconds_percentile
from hyperpod_nccl.thresholds import EXPECTED_PROBE_SECONDS

RATE = thresholds.SSM_START_SESSION_PER_SECOND
CEILING = batches_at_once(DEFAULT_MAP_MAX_CONCURRENCY)


class _SweepHistory:
    """The one Store read Discover sizes from: the probe time the previous full sweep recorded."""

    def __init__(self, probe_seconds: float | None) -> None:
        self.probe_seconds = probe_seconds
        self.asked: list[tuple[str, str]] = []

    def last_full_sweep_probe_seconds(self, region: str, cluster: str) -> float | None:
        self.asked.append((region, cluster))
        return self.probe_seconds


def _ref() -> SweepRef:
    return SweepRef(
        sweep_id="s-1", execution="s-1", cluster="ml", region="us-west-2", started_at=datetime(2026, 1, 1, tzinfo=UTC)
    )


def test_the_percentile_is_the_nearest_rank() -> None:
    durations = [float(n) for n in range(10, 0, -1)]  # 10 .. 1, unsorted on purpose
    assert probe_seconds_percentile(durations, 90) == 9.0
    assert probe_seconds_percentile(durations, 100) == 10.0
    assert probe_seconds_percentile(durations, 50) == 5.0
    assert probe_seconds_percentile([4.5]) == 4.5
    assert probe_seconds_percentile([]) is None
    # The default percentile is a high one: one slow node of twenty does not size the sweep.
    assert PROBE_SECONDS_PERCENTILE >= 90
    assert probe_seconds_percentile([2.0] * 19 + [180.0]) == 2.0


@pytest.mark.parametrize("probe_seconds", [0.5, 2.0, 7.3, 20.0, 45.0])
def test_the_sweep_runs_as_many_probes_as_the_rate_keeps_busy(probe_seconds: float) -> None:
    children = sized_batches_at_once(RATE, probe_seconds, max_batches_at_once=10_000)
    busy = RATE * probe_seconds + BATCH_IDLE_SLOTS
    # Slots >= rate x probe time plus the slots a batch leaves idle, and not a whole child more.
    assert children * PROBE_BATCH_SIZE >= busy
    assert (children - 1) * PROBE_BATCH_SIZE < busy
    assert children == max(1, math.ceil(busy / PROBE_BATCH_SIZE))


def test_the_deployed_ceiling_and_one_child_bound_the_sizing() -> None:
    assert sized_batches_at_once(RATE, 180.0, max_batches_at_once=5) == 5
    assert sized_batches_at_once(RATE, 0.01, max_batches_at_once=5) == 1
    assert sized_batches_at_once(RATE, 0.0, max_batches_at_once=5) == 1
    # A higher rate keeps more probes busy.
    assert sized_batches_at_once(10.0, 20.0, 10_000) > sized_batches_at_once(RATE, 20.0, 10_000)


def test_a_first_sweep_is_sized_for_the_expected_probe_time() -> None:
    assert sized_batches_at_once(RATE, None, 10_000) == sized_batches_at_once(RATE, EXPECTED_PROBE_SECONDS, 10_000)
    # The default ceiling lets the expected probe reach the default rate.
    assert sized_batches_at_once(RATE, None, CEILING) * PROBE_BATCH_SIZE >= RATE * EXPECTED_PROBE_SECONDS


def test_discover_sizes_from_the_clusters_previous_full_sweep() -> None:
    measured = _SweepHistory(probe_seconds=2.0)
    assert probe_concurrency(cast(Store, measured), _ref(), CEILING, RATE) == sized_batches_at_once(RATE, 2.0, CEILING)
    assert measured.asked == [("us-west-2", "ml")]
    first = _SweepHistory(probe_seconds=None)
    assert probe_concurrency(cast(Store, first), _ref(), CEILING, RATE) == sized_batches_at_once(RATE, None, CEILING)
    # Fast probes need fewer children than a first sweep's guess.
    assert sized_batches_at_once(RATE, 2.0, CEILING) < sized_batches_at_once(RATE, None, CEILING)


def test_a_cluster_one_round_covers_is_probed_all_at_once() -> None:
    # 2 s probes at 3/s: the rate keeps 3 children (12 probes) busy. 16 nodes are 12 probes plus
    # what one probe time of starts adds (6): all 4 batches at once, none waiting for a child to end.
    sized = sized_batches_at_once(RATE, 2.0, CEILING)
    assert sized * PROBE_BATCH_SIZE < 16
    assert runs_in_one_round(16, sized, RATE, 2.0)
    assert sized_batches_at_once(RATE, 2.0, CEILING, nodes=16) == math.ceil(16 / PROBE_BATCH_SIZE)
    # Beyond one round the rate sizes it, as without a node count: more would only wait, billed.
    assert not runs_in_one_round(64, sized, RATE, 2.0)
    assert sized_batches_at_once(RATE, 2.0, CEILING, nodes=64) == sized
    # Never past the deployed ceiling, never fewer than the rate keeps busy.
    assert sized_batches_at_once(RATE, 20.0, 5, nodes=40) == 5
    assert sized_batches_at_once(RATE, 2.0, CEILING, nodes=2) == sized


def test_discover_sizes_all_at_once_for_a_small_cluster() -> None:
    measured = cast(Store, _SweepHistory(probe_seconds=2.0))
    assert probe_concurrency(measured, _ref(), CEILING, RATE, nodes=16) == 4
    assert probe_concurrency(measured, _ref(), CEILING, RATE, nodes=256) == sized_batches_at_once(RATE, 2.0, CEILING)


def test_small_clusters_are_split_to_fill_the_sized_children() -> None:
    ids = [f"i-{n:017x}" for n in range(16)]
    assert [len(b) for b in batch_targets(ids, 8)] == [2] * 8
    assert [len(b) for b in batch_targets(ids, 2)] == [PROBE_BATCH_SIZE] * 4
    assert [i for b in batch_targets(ids, 3) for i in b] == ids


def test_discovers_input_carries_the_deployed_ceiling_and_defaults_to_the_default_one() -> None:
    sweep = _ref().model_dump(mode="json")
    assert DiscoverInput.model_validate({"sweep": sweep, "max_batches_at_once": 7}).max_batches_at_once == 7
    assert DiscoverInput.model_validate({"sweep": sweep}).max_batches_at_once == CEILING


def test_aggregate_records_the_high_percentile_of_the_probes_that_ran() -> None:
    results = [NodeProbeResult(instance_id=f"i-{n:017x}", reachable=True, duration_seconds=n + 1.0) for n in range(20)]
    # A node never probed (no duration) is not a fast probe, nor one the rate left no session
    # start for (its time was spent waiting).
    results.append(NodeProbeResult(instance_id="i-0ffffffffffffffff", reachable=False))
    for n, kind in enumerate(sorted(NOT_STARTED_KINDS)):
        results.append(
            NodeProbeResult(
                instance_id=f"i-0eeeeeeeeeeeeee{n}", reachable=False, error_kind=kind, duration_seconds=500.0
            )
        )
    inventory = _inventory(NodeProbeInventory(results=results))
    assert sweep_probe_seconds(inventory) == 18.0
    assert sweep_probe_seconds(_inventory(None)) is None
    assert sweep_probe_seconds(_inventory(NodeProbeInventory())) is None


def _inventory(node_probes: NodeProbeInventory | None) -> Inventory:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return Inventory(
        cluster_name="ml", region="us-west-2", collected_at=now, window_start=now, window_end=now,
        node_probes=node_probes,
    )  # fmt: skip


def test_the_wait_for_a_start_is_not_probe_time() -> None:
    # Twenty 2 s probes that each waited 18 s for their start (a sweep sized too wide): the next
    # sweep must size from 2 s, or it would stay as wide as this one.
    results = [
        NodeProbeResult(instance_id=f"i-{n:017x}", reachable=True, duration_seconds=20.0, paced_seconds=18.0)
        for n in range(20)
    ]
    assert sweep_probe_seconds(_inventory(NodeProbeInventory(results=results))) == 2.0


class _UnreadableHistory:
    def last_full_sweep_probe_seconds(self, region: str, cluster: str) -> float | None:
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "denied"}}, "Query")


def test_an_unreadable_history_sizes_for_the_expected_probe_time_instead_of_failing_the_sweep() -> None:
    store = cast(Store, _UnreadableHistory())
    assert probe_concurrency(store, _ref(), CEILING, RATE) == sized_batches_at_once(RATE, None, CEILING)


def test_the_first_rounds_nodes_take_turns_batch_by_batch_and_later_batches_start_at_once() -> None:
    """The first round's children start together: their nodes' turns at the pace go batch by
    batch, one interval apart, so each child ends one probe after its own starts; a later batch
    starts as a child ends and reserves at once."""
    ids = [f"i-{n:017x}" for n in range(20)]
    children = 3
    batches = batch_targets(ids, children)
    first = FirstRound(paced_from=1_765_000_000.0, batch_size=len(batches[0]), batches=children)
    interval = 1 / RATE
    turns = {
        (b, p): ProbeItem(
            sweep_id="s", cluster="c", region="us-west-2", instance_id=i, batch=b, position=p, first_round=first
        ).first_round_start(interval)
        for b, batch in enumerate(batches)
        for p, i in enumerate(batch)
    }
    ranked = [turns[(b, p)] for b in range(children) for p in range(len(batches[b]))]
    assert ranked == [pytest.approx(first.paced_from + k * interval) for k in range(children * PROBE_BATCH_SIZE)]
    assert all(turn is None for (b, _), turn in turns.items() if b >= children)
    # An item without its place (a Map of an older definition) reserves at once.
    assert ProbeItem(sweep_id="s", cluster="c", region="r", instance_id="i-0").first_round_start(interval) is None


# --- the CLI's pool: the same Little's law, from the probes of its own run --------------------


def test_the_cli_sizes_for_the_expected_probe_before_any_probe_ended() -> None:
    # Waiting for the first 20 s probe to end before widening would cost a whole probe time.
    assert probes_at_once(RATE, [], ceiling=64) == math.ceil(RATE * EXPECTED_PROBE_SECONDS)
    assert probes_at_once(RATE, [], ceiling=24) == 24


def test_the_cli_follows_the_session_time_of_its_probes_never_below_its_floor() -> None:
    assert probes_at_once(RATE, [2.0] * 20, ceiling=64) == thresholds.SSM_PROBE_WORKERS
    assert probes_at_once(RATE, [20.0] * 20, ceiling=64) == math.ceil(RATE * 20.0)
    # The high percentile, not the slowest: one node held for the whole budget sizes nothing.
    assert probes_at_once(RATE, [10.0] * 19 + [180.0], ceiling=64) == math.ceil(RATE * 10.0)
    assert probes_at_once(0.5, [20.0] * 20, ceiling=64) == thresholds.SSM_PROBE_WORKERS
    assert probes_at_once(RATE, [20.0] * 20, ceiling=3) == 3  # a 3-node cluster


def test_the_cli_pool_is_bounded_by_the_memory_a_session_may_hold() -> None:
    per_session = thresholds.SSM_SESSION_MAX_OUTPUT_BYTES
    share = thresholds.SSM_PROBE_MEMORY_SHARE
    assert probe_workers_ceiling(None) == thresholds.SSM_PROBE_WORKERS
    assert probe_workers_ceiling(2 << 30) == thresholds.SSM_PROBE_WORKERS  # never below the floor
    assert probe_workers_ceiling(int(40 * per_session / share)) == 40
    assert probe_workers_ceiling(1 << 40) == thresholds.SSM_PROBE_WORKERS_MAX


def test_a_probe_holds_its_slot_for_its_session_not_its_wait_for_a_start() -> None:
    ran = NodeProbeResult(instance_id="i-1", reachable=True, duration_seconds=7.5, paced_seconds=2.5)
    assert session_seconds(ran) == 5.0
    never = NodeProbeResult(instance_id="i-2", reachable=False, error_kind=next(iter(NOT_STARTED_KINDS)))
    never.duration_seconds = 30.0
    assert session_seconds(never) is None
    assert session_seconds(NodeProbeResult(instance_id="i-3", reachable=False)) is None
