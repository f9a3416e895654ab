"""The node's clock (original host-info row; issue 17, point 7): read with `date -u +%s` during the
session and judged against the collector's clock at the session's start and end."""

from __future__ import annotations

from hyperpod_nccl.checks import discover
from hyperpod_nccl.models.findings import Priority, Status
from hyperpod_nccl.probe.parsers import parse_node_probe
from hyperpod_nccl.probe.sections import NodeSection, begin_line, end_line
from hyperpod_nccl.references import NODE_CLOCK
from tests.builders import probed_node

CHECKS = discover()
STARTED, ANSWERED = 1_765_000_000.0, 1_765_000_012.5


def _clock(reading: str):  # type: ignore[no-untyped-def]
    probe = parse_node_probe("\n".join([begin_line(NodeSection.CLOCK), reading, end_line(NodeSection.CLOCK, 0)]))
    return CHECKS["node.clock"].run(probed_node(probe, started_at=STARTED, answered_at=ANSWERED))


def test_a_reading_inside_the_session_is_in_sync() -> None:
    assert [f.status for f in _clock("1765000006")] == [Status.PASS]
    assert [f.status for f in _clock("1765000013")] == [Status.PASS]  # date drops the fraction


def test_a_skewed_clock_warns_and_past_munges_lifetime_fails() -> None:
    (drift,) = _clock("1765000060")
    assert (drift.status, drift.priority, drift.reference) == (Status.WARN, Priority.P2, NODE_CLOCK)
    assert drift.fields["clock_skew_seconds"] == 48 and "ahead of" in drift.title
    (off,) = _clock("1764999000")
    assert (off.status, off.priority) == (Status.FAIL, Priority.P1) and "1000 s behind" in off.title


def test_an_unreadable_clock_says_nothing() -> None:
    assert _clock("date: invalid date") == []
    assert _clock("$(reboot)") == []
