"""Alerts: turn a sweep (its finding diff and its root-cause changes) into an e-mail text and an
AWS Chatbot (Amazon Q Developer in chat applications) custom notification, and publish both in
one SNS message.

Two kinds of message: the sweep summary, in the cluster's thread, listing the root causes in
verdict order (`build_alert`); and one message per change of a root cause, in that cause's own
thread (`build_incident_alert`; which changes get one: `told_in_its_thread`).

SNS `MessageStructure="json"` carries one body per protocol: e-mail subscribers get the text,
every other subscriber (the Chatbot HTTPS endpoint, SQS) gets the custom-notification JSON.
The Chatbot format: `version` "1.0", `source` "custom", `content` (client-markdown title and
description, nextSteps, keywords) and `metadata` (threadId groups the messages of one thread).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from hyperpod_nccl.incidents.models import Incident, TimelineEntry
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.models.verdict import BLAST_RANK
from hyperpod_nccl.monitor.diff import Change, ChangeKind, SweepDiff
from hyperpod_nccl.monitor.incident_tracking import IncidentChange, IncidentSweep
from hyperpod_nccl.sanitize import email_subject, for_slack, one_line

# Listing every change of a large first sweep would exceed chat limits; the rest is counted.
MAX_DETAILED_CHANGES = 15
MAX_LISTED_CHANGES = 40
# The summary lists this many root causes (verdict order), then counts the rest; under each
# changed cause, this many of the finding changes it folds.
MAX_LISTED_CAUSES = 20
MAX_FINDINGS_PER_CAUSE = 5
# An incident message shows the latest timeline entries; the full story is in the table and CLI.
MAX_TIMELINE_ENTRIES = 15
# A change names this many resources, then counts the rest ("… and 912 more nodes").
MAX_LISTED_RESOURCES = 20
MAX_DEGRADED_LINES = 10
MAX_NEXT_STEPS = 10
# A suggested command longer than this is not put in chat's nextSteps (a cut command must never
# be offered to paste); the e-mail keeps it whole.
NEXT_STEP_MAX_CHARS = 1_000

# --- delivery limits: one definition each (the emulation refuses what AWS refuses) -------------
# SNS Publish: the message, with its attributes, is at most 256 KiB counted in UTF-8 bytes; with
# MessageStructure=json that is the whole JSON document, every protocol's body included.
SNS_MESSAGE_MAX_BYTES = 262_144
# Amazon Q Developer in chat applications (AWS Chatbot) custom notifications: a title of at most
# 250 characters, a description of at most 8,000 (the custom-notification schema's bounds as we
# know them; to be re-checked against the schema page when it changes). Slack's own limit on a
# message's text, 40,000 characters, is far above both.
CHATBOT_TITLE_MAX_CHARS = 250
CHATBOT_DESCRIPTION_MAX_CHARS = 8_000
# `metadata.threadId`: the custom-notifications page (docs.aws.amazon.com/chatbot/latest/adminguide/
# custom-notifs.html, "Parameter details") documents it as an optional string whose notifications
# are grouped in one thread when the channel's preferences allow threads; it states no length or
# alphabet. Ours stay within the bounds the same service documents for its notification names
# (CustomActionAttachment.NotificationType: 1 to 100 characters of `[a-zA-Z0-9-]`), so no cluster
# name can make a thread id the service refuses or reads differently (`_bounded_thread_id`).
CHATBOT_THREAD_ID_MAX_CHARS = 100
_THREAD_ID = re.compile(rf"[A-Za-z0-9-]{{1,{CHATBOT_THREAD_ID_MAX_CHARS}}}")
# E-mail body: Gmail clips a message body over 102 KB behind a link, other clients slow down.
EMAIL_MAX_BYTES = 100_000
# SNS error codes that the same message gets again on every retry (SNS refused the message
# itself); throttling, outages, KMS and permission errors pass or get fixed, and are retried.
PERMANENT_PUBLISH_ERRORS = ("InvalidParameter", "InvalidParameterValue")
INCIDENT_EVENT_TYPES = {
    "new": "HyperPodNcclIncidentOpened",
    "changed": "HyperPodNcclIncidentUpdated",
    "resolved": "HyperPodNcclIncidentResolved",
}
# The sweep summary's event types (metadata.eventType).
SWEEP_EVENT_TYPES = {
    "failed": "HyperPodNcclSweepFailed",
    "baseline": "HyperPodNcclBaseline",
    "changed": "HyperPodNcclFindingsChanged",
}
URGENT = (Priority.P0, Priority.P1)
_ID_KINDS = ("node", "pod", "security_group", "k8s_node", "slurm_node", "gpu", "instance_group", "namespace")


# Every e-mail ends with it: suggested commands are for a person to run, never run by us.
READ_ONLY_FOOTER = "hyperpod-nccl is read-only: it never runs the suggested commands. Check preconditions first."


class ChatbotContent(BaseModel):
    """`content` of a custom notification."""

    textType: Literal["client-markdown"] = "client-markdown"
    title: str
    description: str
    nextSteps: list[str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class ChatbotMetadata(BaseModel):
    """`metadata` of a custom notification."""

    threadId: str
    summary: str
    eventType: str
    relatedResources: list[str] = Field(default_factory=list)
    additionalContext: dict[str, str] = Field(default_factory=dict)


class ChatbotNotification(BaseModel):
    """An AWS Chatbot / Amazon Q Developer custom notification."""

    version: Literal["1.0"] = "1.0"
    source: Literal["custom"] = "custom"
    id: str
    content: ChatbotContent
    metadata: ChatbotMetadata


class Alert(BaseModel):
    """Everything one notification says, in both renderings."""

    subject: str
    email: str
    chatbot: ChatbotNotification


def _bounded_thread_id(*parts: str) -> str:
    """`hyperpod-nccl-<parts>` when that is a valid thread id (CHATBOT_THREAD_ID_MAX_CHARS), else
    `hyperpod-nccl-` and a digest of the parts: the same parts always give the same id."""
    readable = "-".join(("hyperpod-nccl", *parts))
    if _THREAD_ID.fullmatch(readable):
        return readable
    return "hyperpod-nccl-" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:40]


def thread_id(region: str, cluster: str) -> str:
    """The cluster's chat thread, where its sweep summaries stack instead of flooding the channel."""
    return _bounded_thread_id(region, cluster)


def root_cause_thread_id(region: str, cluster: str, cause_id: str) -> str:
    """One chat thread per root cause: the cause's id (the verdict's, stable across sweeps) in its
    cluster, so that every message about the cause (opened, updated, resolved) lands in one thread
    and two clusters' causes never share one."""
    return _bounded_thread_id(region, cluster, cause_id)


def told_in_its_thread(change: IncidentChange) -> bool:
    """Whether a root cause's change gets a message of its own, in the cause's thread.

    The rule: a cause that is P0 or P1 now, or was when last stored, is told in its own thread
    (so an urgent cause that drops to P2 or resolves closes its thread). A P2 cause, an advisory,
    is told only in the sweep summary, marked NEW, WORSE or RESOLVED there: it opens no thread and
    notifies nobody on its own at 3 a.m. A P2 cause raised to P1 or P0 opens its thread with that
    update (`opens_its_thread`)."""
    return change.incident.priority in URGENT or change.previous_priority in URGENT


def opens_its_thread(change: IncidentChange) -> bool:
    """The change is the first message of its cause's thread: a new cause, or an update that made
    a P2 cause urgent (its thread starts there, so the message tells the whole story)."""
    if change.kind == "changed" and change.previous_priority is not None:
        return change.previous_priority not in URGENT
    return change.kind == "new"


def verdict_order(incident: Incident) -> tuple[int, int, int, str, str]:
    """The verdict's order of root causes (its rank), then priority and blast radius for causes
    stored without one."""
    return (incident.verdict_rank, incident.priority.rank, BLAST_RANK[incident.scope], incident.title, incident.id)


def summary_due(diff: SweepDiff, incidents: IncidentSweep | None) -> bool:
    """The sweep summary is sent when the findings changed, the sweep failed or the monitor lost a
    permission (`SweepDiff.worth_notifying`); on a baseline with a root cause open; and when a
    root cause without a thread of its own (`told_in_its_thread`) is new, worse or resolved."""
    if diff.worth_notifying:
        return True
    if incidents is None:
        return False
    if incidents.baseline and incidents.incidents:
        return True
    return any(not told_in_its_thread(c) and (c.kind != "changed" or c.worse) for c in incidents.changes)


def resource_ids(finding: Finding) -> list[str]:
    """The node/pod/SG/... ids a finding names, as `kind id` strings."""
    picked: list[Resource] = [r for r in finding.resources if r.kind in _ID_KINDS]
    return [f"{r.kind} {r.id}" + (f" ({r.name})" if r.name and r.name != r.id else "") for r in picked]


_KIND_PLURAL = {
    "node": "nodes",
    "pod": "pods",
    "security_group": "security groups",
    "k8s_node": "Kubernetes nodes",
    "slurm_node": "Slurm nodes",
    "gpu": "GPUs",
    "instance_group": "instance groups",
    "namespace": "namespaces",
}


def more_count(counts: dict[str, int]) -> str:
    """What a cut list left out, with the exact count per kind: "… and 912 more nodes, 1 more pod"."""
    parts = [
        f"{n} more {_KIND_PLURAL.get(kind, kind) if n != 1 else kind.replace('_', ' ')}" for kind, n in counts.items()
    ]
    return "… and " + ", ".join(parts)


def listed_resources(finding: Finding, limit: int = MAX_LISTED_RESOURCES) -> str:
    """The ids a finding names, the first `limit` of them, then the count of the rest by kind."""
    ids = resource_ids(finding)
    if len(ids) <= limit:
        return ", ".join(ids)
    rest: dict[str, int] = {}
    for resource in [r for r in finding.resources if r.kind in _ID_KINDS][limit:]:
        rest[resource.kind] = rest.get(resource.kind, 0) + 1
    return ", ".join(ids[:limit]) + " " + more_count(rest)


class _Markup(str):
    """A line of our own chat markup (bold, link, code fence) whose cluster values were escaped
    when it was built; `_escaped` passes it through, every other line is escaped there."""


def _chat(value: str) -> str:
    """A cluster value inside one line of our chat markup."""
    return for_slack(one_line(value))


def _escaped(lines: list[str], *, markdown: bool) -> list[str]:
    """The body lines as they may be sent: cluster text in them (titles, evidence, names) shows
    its control characters escaped and cannot start a line of its own; in chat, it also cannot
    form a mention, a link or a code fence. Escaping is idempotent, so a line escaped twice is
    unchanged."""
    if not markdown:
        return [one_line(line) for line in lines]
    return [line if isinstance(line, _Markup) else _chat(line) for line in lines]


def _priority(finding: Finding) -> str:
    return finding.priority.value if finding.priority else "--"


@dataclass(frozen=True)
class _Causes:
    """The root causes a sweep summary lists: the open ones in verdict order, then those resolved
    this sweep, with each one's change (if any) and the finding changes no listed cause folds."""

    baseline: bool
    open: list[Incident]
    resolved: list[Incident]
    changes: dict[str, IncidentChange]
    folded: dict[str, list[Change]]
    unfolded: list[Change]

    @classmethod
    def of(cls, sweep: IncidentSweep, diff: SweepDiff) -> _Causes:
        """The view of `sweep`'s root causes and `diff`'s finding changes."""
        resolved = sorted((c.incident for c in sweep.changes if c.kind == "resolved"), key=verdict_order)
        listed = [*sorted(sweep.incidents, key=verdict_order), *resolved]
        by_fingerprint = {c.fingerprint: c for c in diff.changes}
        folded = {i.id: [by_fingerprint[f] for f in i.finding_fingerprints if f in by_fingerprint] for i in listed}
        explained = {c.fingerprint for changes in folded.values() for c in changes}
        return cls(
            baseline=sweep.baseline,
            open=listed[: len(listed) - len(resolved)],
            resolved=resolved,
            changes={c.incident.id: c for c in sweep.changes},
            folded=folded,
            unfolded=[c for c in diff.changes if c.fingerprint not in explained],
        )

    def of_kind(self, kind: str, *, worse: bool = False) -> list[IncidentChange]:
        """The cause changes of one kind (`worse`: only those that made a cause worse)."""
        return [c for c in self.changes.values() if c.kind == kind and (c.worse or not worse)]

    def mark(self, incident: Incident) -> str:
        """NEW, WORSE, UPDATED or RESOLVED; nothing for an unchanged cause, or a new one in a
        baseline (where every cause is new to the channel)."""
        change = self.changes.get(incident.id)
        if change is None or (change.kind == "new" and self.baseline):
            return ""
        if change.kind == "changed":
            return "WORSE" if change.worse else "UPDATED"
        return change.kind.upper()

    def to_act_on(self) -> list[Incident]:
        """The urgent open causes that are news: new or worse (every urgent one in a baseline)."""
        return [i for i in self.open if i.priority in URGENT and (self.baseline or self.mark(i) in ("NEW", "WORSE"))]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _folded_count(incident: Incident) -> int:
    """The findings a cause accounts for (a cause stored before the count existed: its fingerprints)."""
    return incident.findings_folded or len(incident.finding_fingerprints)


def _causes_phrase(incidents: list[Incident]) -> str:
    """The phrase "N root causes (folding M findings)"."""
    folded = sum(_folded_count(i) for i in incidents)
    return f"{_plural(len(incidents), 'root cause')} (folding {_plural(folded, 'finding')})"


def _headline(diff: SweepDiff, causes: _Causes | None) -> str:
    late = f" (delayed: sweep of {diff.started_at:%Y-%m-%d %H:%M} UTC)" if diff.delivered_late else ""
    return _what_happened(diff, causes) + late


def _what_happened(diff: SweepDiff, causes: _Causes | None) -> str:
    if diff.failure is not None:
        return f"HyperPod {diff.cluster}: sweep could not run"
    if causes is not None and causes.baseline:
        parts = [f"baseline, {_causes_phrase(causes.open)} open" if causes.open else "baseline, no root cause open"]
    else:
        parts = (_cause_parts(causes) if causes is not None else []) or _finding_parts(diff)
    if diff.new_permission_gaps:
        parts.append(f"monitor denied {', '.join(diff.new_permission_gaps)}")
    return f"HyperPod {diff.cluster}: " + ", ".join(parts)


def _cause_parts(causes: _Causes) -> list[str]:
    parts = []
    new, worse, resolved = causes.of_kind("new"), causes.of_kind("changed", worse=True), causes.of_kind("resolved")
    if new:
        urgent = sum(1 for c in new if c.incident.priority in URGENT)
        parts.append(f"{_plural(len(new), 'new root cause')}" + (f" ({urgent} P0/P1)" if urgent else ""))
    if worse:
        parts.append(f"{len(worse)} worse")
    if resolved:
        parts.append(f"{len(resolved)} resolved")
    return parts


def _finding_parts(diff: SweepDiff) -> list[str]:
    parts = []
    new = diff.of_kind("new")
    raised = diff.of_kind("priority_raised")
    resolved = diff.of_kind("resolved")
    if new:
        urgent = sum(1 for c in new if c.finding.priority in URGENT)
        parts.append(f"{_plural(len(new), 'new finding')}" + (f" ({urgent} P0/P1)" if urgent else ""))
    if raised:
        parts.append(f"{_plural(len(raised), 'finding')} priority raised")
    if resolved:
        parts.append(f"{_plural(len(resolved), 'resolved finding')}")
    return parts


def _counts_line(diff: SweepDiff) -> str:
    counts = ", ".join(f"{key} {value}" for key, value in diff.open_by_priority.items() if value)
    return f"Open issues by priority: {counts or 'none'}"


def _causes_line(causes: _Causes) -> str:
    by_priority = {p: sum(1 for i in causes.open if i.priority is p) for p in Priority}
    counts = ", ".join(f"{p.value} {n}" for p, n in by_priority.items() if n)
    return f"Open: {_causes_phrase(causes.open)}" + (f"; {counts}" if counts else "")


def _coverage_line(diff: SweepDiff) -> str:
    cov = diff.coverage
    return (
        f"Coverage: {cov.nodes_probed}/{cov.nodes_total} nodes probed, {cov.nodes_unreachable} unreachable, "
        f"{cov.nodes_skipped} skipped"
    )


_CHANGE_ORDER: tuple[ChangeKind, ...] = ("new", "priority_raised", "resolved")
_CHANGE_LABELS: dict[ChangeKind, str] = {"new": "NEW", "priority_raised": "RAISED", "resolved": "RESOLVED"}


def _brief_line(change: Change) -> str:
    """One finding change on one line: label, priority, title and the ids it names."""
    ids = listed_resources(change.finding)
    return f"[{_CHANGE_LABELS[change.kind]}] [{_priority(change.finding)}] {change.finding.title}" + (
        f" ({ids})" if ids else ""
    )


def _detail_lines(change: Change, base_url: str, *, markdown: bool) -> list[str]:
    finding = change.finding
    head = f"[{_CHANGE_LABELS[change.kind]}] [{_priority(finding)}] {finding.title}"
    if change.kind == "priority_raised" and change.previous_priority:
        head += f" (was {change.previous_priority.value})"
    link = finding.reference.url(base_url)
    lines = [_Markup(f"*{_chat(head)}*") if markdown else head]
    ids = listed_resources(finding)
    if ids:
        lines.append(("  Resources: " if not markdown else "Resources: ") + ids)
    if markdown:
        lines.append(_Markup(f"Runbook: <{for_slack(link)}|{_chat(finding.reference.pointer)}>"))
    else:
        lines.append(f"  Runbook: {finding.reference.pointer} - {link}")
    if change.kind != "resolved":
        for command in finding.suggested_commands:
            if markdown:
                # Inside the fence a newline is harmless: the command keeps its own lines.
                lines.append(_Markup(f"{_chat(command.description)}:\n```{for_slack(command.text)}```"))
            else:
                lines.append(f"  Suggested ({command.description}): {command.text}")
                if command.preconditions:
                    lines.append(f"    Preconditions: {command.preconditions}")
                if command.blast_radius:
                    lines.append(f"    Blast radius: {command.blast_radius}")
    return lines


def _is_detailed(change: Change) -> bool:
    """New or raised P0/P1 findings get ids, link and commands; the rest a one-line mention."""
    return change.kind in ("new", "priority_raised") and change.finding.priority in URGENT


def _runbook_line(incident: Incident, base_url: str, *, markdown: bool, indent: str = "") -> str:
    reference = incident.root_cause.reference
    link = reference.url(base_url)
    if markdown:
        return _Markup(f"Runbook: <{for_slack(link)}|{_chat(reference.pointer)}>")
    return f"{indent}Runbook: {reference.pointer} - {link}"


def _cause_lines(position: str, incident: Incident, causes: _Causes, base_url: str, *, markdown: bool) -> list[str]:
    """A root cause in the summary: its head line (place, mark, priority, scope, title, findings
    folded); when it is news (or in a baseline), its first step, runbook pointer and the finding
    changes it folds."""
    mark = causes.mark(incident)
    change = causes.changes.get(incident.id)
    head = f"{position}{f'[{mark}] ' if mark else ''}[{incident.priority.value}] [{incident.scope}] {incident.title}"
    previous = change.previous_priority if change is not None else None
    if previous is not None and previous is not incident.priority:
        head += f" (was {previous.value})"
    head += f" ({_plural(_folded_count(incident), 'finding')})"
    lines = [_Markup(f"*{_chat(head)}*") if markdown else head]
    if not (mark or causes.baseline):
        return lines  # unchanged: the head line keeps it in the picture, its thread has the rest
    indent = "" if markdown else "   "
    if incident.first_step and mark != "RESOLVED":
        lines.append(f"{indent}First step: {incident.first_step}")
    lines.append(_runbook_line(incident, base_url, markdown=markdown, indent=indent))
    if not causes.baseline:  # a baseline's findings are all new: the cause says it
        folded = causes.folded.get(incident.id, [])
        lines.extend(f"{indent}- {_brief_line(c)}" for c in folded[:MAX_FINDINGS_PER_CAUSE])
        if len(folded) > MAX_FINDINGS_PER_CAUSE:
            lines.append(f"{indent}- … and {len(folded) - MAX_FINDINGS_PER_CAUSE} more finding changes")
    return lines


def _causes_section(causes: _Causes, diff: SweepDiff, base_url: str, *, markdown: bool) -> list[str]:
    """The causes in verdict order, open ones numbered by their place in it, then the resolved.
    Past MAX_LISTED_CAUSES the unchanged causes last in the order are left out first: the news
    (new, worse, updated, resolved) is never cut for a cause that did not change."""
    listed = [*causes.open, *causes.resolved]
    if not listed:
        return []
    news = [i.id for i in listed if causes.mark(i)][:MAX_LISTED_CAUSES]
    unchanged = [i.id for i in listed if not causes.mark(i)][: MAX_LISTED_CAUSES - len(news)]
    shown = {*news, *unchanged}
    place = {incident.id: n for n, incident in enumerate(causes.open, 1)}
    lines = ["", "Root causes, in the order to act on them:"]
    for incident in (i for i in listed if i.id in shown):
        position = f"{place[incident.id]}. " if incident.id in place else "- "
        lines.append("")
        lines.extend(_cause_lines(position, incident, causes, base_url, markdown=markdown))
    if len(listed) > len(shown):
        lines.append(
            f"… and {len(listed) - len(shown)} more root causes{'' if causes.baseline else ', unchanged'}: "
            f"hyperpod-nccl incidents --cluster {diff.cluster} --region {diff.region}"
        )
    return lines


def _finding_lines(changes: list[Change], diff: SweepDiff, base_url: str, *, markdown: bool) -> list[str]:
    """Finding changes, most urgent first: new or raised P0/P1 ones in detail, the rest on a line."""
    listed = {c.fingerprint for c in changes}
    ordered = [c for kind in _CHANGE_ORDER for c in diff.of_kind(kind) if c.fingerprint in listed]
    detailed = [c for c in ordered if _is_detailed(c)]
    brief = [c for c in ordered if not _is_detailed(c)]
    lines: list[str] = []
    for change in detailed[:MAX_DETAILED_CHANGES]:
        lines.append("")
        lines.extend(_detail_lines(change, base_url, markdown=markdown))
    if len(detailed) > MAX_DETAILED_CHANGES:
        lines.append(f"... and {len(detailed) - MAX_DETAILED_CHANGES} more P0/P1 changes")
    if brief:
        lines.append("")
    lines.extend(_brief_line(c) for c in brief[:MAX_LISTED_CHANGES])
    if len(brief) > MAX_LISTED_CHANGES:
        lines.append(f"... and {len(brief) - MAX_LISTED_CHANGES} more")
    return lines


def _body(diff: SweepDiff, causes: _Causes | None, base_url: str, *, markdown: bool) -> list[str]:
    lines: list[str] = []
    if diff.failure is not None:
        lines.append(f"The sweep {diff.sweep_id} could not run: {diff.failure}")
    else:
        lines.append(_counts_line(diff) if causes is None else _causes_line(causes))
        lines.append(_coverage_line(diff))
    for source in diff.degraded_sources[:MAX_DEGRADED_LINES]:
        lines.append(f"Degraded source: {source.source}: {source.reason} -> {source.fix}")
    if len(diff.degraded_sources) > MAX_DEGRADED_LINES:
        lines.append(f"… and {len(diff.degraded_sources) - MAX_DEGRADED_LINES} more degraded sources")
    if causes is None:
        lines.extend(_finding_lines(diff.changes, diff, base_url, markdown=markdown))
        return _escaped(lines, markdown=markdown)
    lines.extend(_causes_section(causes, diff, base_url, markdown=markdown))
    if causes.unfolded:
        # Stored causes (or a node-scoped sweep's) need not account for every finding that changed.
        lines.extend(["", "Finding changes no root cause above accounts for:"])
        lines.extend(_finding_lines(causes.unfolded, diff, base_url, markdown=markdown))
    return _escaped(lines, markdown=markdown)


def _emoji(diff: SweepDiff, causes: _Causes | None) -> str:
    if diff.failure is not None:
        return ":x:"
    unfolded = diff.changes if causes is None else causes.unfolded
    if any(_is_detailed(c) for c in unfolded) or (causes is not None and causes.to_act_on()):
        return ":rotating_light:"
    kinds = [c.kind for c in diff.changes] + [c.kind for c in (causes.changes.values() if causes else [])]
    if kinds and all(kind == "resolved" for kind in kinds):
        return ":white_check_mark:"
    return ":information_source:"


def _next_steps(diff: SweepDiff, causes: _Causes | None) -> list[str]:
    """What to do first, for chat's nextSteps: the first step of each urgent cause that is news,
    in verdict order, then the commands of urgent finding changes no cause folds."""
    steps = [_chat(i.first_step) for i in (causes.to_act_on() if causes else []) if i.first_step]
    for change in diff.changes if causes is None else causes.unfolded:
        if _is_detailed(change):
            steps.extend(for_slack(f"{c.description}: {c.command}") for c in change.finding.suggested_commands)
    return [step for step in steps if len(step) <= NEXT_STEP_MAX_CHARS]


def build_alert(diff: SweepDiff, base_url: str, incidents: IncidentSweep | None = None) -> Alert:
    """Render one sweep's summary (or its failure) for e-mail and chat, in the cluster's thread.

    With the sweep's root causes (`incidents`), it lists them in verdict order, each marked NEW,
    WORSE, UPDATED or RESOLVED with its priority, scope, title and the findings it folds, and for
    those that are news its first step, runbook pointer and finding changes; then any finding
    change no listed cause accounts for. A baseline (the cluster's first evaluated sweep) lists
    every open cause the same way and is the only message of its sweep. Without them (a sweep
    whose Aggregate stored none), it lists the finding changes."""
    causes = _Causes.of(incidents, diff) if incidents is not None else None
    headline = _headline(diff, causes)
    event = "failed" if diff.failure is not None else ("baseline" if causes and causes.baseline else "changed")
    email_lines = [
        headline,
        _cluster_line(diff.cluster, diff.region, diff.cluster_arn),
        f"Sweep: {diff.sweep_id} started {diff.started_at.isoformat()}",
        "",
        *_body(diff, causes, base_url, markdown=False),
        "",
        READ_ONLY_FOOTER,
    ]
    chatbot = ChatbotNotification(
        id=diff.sweep_id,
        content=ChatbotContent(
            title=_chat(f"{_emoji(diff, causes)} {headline}"),
            description="\n".join(_body(diff, causes, base_url, markdown=True)),
            nextSteps=_next_steps(diff, causes)[:MAX_NEXT_STEPS],
            keywords=["hyperpod", "nccl", _chat(diff.cluster)],
        ),
        metadata=ChatbotMetadata(
            threadId=thread_id(diff.region, diff.cluster),
            summary=_chat(headline),
            eventType=SWEEP_EVENT_TYPES[event],
            relatedResources=[diff.cluster_arn] if diff.cluster_arn else [],
            additionalContext={"clusterName": diff.cluster, "region": diff.region, "sweepId": diff.sweep_id},
        ),
    )
    return Alert(subject=email_subject(headline), email="\n".join(map(one_line, email_lines)), chatbot=chatbot)


def _cluster_line(cluster: str, region: str, arn: str | None) -> str:
    return f"Cluster: {cluster} ({region})" + (f" {arn}" if arn else "")


def _timeline_line(entry: TimelineEntry) -> str:
    when = f"{entry.time:%Y-%m-%d %H:%M} UTC" if entry.time else "at the sweep"
    return f"{when} [{entry.kind}/{entry.source}] {entry.text}"


def _affected_line(incident: Incident) -> str:
    affected = incident.affected
    parts = [
        ("instances", affected.instance_ids),
        ("nodes", affected.nodes),
        ("pods", affected.pods),
        ("ranks", [str(r) for r in affected.ranks]),
        ("jobs", affected.jobs),
        ("GPUs", affected.gpus),
    ]
    listed = [
        f"{name} {', '.join(values[:10])}" + (f" … and {len(values) - 10} more" if len(values) > 10 else "")
        for name, values in parts
        if values
    ]
    return "Affected: " + ("; ".join(listed) if listed else "no node, pod or rank named")


def _incident_body(change: IncidentChange, base_url: str, *, markdown: bool) -> list[str]:
    incident = change.incident
    lines = [f"Root cause: {incident.root_cause.summary}"]
    lines.append(f"Scope: {incident.scope}; it accounts for {_plural(_folded_count(incident), 'finding')}")
    if incident.first_step and change.kind != "resolved":
        lines.append(f"First step: {incident.first_step}")
    lines.append(_runbook_line(incident, base_url, markdown=markdown))
    lines.append(f"Outcome: {incident.outcome}")
    lines.append(_affected_line(incident))
    if change.what:
        lines.append("What changed: " + "; ".join(change.what))
    if incident.recurrence is not None:
        lines.append(f"Recurrence: {incident.recurrence.detail}. {incident.recurrence.advice}")
    # An update shows what is new in the thread; a first message tells the story so far.
    update = not opens_its_thread(change)
    entries = change.new_entries if update else incident.timeline
    if entries and change.kind != "resolved":
        lines.append("")
        lines.append("Timeline (new entries):" if update else "Timeline:")
        shown = entries[-MAX_TIMELINE_ENTRIES:]
        if len(entries) > len(shown):
            lines.append(f"... {len(entries) - len(shown)} earlier entries")
        lines.extend(("- " if markdown else "  ") + _timeline_line(e) for e in shown)
    if incident.evidence and opens_its_thread(change):
        lines.append("")
        lines.append("Evidence:")
        lines.extend(_Markup(f"```{_chat(line)}```") if markdown else f"  {line}" for line in incident.evidence[:5])
    return _escaped(lines, markdown=markdown)


def _incident_next_steps(change: IncidentChange) -> list[str]:
    """The cause's first step, then its recurrence advice; nothing once it is resolved."""
    incident = change.incident
    if change.kind == "resolved":
        return []
    steps = [incident.first_step] if incident.first_step else []
    steps += [incident.recurrence.advice] if incident.recurrence else []
    return [step for step in map(_chat, steps) if len(step) <= NEXT_STEP_MAX_CHARS]


def build_incident_alert(sweep: IncidentSweep, change: IncidentChange, base_url: str) -> Alert:
    """One root cause's message (opened, updated, resolved) in the cause's own chat thread
    (`root_cause_thread_id`), so that its updates and its resolution land under the first one."""
    incident = change.incident
    label = {"new": "Root cause", "changed": "Root cause update", "resolved": "Root cause resolved"}[change.kind]
    headline = f"HyperPod {sweep.cluster}: {label} [{incident.priority.value}] {incident.title}"
    emoji = {"new": ":rotating_light:", "changed": ":arrows_counterclockwise:", "resolved": ":white_check_mark:"}[
        change.kind
    ]
    email_lines = [
        headline,
        _cluster_line(sweep.cluster, sweep.region, sweep.cluster_arn),
        f"Root cause id: {incident.id}; sweep {sweep.sweep_id} started {sweep.started_at.isoformat()}",
        "",
        *_incident_body(change, base_url, markdown=False),
        "",
        f"Full story: hyperpod-nccl incidents --cluster {sweep.cluster} --region {sweep.region}",
        READ_ONLY_FOOTER,
    ]
    related = [sweep.cluster_arn] if sweep.cluster_arn else []
    chatbot = ChatbotNotification(
        id=f"{sweep.sweep_id}-{incident.id}",
        content=ChatbotContent(
            title=_chat(f"{emoji} {headline}")[:CHATBOT_TITLE_MAX_CHARS],
            description="\n".join(_incident_body(change, base_url, markdown=True)),
            nextSteps=_incident_next_steps(change),
            keywords=["hyperpod", "nccl", "incident", _chat(sweep.cluster)],
        ),
        metadata=ChatbotMetadata(
            threadId=root_cause_thread_id(sweep.region, sweep.cluster, incident.id),
            summary=_chat(headline),
            eventType=INCIDENT_EVENT_TYPES[change.kind],
            relatedResources=related,
            additionalContext={
                "clusterName": sweep.cluster,
                "region": sweep.region,
                "sweepId": sweep.sweep_id,
                "incidentId": incident.id,
            },
        ),
    )
    return Alert(subject=email_subject(headline), email="\n".join(map(one_line, email_lines)), chatbot=chatbot)


def sns_message(alert: Alert) -> dict[str, Any]:
    """Publish arguments: one SNS message with a body per protocol, fitted to every delivery
    limit first (`fit_alert`), so SNS never refuses it for its size."""
    return _publish_arguments(fit_alert(alert))


def _publish_arguments(alert: Alert) -> dict[str, Any]:
    chat = alert.chatbot.model_dump_json()
    arguments = {
        "MessageStructure": "json",
        # UTF-8 as is rather than \uXXXX escapes: SNS counts bytes, an escape costs up to six.
        "Message": json.dumps({"default": chat, "email": alert.email, "email-json": chat}, ensure_ascii=False),
    }
    if alert.subject:  # SNS refuses an empty Subject; without one, e-mail shows its default
        arguments["Subject"] = alert.subject
    return arguments


def sns_message_bytes(arguments: dict[str, Any]) -> int:
    """The size SNS checks against SNS_MESSAGE_MAX_BYTES: the UTF-8 bytes of the message (the
    whole JSON structure) and of the subject, with each message attribute's name, type and value."""
    size = len(str(arguments.get("Message", "")).encode()) + len(str(arguments.get("Subject") or "").encode())
    for name, attribute in (arguments.get("MessageAttributes") or {}).items():
        value = attribute.get("StringValue") or attribute.get("BinaryValue") or b""
        size += len(name.encode()) + len(str(attribute.get("DataType", "")).encode())
        size += len(value if isinstance(value, bytes) else str(value).encode())
    return size


def _cut_lines(text: str, limit: int, size: Callable[[str], int], *, keep_last: str = "") -> str:
    """`text` cut at a line boundary so that `size(result) <= limit`, ending with how many lines
    were left out (then `keep_last`, when the text ends with that line: the e-mail's read-only
    footer survives any cut). A line is kept whole or not at all (a half command must never be
    shown); a code fence left open by the cut is closed."""
    if size(text) <= limit:
        return text
    lines = text.split("\n")
    tail = [lines.pop()] if keep_last and lines and lines[-1] == keep_last else []
    room = limit - size(_cut_marker(len(lines))) - size("\n```\n") - sum(size(t) + 1 for t in tail)
    kept: list[str] = []
    for line in lines:
        room -= size(line) + 1
        if room < 0:
            break
        kept.append(line)
    left = len(lines) - len(kept)
    if "\n".join(kept).count("```") % 2:
        kept.append("```")
    return "\n".join([*kept, _cut_marker(left), *tail])


def _cut_marker(lines: int) -> str:
    return f"… {lines} more lines not shown (message size limit); the full sweep is in the monitor's table"


def _chars(text: str) -> int:
    return len(text)


def _utf8(text: str) -> int:
    return len(text.encode())


def _with_bodies(alert: Alert, *, email_bytes: int, description_chars: int) -> Alert:
    content = alert.chatbot.content
    metadata = alert.chatbot.metadata
    chatbot = alert.chatbot.model_copy(
        update={
            "content": content.model_copy(
                update={
                    "title": content.title[:CHATBOT_TITLE_MAX_CHARS],
                    "description": _cut_lines(content.description, description_chars, _chars),
                    "nextSteps": [s for s in content.nextSteps if len(s) <= NEXT_STEP_MAX_CHARS][:MAX_NEXT_STEPS],
                }
            ),
            "metadata": metadata.model_copy(update={"summary": metadata.summary[:CHATBOT_TITLE_MAX_CHARS]}),
        }
    )
    email = _cut_lines(alert.email, email_bytes, _utf8, keep_last=READ_ONLY_FOOTER)
    return alert.model_copy(update={"email": email, "chatbot": chatbot})


def fit_alert(alert: Alert) -> Alert:
    """`alert` within every delivery limit: the chat title and description, the e-mail body and
    the whole SNS message (SNS_MESSAGE_MAX_BYTES as SNS counts it: both chat copies, the e-mail
    and the subject). Text is cut at line boundaries with the number of lines left out; when even
    short bodies do not fit (huge metadata), the alert is reduced to its headline."""
    email_bytes, description_chars = EMAIL_MAX_BYTES, CHATBOT_DESCRIPTION_MAX_CHARS
    while email_bytes >= 1_000 and description_chars >= 500:
        fitted = _with_bodies(alert, email_bytes=email_bytes, description_chars=description_chars)
        if sns_message_bytes(_publish_arguments(fitted)) <= SNS_MESSAGE_MAX_BYTES:
            return fitted
        # The e-mail is sent once, the chat JSON twice (default and email-json): shrink the
        # e-mail first, then both.
        if email_bytes > 8 * description_chars:
            email_bytes //= 2
        else:
            email_bytes, description_chars = email_bytes // 2, description_chars // 2
    return undeliverable_alert(alert, "the alert did not fit the SNS message limit")


def undeliverable_alert(alert: Alert, reason: str) -> Alert:
    """A short stand-in for an alert SNS refused or that cannot fit: the same headline, thread and
    event type, saying why and where the full content is; bounded whatever `alert` holds."""
    content, metadata = alert.chatbot.content, alert.chatbot.metadata
    sweep = metadata.additionalContext.get("sweepId", alert.chatbot.id)
    text = (
        f"The full alert could not be delivered ({one_line(reason[:300])}). Its findings are stored by the "
        f"monitor: sweep {one_line(sweep[:200])}."
    )
    context = {k: v[:200] for k, v in list(metadata.additionalContext.items())[:10]}
    chatbot = ChatbotNotification(
        id=alert.chatbot.id[:200],
        content=ChatbotContent(
            title=content.title[:CHATBOT_TITLE_MAX_CHARS], description=for_slack(text), keywords=content.keywords[:5]
        ),
        metadata=ChatbotMetadata(
            threadId=metadata.threadId[:CHATBOT_THREAD_ID_MAX_CHARS],
            summary=metadata.summary[:CHATBOT_TITLE_MAX_CHARS],
            eventType=metadata.eventType,
            relatedResources=metadata.relatedResources[:1],
            additionalContext=context,
        ),
    )
    headline = alert.email.split("\n", 1)[0][:CHATBOT_TITLE_MAX_CHARS]
    return Alert(subject=alert.subject, email=f"{headline}\n\n{text}\n\n{READ_ONLY_FOOTER}", chatbot=chatbot)
