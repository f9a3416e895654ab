"""Pacing of the account-wide StartSession rate, on fake clocks: the in-process pacer adapts to
throttling, the session runner retries a throttle with full jitter inside the budget and feeds it
back, the throttling error's quota is named, and a node the rate left no start for is not probed
(skipped, named by a partial source), never unreachable. The table-backed pacer is
tests/functional/test_shared_pacer.py."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from botocore.endpoint import Endpoint
from botocore.exceptions import ClientError
from botocore.parsers import create_parser
from botocore.session import get_session

import hyperpod_nccl
from hyperpod_nccl.checks import discover
from hyperpod_nccl.collectors.node_probes import assemble, rate_limited_source
from hyperpod_nccl.models.node_probe import NodeProbeResult, ProbePlan, ProbeTarget
from hyperpod_nccl.pacing import (
    THROTTLE_COOLDOWN_STARTS,
    THROTTLE_RECUR_STARTS,
    THROTTLE_SLOWDOWN_MAX,
    RateLimiter,
    slowdown,
    throttle_recurs,
)
from hyperpod_nccl.ssm.client import (
    NOT_STARTED_MESSAGE,
    THROTTLE_BACKOFF_MAX_SECONDS,
    SessionError,
    SessionErrorKind,
    SessionRunner,
    classify_start_error,
)
from tests.builders import FakeClock, inventory


def _start_times(limiter: RateLimiter, clock: FakeClock, count: int) -> list[float]:
    times = []
    for _ in range(count):
        assert limiter.acquire()
        times.append(round(clock.now, 6))
    return times


# --- the in-process pacer adapts to throttling ---------------------------------------------------


def test_a_lone_throttle_pushes_the_next_start_back_without_slowing_the_pace() -> None:
    clock = FakeClock()
    limiter = RateLimiter(2.0, burst=1, clock=clock, sleep=clock.sleep)
    assert _start_times(limiter, clock, 2) == [0.0, 0.5]
    limiter.throttled()
    # One interval (0.5 s) from the throttle, then the configured pace: one stray throttle (calls
    # bunched by jitter) must not hold a whole sweep at half speed.
    assert _start_times(limiter, clock, 3) == [1.0, 1.5, 2.0]


def test_a_recurring_throttle_slows_the_rate_for_the_cooldown_then_the_rate_comes_back() -> None:
    clock = FakeClock()
    limiter = RateLimiter(2.0, burst=1, clock=clock, sleep=clock.sleep)
    assert _start_times(limiter, clock, 2) == [0.0, 0.5]
    limiter.throttled()
    assert _start_times(limiter, clock, 1) == [1.0]
    # This call was reserved after the first throttle pushed the pace back, and throttled anyway.
    limiter.throttled()
    # Pushed back one slow interval (0.625 s: 1.25 x 0.5 s) from the throttle, then paced at it.
    assert _start_times(limiter, clock, 3) == [1.625, 2.25, 2.875]
    # The cooldown is counted in configured intervals: 90 of 0.5 s from the recurring throttle.
    assert limiter.cooldown_seconds == THROTTLE_COOLDOWN_STARTS / 2.0
    clock.now = 1.0 + limiter.cooldown_seconds + 1
    began = clock.now
    assert [round(t - began, 6) for t in _start_times(limiter, clock, 3)] == [0.0, 0.5, 1.0]


def test_throttles_that_keep_recurring_slow_the_pace_step_by_step_to_a_floor() -> None:
    # A competitor that keeps taking the account's rate: each recurrence inside the cooldown slows
    # the pace once more, down to a quarter of the rate; a quiet cooldown brings the rate back, and
    # the next recurrence starts again from the first step.
    clock = FakeClock()
    limiter = RateLimiter(1.0, burst=1, clock=clock, sleep=clock.sleep, cooldown=100.0)
    assert limiter.acquire()
    limiter.throttled()  # lone
    intervals = []
    for _ in range(8):
        assert limiter.acquire()  # reserved after the last throttle
        limiter.throttled()  # and throttled anyway: recurs
        intervals.append(limiter.interval(clock.now))
    assert intervals == pytest.approx([1.25, 1.5625, 1.953125, 2.44140625, 3.0517578125, 3.814697265625, 4.0, 4.0])
    assert slowdown(0) == 1.0 and slowdown(50) == THROTTLE_SLOWDOWN_MAX
    clock.now += 101
    assert limiter.interval(clock.now) == 1.0
    for _ in range(2):  # a lone throttle, then one that recurs
        assert limiter.acquire()
        limiter.throttled()
    assert limiter.interval(clock.now) == 1.25


def test_throttles_of_calls_reserved_before_the_last_one_do_not_recur() -> None:
    interval = 1 / 3
    # Reserved before the previous throttle: the same moment of bunching, not a pace too fast.
    assert not throttle_recurs(previous=10.0, reserved_at=9.9, now=10.2, interval=interval)
    # Reserved after it and throttled within the window: the pushed-back pace is still too fast.
    assert throttle_recurs(previous=10.0, reserved_at=10.4, now=10.5, interval=interval)
    # Long after it (past THROTTLE_RECUR_STARTS intervals): a new lone throttle.
    late = 10.0 + THROTTLE_RECUR_STARTS * interval + 0.1
    assert not throttle_recurs(previous=10.0, reserved_at=late - 0.2, now=late, interval=interval)
    assert not throttle_recurs(previous=None, reserved_at=10.0, now=10.1, interval=interval)
    assert not throttle_recurs(previous=10.0, reserved_at=None, now=10.1, interval=interval)


def test_each_threads_own_reservation_decides_whether_its_throttle_recurs() -> None:
    import threading

    clock = FakeClock()
    limiter = RateLimiter(2.0, burst=1, clock=clock, sleep=clock.sleep)

    def in_other_thread(step: Any) -> None:
        worker = threading.Thread(target=step)
        worker.start()
        worker.join()

    assert limiter.acquire()  # this thread reserves at 0
    clock.now = 1.0
    in_other_thread(limiter.acquire)  # the other reserves at 1.0
    clock.now = 1.1
    in_other_thread(limiter.throttled)  # the first throttle: pushed back, not slowed
    clock.now = 1.2
    limiter.throttled()  # this thread's call was reserved (at 0) before it: the same bunching
    assert limiter.interval(clock.now) == 0.5
    clock.now = 1.3

    def reserve_then_throttled() -> None:
        assert limiter.acquire()  # reserved at 1.3, after the throttle at 1.2: paced with it
        limiter.throttled()

    in_other_thread(reserve_then_throttled)
    assert limiter.interval(clock.now) == 0.625


def test_a_throttle_empties_the_burst() -> None:
    clock = FakeClock()
    limiter = RateLimiter(3.0, burst=3, clock=clock, sleep=clock.sleep)
    limiter.throttled()
    # No burst right after AWS said its bucket is empty: the first start waits one interval.
    assert _start_times(limiter, clock, 2) == pytest.approx([1 / 3, 2 / 3])


def test_a_refused_start_reserves_nothing_even_while_slowed() -> None:
    clock = FakeClock()
    limiter = RateLimiter(1.0, burst=1, clock=clock, sleep=clock.sleep)
    assert limiter.acquire()
    limiter.throttled()
    limiter.throttled()  # recurs: reserved at 0, the first throttle at 0
    assert not limiter.acquire(deadline=1.0)
    assert clock.slept == []
    assert limiter.acquire(deadline=2.0) and clock.now == pytest.approx(1.25)


# --- the session runner: throttles retried with full jitter, fed back, bounded by the budget ----


def _throttling_error(quota: str | None = "L-0F3A1B2C", service: str | None = "ssm") -> ClientError:
    """A ThrottlingException as botocore builds it from SSM's answer: its modeled members (QuotaCode,
    ServiceCode, botocore's ssm service-2.json) merged into the top level of the error response by
    botocore's own code (Endpoint._add_modeled_error_fields), not by this test."""
    model = get_session().get_service_model("ssm")
    operation = model.operation_model("StartSession")
    body: dict[str, Any] = {"__type": "ThrottlingException", "Message": "Rate exceeded"}
    if quota:
        body["QuotaCode"] = quota
    if service:
        body["ServiceCode"] = service
    raw = {"status_code": 400, "headers": {}, "body": json.dumps(body).encode()}
    parser = create_parser(model.protocol)
    parsed = parser.parse(raw, operation.output_shape)
    Endpoint._add_modeled_error_fields(None, raw, parsed, operation, parser)  # type: ignore[arg-type]
    return ClientError(parsed, "StartSession")


class _Ssm:
    """StartSession answering with throttling `throttles` times, then TargetNotConnected (so that
    no data channel is needed: the runner's retry policy is what is tested)."""

    def __init__(self, throttles: int) -> None:
        self.throttles = throttles
        self.calls = 0

    def start_session(self, **_: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.throttles:
            raise _throttling_error()
        raise ClientError({"Error": {"Code": "TargetNotConnected", "Message": "not connected"}}, "StartSession")


class _RecordingPacer:
    """A pacer that grants every start before `refuse_after` calls and counts the throttles fed back."""

    def __init__(self, clock: FakeClock, refuse_after: int | None = None) -> None:
        self.clock = clock
        self.refuse_after = refuse_after
        self.acquired = 0
        self.throttles = 0

    def acquire(self, deadline: float | None = None) -> bool:
        if self.refuse_after is not None and self.acquired >= self.refuse_after:
            return False
        self.acquired += 1
        return True

    def throttled(self) -> None:
        self.throttles += 1


def test_a_throttled_start_is_fed_back_and_retried_after_a_full_jitter_wait() -> None:
    clock = FakeClock()
    pacer = _RecordingPacer(clock)
    ceilings: list[tuple[float, float]] = []

    def jitter(low: float, high: float) -> float:
        ceilings.append((low, high))
        return high / 2

    runner = SessionRunner(
        ssm=_Ssm(throttles=3), limiter=pacer, backoff_seconds=1.0, clock=clock, sleep=clock.sleep, jitter=jitter
    )
    with pytest.raises(SessionError) as raised:
        runner.run("sagemaker-cluster:abc_worker-i-1", "true")
    # Three throttles, each fed back and waited out with a draw from [0, 1 s x 2^n]; then the
    # permanent error stands, carrying the count.
    assert pacer.throttles == 3
    assert ceilings == [(0.0, 1.0), (0.0, 2.0), (0.0, 4.0)]
    assert clock.slept == [0.5, 1.0, 2.0]
    error = raised.value
    assert (error.kind, error.throttles, error.attempts) == (SessionErrorKind.TARGET_NOT_CONNECTED, 3, 4)
    # The jitter waits are time spent on the rate, not on the node.
    assert error.paced_seconds == pytest.approx(3.5)


def test_the_wait_for_a_start_is_counted_as_paced_not_probing() -> None:
    clock = FakeClock()
    limiter = RateLimiter(1.0, burst=1, clock=clock, sleep=clock.sleep)
    assert limiter.acquire()  # another probe took this second's start
    runner = SessionRunner(ssm=_Ssm(throttles=0), limiter=limiter, clock=clock, sleep=clock.sleep)
    with pytest.raises(SessionError) as raised:
        runner.run("sagemaker-cluster:abc_worker-i-1", "true")
    assert raised.value.paced_seconds == pytest.approx(1.0)


def test_the_jitter_ceiling_stops_growing_and_never_outlasts_the_budget() -> None:
    clock = FakeClock()
    runner = SessionRunner(
        ssm=_Ssm(throttles=10**6),
        limiter=_RecordingPacer(clock),
        budget_seconds=60.0,
        clock=clock,
        sleep=clock.sleep,
        jitter=lambda low, high: high,
    )
    with pytest.raises(SessionError) as raised:
        runner.run("sagemaker-cluster:abc_worker-i-1", "true")
    assert max(clock.slept) <= THROTTLE_BACKOFF_MAX_SECONDS
    assert clock.now <= 60.0 + 1e-9
    assert raised.value.kind is SessionErrorKind.THROTTLED


def test_no_start_inside_the_budget_is_rate_limited_and_names_the_throttles_quota() -> None:
    clock = FakeClock()
    runner = SessionRunner(
        ssm=_Ssm(throttles=1),
        limiter=_RecordingPacer(clock, refuse_after=1),
        clock=clock,
        sleep=clock.sleep,
        jitter=lambda low, high: 0.0,
    )
    with pytest.raises(SessionError) as raised:
        runner.run("sagemaker-cluster:abc_worker-i-1", "true")
    error = raised.value
    assert error.kind is SessionErrorKind.RATE_LIMITED and not error.kind.retryable
    assert error.message.startswith(NOT_STARTED_MESSAGE)
    assert "quota L-0F3A1B2C of ssm" in error.message and error.throttles == 1


def test_a_throttling_error_names_its_quota_where_botocore_puts_it() -> None:
    named = classify_start_error(_throttling_error())
    assert named.kind is SessionErrorKind.THROTTLED
    assert "(quota L-0F3A1B2C of ssm)" in named.message
    unnamed = classify_start_error(_throttling_error(quota=None, service=None))
    assert unnamed.kind is SessionErrorKind.THROTTLED and "quota" not in unnamed.message


# --- a node the rate left no start for is not probed, and says so -------------------------------


def _target(index: int) -> ProbeTarget:
    return ProbeTarget(
        instance_id=f"i-{index:017x}",
        instance_group="worker",
        instance_type="ml.p5.48xlarge",
        cluster_id="abc123def456",
    )


def test_a_node_not_started_is_skipped_and_named_never_unreachable() -> None:
    targets = [_target(i) for i in range(3)]
    results = [
        NodeProbeResult(instance_id=targets[0].instance_id, reachable=True, throttles=2, retries=2),
        NodeProbeResult(
            instance_id=targets[1].instance_id,
            reachable=False,
            error_kind=SessionErrorKind.RATE_LIMITED.value,
            error=NOT_STARTED_MESSAGE,
        ),
        NodeProbeResult(
            instance_id=targets[2].instance_id, reachable=False, error_kind=SessionErrorKind.TRANSPORT.value
        ),
    ]
    probes = assemble(ProbePlan(targets=targets), results)
    assert probes.probed_instance_ids == [targets[0].instance_id]
    assert probes.unreachable_instance_ids == [targets[2].instance_id]
    assert probes.skipped_reasons == {targets[1].instance_id: NOT_STARTED_MESSAGE}
    source = rate_limited_source(results)
    assert source is not None and source.partial and targets[1].instance_id in source.reason
    assert NOT_STARTED_MESSAGE in source.reason
    findings = list(discover()["node.reachability"].run(inventory(node_probes=probes)))
    # Only the node that was tried and failed is a reachability finding.
    assert [r.id for f in findings for r in f.resources] == [targets[2].instance_id]
    assert rate_limited_source(results[:1]) is None


def test_stored_results_from_before_the_counts_still_read() -> None:
    old = NodeProbeResult.model_validate({"instance_id": "i-0123456789abcdef0", "reachable": True, "attempts": 1})
    assert (old.throttles, old.retries) == (0, 0)


# --- no pacer lives in a module: each run (and each sandbox) builds its own ----------------------

_PACER_FACTORIES = frozenset(
    {"RateLimiter", "SharedPacer", "per_second", "start_session_limiter", "filter_log_events_limiter"}
)


def _module_level_pacers(source: str) -> list[str]:
    """Module-level assignments in `source` whose value builds a pacer (a process-wide limiter)."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call):
            func = node.value.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _PACER_FACTORIES:
                found.append(ast.unparse(node).split("=", 1)[0].strip())
    return found


def test_no_module_holds_a_process_wide_pacer() -> None:
    package = Path(hyperpod_nccl.__file__).resolve().parent
    offenders = {
        str(path.relative_to(package)): names
        for path in sorted(package.rglob("*.py"))
        if (names := _module_level_pacers(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, "build pacers where a run starts (CollectionContext), not at import: docs/pacing.md"
    # The guard sees the shape it refuses.
    assert _module_level_pacers("LIMITER = RateLimiter(3.0, burst=3)\n") == ["LIMITER"]
