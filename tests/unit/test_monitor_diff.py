"""Diff semantics: new, priority raised, resolved, and never 'resolved' by not looking."""

from __future__ import annotations

from datetime import UTC, datetime

from hyperpod_nccl.models.findings import Finding, Priority, Resource, Status
from hyperpod_nccl.monitor.diff import OpenFinding, compute_changes, open_counts
from hyperpod_nccl.references import DBG_SECURITY_GROUPS

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _finding(check: str, node: str, priority: Priority, status: Status = Status.FAIL) -> Finding:
    return Finding(
        check_id=check,
        status=status,
        priority=priority,
        title=f"{check} on {node}",
        resources=[Resource(kind="node", id=node)],
        reference=DBG_SECURITY_GROUPS,
    )


def _open(finding: Finding) -> OpenFinding:
    return OpenFinding(fingerprint=finding.fingerprint, finding=finding, first_seen=T0, last_seen=T0, occurrences=2)


def test_new_raised_resolved_and_unchanged() -> None:
    same = _finding("a", "i-1", Priority.P1)
    raised_before = _finding("b", "i-2", Priority.P2)
    raised_now = _finding("b", "i-2", Priority.P0)
    gone = _finding("c", "i-3", Priority.P0)
    new = _finding("d", "i-4", Priority.P1)
    changes, kept = compute_changes(
        [_open(same), _open(raised_before), _open(gone)], [same, raised_now, new], re_evaluated=lambda f: True
    )
    kinds = {(c.kind, c.finding.check_id) for c in changes}
    assert kinds == {("priority_raised", "b"), ("resolved", "c"), ("new", "d")}
    raised = next(c for c in changes if c.kind == "priority_raised")
    assert raised.previous_priority is Priority.P2
    assert raised.occurrences == 3
    assert kept == []


def test_finding_not_re_evaluated_is_kept_open_not_resolved() -> None:
    gone = _finding("c", "i-3", Priority.P0)
    changes, kept = compute_changes([_open(gone)], [], re_evaluated=lambda f: False)
    assert changes == []
    assert kept == [gone.fingerprint]


def test_priority_lowered_or_pass_findings_are_not_news() -> None:
    before = _finding("a", "i-1", Priority.P0)
    lowered = _finding("a", "i-1", Priority.P2)
    passed = _finding("z", "i-9", Priority.P0, status=Status.PASS)
    changes, _ = compute_changes([_open(before)], [lowered, passed], re_evaluated=lambda f: True)
    assert changes == []


def test_open_counts_deduplicate_by_fingerprint() -> None:
    one = _finding("a", "i-1", Priority.P0)
    counts = open_counts([one, one, _finding("b", "i-1", Priority.P2)])
    assert counts == {"P0": 1, "P1": 0, "P2": 1}
