"""The details of the text report under each root cause stay one screen at any cluster size, most
urgent findings first, and no FAIL/WARN finding is dropped when a result's verdict does not fold it
(issue 14, point 4). The layout on every shipped scenario: tests/functional/test_report_layout.py."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from hyperpod_nccl.cli.render import MAX_SHOWN_FINDINGS, TextReport
from hyperpod_nccl.models.common import Priority, Resource, Status
from hyperpod_nccl.models.findings import Finding, SweepResult
from hyperpod_nccl.models.verdict import ExplainedSymptom, RootCause, Verdict
from hyperpod_nccl.references import OPS_REMEDIATIONS

NOW = datetime(2026, 12, 1, tzinfo=UTC)
WATCHDOG_NODES = 500


def _finding(title: str, node: str, status: Status = Status.FAIL, priority: Priority = Priority.P1) -> Finding:
    return Finding(
        check_id="logs.signatures",
        status=status,
        priority=priority,
        title=title,
        detail="rank=3, op=ALLREDUCE",
        resources=[Resource(kind="node", id=node)],
        reference=OPS_REMEDIATIONS,
    )


def _report(findings: list[Finding], verdict: Verdict) -> list[str]:
    result = SweepResult(
        cluster_name="c",
        region="us-west-2",
        started_at=NOW,
        window_start=NOW,
        window_end=NOW,
        findings=findings,
        verdict=verdict,
    )
    out = io.StringIO()
    TextReport(out, colour=False).render(result)
    return out.getvalue().splitlines()


def _block(lines: list[str], heading: str) -> list[str]:
    start = lines.index(heading)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("==")), len(lines))
    return lines[start + 1 : end]


def test_a_symptom_of_many_nodes_shows_its_most_urgent_findings_and_counts_the_rest() -> None:
    cause = _finding("sg-1 has no outbound self-referencing rule", "i-cause", priority=Priority.P0)
    timeouts = [
        _finding(f"NCCL collective timed out on i-{n:05d}", f"i-{n:05d}", Status.WARN) for n in range(WATCHDOG_NODES)
    ]
    # The one FAIL P0 comes last in the data: the details still show it first.
    timeouts[-1] = _finding("NCCL collective timed out on i-last", "i-last", Status.FAIL, Priority.P0)
    root = RootCause(
        id=RootCause.make_id("security_group_self_reference", "cluster"),
        kind="security_group_self_reference",
        title="Security group blocks traffic between the cluster's nodes",
        priority=Priority.P0,
        scope="cluster",
        anchor="cluster",
        reference=OPS_REMEDIATIONS,
        why="every collective between nodes",
        evidence=[cause.fingerprint],
        explains=[
            ExplainedSymptom(
                kind="collective_hang",
                title="NCCL collectives timed out",
                why="the group drops traffic between the job's nodes",
                findings=[f.fingerprint for f in timeouts],
            )
        ],
    )
    lines = _report([cause, *timeouts], Verdict(root_causes=[root], findings_folded=1 + WATCHDOG_NODES))

    block = _block(lines, "== 1. P0 Security group blocks traffic between the cluster's nodes  [cluster] ==")
    labelled = [line for line in block if line.startswith("    [")]
    assert len(labelled) == 1 + MAX_SHOWN_FINDINGS
    assert labelled[1] == "    [FAIL] P0 NCCL collective timed out on i-last"
    assert f"  explains: NCCL collectives timed out ({WATCHDOG_NODES} finding(s))" in block
    assert "    why: the group drops traffic between the job's nodes" in block
    more = WATCHDOG_NODES - MAX_SHOWN_FINDINGS
    assert f"    … and {more} more finding(s) like these (--format json lists every one)" in block
    assert len(block) < 30, "one screen, whatever the number of nodes"


def test_findings_a_verdict_does_not_fold_are_shown_not_lost() -> None:
    findings = [_finding("EFA device missing on i-1", "i-1"), _finding("EFA device missing on i-2", "i-2", Status.WARN)]
    lines = _report(findings, Verdict())
    block = _block(lines, "== Findings no root cause accounts for ==")
    assert "    [FAIL] P1 EFA device missing on i-1" in block
    assert "    [WARN] P1 EFA device missing on i-2" in block
