"""The table-backed pacer every monitor sandbox shares (monitor/shared_pacer.py, Store.reserve_start
escalate_slowdown, push_back_start) against the emulated DynamoDB: pacers that share nothing but the table keep the
account's rate together, refuse a start past a deadline without reserving it, and slow down together
when one of them is throttled."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.config import Config

from hyperpod_nccl import reads
from hyperpod_nccl.monitor.payloads import ProbeItem
from hyperpod_nccl.monitor.settings import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, MonitorSettings
from hyperpod_nccl.monitor.shared_pacer import LATE_RESERVATION_RETRIES, AccountPace, SharedPacer
from hyperpod_nccl.monitor.store import BUCKET, Store, pace_key
from hyperpod_nccl.pacing import PACED_BURST, THROTTLE_RECUR_STARTS, slowdown
from hyperpod_nccl_sim.aws import EmulatedAws
from hyperpod_nccl_sim.scenario import FaultSpec
from hyperpod_nccl_sim.serverless import TABLE_NAME, LocalMonitor

ACCOUNT, REGION = "123456789012", "us-west-2"
_tables = iter(range(1_000_000))


@pytest.fixture
def table_name(emulation: EmulatedAws) -> Iterator[str]:
    """A fresh table with the monitor's key schema (pace items need no index)."""
    name = f"pace-{next(_tables)}"
    ddb = emulation.client("dynamodb")
    ddb.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in (PARTITION_KEY, SORT_KEY)],
        KeySchema=[
            {"AttributeName": PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": SORT_KEY, "KeyType": "RANGE"},
        ],
    )
    yield name
    ddb.delete_table(TableName=name)


# DynamoDB applies each request to an item atomically (a conditional write is checked and applied as
# one step); moto's server runs requests in threads without locking its tables, so two concurrent
# conditional updates could both pass their check there. Each sandbox's store sends its requests
# under this lock: one request at a time, whole, as the service applies them. Requests of different
# sandboxes still interleave freely, which is the race (read, then write) the pacer must not lose.
_ONE_REQUEST_AT_A_TIME = threading.Lock()


def _hold(**_: object) -> None:
    # Returns None: a before-call handler's answer would stand in for the service's.
    _ONE_REQUEST_AT_A_TIME.acquire()


def _let_go(**_: object) -> None:
    _ONE_REQUEST_AT_A_TIME.release()


def _sandbox_store(emulation: EmulatedAws, table_name: str, *, attempts: int | None = None) -> Store:
    """A store with its own session and client, as a separate Lambda sandbox has (`attempts`:
    botocore's total attempts per call, its default when None)."""
    config = None if attempts is None else Config(retries={"total_max_attempts": attempts, "mode": "standard"})
    resource: Any = emulation.session(REGION).resource("dynamodb", endpoint_url=emulation.endpoint_url, config=config)
    events = resource.meta.client.meta.events
    events.register("before-call.dynamodb", _hold)
    for event in ("after-call.dynamodb", "after-call-error.dynamodb"):
        events.register(event, _let_go)
    return Store(resource.Table(table_name))


class FakeTime:
    """One clock for every pacer of a test (the table's epoch seconds and the deadlines alike):
    sleeping advances it."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _pacer(store: Store, clock: FakeTime, rate: float = 2.0, burst: int = 1) -> SharedPacer:
    return SharedPacer(
        store, reads.START_SESSION, ACCOUNT, REGION, rate, burst, clock=clock, deadline_clock=clock, sleep=clock.sleep
    )


def test_pacers_that_share_only_the_table_keep_one_pace(emulation: EmulatedAws, table_name: str) -> None:
    clock = FakeTime()
    first, second = (_pacer(_sandbox_store(emulation, table_name), clock, rate=2.0, burst=2) for _ in range(2))
    began = clock.now
    order = []
    for pacer in (first, second, first, second, first):
        assert pacer.acquire()
        order.append(round(clock.now - began, 6))
    # A burst of two, then one start every half second, whichever sandbox asks.
    assert order == [0.0, 0.0, 0.5, 1.0, 1.5]
    item = _sandbox_store(emulation, table_name).get(pace_key(reads.START_SESSION, ACCOUNT, REGION), BUCKET)
    assert item is not None and int(item[TTL_ATTRIBUTE]) > clock.now


def test_a_start_past_the_deadline_is_refused_and_nothing_is_reserved(emulation: EmulatedAws, table_name: str) -> None:
    clock = FakeTime()
    store = _sandbox_store(emulation, table_name)
    pacer = _pacer(store, clock, rate=1.0)
    assert pacer.acquire()
    key = pace_key(reads.START_SESSION, ACCOUNT, REGION)
    before = store.get(key, BUCKET)
    # The next start is a second away: a deadline half a second away refuses it, without a wait.
    assert not pacer.acquire(deadline=clock.now + 0.5)
    assert store.get(key, BUCKET) == before and clock.now == 1_700_000_000.0
    # ... and the refused reservation left the next start where it was, for the next caller.
    assert pacer.acquire(deadline=clock.now + 1.0) and clock.now == pytest.approx(1_700_000_001.0)


def _answer_late(store: Store, clock: FakeTime, delays: list[float]) -> None:
    """The table answers the store's next reservations `delays` seconds late (then at once)."""

    def late(**_: object) -> None:
        if delays:
            clock.now += delays.pop(0)

    store.table.meta.client.meta.events.register("after-call.dynamodb.UpdateItem", late)


def test_a_start_that_passed_before_its_reservation_came_back_is_reserved_again(
    emulation: EmulatedAws, table_name: str
) -> None:
    # Measured in `bench sweep --path state-machine` (64 nodes): cold sandboxes' first reservations
    # came back 1-4 s late, so their starts had passed and 13 calls left within one second
    # (13 of 77 throttled); reserving those again brought it to 2-3.
    clock = FakeTime()
    began = clock.now
    store = _sandbox_store(emulation, table_name)
    _answer_late(store, clock, [2.0])
    pacer = _pacer(store, clock, rate=2.0)
    assert pacer.acquire()
    # The start reserved at 0 s came back at 2 s: it was given up, and 2 s reserved instead.
    assert clock.now - began == pytest.approx(2.0)
    item = store.get(pace_key(reads.START_SESSION, ACCOUNT, REGION), BUCKET)
    assert item is not None and float(item["tat"]) == pytest.approx(began + 2.5)
    # A reservation that comes back after its start, but within one interval of it, is kept: the
    # start reserved was 2.5 s, the answer came at 2.8 s, the call goes then.
    _answer_late(store, clock, [0.8])
    assert pacer.acquire() and clock.now - began == pytest.approx(2.8)
    assert float(store.get(pace_key(reads.START_SESSION, ACCOUNT, REGION), BUCKET)["tat"]) == pytest.approx(began + 3.0)


def test_a_table_that_always_answers_late_is_reserved_again_a_bounded_number_of_times(
    emulation: EmulatedAws, table_name: str
) -> None:
    reservations: list[float | None] = []

    class CountingStore(Store):
        def reserve_start(self, *args: Any, **kwargs: Any) -> float | None:
            reservations.append(super().reserve_start(*args, **kwargs))
            return reservations[-1]

    clock = FakeTime()
    store = CountingStore(_sandbox_store(emulation, table_name).table)
    _answer_late(store, clock, [5.0] * 20)
    assert _pacer(store, clock, rate=2.0).acquire()  # the call still goes, after the last try
    assert len(reservations) == LATE_RESERVATION_RETRIES + 1


def test_a_lone_throttle_pushes_every_sandbox_back_without_slowing_the_pace(
    emulation: EmulatedAws, table_name: str
) -> None:
    clock = FakeTime()
    began = clock.now
    throttled, other = (_pacer(_sandbox_store(emulation, table_name), clock, rate=2.0) for _ in range(2))
    assert throttled.acquire()
    throttled.throttled()
    starts = []
    for _ in range(3):
        assert other.acquire()
        starts.append(round(clock.now - began, 6))
    # One interval (0.5 s) from the throttle, in the other sandbox too, then the configured pace.
    assert starts == [0.5, 1.0, 1.5]
    item = _sandbox_store(emulation, table_name).get(pace_key(reads.START_SESSION, ACCOUNT, REGION), BUCKET)
    assert item is not None and "slow_until" not in item and float(item["last_throttle"]) == began


def test_a_recurring_throttle_slows_every_sandbox_for_the_cooldown_then_the_rate_comes_back(
    emulation: EmulatedAws, table_name: str
) -> None:
    clock = FakeTime()
    began = clock.now
    first, second, other = (_pacer(_sandbox_store(emulation, table_name), clock, rate=2.0) for _ in range(3))
    assert first.acquire()
    assert second.acquire()  # reserved at 0, its start at 0.5
    first.throttled()  # at 0.5: a lone throttle so far
    # The second sandbox's call was reserved before that throttle: the same bunching, not slowed.
    second.throttled()
    assert other.acquire() and round(clock.now - began, 6) == 1.0
    # Reserved after the throttles and throttled anyway: the pace itself is too fast.
    other.throttled()
    starts = []
    for pacer in (first, second, other):
        assert pacer.acquire()
        starts.append(round(clock.now - began, 6))
    # Pushed back one slow interval (0.625 s, 1.25 x 0.5 s) and paced at it, in every sandbox.
    assert starts == [1.625, 2.25, 2.875]
    assert other.cooldown_seconds == pytest.approx(45.0)  # 90 intervals of 0.5 s
    clock.now = began + 1.0 + other.cooldown_seconds + 5
    resumed = clock.now
    after = []
    for pacer in (other, first, other):
        assert pacer.acquire()
        after.append(round(clock.now - resumed, 6))
    assert after == [0.0, 0.5, 1.0]


def test_throttles_far_apart_do_not_recur(emulation: EmulatedAws, table_name: str) -> None:
    clock = FakeTime()
    store = _sandbox_store(emulation, table_name)
    pacer = _pacer(store, clock, rate=2.0)
    assert pacer.acquire()
    pacer.throttled()
    clock.now += THROTTLE_RECUR_STARTS * pacer.interval + 1
    assert pacer.acquire()
    pacer.throttled()
    item = store.get(pace_key(reads.START_SESSION, ACCOUNT, REGION), BUCKET)
    assert item is not None and "slow_until" not in item


def test_a_later_throttle_is_not_shortened_by_an_earlier_one(emulation: EmulatedAws, table_name: str) -> None:
    clock = FakeTime()
    store = _sandbox_store(emulation, table_name)
    pacer = _pacer(store, clock)
    key = pace_key(reads.START_SESSION, ACCOUNT, REGION)
    pacer.throttled()
    assert pacer.acquire()
    pacer.throttled()  # recurs: slowed
    latest = store.get(key, BUCKET)
    assert latest is not None and int(latest["slow_level"]) == 1
    # A sandbox whose throttle came (or whose clock reads) earlier records a shorter cooldown and
    # an earlier next start: neither moves back, and its recurrence still counts.
    earlier = clock.now - 10
    step = store.escalate_slowdown(
        reads.START_SESSION, ACCOUNT, REGION, now=clock.now, until=earlier + pacer.cooldown_seconds,
        step_at=lambda level: pacer.interval * slowdown(level), expires_at=int(earlier) + 60,
    )  # fmt: skip
    store.push_back_start(reads.START_SESSION, ACCOUNT, REGION, next_tat=earlier + 1, expires_at=int(earlier) + 60)
    again = store.get(key, BUCKET)
    assert again is not None
    assert (again["slow_until"], again["tat"]) == (latest["slow_until"], latest["tat"])
    assert int(again["slow_level"]) == 2 and float(again["slow_step"]) == step == pytest.approx(pacer.interval * 1.5625)


def test_every_sandbox_takes_the_slower_step_another_one_recorded(emulation: EmulatedAws, table_name: str) -> None:
    # Recurrences in two sandboxes of one cooldown add up: the second slows the pace one level more,
    # and a third sandbox, which never saw a throttle, reserves at that pace.
    clock = FakeTime()
    first, second, other = (_pacer(_sandbox_store(emulation, table_name), clock, rate=2.0) for _ in range(3))
    assert first.acquire()
    first.throttled()  # lone
    assert first.acquire()
    first.throttled()  # recurs: level 1
    assert second.acquire()
    second.throttled()  # reserved after the last throttle: recurs, level 2
    began = clock.now
    starts = []
    for _ in range(3):
        assert other.acquire()
        starts.append(round(clock.now - began, 6))
    slow = 0.5 * 1.5625
    assert starts == pytest.approx([slow, 2 * slow, 3 * slow])


def test_many_sandboxes_never_start_more_than_rate_plus_burst_in_any_window(
    emulation: EmulatedAws, table_name: str
) -> None:
    rate, burst, sandboxes, each = 20.0, 3, 6, 8
    starts: list[float] = []
    lock = threading.Lock()

    class RecordingStore(Store):
        """The sandbox's store, keeping each start the table handed out (when a call may go: the
        sandbox then sleeps until it, and how late a loaded machine wakes it is not the pacer's)."""

        def reserve_start(self, *args: Any, **kwargs: Any) -> float | None:
            start = super().reserve_start(*args, **kwargs)
            if start is not None:
                with lock:
                    starts.append(start)
            return start

    def sandbox() -> None:
        store = RecordingStore(_sandbox_store(emulation, table_name).table)
        pacer = SharedPacer(store, reads.START_SESSION, ACCOUNT, REGION, rate, burst)
        for _ in range(each):
            assert pacer.acquire(deadline=time.monotonic() + 60)

    threads = [threading.Thread(target=sandbox) for _ in range(sandboxes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    # Each start handed out, those given up because their reservation came back late included
    # (SharedPacer.acquire reserves those again): the bound holds for all of them.
    assert len(starts) >= sandboxes * each
    starts.sort()
    window = 1.0
    # The cell rate algorithm's bound: in any window of W seconds, at most W x rate + burst starts.
    allowed = rate * window + burst
    densest = max(sum(1 for t in starts[i:] if t < start + window - 1e-6) for i, start in enumerate(starts))
    assert densest <= allowed, f"{densest} starts in {window} s (at most {allowed})"
    # And the pace was used, not just respected: never faster than (n - burst) / rate, and not a
    # slowed pace (twice the interval would take twice as long). How close to the bound a loaded
    # machine gets is a speed figure, measured side by side in `make bench`, not asserted here.
    paced = (len(starts) - burst) / rate
    assert paced - 0.05 <= starts[-1] - starts[0] < 1.8 * paced


def test_account_pace_names_one_item_per_api_account_and_region() -> None:
    pace = AccountPace(account=ACCOUNT, start_session_rate=2.5, log_filter_rate=4.0)
    store: Any = object()
    starts, filters = pace.start_sessions(store, REGION), pace.filter_log_events(store, REGION)
    # No burst: AWS's bucket keeps its burst as slack for jitter and other clients (pacing.PACED_BURST).
    assert (starts.api, starts.rate, starts.burst) == (reads.START_SESSION, 2.5, PACED_BURST)
    assert (filters.api, filters.rate, filters.burst) == (reads.FILTER_LOG_EVENTS, 4.0, PACED_BURST)
    keys = {pace_key(p.api, p.account, p.region) for p in (starts, filters)}
    assert keys == {
        f"PACE#{reads.START_SESSION}#{ACCOUNT}#{REGION}",
        f"PACE#{reads.FILTER_LOG_EVENTS}#{ACCOUNT}#{REGION}",
    }


def test_a_deployed_sweep_paces_its_probes_and_its_log_scan_through_the_table(simulate) -> None:  # type: ignore[no-untyped-def]
    deployed = LocalMonitor(simulate("eks-p5"), node_coverage=2).start()
    try:
        assert deployed.sweep().status == "SUCCEEDED"
        resource: Any = deployed.emulation.session(deployed.region).resource(
            "dynamodb", endpoint_url=deployed.emulation.endpoint_url
        )
        store = Store(resource.Table(TABLE_NAME))
        account = MonitorSettings.from_env({}).account_id
        for api in (reads.START_SESSION, reads.FILTER_LOG_EVENTS):
            item = store.get(pace_key(api, account, deployed.region), BUCKET)
            # The probes' sandboxes (and the scan's) took their starts from the shared item.
            assert item is not None and float(item["tat"]) > 0, api
    finally:
        deployed.stop()


def test_a_first_round_node_reserves_no_sooner_than_its_turn_and_only_once(
    emulation: EmulatedAws, table_name: str
) -> None:
    clock = FakeTime()
    began = clock.now
    pacer = _pacer(_sandbox_store(emulation, table_name), clock, rate=2.0)
    pacer.not_before = began + 3.0
    assert pacer.acquire()
    assert clock.now - began == pytest.approx(3.0)
    # The turn orders the first start only: the next one is the pace's next.
    assert pacer.acquire()
    assert clock.now - began == pytest.approx(3.5)


def test_a_turn_that_would_outlast_the_budget_is_not_waited_for(emulation: EmulatedAws, table_name: str) -> None:
    clock = FakeTime()
    began = clock.now
    pacer = _pacer(_sandbox_store(emulation, table_name), clock, rate=2.0)
    pacer.not_before = began + 30.0
    assert pacer.acquire(deadline=clock.now + 10.0)
    assert clock.now == began


def test_a_deployed_sweep_gives_each_probe_its_place_for_the_first_rounds_turns(simulate) -> None:  # type: ignore[no-untyped-def]
    deployed = LocalMonitor(simulate("eks-p5")).start()
    try:
        run = deployed.sweep()
        assert run.status == "SUCCEEDED"
        items = [ProbeItem.model_validate(call.event) for call in deployed.calls_of(run, "probe_node")]
        assert items and all(item.first_round is not None for item in items)
        # One plan for the whole sweep, and each node's place in it (the Map's item indexes).
        assert len({item.first_round for item in items}) == 1
        places = sorted((item.batch or 0, item.position or 0) for item in items)
        assert len(set(places)) == len(items)
        first = items[0].first_round
        assert first is not None
        turns = [item.first_round_start(1.0) for item in items if (item.batch or 0) < first.batches]
        assert turns and len(set(turns)) == len(turns)
    finally:
        deployed.stop()


def test_a_table_that_cannot_pace_leaves_the_sandbox_pacing_itself(emulation: EmulatedAws, table_name: str) -> None:
    clock = FakeTime()
    # One attempt a call: what is tested is the pacer once the table failed, not botocore's backoff.
    pacer = _pacer(_sandbox_store(emulation, table_name, attempts=1), clock, rate=2.0)
    emulation.faults.set_faults(
        [FaultSpec(operation="dynamodb:UpdateItem", error_code="ProvisionedThroughputExceededException")]
    )
    try:
        began = clock.now
        starts = []
        for _ in range(3):
            assert pacer.acquire(deadline=clock.now + 10)
            starts.append(round(clock.now - began, 6))
        assert pacer.acquire(deadline=clock.now + 10)  # reserved at 1.0, started at 1.5
        pacer.throttled()  # a lone throttle at 1.5: not recorded in the table, still honoured here
        pacer.throttled()  # the call was reserved before the first: the same bunching, no slowdown
        # Pushed back one interval from the throttle, the configured pace kept.
        assert pacer.acquire() and round(clock.now - began, 6) == 2.0
    finally:
        emulation.faults.set_faults([])
    # The rate still held, in this sandbox alone.
    assert starts == [0.0, 0.5, 1.0]
    # And the report will say so: the pace was kept per sandbox only, no IAM action to grant.
    assert pacer.unshared is not None and pacer.unshared.missing_action is None
    assert "each sandbox paced its own ssm:StartSession calls" in pacer.unshared.reason
    assert pacer.unshared.reason.startswith("dynamodb:UpdateItem of the shared pace failed")


def test_a_denied_pace_names_the_action_to_grant(emulation: EmulatedAws, table_name: str) -> None:
    clock = FakeTime()
    pacer = _pacer(_sandbox_store(emulation, table_name), clock, rate=2.0)
    assert pacer.acquire() and pacer.unshared is None  # the table served it
    emulation.faults.set_faults([FaultSpec(operation="dynamodb:UpdateItem", error_code="AccessDeniedException")])
    try:
        assert pacer.acquire()
    finally:
        emulation.faults.set_faults([])
    assert pacer.unshared is not None and pacer.unshared.missing_action == "dynamodb:UpdateItem"
    assert pacer.unshared.fix.startswith("grant dynamodb:UpdateItem")
