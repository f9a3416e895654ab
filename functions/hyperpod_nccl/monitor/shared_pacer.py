"""A `StartPacer` shared by every Lambda sandbox of the monitor through one item of its table.

Deployed, each ProbeNode (and CollectLogs) invocation runs in a sandbox of its own: a pacer in
memory paces only its own process, and `mapMaxConcurrency` of them started sessions at once. This
pacer keeps the generic cell rate algorithm's one number, the theoretical arrival time `tat`, in the
table (`Store.reserve_start`: one conditional UpdateItem per start, no read-modify-write race), so
every sandbox, and every watched cluster of the stack in the same account and Region, takes its
starts from the same bucket. `throttled()` pushes the shared pace back and, when throttles recur
(`pacing.throttle_recurs` over the table's `last_throttle`), raises a graduated slowdown every
sandbox then honours (`Store.note_throttle`, `Store.escalate_slowdown`, `Store.push_back_start`).
docs/pacing.md has the design and its costs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_nccl import reads, thresholds
from hyperpod_nccl.aws_errors import error_message, is_access_denied
from hyperpod_nccl.models.findings import DegradedSource
from hyperpod_nccl.monitor.settings import PACE_RETENTION_SECONDS, MonitorSettings
from hyperpod_nccl.monitor.store import PaceContended, Store
from hyperpod_nccl.pacing import PACED_BURST, RateLimiter, cooldown_seconds, slowdown, throttle_recurs

logger = logging.getLogger(__name__)
# The one table call a reservation makes (Store.reserve_start).
PACE_ACTION = "dynamodb:UpdateItem"
# How many times a start that had already passed when its reservation came back is reserved again.
LATE_RESERVATION_RETRIES = 3


@dataclass
class SharedPacer:
    """Paces `api` (as reads.py spells it) at `rate` per second after a `burst`, for every sandbox
    that builds one over the same table, account and Region.

    `clock` is the table's time (epoch seconds: Lambda clocks are kept in sync by the Amazon Time
    Sync Service, so sandboxes agree on it to well under one interval); deadlines passed to `acquire`
    are on `deadline_clock`, the caller's own (the SSM client's monotonic clock). When the table
    cannot be used (throttled, unreachable), the pacer falls back to an in-process `RateLimiter` at
    the same rate for that call, logged: the probe still runs, and throttling, if it comes, is
    retried and fed back like any other.
    """

    store: Store
    api: str
    account: str
    region: str
    rate: float
    burst: int = 1
    clock: Callable[[], float] = time.time
    deadline_clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    # How long a recurring throttle slows the pace (None: `pacing.cooldown_seconds(rate)`).
    cooldown: float | None = None
    # Epoch seconds (on `clock`) before which the first `acquire` does not reserve: the node's turn
    # in the probe Map's first round (`ProbeItem.first_round_start`); None: reserve at once.
    not_before: float | None = None
    # Why this sandbox paced itself alone at least once (None while the table served every start).
    unshared: DegradedSource | None = field(default=None, init=False)
    _fallback: RateLimiter | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    # Each thread's last reservation (on `clock`), by which `throttled()` judges a recurrence.
    _reserved: threading.local = field(default_factory=threading.local, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError(f"a pacer's rate must be positive, not {self.rate}")
        self.burst = max(1, self.burst)

    @property
    def interval(self) -> float:
        """Seconds between starts at the configured rate."""
        return 1.0 / self.rate

    @property
    def cooldown_seconds(self) -> float:
        """How long a recurring throttle slows the pace."""
        return cooldown_seconds(self.rate) if self.cooldown is None else self.cooldown

    @property
    def tolerance(self) -> float:
        """How far ahead of the steady pace a burst may run: (burst - 1) intervals."""
        return (self.burst - 1) * self.interval

    def _expires_at(self, now: float) -> int:
        return int(now) + PACE_RETENTION_SECONDS

    def acquire(self, deadline: float | None = None) -> bool:
        """Reserve the account's next start of `api` and sleep until it. False, reserving nothing,
        when that start would come after `deadline` (on `deadline_clock`).

        A start that has already passed by more than one interval when the reservation comes back
        (the table answered late: a sandbox starved of CPU, a slow first call) is not kept: calls
        sent that late arrive together with the ones reserved after them and are throttled as a
        bunch. Such a start is reserved again, up to `LATE_RESERVATION_RETRIES` times (the passed
        start stays unused; it cost the account nothing)."""
        self._hold_for_turn(deadline)
        start = float("-inf")
        for attempt in range(LATE_RESERVATION_RETRIES + 1):
            try:
                reserved = self._reserve(deadline)
            except (ClientError, BotoCoreError, PaceContended) as error:
                logger.warning("pace of %s not reserved in the table (%s): pacing this sandbox alone", self.api, error)
                self._note_unshared(error)
                return self._local().acquire(deadline)
            if reserved is None:
                return False
            start = reserved
            late = self.clock() - start
            if late <= self.interval or attempt == LATE_RESERVATION_RETRIES:
                break
            logger.info("start of %s reserved %.2f s late: reserving another", self.api, late)
        wait = start - self.clock()
        if wait > 0:
            self.sleep(wait)
        return True

    def _hold_for_turn(self, deadline: float | None) -> None:
        """Sleep until `not_before` (once: later calls reserve at once), unless that would pass
        `deadline`: the turn orders starts, it is not worth a node's budget."""
        turn, self.not_before = self.not_before, None
        if turn is None:
            return
        hold = turn - self.clock()
        if hold > 0 and (deadline is None or hold < deadline - self.deadline_clock()):
            self.sleep(hold)

    def _reserve(self, deadline: float | None) -> float | None:
        """The start reserved in the table (on `clock`); None when it would come after `deadline`.
        Raises what the table call raised."""
        now = self.clock()
        if deadline is None:
            latest = float("inf")
        else:
            latest = now + (deadline - self.deadline_clock())
            if latest < now:
                return None
        start = self.store.reserve_start(
            self.api,
            self.account,
            self.region,
            now=now,
            # DynamoDB numbers are finite: "no deadline" is a day away, past any probe budget.
            latest_start=min(latest, now + 86_400),
            interval=self.interval,
            tolerance=self.tolerance,
            expires_at=self._expires_at(now),
        )
        if start is not None:
            self._reserved.at = now
        return start

    def throttled(self) -> None:
        """Tell every sandbox: the next start comes no sooner than one interval from now (after the
        burst); when this throttle recurs (`pacing.throttle_recurs`: this thread's call was reserved
        after the account's previous throttle, and soon after it), the account's slowdown goes up a
        level and each start takes `pacing.slowdown(level)` intervals until `cooldown_seconds` from
        now, that first one included."""
        now = self.clock()
        expires_at = self._expires_at(now)
        try:
            previous = self.store.note_throttle(self.api, self.account, self.region, now=now, expires_at=expires_at)
            step = self.interval
            if throttle_recurs(previous, getattr(self._reserved, "at", None), now, self.interval):
                step = self.store.escalate_slowdown(
                    self.api,
                    self.account,
                    self.region,
                    now=now,
                    until=now + self.cooldown_seconds,
                    step_at=lambda level: self.interval * slowdown(level),
                    expires_at=expires_at,
                )
            self.store.push_back_start(
                self.api, self.account, self.region, next_tat=now + self.tolerance + step, expires_at=expires_at
            )
        except (ClientError, BotoCoreError, PaceContended) as error:
            logger.warning("throttle of %s not recorded in the table (%s)", self.api, error)
        self._local().throttled()

    def _note_unshared(self, error: BaseException) -> None:
        """Keep the first reason this sandbox paced alone: the report says the account's rate was
        only kept per sandbox (and, when denied, which action to grant)."""
        if self.unshared is not None:
            return
        denied = is_access_denied(error)
        self.unshared = DegradedSource(
            source=f"{self.api} pacing",
            reason=(
                f"{PACE_ACTION} of the shared pace failed ({error_message(error) or error}): each sandbox "
                f"paced its own {self.api} calls, so together they may have exceeded the account's rate"
            ),
            fix=f"grant {PACE_ACTION} on the monitor's table to the function"
            if denied
            else "check the table's health and throttling; the next sweep shares the pace again",
            missing_action=PACE_ACTION if denied else None,
        )

    def _local(self) -> RateLimiter:
        """The in-process pacer used while the table cannot be (created on first need)."""
        with self._lock:
            if self._fallback is None:
                self._fallback = RateLimiter(
                    self.rate,
                    self.burst,
                    clock=self.deadline_clock,
                    sleep=self.sleep,
                    cooldown=self.cooldown_seconds,
                )
            return self._fallback


@dataclass(frozen=True)
class AccountPace:
    """The account-wide rates the monitor's sandboxes share, and the account their items name
    (MonitorSettings: START_SESSION_RATE_ENV, LOG_FILTER_RATE_ENV, ACCOUNT_ID_ENV)."""

    account: str = "local"
    start_session_rate: float = thresholds.SSM_START_SESSION_PER_SECOND
    log_filter_rate: float = thresholds.LOG_FILTER_CALLS_PER_SECOND

    @classmethod
    def of(cls, settings: MonitorSettings) -> AccountPace:
        """The pace a handler's settings configure."""
        return cls(settings.account_id, settings.start_session_rate, settings.log_filter_rate)

    def start_sessions(self, store: Store, region: str) -> SharedPacer:
        """The pacer of ssm:StartSession in `region` that every ProbeNode sandbox shares."""
        rate = self.start_session_rate
        return SharedPacer(store, reads.START_SESSION, self.account, region, rate, burst=PACED_BURST)

    def filter_log_events(self, store: Store, region: str) -> SharedPacer:
        """The pacer of logs:FilterLogEvents in `region` that every CollectLogs sandbox shares."""
        rate = self.log_filter_rate
        return SharedPacer(store, reads.FILTER_LOG_EVENTS, self.account, region, rate, burst=PACED_BURST)
