"""Client-side pacing of AWS APIs whose rates are account-wide (StartSession, FilterLogEvents).

A neutral home: the SSM client and the CloudWatch scan both pace their calls, and neither should
import the other to do so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class RateLimiter:
    """A thread-safe, first-come-first-served pacer: at most `rate` acquisitions per second after
    a `burst` (the generic cell rate algorithm: each caller reserves the next free start time).

    One instance is shared by every caller of a rate-limited API in this process (StartSession
    for the probes, FilterLogEvents for the log scan), so hundreds of calls stay under the
    account's rate instead of failing with throttling. Reservations keep the
    callers' order, so a batch of probes that asked first starts first: with a token bucket
    polled by sleepers, the last node of a batch waited for as long as every other caller's.
    """

    def __init__(
        self,
        rate: float,
        burst: int = 1,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._interval = 1.0 / rate
        # How far ahead of the steady pace a burst may run.
        self._tolerance = (max(1, burst) - 1) * self._interval
        # The theoretical time of the next start at the steady pace.
        self._next = clock()
        self._lock = threading.Lock()

    def _wait(self, now: float) -> tuple[float, float]:
        """Seconds until the next start may happen, and the pace marker after it."""
        due = max(self._next, now)
        # The epsilon absorbs float rounding of the steps (1/3 s steps never sum exactly).
        wait = max(0.0, due - self._tolerance - now)
        return (0.0 if wait < 1e-9 else wait), due + self._interval

    def acquire(self, deadline: float | None = None) -> bool:
        """Reserve the next free start and wait for it; False (reserving nothing) when it would
        not come before `deadline`."""
        with self._lock:
            now = self._clock()
            wait, after = self._wait(now)
            if deadline is not None and now + wait > deadline:
                return False
            self._next = after
        if wait:
            self._sleep(wait)
        return True
