"""What changed between the open findings before a sweep and the issues the sweep found:
new, priority raised, resolved. Pure functions; the store and the notifier build on them.

A finding that was not re-evaluated (its check did not run, something it reads was left unread
by a degraded source, or every node it names was not probed this sweep) is *kept open*, never
resolved by absence: a dead collector must not announce that everything got better. A finding
whose check reported it SKIP this sweep is kept open whatever the rule says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from hyperpod_nccl.models.findings import Coverage, DegradedSource, Finding, Priority, Status

ChangeKind = Literal["new", "priority_raised", "resolved"]


class OpenFinding(BaseModel):
    """A finding that was open before this sweep, as the store remembers it."""

    fingerprint: str
    finding: Finding
    first_seen: datetime
    last_seen: datetime
    occurrences: int = 1


class Change(BaseModel):
    """One change worth telling on-call about."""

    kind: ChangeKind
    fingerprint: str
    finding: Finding
    previous_priority: Priority | None = None
    first_seen: datetime | None = None
    occurrences: int = 1


class SweepDiff(BaseModel):
    """The outcome of one sweep as the notifier sees it."""

    sweep_id: str
    cluster: str
    region: str
    cluster_arn: str | None = None
    started_at: datetime
    finished_at: datetime | None = None
    changes: list[Change] = Field(default_factory=list)
    open_by_priority: dict[str, int] = Field(default_factory=dict)
    coverage: Coverage = Field(default_factory=Coverage)
    degraded_sources: list[DegradedSource] = Field(default_factory=list)
    kept_open: list[str] = Field(default_factory=list)
    failure: str | None = None
    delivered_late: bool = Field(
        default=False, description="sent by a later sweep because the alerts topic failed when it was due"
    )
    new_permission_gaps: list[str] = Field(
        default_factory=list,
        description="IAM actions denied this sweep and not the one before: the monitor went blind there",
    )

    @property
    def worth_notifying(self) -> bool:
        """Something changed, the sweep could not run, or the monitor lost a permission."""
        return bool(self.changes) or self.failure is not None or bool(self.new_permission_gaps)

    def of_kind(self, kind: ChangeKind) -> list[Change]:
        """The changes of one kind, most urgent first."""
        chosen = [c for c in self.changes if c.kind == kind]
        return sorted(chosen, key=lambda c: (_rank(c.finding.priority), c.finding.check_id, c.fingerprint))


def _rank(priority: Priority | None) -> int:
    return priority.rank if priority is not None else 3


def compute_changes(
    previous: Iterable[OpenFinding],
    current: Iterable[Finding],
    *,
    re_evaluated: Callable[[Finding], bool],
) -> tuple[list[Change], list[str]]:
    """Changes between the open findings before the sweep and the issues it found.

    Returns the changes and the fingerprints kept open because they were not re-evaluated.
    Only issues (FAIL/WARN) count; PASS/INFO findings never open anything, and a SKIP (the check
    could not tell) never resolves anything.
    """
    before = {item.fingerprint: item for item in previous}
    now: dict[str, Finding] = {}
    unknown: set[str] = set()
    for finding in current:
        if finding.is_issue:
            now.setdefault(finding.fingerprint, finding)
        elif finding.status is Status.SKIP:
            unknown.add(finding.fingerprint)
    changes: list[Change] = []
    for fingerprint, finding in now.items():
        old = before.get(fingerprint)
        if old is None:
            changes.append(Change(kind="new", fingerprint=fingerprint, finding=finding))
        elif _rank(finding.priority) < _rank(old.finding.priority):
            changes.append(
                Change(
                    kind="priority_raised",
                    fingerprint=fingerprint,
                    finding=finding,
                    previous_priority=old.finding.priority,
                    first_seen=old.first_seen,
                    occurrences=old.occurrences + 1,
                )
            )
    kept_open: list[str] = []
    for fingerprint, old in before.items():
        if fingerprint in now:
            continue
        if fingerprint not in unknown and re_evaluated(old.finding):
            changes.append(
                Change(
                    kind="resolved",
                    fingerprint=fingerprint,
                    finding=old.finding,
                    first_seen=old.first_seen,
                    occurrences=old.occurrences,
                )
            )
        else:
            kept_open.append(fingerprint)
    return changes, sorted(kept_open)


def open_counts(findings: Iterable[Finding]) -> dict[str, int]:
    """Open issues by priority ("P0".."P2", "none" for unprioritised), deduplicated by fingerprint."""
    seen: dict[str, Finding] = {}
    for finding in findings:
        if finding.is_issue:
            seen.setdefault(finding.fingerprint, finding)
    counts = {p.value: 0 for p in Priority}
    for finding in seen.values():
        key = finding.priority.value if finding.priority else "none"
        counts[key] = counts.get(key, 0) + 1
    return counts
