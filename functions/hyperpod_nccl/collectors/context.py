"""The state one collection shares: the request, AWS clients, the clock and the sinks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hyperpod_nccl import thresholds
from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.models.findings import DegradedSource
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.pacing import StartPacer, filter_log_events_limiter, start_session_limiter

ProgressSink = Callable[[str], None]


def _no_progress(_: str) -> None:
    return None


@dataclass
class CollectionContext:
    """Passed to every collector; collectors append what they could not read to `degraded`."""

    request: DiagnoseRequest
    aws: AwsClients
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    progress: ProgressSink = _no_progress
    degraded: list[DegradedSource] = field(default_factory=list)
    # Probe role -> the monitor stack's Session document to probe with; a role without one uses
    # the AWS managed document. None: not decided yet (the CLI looks for a deployed stack).
    probe_documents: dict[str, str] | None = None
    # The most one node's probe session may return (the SSM client stops there, keeping what
    # arrived): the CLI's default, less in the monitor's ProbeNode Lambda.
    probe_output_max_bytes: int = thresholds.SSM_SESSION_MAX_OUTPUT_BYTES
    # The paces of the account-wide APIs this collection calls, shared by all its threads: by
    # default one in-process pacer each per collection, i.e. per diagnose run (StartSession's at
    # the request's `start_session_rate`); the monitor's states put the table-backed pacers every
    # sandbox shares here instead (monitor/shared_pacer.py).
    start_pacer: StartPacer = field(init=False)
    filter_pacer: StartPacer = field(default_factory=filter_log_events_limiter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.start_pacer = start_session_limiter(self.request.start_session_rate)

    @property
    def window_start(self) -> datetime:
        """Start of the look-back window (`--since`)."""
        return self.now - timedelta(seconds=self.request.scope.since_seconds)

    def degrade(self, source: DegradedSource) -> None:
        """Record a source that could not be read (thread-safe: collectors run in parallel)."""
        with self._lock:
            self.degraded.append(source)
