"""Report rendering: the text report (the verdict, then each root cause's findings, then what could
not be checked, then INFO and PASS), and JSON with every field."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable
from typing import TextIO

from hyperpod_nccl.checks import REGISTRY, SOURCE_TITLES
from hyperpod_nccl.models.findings import DegradedSource, Finding, Priority, Status, SweepResult
from hyperpod_nccl.models.verdict import SCHEMA_VERSION, PlanStep, RootCause
from hyperpod_nccl.references import runbooks_line
from hyperpod_nccl.sanitize import one_line

PRIORITY_HEADINGS = {
    Priority.P0: "P0 — Fix immediately (blocks training)",
    Priority.P1: "P1 — Fix soon (degrades training)",
    Priority.P2: "P2 — Advisory",
}
# SKIP is dim: it is no result, neither good nor bad news.
# The verdict details this many causes (why, where, what they explain, the first step), then one
# line each: the first screen says what is broken and in what order on any cluster.
VERDICT_DETAILED_CAUSES = 5
_COLOURS = {Status.PASS: "32", Status.FAIL: "31", Status.WARN: "33", Status.INFO: "36", Status.SKIP: "2"}


def use_colour(stream: TextIO, disabled: bool = False) -> bool:
    """Colour only on a TTY, never with --no-color, a non-empty NO_COLOR (no-color.org: an empty
    one is unset) or TERM=dumb."""
    if disabled or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return stream.isatty()


class TextReport:
    """Writes a sweep result in the `[PASS] [FAIL] [WARN] [INFO] [SKIP]` style."""

    def __init__(self, stream: TextIO, colour: bool) -> None:
        self.stream = stream
        self.colour = colour

    def _label(self, status: Status) -> str:
        label = f"[{status.value}]"
        return f"\033[{_COLOURS[status]}m{label}\033[0m" if self.colour else label

    def _line(self, text: str = "", *, status: Status | None = None, indent: str = "") -> None:
        # Every line is written here. Its text (titles, evidence, host names: cluster data) goes
        # through `one_line` so that an escape sequence shows as `\x1b[...` and no value can start
        # a line of its own (a forged "[PASS]"); our own colour codes are added after it.
        label = f"{self._label(status)} " if status is not None else ""
        self.stream.write(f"{indent}{label}{one_line(text)}\n")

    def finding(self, finding: Finding, *, indent: str = "") -> None:
        """One finding: label, priority, title, detail, evidence, pointer."""
        priority = f"{finding.priority.value} " if finding.priority and finding.is_issue else ""
        self._line(f"{priority}{finding.title}", status=finding.status, indent=indent)
        if finding.detail:
            self._line(f"{indent}       {finding.detail}")
        for line in finding.evidence[:5]:
            self._line(f"{indent}       | {line}")
        if finding.status is not Status.PASS:
            self._line(f"{indent}       → {finding.reference.pointer}")

    def degraded(self, source: DegradedSource) -> None:
        """A source that could not be read."""
        self._line(f"{source.source}: {source.reason}", status=Status.WARN)
        pointer = f" ({source.reference.pointer})" if source.reference else ""
        self._line(f"       fix: {source.fix}{pointer}")

    def render(self, result: SweepResult) -> None:
        """The whole report: header, verdict, each root cause's details, sources not fully read,
        SKIP lines, INFO and PASS lines by source, summary, commands."""
        self._header(result)
        self._verdict(result)
        self._details(result)
        self._summary(result)
        self._commands(result)

    def _details(self, result: SweepResult) -> None:
        """Every FAIL/WARN finding once, under its root cause in verdict order; then what could not
        be read and the checks it left unsure; INFO and PASS last, where they cannot bury a fault."""
        issues = IssuesByFingerprint(result.findings)
        for number, cause in enumerate(result.verdict.root_causes, 1):
            self._cause_details(number, cause, issues)
        # Empty for a verdict built from these findings (it folds every one); shown rather than lost
        # for a result whose verdict was not.
        unfolded = issues.left()
        if unfolded:
            self._line()
            self._line("== Findings no root cause accounts for ==")
            self._compact(unfolded)
        if result.degraded_sources:
            self._line()
            self._line("== Sources not fully read ==")
            for degraded in result.degraded_sources:
                self.degraded(degraded)
        skipped = [f for f in result.findings if f.status is Status.SKIP]
        if skipped:
            self._line()
            self._line("== Not checked: what they read was not fully read ==")
            for finding in sorted(skipped, key=_source_rank):
                self.finding(finding)
        for source, title in SOURCE_TITLES.items():
            findings = [f for f in result.findings if f.status in _SHOWN_LAST and _source_of(f) == source]
            if not findings:
                continue
            self._line()
            self._line(f"== {title}: INFO and PASS ==")
            for finding in _ordered(findings):
                self.finding(finding)

    def _cause_details(self, number: int, cause: RootCause, issues: IssuesByFingerprint) -> None:
        """One root cause, numbered as in the verdict: its own findings, then each symptom it
        explains with the rule's sentence."""
        self._line()
        self._line(f"== {number}. {cause.priority.value} {cause.title}  [{cause.scope}] ==")
        evidence = issues.take(cause.evidence)
        if evidence:
            self._line(f"  evidence ({len(evidence)} finding(s)):")
            self._compact(evidence)
        for symptom in cause.explains:
            findings = issues.take(symptom.findings)
            self._line(f"  explains: {symptom.title} ({len(findings)} finding(s))")
            if symptom.why:
                self._line(f"    why: {symptom.why}")
            self._compact(findings)

    def _compact(self, findings: list[Finding]) -> None:
        """The most urgent `MAX_SHOWN_FINDINGS` findings, then how many more there are."""
        ordered = _ordered(findings)
        for finding in ordered[:MAX_SHOWN_FINDINGS]:
            self.finding(finding, indent=_FINDING_INDENT)
        if len(ordered) > MAX_SHOWN_FINDINGS:
            more = len(ordered) - MAX_SHOWN_FINDINGS
            self._line(f"{_FINDING_INDENT}… and {more} more finding(s) like these (--format json lists every one)")

    def _header(self, result: SweepResult) -> None:
        self._line("hyperpod-nccl diagnose (READ-ONLY: nothing on the cluster is changed)")
        self._line(f"Cluster:      {result.cluster_name}" + (f"  ({result.cluster_arn})" if result.cluster_arn else ""))
        orchestrator = result.orchestrator + (
            f"  (EKS cluster {result.eks_cluster_name})" if result.eks_cluster_name else ""
        )
        self._line(f"Region:       {result.region}")
        self._line(f"Orchestrator: {orchestrator}")
        scope = result.scope
        scoped = [f"namespace={scope.namespace}" if scope.namespace else "", f"job={scope.job}" if scope.job else ""]
        scoped += [f"node={scope.node}" if scope.node else ""]
        self._line(f"Scope:        {' '.join(s for s in scoped if s) or 'whole cluster'}")
        self._line(f"Window:       {result.window_start:%Y-%m-%d %H:%M:%S} → {result.window_end:%Y-%m-%d %H:%M:%S} UTC")

    def _verdict(self, result: SweepResult) -> None:
        """The root causes, in the order to act on them, each with where, why and the section."""
        causes = result.verdict.root_causes
        self._line()
        self._line("==== Verdict ====")
        if result.degraded_sources:
            self._line(
                f"Partial: {len(result.degraded_sources)} source(s) not fully read (listed below): "
                "a cause only they would show is missing here",
                status=Status.WARN,
            )
        if not causes:
            self._line("No root cause found in the data read.")
            return
        folded = result.verdict.findings_folded
        self._line(f"{len(causes)} root cause(s) explain {folded} finding(s); act in this order:")
        for number, cause in enumerate(causes, 1):
            if number > VERDICT_DETAILED_CAUSES:
                # Past the first few, one line each: the verdict stays one screen on a cluster
                # with dozens of causes, and each one's block below has the rest.
                self._line(
                    f"  {number}. {cause.priority.value} {cause.title}  [{cause.scope}]  → {cause.reference.pointer}"
                )
                continue
            self._line(f"  {number}. {cause.priority.value} {cause.title}  [{cause.scope}]")
            self._line(f"       blocks: {cause.why}")
            if cause.resources:
                self._line(f"       where: {listed(f'{r.kind} {r.id}' for r in cause.resources)}")
            if cause.explains:
                self._line(f"       explains: {listed(f'{s.title} ({len(s.findings)})' for s in cause.explains)}")
            self._line(f"       → {cause.reference.pointer}")
            first = next((step for step in cause.plan if step.command), None)
            if first is not None:
                self._line(f"       first step: [{first.stage}] {first.description}")
        if len(causes) > VERDICT_DETAILED_CAUSES:
            self._line(
                f"  (causes {VERDICT_DETAILED_CAUSES + 1} to {len(causes)} in one line each: every cause in full below)"
            )

    def _summary(self, result: SweepResult) -> None:
        cov = result.coverage
        issues = result.issues
        self._line()
        self._line("==== Summary ====")
        self._line(
            f"Nodes: {cov.nodes_total} total, {cov.nodes_probed} probed, "
            f"{cov.nodes_unreachable} unreachable, {cov.nodes_skipped} not probed"
        )
        if cov.probe_access_note:
            self._line(cov.probe_access_note, status=Status.WARN)
        if result.degraded_sources:
            self._line(f"Sources not fully read: {len(result.degraded_sources)} (the report is partial)")
        causes = result.verdict.root_causes
        self._line(f"Issues Found: {len(causes)} root cause(s), folding {len(issues)} finding(s) (Verdict above)")
        for priority in Priority:
            group = [c for c in causes if c.priority is priority]
            if not group:
                continue
            self._line()
            self._line(f"{PRIORITY_HEADINGS[priority]}: {len(group)}")
            for number, cause in enumerate(group, 1):
                folded = len(cause.fingerprints)
                self._line(
                    f"  {number}. [{cause.scope}] {cause.title} ({folded} finding(s)) → {cause.reference.pointer}"
                )
        if causes:
            self._line()
            self._line(runbooks_line())
        skipped = sum(1 for f in result.findings if f.status is Status.SKIP)
        if skipped:
            self._line(
                f"Skipped: {skipped} [SKIP] line(s), checks that could not tell: what they read was not fully read"
            )
        if not issues and (skipped or result.degraded_sources):
            self._line(
                "No issues found in the data that was read: this is no all-clear. Fix the sources not fully "
                "read (above) and re-run before concluding."
            )
        elif not issues:
            self._line(
                "No issues found. If training still fails: scan CloudWatch for NCCL WARN lines, "
                "compare versions across nodes, and prepare a support bundle."
            )

    def _commands(self, result: SweepResult) -> None:
        """Each root cause's plan, in verdict order, safest step first: shell lines as they are,
        YAML indented under the nesting path it belongs to, and every step that depends on the one
        before it (replace only if the recheck fails) commented out, so that pasting a whole block
        can never run it."""
        lines = command_block(result)
        if lines:
            self._line()
            self._line("Suggested commands (run yourself):")
            self._line(f"  {COMMANDS_HEADER}")
            for line in lines:
                self._line(line)


# The first line of the "Suggested commands (run yourself)" block, in every rendering.
COMMANDS_HEADER = (
    "# by root cause in verdict order, safest step first; steps that depend on the one before are commented out"
)


def command_block(result: SweepResult) -> list[str]:
    """The "Suggested commands (run yourself)" block of every rendering, each line indented by two
    spaces: each root cause with a command, in verdict order, its plan's steps (`plan_step_lines`)
    under a comment naming it, a blank line between causes."""
    lines: list[str] = []
    for number, cause in enumerate(result.verdict.root_causes, 1):
        if not any(step.command for step in cause.plan):
            continue
        if lines:
            lines.append("")
        lines.append(f"  # {number}. {cause.title} ({cause.priority.value}, {cause.reference.pointer})")
        for step in cause.plan:
            lines.extend(plan_step_lines(step))
    return lines


def plan_step_lines(step: PlanStep) -> list[str]:
    """One plan step as report lines (see `TextReport._commands`)."""
    lines = [f"  # [{step.stage}] {step.description}"]
    if step.precondition:
        lines.append(f"  #   precondition: {step.precondition}")
    if not step.command:
        return lines
    if step.language == "yaml":
        lines.append(f"  # YAML for {step.yaml_path or 'the pod spec'} of the job's manifest (not shell):")
        return lines + [f"      {part}" for part in step.command.split("\n")]
    text = (
        f"{step.session}\n# run inside the session, as root on the node:\n{step.command}"
        if step.session
        else (step.command)
    )
    if step.conditional:
        lines.append("  #   only if the step before says so; then run:")
        return lines + [f"  #   {part}" for part in text.split("\n")]
    return lines + [f"  {part}" for part in text.split("\n")]


# A verdict line lists this many resources or symptoms, then counts the rest.
MAX_LISTED = 6
# A root cause's details show this many of its own findings, and of each symptom it explains, then
# count the rest: the watchdog timeouts of 500 nodes' ranks stay a few lines.
MAX_SHOWN_FINDINGS = 3
# Where a finding's line starts under its root cause. Its detail and evidence lines start 7 columns
# further in, so a value that begins with a label ("[PASS] ...") can never line up with our own.
_FINDING_INDENT = "    "
# Shown after everything else, by source: they report no fault.
_SHOWN_LAST = frozenset({Status.INFO, Status.PASS})


def listed(items: Iterable[str]) -> str:
    """The first `MAX_LISTED` items, comma-separated, and how many more there are."""
    values = list(items)
    shown = ", ".join(values[:MAX_LISTED])
    return shown + (f" … and {len(values) - MAX_LISTED} more" if len(values) > MAX_LISTED else "")


def _source_of(finding: Finding) -> str:
    registered = REGISTRY.get(finding.check_id)
    if registered is not None:
        return registered.meta.source
    # The SKIP line of a source that was not collected is named after the source (engine.not_collected).
    return finding.check_id if finding.check_id in SOURCE_TITLES else "control_plane"


_SOURCE_ORDER: dict[str, int] = {source: rank for rank, source in enumerate(SOURCE_TITLES)}


def _source_rank(finding: Finding) -> int:
    return _SOURCE_ORDER[_source_of(finding)]


class IssuesByFingerprint:
    """The FAIL/WARN findings of a result, by fingerprint, each handed out once (two findings may
    share a fingerprint; the verdict then names it twice)."""

    def __init__(self, findings: Iterable[Finding]) -> None:
        self._left: dict[str, list[Finding]] = defaultdict(list)
        for finding in findings:
            if finding.is_issue:
                self._left[finding.fingerprint].append(finding)

    def take(self, fingerprints: Iterable[str]) -> list[Finding]:
        """The findings the fingerprints name that were not handed out yet."""
        taken = []
        for fingerprint in fingerprints:
            waiting = self._left.get(fingerprint)
            if waiting:
                taken.append(waiting.pop(0))
        return taken

    def left(self) -> list[Finding]:
        """The findings no `take` named."""
        return [finding for waiting in self._left.values() for finding in waiting]


_STATUS_ORDER = {Status.FAIL: 0, Status.WARN: 1, Status.INFO: 2, Status.SKIP: 3, Status.PASS: 4}


def _ordered(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (_STATUS_ORDER[f.status], f.priority.rank if f.priority else 3))


def render_json(result: SweepResult) -> str:
    """`report_document` as JSON text."""
    return json.dumps(report_document(result), indent=2, sort_keys=False)


def report_document(result: SweepResult) -> dict[str, object]:
    """Every field of the sweep result, its layout version first, plus the derived counts. Every
    `reference` carries its `pointer`; every finding its `fingerprint`, which the verdict's
    `evidence` and `explains[].findings` name."""
    dumped = result.model_dump(mode="json")
    for finding, entry in zip(result.findings, dumped["findings"], strict=True):
        entry["fingerprint"] = finding.fingerprint
    causes = result.verdict.root_causes
    document = {
        "schema_version": SCHEMA_VERSION,
        **dumped,
        "issues_found": len(causes),
        "findings_with_issues": len(result.issues),
        "issues_by_priority": {p.value: sum(1 for c in causes if c.priority is p) for p in Priority},
    }
    return document
