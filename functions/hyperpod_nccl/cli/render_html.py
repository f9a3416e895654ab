"""The HTML report (`--format html`): one self-contained page per run.

The verdict first (root causes in the order to act on them, each with its runbook section linked
and its plan), then each cause's timeline over the diagnosis window, then the node grid (every node
by check family, by instance group, worst node first), what could not be read, the suggested
commands exactly as the text report prints them, and every other finding.

Self-contained: no script, no font, no image, no request; a Content-Security-Policy that forbids
loading anything makes that hold even if a value slipped through. Every cluster value goes through
`sanitize.for_html` where it is written. Links point only at our own runbooks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from hyperpod_nccl.cli.render import (
    COMMANDS_HEADER,
    MAX_SHOWN_FINDINGS,
    VERDICT_DETAILED_CAUSES,
    IssuesByFingerprint,
    command_block,
    listed,
)
from hyperpod_nccl.models.common import parse_time
from hyperpod_nccl.models.findings import DegradedSource, Finding, Status, SweepResult
from hyperpod_nccl.models.verdict import RootCause
from hyperpod_nccl.references import REFERENCES_URL, Reference, section_heading
from hyperpod_nccl.sanitize import for_html
from hyperpod_nccl.verdict.grid import Cell, GroupGrid, NodeGrid, node_grid

# What each cell value is called in the legend and the tooltips.
CELL_LABELS: dict[str, str] = {
    "FAIL": "FAIL",
    "WARN": "WARN",
    "SKIP": "SKIP: could not tell (not reached, or its input not read)",
    "INFO": "INFO",
    "PASS": "PASS: read, nothing found",
    "not_probed": "not probed (outside the sample)",
    "unsaid": "no finding (nothing read node by node)",
}
# A finding's evidence shown under it, as in the text report.
_EVIDENCE_LINES = 5
# A timeline marker narrower than this share of the window is widened to it, so a single instant
# stays visible.
_MIN_MARK_PERCENT = 0.6

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
_STYLE = """
:root{--fail:#c62828;--warn:#ef8f00;--skip:#9e9e9e;--info:#1e88e5;--pass:#2e7d32;--np:#e6e9ec;--unsaid:#f7f8f9;
--ink:#1b1f23;--muted:#5f6b76;--line:#d8dde2;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
body{margin:0 auto;max-width:1500px;padding:16px 24px;color:var(--ink);line-height:1.4}
h1{font-size:1.4rem;margin:.2rem 0}h2{font-size:1.15rem;margin:1.6rem 0 .5rem;border-bottom:1px solid var(--line)}
h3{font-size:1rem;margin:.6rem 0 .3rem}
.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;font-size:.9rem;color:var(--muted)}
.meta b{color:var(--ink);font-weight:600}
.banner{padding:8px 12px;border-left:4px solid var(--warn);background:#fff6e5;margin:10px 0}
.readonly{font-size:.85rem;color:var(--muted)}
.cause{border:1px solid var(--line);border-left:6px solid var(--skip);border-radius:4px;padding:8px 12px;margin:8px 0}
.cause.compact{padding:2px 12px;margin:3px 0}.cause.compact h3{font-size:.92rem;margin:.2rem 0}
.cause.P0{border-left-color:var(--fail)}.cause.P1{border-left-color:var(--warn)}.cause.P2{border-left-color:var(--info)}
.badge{display:inline-block;font-weight:700;font-size:.8rem;padding:1px 6px;border-radius:3px;color:#fff;
background:var(--skip);margin-right:6px}
.badge.P0,.badge.FAIL{background:var(--fail)}.badge.P1,.badge.WARN{background:var(--warn)}
.badge.P2,.badge.INFO{background:var(--info)}.badge.PASS{background:var(--pass)}
.kv{font-size:.9rem;margin:2px 0}.kv span{color:var(--muted)}
pre{background:#f4f6f8;border:1px solid var(--line);padding:8px;overflow-x:auto;font-size:.82rem}
code,.id{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
details>summary{cursor:pointer;color:var(--muted)}
.finding{margin:4px 0 4px 10px;font-size:.9rem}.finding .ev{font-family:ui-monospace,monospace;font-size:.8rem;
color:var(--muted);white-space:pre-wrap;word-break:break-all;margin-left:14px}
.tl{display:grid;grid-template-columns:minmax(220px,28%) 1fr;gap:8px;align-items:center;margin:3px 0;font-size:.85rem}
.track{position:relative;height:14px;background:#f1f3f5;border-radius:3px}
.mark{position:absolute;top:1px;height:12px;border-radius:2px;background:var(--skip);opacity:.85}
.mark.FAIL{background:var(--fail)}.mark.WARN{background:var(--warn)}.mark.INFO{background:var(--info)}
.axis{display:flex;justify-content:space-between;font-size:.75rem;color:var(--muted);margin-left:calc(28% + 8px)}
.group{margin:10px 0 18px}.groupsum{font-size:.85rem;color:var(--muted)}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(285px,1fr));gap:1px 14px;margin-top:6px}
.row{display:flex;align-items:center;gap:2px;height:15px}
.row .id{font-size:11px;width:150px;overflow:hidden;white-space:nowrap;text-overflow:ellipsis}
.c{display:inline-block;width:12px;height:12px;border-radius:2px;background:var(--unsaid);border:1px solid #e3e6e9;
box-sizing:border-box}
.c.FAIL{background:var(--fail);border-color:var(--fail)}.c.WARN{background:var(--warn);border-color:var(--warn)}
.c.SKIP{background:repeating-linear-gradient(45deg,#bdbdbd 0 2px,#eee 2px 4px);border-color:#aaa}
.c.INFO{background:var(--info);border-color:var(--info)}.c.PASS{background:var(--pass);border-color:var(--pass)}
.c.not_probed{background:var(--np)}
.head{height:auto;align-items:flex-end}.head .h{writing-mode:vertical-rl;transform:rotate(180deg);font-size:10px;
width:12px;color:var(--muted)}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;font-size:.8rem;color:var(--muted);align-items:center}
.legend .c{vertical-align:middle;margin-right:4px}
footer{margin:2rem 0 1rem;font-size:.8rem;color:var(--muted)}
"""


def _e(value: object) -> str:
    return for_html(str(value))


def _time(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S} UTC" if value else "unknown"


def runbook_link(reference: Reference) -> str:
    """`references/<file> § <section> — <heading>`, linked to the published runbook section."""
    try:
        heading = section_heading(reference)
        url = reference.url(REFERENCES_URL)
    except FileNotFoundError:  # runbooks not installed here: the file's URL, no heading
        heading, url = None, f"{REFERENCES_URL}/{reference.file}"
    title = f"{reference.pointer} — {heading}" if heading else reference.pointer
    return f'<a href="{_e(url)}">{_e(title)}</a>'


def render_html(results: Sequence[SweepResult]) -> str:
    """One self-contained page with a report per result (the demo diagnoses several scenarios)."""
    title = ", ".join(r.cluster_name for r in results) or "no cluster"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>hyperpod-nccl: {_e(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
    ]
    for result in results:
        parts.extend(_report(result))
    parts.append(
        f'<footer>Runbooks: <a href="{_e(REFERENCES_URL)}">{_e(REFERENCES_URL)}</a> · generated by '
        "hyperpod-nccl (read-only: nothing on the cluster was changed)</footer>"
    )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def error_page(message: str, details: Iterable[str], fix: str) -> str:
    """The page `--format html` writes for a diagnosis that stopped (the exit code is unchanged)."""
    lines = "".join(f"<li>{_e(d)}</li>" for d in details)
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}"><title>hyperpod-nccl: stopped</title>'
        f"<style>{_STYLE}</style></head><body><h1>hyperpod-nccl: the diagnosis stopped</h1>"
        f'<div class="banner" data-error="1">{_e(message)}</div><ul>{lines}</ul><p>fix: {_e(fix)}</p></body></html>\n'
    )


def _report(result: SweepResult) -> list[str]:
    parts = [f'<section class="report" data-cluster="{_e(result.cluster_name)}">']
    parts += _header(result)
    parts += _verdict(result)
    parts += _timelines(result)
    parts += _grid(node_grid(result), result)
    parts += _degraded(result.degraded_sources)
    parts += _commands(result)
    parts += _other_findings(result)
    parts.append("</section>")
    return parts


def _header(result: SweepResult) -> list[str]:
    cov = result.coverage
    scope = result.scope
    scoped = [f"namespace={scope.namespace}" if scope.namespace else "", f"job={scope.job}" if scope.job else ""]
    scoped.append(f"node={scope.node}" if scope.node else "")
    orchestrator = result.orchestrator + (
        f" (EKS cluster {result.eks_cluster_name})" if result.eks_cluster_name else ""
    )
    rows = [
        ("Cluster", result.cluster_name + (f" ({result.cluster_arn})" if result.cluster_arn else "")),
        ("Region", result.region),
        ("Orchestrator", orchestrator),
        ("Scope", " ".join(s for s in scoped if s) or "whole cluster"),
        ("Window", f"{_time(result.window_start)} → {_time(result.window_end)}"),
        (
            "Nodes",
            f"{cov.nodes_total} total, {cov.nodes_probed} probed, {cov.nodes_unreachable} unreachable, "
            f"{cov.nodes_skipped} not probed",
        ),
    ]
    parts = [
        f"<h1>hyperpod-nccl diagnose: {_e(result.cluster_name)}</h1>",
        '<p class="readonly">READ-ONLY: nothing on the cluster was changed; every command below is for you to run.</p>',
        '<div class="meta">' + "".join(f"<b>{_e(k)}</b><span>{_e(v)}</span>" for k, v in rows) + "</div>",
    ]
    if cov.probe_access_note:
        parts.append(f'<div class="banner">{_e(cov.probe_access_note)}</div>')
    return parts


def _verdict(result: SweepResult) -> list[str]:
    causes = result.verdict.root_causes
    parts = ["<h2>Verdict</h2>"]
    if result.degraded_sources:
        parts.append(
            f'<div class="banner" data-partial="1">Partial: {len(result.degraded_sources)} source(s) not fully '
            "read (listed below): a cause only they would show is missing here.</div>"
        )
    if not causes:
        parts.append("<p>No root cause found in the data read.</p>")
        return parts
    parts.append(
        f"<p>{len(causes)} root cause(s) explain {result.verdict.findings_folded} finding(s); act in this order:</p>"
    )
    issues = IssuesByFingerprint(result.findings)
    for number, cause in enumerate(causes, 1):
        parts += _cause(number, cause, issues, detailed=number <= VERDICT_DETAILED_CAUSES)
    return parts


def _cause(number: int, cause: RootCause, issues: IssuesByFingerprint, *, detailed: bool) -> list[str]:
    """One root cause: the first few in full, the rest (as in the text verdict) one line each with
    their details folded, so that the first screen says what is broken and in what order."""
    where = [f"{r.kind} {r.id}" for r in cause.resources]
    compact = "" if detailed else " compact"
    parts = [
        f'<div class="cause {cause.priority.value}{compact}" id="{_e(cause.id)}" data-cause="{_e(cause.id)}">',
        f'<h3><span class="badge {cause.priority.value}">{cause.priority.value}</span>{number}. {_e(cause.title)} '
        f'<span class="readonly">[{_e(cause.scope)}: {_e(cause.anchor)}]</span>'
        + ("" if detailed else f" · {runbook_link(cause.reference)}")
        + "</h3>",
    ]
    if not detailed:
        parts.append("<details><summary>why, where and the evidence</summary>")
    parts.append(f'<div class="kv"><span>blocks:</span> {_e(cause.why)}</div>')
    if where:
        parts.append(f'<div class="kv"><span>where:</span> {_e(listed(where))}</div>')
    if cause.explains:
        explained = listed(f"{s.title} ({len(s.findings)})" for s in cause.explains)
        parts.append(f'<div class="kv"><span>explains:</span> {_e(explained)}</div>')
    parts.append(f'<div class="kv"><span>runbook:</span> {runbook_link(cause.reference)}</div>')
    first = next((step for step in cause.plan if step.command), None)
    if first is not None:
        parts.append(f'<div class="kv"><span>first step:</span> [{_e(first.stage)}] {_e(first.description)}</div>')
    evidence = issues.take(cause.evidence)
    symptoms = [(symptom, issues.take(symptom.findings)) for symptom in cause.explains]
    count = len(evidence) + sum(len(found) for _, found in symptoms)
    parts.append(f"<details><summary>evidence and what it explains ({count} finding(s))</summary>")
    parts += _findings(evidence)
    for symptom, found in symptoms:
        parts.append(
            f"<p><b>explains:</b> {_e(symptom.title)} ({len(found)})"
            + (f" — {_e(symptom.why)}" if symptom.why else "")
            + "</p>"
        )
        parts += _findings(found)
    parts.append("</details>" + ("" if detailed else "</details>") + "</div>")
    return parts


def _findings(findings: list[Finding], *, limit: int = MAX_SHOWN_FINDINGS) -> list[str]:
    parts = [_finding(f) for f in findings[:limit]]
    if len(findings) > limit:
        parts.append(
            f'<div class="finding readonly">… and {len(findings) - limit} more like these '
            "(--format json lists every one)</div>"
        )
    return parts


def _finding(finding: Finding) -> str:
    priority = f"{finding.priority.value} " if finding.priority and finding.is_issue else ""
    lines = [
        f'<div class="finding" data-fingerprint="{finding.fingerprint}">'
        f'<span class="badge {finding.status.value}">{finding.status.value}</span>{_e(priority + finding.title)}'
    ]
    if finding.detail:
        lines.append(f'<div class="ev">{_e(finding.detail)}</div>')
    lines += [f'<div class="ev">| {_e(line)}</div>' for line in finding.evidence[:_EVIDENCE_LINES]]
    if finding.status is not Status.PASS:
        lines.append(f'<div class="ev">→ {runbook_link(finding.reference)}</div>')
    return "".join(lines) + "</div>"


def _timelines(result: SweepResult) -> list[str]:
    causes = result.verdict.root_causes
    if not causes:
        return []
    start = result.window_start
    end = max(result.finished_at or result.window_end, result.window_end)
    span = max((end - start).total_seconds(), 1.0)
    by_fingerprint: dict[str, list[Finding]] = {}
    for finding in result.findings:
        by_fingerprint.setdefault(finding.fingerprint, []).append(finding)
    parts = [
        '<section id="timeline"><h2>Timeline</h2>',
        '<p class="readonly">When each root cause\'s findings were seen in the window (from the times in the data: '
        "log lines and cluster events); a cause with no time in its data was seen by this diagnosis.</p>",
    ]
    untimed_causes: list[str] = []
    for number, cause in enumerate(causes, 1):
        marks: list[str] = []
        untimed = 0
        for fingerprint in dict.fromkeys(cause.fingerprints):
            for finding in by_fingerprint.get(fingerprint, []):
                mark = _mark(finding, start, span)
                untimed += mark is None
                marks += [mark] if mark else []
        if not marks:
            untimed_causes.append(str(number))
            continue
        note = f" · and {untimed} finding(s) without a time" if untimed else ""
        earlier = f" · open since {_time(cause.first_seen)}" if cause.first_seen and cause.first_seen < start else ""
        parts.append(
            f'<div class="tl" data-cause="{_e(cause.id)}"><div>{number}. {cause.priority.value} '
            f'{_e(cause.title)}<span class="readonly">{_e(note + earlier)}</span></div>'
            f'<div class="track">{"".join(marks)}</div></div>'
        )
    if untimed_causes:
        parts.append(
            f'<p class="readonly" data-untimed="{len(untimed_causes)}">No time in the data of cause(s) '
            f"{', '.join(untimed_causes)}: seen by this diagnosis.</p>"
        )
    parts.append(f'<div class="axis"><span>{_e(_time(start))}</span><span>{_e(_time(end))}</span></div></section>')
    return parts


def _mark(finding: Finding, start: datetime, span: float) -> str | None:
    """A finding's stretch of the window (first to last seen) as a marker on its cause's track;
    None when its data has no time."""
    first = finding.first_seen
    last = parse_time(finding.fields.get("last_seen")) or first
    if first is None or last is None:
        return None
    left = min(max((first - start).total_seconds() / span * 100, 0.0), 100.0)
    right = min(max((last - start).total_seconds() / span * 100, left), 100.0)
    width = max(right - left, _MIN_MARK_PERCENT)
    left = min(left, 100.0 - width)
    label = f"{finding.title}: {_time(first)}" + (f" → {_time(last)}" if last != first else "")
    return (
        f'<span class="mark {finding.status.value}" style="left:{left:.2f}%;width:{width:.2f}%" '
        f'title="{_e(label)}"></span>'
    )


def _grid(grid: NodeGrid, result: SweepResult) -> list[str]:
    parts = [f'<section id="nodes"><h2>Nodes by check family ({len(result.nodes)} node(s))</h2>']
    if not result.nodes:
        parts.append("<p>No node list: ListClusterNodes was not read (see the sources not fully read).</p></section>")
        return parts
    legend = "".join(f'<span><span class="c {value}"></span>{_e(label)}</span>' for value, label in CELL_LABELS.items())
    parts.append(f'<div class="legend">{legend}</div>')
    parts.append(
        '<p class="readonly">Each row is a node, each square a family of checks (in the header\'s order); hover a '
        "square for its findings. Worst nodes first in each instance group.</p>"
    )
    for group in grid.groups:
        parts += _group(group, grid.families)
    parts.append("</section>")
    return parts


def _group(group: GroupGrid, families: tuple[str, ...]) -> list[str]:
    counts = ", ".join(f"{group.count(value)} with {value}" for value in ("FAIL", "WARN", "SKIP") if group.count(value))
    head = "".join(f'<span class="h">{_e(family)}</span>' for family in families)
    parts = [
        f'<div class="group" data-group="{_e(group.instance_group)}">',
        f'<h3>{_e(group.instance_group)} <span class="groupsum">{len(group.rows)} node(s)'
        + (f"; {_e(counts)}" if counts else "; no node with a FAIL, WARN or SKIP")
        + "</span></h3>",
        f'<div class="row head"><span class="id">node</span>{head}</div><div class="grid">',
    ]
    for row in group.rows:
        node = row.node
        label = " · ".join(filter(None, (node.instance_id, node.hostname, node.instance_type, node.status)))
        cells = "".join(_grid_cell(cell, family) for cell, family in zip(row.cells, families, strict=True))
        parts.append(
            f'<div class="row" data-node="{_e(node.instance_id)}"><span class="id" title="{_e(label)}">'
            f"{_e(node.instance_id)}</span>{cells}</div>"
        )
    parts.append("</div></div>")
    return parts


def _grid_cell(cell: Cell, family: str) -> str:
    tip = f"{family}: {CELL_LABELS[cell.value]}"
    if cell.titles:
        tip += " — " + "; ".join(cell.titles) + (f"; and {cell.more} more" if cell.more else "")
    return (
        f'<span class="c {cell.value}" data-family="{_e(family)}" data-status="{cell.value}" title="{_e(tip)}"></span>'
    )


def _degraded(sources: list[DegradedSource]) -> list[str]:
    if not sources:
        return []
    parts = ["<h2>Sources not fully read</h2><ul>"]
    for source in sources:
        pointer = f" ({runbook_link(source.reference)})" if source.reference else ""
        parts.append(f"<li><b>{_e(source.source)}</b>: {_e(source.reason)}<br>fix: {_e(source.fix)}{pointer}</li>")
    parts.append("</ul>")
    return parts


def _commands(result: SweepResult) -> list[str]:
    lines = command_block(result)
    if not lines:
        return []
    body = "\n".join(_e(line.removeprefix("  ")) for line in [f"  {COMMANDS_HEADER}", *lines])
    return ["<h2>Suggested commands (run yourself)</h2>", f'<pre class="commands">{body}</pre>']


def _other_findings(result: SweepResult) -> list[str]:
    issues = IssuesByFingerprint(result.findings)
    for cause in result.verdict.root_causes:
        issues.take(cause.fingerprints)
    unfolded = issues.left()
    rest = [f for f in result.findings if not f.is_issue]
    parts: list[str] = []
    if unfolded:
        parts.append("<h2>Findings no root cause accounts for</h2>")
        parts += _findings(unfolded, limit=len(unfolded))
    if rest:
        order = {Status.SKIP: 0, Status.INFO: 1, Status.PASS: 2}
        rest.sort(key=lambda f: (order.get(f.status, 3), f.check_id))
        parts.append(f"<details><summary>SKIP, INFO and PASS findings ({len(rest)})</summary>")
        parts += _findings(rest, limit=len(rest))
        parts.append("</details>")
    return parts
