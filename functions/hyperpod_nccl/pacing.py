"""Client-side pacing of AWS APIs whose rates are account-wide (StartSession, FilterLogEvents).

A neutral home: the SSM client and the CloudWatch scan both pace their calls through a `StartPacer`,
and neither should import the other to do so. Two pacers implement it:

- `RateLimiter` (here): one process, many threads (the CLI's `diagnose`, one per run);
- `hyperpod_nccl.monitor.shared_pacer.SharedPacer`: every Lambda sandbox of the monitor, through one
  item of its table (a sandbox shares no memory with another).

Both adapt the same way (`throttle_recurs`, `slowdown`, `cooldown_seconds`): AWS throttling a call
anyway pushes the next start back; a throttle that recurs (another client of the account, a rate set
too high) also lengthens the interval by `THROTTLE_SLOWDOWN_STEP` for `THROTTLE_COOLDOWN_STARTS`
intervals, once more for each recurrence inside that cooldown (up to `THROTTLE_SLOWDOWN_MAX`), and the
configured rate comes back after a cooldown without one (docs/pacing.md).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from hyperpod_nccl import thresholds

# A throttle slows the pace only when it recurs: one of a call reserved after an earlier throttle
# (so paced with that throttle already counted) and within this many configured intervals of it
# (10 s at 3/s) shows the pace itself is more than the account has left. A lone throttle (calls that
# left evenly arriving bunched, one moment of jitter) only pushes the next start back: measured,
# halving the pace for every stray throttle turned a 1.1x sweep into a 1.8x one.
THROTTLE_RECUR_STARTS = 30
# How long a recurring throttle slows the pace, in configured intervals (30 s at 3/s): counted in
# starts, not seconds, so it holds back the same number of starts at any configured rate (and in
# the time-scaled benchmark), long enough to outlast a burst from another client of the account.
THROTTLE_COOLDOWN_STARTS = 90
# Each recurrence inside a cooldown multiplies the interval by this once more. Graduated, because
# one fixed step cannot serve both causes: measured, halving the rate at the first recurrence made
# a 64-node sweep whose only throttles were two stray pairs take 1.54x its bound; a competitor that
# keeps taking the account's rate recurs again and again and drives the pace down within a few
# recurrences (1.25, 1.56, 1.95, 2.44, ...).
THROTTLE_SLOWDOWN_STEP = 1.25
# The slowest pace, as a multiple of the configured interval (a quarter of the rate): with another
# client at the account's full rate, half of it is ours to take, and below a quarter a sweep would
# outlast its cadence long before the competitor's burst ends.
THROTTLE_SLOWDOWN_MAX = 4.0
# Our pacers start calls evenly, without a burst. AWS's bucket holds about one second's calls; a
# client pacing at the full rate AND the full burst leaves it no slack, so calls that arrive a few
# milliseconds closer together than they left (network jitter) are throttled. Measured against the
# emulation's 3/s bucket of 3: burst 3 sent 10-11 StartSession requests for 8 nodes, burst 1 sends 8.
PACED_BURST = 1


# The percentile of probe times that sizes the probes at once (the monitor's next sweep from the
# previous full one, the CLI from the probes of its run that ended): high, so that the slow nodes of
# a sweep do not leave the rate unused, but not the slowest, whose one node held for the whole
# budget would size every later sweep for it.
PROBE_SECONDS_PERCENTILE = 90


def probe_seconds_percentile(durations: Iterable[float], percentile: int = PROBE_SECONDS_PERCENTILE) -> float | None:
    """The `percentile` of probe `durations` by the nearest-rank rule (the smallest duration that
    at least that share of them do not exceed); None without any."""
    ordered = sorted(durations)
    if not ordered:
        return None
    rank = max(1, math.ceil(percentile / 100 * len(ordered)))
    return ordered[rank - 1]


def probes_to_keep_pace(rate_per_second: float, probe_seconds: float) -> int:
    """Probes in flight that keep a start pace of `rate_per_second` busy when each holds its slot
    `probe_seconds` (Little's law: in flight = arrival rate x time in flight), at least one."""
    return max(1, math.ceil(rate_per_second * probe_seconds))


def cooldown_seconds(rate: float) -> float:
    """How long a recurring throttle slows a pace of `rate` per second (`THROTTLE_COOLDOWN_STARTS`)."""
    return THROTTLE_COOLDOWN_STARTS / rate


def slowdown(level: int) -> float:
    """The interval's multiple at slowdown `level`: the recurring throttles of one cooldown (0: none)."""
    return min(THROTTLE_SLOWDOWN_MAX, THROTTLE_SLOWDOWN_STEP ** max(0, level))


def escalated_level(level: int, still_slowed: bool) -> int:
    """The slowdown level after a recurring throttle: one more than `level` while its cooldown lasts
    (`still_slowed`), else the first step again."""
    return (level if still_slowed else 0) + 1


def throttle_recurs(previous: float | None, reserved_at: float | None, now: float, interval: float) -> bool:
    """Whether a throttle at `now`, of a call whose start was reserved at `reserved_at`, recurs after
    the `previous` one (None: none yet): the call was paced after that throttle had pushed the pace
    back, and is throttled within `THROTTLE_RECUR_STARTS` intervals of it. Calls reserved before the
    previous throttle belong to the same moment of bunching and do not count again."""
    if previous is None or reserved_at is None:
        return False
    return reserved_at >= previous and now - previous <= THROTTLE_RECUR_STARTS * interval


class StartPacer(Protocol):
    """Paces the starts of one rate-limited API for every caller that shares it."""

    def acquire(self, deadline: float | None = None) -> bool:
        """Reserve the next start and wait for it. False, reserving nothing, when that start would
        not come before `deadline` (on this pacer's clock)."""
        ...

    def throttled(self) -> None:
        """AWS throttled this thread's last call anyway: push the next start back, and slow down
        for a while when throttles recur (`throttle_recurs`)."""
        ...


class RateLimiter:
    """A thread-safe, first-come-first-served pacer: at most `rate` acquisitions per second after
    a `burst` (the generic cell rate algorithm: each caller reserves the next free start time).

    One instance is shared by every caller of a rate-limited API in one diagnose run (StartSession
    for the probes, FilterLogEvents for the log scan), so hundreds of calls stay under the
    account's rate instead of failing with throttling. Reservations keep the
    callers' order, so a batch of probes that asked first starts first: with a token bucket
    polled by sleepers, the last node of a batch waited for as long as every other caller's.

    On `throttled()` the next start moves at least one interval past the throttle, after the burst;
    when the throttle recurs (`throttle_recurs`, judged by the calling thread's last reservation) the
    slowdown goes up a level for `cooldown_seconds` (default: `THROTTLE_COOLDOWN_STARTS` intervals):
    the interval is `slowdown(level)` times the configured one until the cooldown ends.
    """

    def __init__(
        self,
        rate: float,
        burst: int = 1,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        cooldown: float | None = None,
    ) -> None:
        if rate <= 0:
            raise ValueError(f"a pacer's rate must be positive, not {rate}")
        self.rate = rate
        self.burst = max(1, burst)
        self.cooldown_seconds = cooldown_seconds(rate) if cooldown is None else cooldown
        self._clock = clock
        self._sleep = sleep
        self._interval = 1.0 / rate
        # How far ahead of the steady pace a burst may run.
        self._tolerance = (self.burst - 1) * self._interval
        # The theoretical time of the next start at the steady pace.
        self._next = clock()
        # Until when throttling slows the pace (the clock's time; -inf: never throttled).
        self._slow_until = float("-inf")
        # The slowdown level while `_slow_until` lasts (`slowdown`).
        self._slow_level = 0
        # The last throttle's time (None: never throttled), and each thread's last reservation.
        self._last_throttle: float | None = None
        self._reserved = threading.local()
        self._lock = threading.Lock()

    @classmethod
    def per_second(cls, rate: float) -> RateLimiter:
        """A pacer at `rate` per second without a burst (`PACED_BURST`)."""
        return cls(rate, burst=PACED_BURST)

    def interval(self, now: float) -> float:
        """Seconds between starts at `now`: the configured interval, `slowdown(level)` times longer
        while cooling down."""
        return self._interval * slowdown(self._slow_level) if now < self._slow_until else self._interval

    def _wait(self, now: float) -> tuple[float, float]:
        """Seconds until the next start may happen, and the pace marker after it."""
        due = max(self._next, now)
        # The epsilon absorbs float rounding of the steps (1/3 s steps never sum exactly).
        wait = max(0.0, due - self._tolerance - now)
        return (0.0 if wait < 1e-9 else wait), due + self.interval(now)

    def acquire(self, deadline: float | None = None) -> bool:
        """Reserve the next free start and wait for it; False (reserving nothing) when it would
        not come before `deadline`."""
        with self._lock:
            now = self._clock()
            wait, after = self._wait(now)
            if deadline is not None and now + wait > deadline:
                return False
            self._next = after
        self._reserved.at = now
        if wait:
            self._sleep(wait)
        return True

    def throttled(self) -> None:
        """Start again no sooner than one interval from now, after the burst (AWS's bucket is empty:
        the calls we thought it had room for were not); when the throttle recurs, slow down one level
        more (from none when the last cooldown has ended) for a new cooldown first."""
        with self._lock:
            now = self._clock()
            reserved_at = getattr(self._reserved, "at", None)
            if throttle_recurs(self._last_throttle, reserved_at, now, self._interval):
                self._slow_level = escalated_level(self._slow_level, now < self._slow_until)
                self._slow_until = max(self._slow_until, now + self.cooldown_seconds)
            self._last_throttle = now
            self._next = max(self._next, now + self._tolerance + self.interval(now))


def start_session_limiter(rate: float = thresholds.SSM_START_SESSION_PER_SECOND) -> RateLimiter:
    """A new in-process StartSession pacer: one per diagnose run, never one per module (docs/pacing.md)."""
    return RateLimiter.per_second(rate)


def filter_log_events_limiter(rate: float = thresholds.LOG_FILTER_CALLS_PER_SECOND) -> RateLimiter:
    """A new in-process FilterLogEvents pacer: one per diagnose run, never one per module."""
    return RateLimiter.per_second(rate)
