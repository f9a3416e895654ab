"""The text report's details follow the verdict (issue 14, point 4): on every shipped scenario, each
root cause gets a block numbered as in the verdict, in verdict order, holding its own findings and
then each symptom it explains; every FAIL/WARN finding is in exactly one block (a long group shown
as its first few and a count of the rest); what could not be checked follows, and INFO and PASS
come last (a partial diagnosis too: its unread sources, then its SKIP lines)."""

from __future__ import annotations

import io
import re
from collections import Counter
from dataclasses import dataclass, field

import pytest

from hyperpod_nccl.cli.render import MAX_SHOWN_FINDINGS, VERDICT_DETAILED_CAUSES, TextReport
from hyperpod_nccl.engine import diagnose
from hyperpod_nccl.models.findings import Finding, Scope, Status, SweepResult
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.sanitize import one_line
from hyperpod_nccl_sim.scenario import FaultSpec, available_scenarios, load_scenario

CAUSE_HEADING = re.compile(r"^== (?P<number>\d+)\. (?P<priority>P\d) (?P<title>.*)  \[(?P<scope>\w+)\] ==$")
# Our own finding lines start at column 0 or, under a root cause, at column 4; a finding's detail and
# evidence lines start at column 7 or further, so no cluster value can match here.
FINDING_LINE = re.compile(r"^(?: {4})?\[(?P<status>FAIL|WARN|INFO|PASS|SKIP)\] ")
MORE = re.compile(r"^ {4}… and (?P<count>\d+) more ")
# The order of the sections after the verdict: root causes, then what was not read, then INFO/PASS.
SECTION_RANK = {"cause": 0, "unread": 1, "skip": 2, "last": 3}
# Two reads denied: the log scan and the security groups, whose checks then print SKIP.
DENIED = [
    FaultSpec(operation="logs:FilterLogEvents", error_code="AccessDeniedException", message="not allowed"),
    FaultSpec(operation="ec2:DescribeSecurityGroups", error_code="UnauthorizedOperation", http_status=403),
]


@dataclass
class Group:
    """A root cause's own findings (`evidence`) or one symptom it explains."""

    heading: str
    findings: list[str] = field(default_factory=list)
    more: int = 0


@dataclass
class Section:
    """One `== ... ==` section of the details: a root cause, or one of the sections after them."""

    heading: str
    kind: str
    groups: list[Group] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def finding_lines(self, *statuses: str) -> list[str]:
        return [line for line in self.lines if (m := FINDING_LINE.match(line)) and m["status"] in statuses]


def _kind(heading: str) -> str:
    if CAUSE_HEADING.match(heading):
        return "cause"
    if heading == "== Sources not fully read ==":
        return "unread"
    if heading.startswith("== Not checked"):
        return "skip"
    assert heading.endswith(": INFO and PASS =="), f"a section the layout does not know: {heading}"
    return "last"


def _sections(report: str) -> tuple[list[str], list[Section]]:
    """The verdict's lines, and the details: every section between the verdict and the summary."""
    after = report.split("\n==== Verdict ====\n", 1)[1].split("\n==== Summary ====\n", 1)[0]
    verdict: list[str] = []
    sections: list[Section] = []
    for line in after.splitlines():
        if line.startswith("== "):
            sections.append(Section(line, _kind(line)))
        elif not sections:
            verdict.append(line)
        elif line.startswith(("  evidence (", "  explains: ")):
            sections[-1].groups.append(Group(line))
            sections[-1].lines.append(line)
        else:
            sections[-1].lines.append(line)
            if sections[-1].groups and (more := MORE.match(line)):
                sections[-1].groups[-1].more = int(more["count"])
            elif sections[-1].groups and FINDING_LINE.match(line):
                sections[-1].groups[-1].findings.append(line.strip())
    return verdict, sections


def _line_of(finding: Finding) -> str:
    priority = f"{finding.priority.value} " if finding.priority and finding.is_issue else ""
    return f"[{finding.status.value}] {one_line(priority + finding.title)}"


# The detailed causes' lines (title, blocks, where, explains, pointer, first step) and the headings.
VERDICT_SCREEN_LINES = 6 * VERDICT_DETAILED_CAUSES + 5


def _assert_details_follow_the_verdict(result: SweepResult, report: str) -> None:
    verdict, sections = _sections(report)
    causes = result.verdict.root_causes
    # The verdict lists causes; no finding line comes before the details but the partial warning.
    assert [line for line in verdict if FINDING_LINE.match(line) and not line.startswith("[WARN] Partial: ")] == []
    ranks = [SECTION_RANK[s.kind] for s in sections]
    assert ranks == sorted(ranks), [s.heading for s in sections]
    # One screen: the first causes in full (a handful of lines each), every other in one line.
    numbered = [line for line in verdict if re.match(r"  \d+\. P\d ", line)]
    assert len(numbered) == len(causes), "every root cause is in the verdict"
    assert len(verdict) <= VERDICT_SCREEN_LINES + max(0, len(causes) - VERDICT_DETAILED_CAUSES), len(verdict)

    blocks = [s for s in sections if s.kind == "cause"]
    headings = [CAUSE_HEADING.match(s.heading).groupdict() for s in blocks]  # type: ignore[union-attr]
    expected = [
        {"number": str(n), "priority": c.priority.value, "title": one_line(c.title), "scope": c.scope}
        for n, c in enumerate(causes, 1)
    ]
    assert headings == expected, "one block per root cause, numbered and ordered as in the verdict"

    by_fingerprint: dict[str, list[Finding]] = {}
    for finding in result.issues:
        by_fingerprint.setdefault(finding.fingerprint, []).append(finding)
    shown = 0
    for cause, block in zip(causes, blocks, strict=True):
        groups = [("  evidence (", cause.evidence)] if cause.evidence else []
        groups += [(f"  explains: {one_line(s.title)} (", s.findings) for s in cause.explains]
        assert len(block.groups) == len(groups), block.heading
        assert all(g.heading.startswith(h) for g, (h, _) in zip(block.groups, groups, strict=True)), block.heading
        for group, (_, fingerprints) in zip(block.groups, groups, strict=True):
            owned = Counter(_line_of(f) for fp in set(fingerprints) for f in by_fingerprint[fp])
            assert not Counter(group.findings) - owned, f"{block.heading}: a line not of this group"
            assert len(group.findings) == min(len(fingerprints), MAX_SHOWN_FINDINGS), group
            assert len(group.findings) + group.more == len(fingerprints), group
            shown += len(group.findings) + group.more
        assert len(block.finding_lines("FAIL", "WARN")) == sum(len(g.findings) for g in block.groups)
    assert shown == len(result.issues), "every FAIL/WARN finding is in exactly one root cause's block"
    others = [s for s in sections if s.kind != "cause"]
    assert not [line for s in others if s.kind != "unread" for line in s.finding_lines("FAIL", "WARN")]

    skipped = [line for s in sections if s.kind == "skip" for line in s.finding_lines("SKIP")]
    last = [line for s in sections if s.kind == "last" for line in s.finding_lines("INFO", "PASS")]
    assert len(skipped) == sum(1 for f in result.findings if f.status is Status.SKIP)
    assert len(last) == sum(1 for f in result.findings if f.status in (Status.INFO, Status.PASS))
    assert all(not s.finding_lines("INFO", "PASS") for s in sections if s.kind != "last")


def _diagnosed(simulate, name: str, faults: list[FaultSpec] | None = None) -> tuple[SweepResult, str]:  # type: ignore[no-untyped-def]
    """The diagnosis of scenario `name` with every node probed, and its text report."""
    scenario = load_scenario(name)
    sim = simulate(scenario, faults=faults)
    request = DiagnoseRequest(cluster=scenario.cluster.name, region=scenario.region, scope=Scope(sample_nodes="all"))
    result = diagnose(request, sim.clients())
    out = io.StringIO()
    TextReport(out, colour=False).render(result)
    return result, out.getvalue()


@pytest.mark.parametrize("name", available_scenarios())
def test_the_details_follow_the_verdict(name: str, simulate) -> None:  # type: ignore[no-untyped-def]
    result, report = _diagnosed(simulate, name)
    _assert_details_follow_the_verdict(result, report)
    if load_scenario(name).planted_root_causes:
        assert result.verdict.root_causes, "a scenario with planted faults has root causes to detail"


def test_a_partial_diagnosis_lists_its_unread_sources_and_skips_after_the_causes(simulate) -> None:  # type: ignore[no-untyped-def]
    result, report = _diagnosed(simulate, "eks-p5", DENIED)
    assert result.degraded_sources and any(f.status is Status.SKIP for f in result.findings)
    _assert_details_follow_the_verdict(result, report)
    kinds = [s.kind for s in _sections(report)[1]]
    assert "unread" in kinds and "skip" in kinds
