"""Alerts: turn a sweep diff into an e-mail text and an AWS Chatbot (Amazon Q Developer in chat
applications) custom notification, and publish both in one SNS message.

SNS `MessageStructure="json"` carries one body per protocol: e-mail subscribers get the text,
every other subscriber (the Chatbot HTTPS endpoint, SQS) gets the custom-notification JSON.
The Chatbot format: `version` "1.0", `source` "custom", `content` (client-markdown title and
description, nextSteps, keywords) and `metadata` (threadId groups one cluster's alerts).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from hyperpod_nccl.incidents.models import Incident, TimelineEntry
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.monitor.diff import Change, SweepDiff
from hyperpod_nccl.monitor.incidents import IncidentChange, IncidentSweep

# Listing every change of a large first sweep would exceed chat limits; the rest is counted.
MAX_DETAILED_CHANGES = 15
MAX_LISTED_CHANGES = 40
# An incident message shows the latest timeline entries; the full story is in the table and CLI.
MAX_TIMELINE_ENTRIES = 15
INCIDENT_EVENT_TYPES = {
    "new": "HyperPodNcclIncidentOpened",
    "changed": "HyperPodNcclIncidentUpdated",
    "resolved": "HyperPodNcclIncidentResolved",
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


def thread_id(region: str, cluster: str) -> str:
    """One chat thread per cluster, so updates stack instead of flooding the channel."""
    return f"hyperpod-nccl-{region}-{cluster}"


def resource_ids(finding: Finding) -> list[str]:
    """The node/pod/SG/... ids a finding names, as `kind id` strings."""
    picked: list[Resource] = [r for r in finding.resources if r.kind in _ID_KINDS]
    return [f"{r.kind} {r.id}" + (f" ({r.name})" if r.name and r.name != r.id else "") for r in picked]


def _priority(finding: Finding) -> str:
    return finding.priority.value if finding.priority else "--"


def _headline(diff: SweepDiff) -> str:
    late = f" (delayed: sweep of {diff.started_at:%Y-%m-%d %H:%M} UTC)" if diff.delivered_late else ""
    return _what_happened(diff) + late


def _what_happened(diff: SweepDiff) -> str:
    if diff.failure is not None:
        return f"HyperPod {diff.cluster}: sweep could not run"
    parts = []
    new = diff.of_kind("new")
    raised = diff.of_kind("priority_raised")
    resolved = diff.of_kind("resolved")
    if new:
        urgent = sum(1 for c in new if c.finding.priority in URGENT)
        parts.append(f"{len(new)} new" + (f" ({urgent} P0/P1)" if urgent else ""))
    if raised:
        parts.append(f"{len(raised)} priority raised")
    if resolved:
        parts.append(f"{len(resolved)} resolved")
    if diff.new_permission_gaps:
        parts.append(f"monitor denied {', '.join(diff.new_permission_gaps)}")
    return f"HyperPod {diff.cluster}: " + ", ".join(parts)


def _counts_line(diff: SweepDiff) -> str:
    counts = ", ".join(f"{key} {value}" for key, value in diff.open_by_priority.items() if value)
    return f"Open issues by priority: {counts or 'none'}"


def _coverage_line(diff: SweepDiff) -> str:
    cov = diff.coverage
    return (
        f"Coverage: {cov.nodes_probed}/{cov.nodes_total} nodes probed, {cov.nodes_unreachable} unreachable, "
        f"{cov.nodes_skipped} skipped"
    )


def _detail_lines(change: Change, base_url: str, *, markdown: bool) -> list[str]:
    finding = change.finding
    label = {"new": "NEW", "priority_raised": "RAISED", "resolved": "RESOLVED"}[change.kind]
    head = f"[{label}] [{_priority(finding)}] {finding.title}"
    if change.kind == "priority_raised" and change.previous_priority:
        head += f" (was {change.previous_priority.value})"
    link = finding.reference.url(base_url)
    lines = [f"*{head}*" if markdown else head]
    ids = resource_ids(finding)
    if ids:
        lines.append(("  Resources: " if not markdown else "Resources: ") + ", ".join(ids))
    if markdown:
        lines.append(f"Runbook: <{link}|{finding.reference.pointer}>")
    else:
        lines.append(f"  Runbook: {finding.reference.pointer} - {link}")
    if change.kind != "resolved":
        for command in finding.suggested_commands:
            if markdown:
                lines.append(f"{command.description}:\n```{command.command}```")
            else:
                lines.append(f"  Suggested ({command.description}): {command.command}")
                if command.preconditions:
                    lines.append(f"    Preconditions: {command.preconditions}")
                if command.blast_radius:
                    lines.append(f"    Blast radius: {command.blast_radius}")
    return lines


def _is_detailed(change: Change) -> bool:
    """New or raised P0/P1 findings get ids, link and commands; the rest a one-line mention."""
    return change.kind in ("new", "priority_raised") and change.finding.priority in URGENT


def _body(diff: SweepDiff, base_url: str, *, markdown: bool) -> list[str]:
    lines: list[str] = []
    if diff.failure is not None:
        lines.append(f"The sweep {diff.sweep_id} could not run: {diff.failure}")
    else:
        lines.append(_counts_line(diff))
        lines.append(_coverage_line(diff))
    for source in diff.degraded_sources:
        lines.append(f"Degraded source: {source.source}: {source.reason} -> {source.fix}")
    ordered = [*diff.of_kind("new"), *diff.of_kind("priority_raised"), *diff.of_kind("resolved")]
    detailed = [c for c in ordered if _is_detailed(c)]
    brief = [c for c in ordered if not _is_detailed(c)]
    for change in detailed[:MAX_DETAILED_CHANGES]:
        lines.append("")
        lines.extend(_detail_lines(change, base_url, markdown=markdown))
    if len(detailed) > MAX_DETAILED_CHANGES:
        lines.append(f"... and {len(detailed) - MAX_DETAILED_CHANGES} more P0/P1 changes")
    if brief:
        lines.append("")
    for change in brief[:MAX_LISTED_CHANGES]:
        label = {"new": "NEW", "priority_raised": "RAISED", "resolved": "RESOLVED"}[change.kind]
        ids = ", ".join(resource_ids(change.finding))
        lines.append(f"[{label}] [{_priority(change.finding)}] {change.finding.title}" + (f" ({ids})" if ids else ""))
    if len(brief) > MAX_LISTED_CHANGES:
        lines.append(f"... and {len(brief) - MAX_LISTED_CHANGES} more")
    return lines


def build_alert(diff: SweepDiff, base_url: str) -> Alert:
    """Render one sweep's changes (or its failure) for e-mail and chat."""
    headline = _headline(diff)
    failed = diff.failure is not None
    urgent_new = any(_is_detailed(c) for c in diff.changes)
    emoji = ":x:" if failed else (":rotating_light:" if urgent_new else ":information_source:")
    if not failed and diff.changes and all(c.kind == "resolved" for c in diff.changes):
        emoji = ":white_check_mark:"
    next_steps: list[str] = []
    for change in diff.changes:
        if _is_detailed(change):
            next_steps.extend(f"{c.description}: {c.command}" for c in change.finding.suggested_commands)
    email_lines = [
        headline,
        _cluster_line(diff.cluster, diff.region, diff.cluster_arn),
        f"Sweep: {diff.sweep_id} started {diff.started_at.isoformat()}",
        "",
        *_body(diff, base_url, markdown=False),
        "",
        READ_ONLY_FOOTER,
    ]
    chatbot = ChatbotNotification(
        id=diff.sweep_id,
        content=ChatbotContent(
            title=f"{emoji} {headline}",
            description="\n".join(_body(diff, base_url, markdown=True)),
            nextSteps=next_steps[:10],
            keywords=["hyperpod", "nccl", diff.cluster],
        ),
        metadata=ChatbotMetadata(
            threadId=thread_id(diff.region, diff.cluster),
            summary=headline,
            eventType="HyperPodNcclSweepFailed" if failed else "HyperPodNcclFindingsChanged",
            relatedResources=[diff.cluster_arn] if diff.cluster_arn else [],
            additionalContext={"clusterName": diff.cluster, "region": diff.region, "sweepId": diff.sweep_id},
        ),
    )
    return Alert(subject=headline[:100], email="\n".join(email_lines), chatbot=chatbot)


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
        f"{name} {', '.join(values[:10])}" + (" ..." if len(values) > 10 else "") for name, values in parts if values
    ]
    return "Affected: " + ("; ".join(listed) if listed else "no node, pod or rank named")


def _incident_body(change: IncidentChange, base_url: str, *, markdown: bool) -> list[str]:
    incident = change.incident
    reference = incident.root_cause.reference
    link = reference.url(base_url)
    lines = [f"Root cause: {incident.root_cause.summary}"]
    lines.append(f"Runbook: <{link}|{reference.pointer}>" if markdown else f"Runbook: {reference.pointer} - {link}")
    lines.append(f"Outcome: {incident.outcome}")
    lines.append(_affected_line(incident))
    if change.what:
        lines.append("What changed: " + "; ".join(change.what))
    if incident.recurrence is not None:
        lines.append(f"Recurrence: {incident.recurrence.detail}. {incident.recurrence.advice}")
    # An update shows what is new in the thread; a first message tells the story so far.
    entries = change.new_entries if change.kind == "changed" else incident.timeline
    if entries and change.kind != "resolved":
        lines.append("")
        lines.append("Timeline (new entries):" if change.kind == "changed" else "Timeline:")
        shown = entries[-MAX_TIMELINE_ENTRIES:]
        if len(entries) > len(shown):
            lines.append(f"... {len(entries) - len(shown)} earlier entries")
        lines.extend(("- " if markdown else "  ") + _timeline_line(e) for e in shown)
    if incident.evidence and change.kind == "new":
        lines.append("")
        lines.append("Evidence:")
        lines.extend(f"```{line}```" if markdown else f"  {line}" for line in incident.evidence[:5])
    return lines


def build_incident_alert(sweep: IncidentSweep, change: IncidentChange, base_url: str) -> Alert:
    """One incident's message: its own chat thread (threadId = incident id) so that updates and
    the resolution land under the first message."""
    incident = change.incident
    label = {"new": "Incident", "changed": "Incident update", "resolved": "Incident resolved"}[change.kind]
    headline = f"HyperPod {sweep.cluster}: {label} [{incident.priority.value}] {incident.title}"
    emoji = {"new": ":rotating_light:", "changed": ":arrows_counterclockwise:", "resolved": ":white_check_mark:"}[
        change.kind
    ]
    email_lines = [
        headline,
        _cluster_line(sweep.cluster, sweep.region, sweep.cluster_arn),
        f"Incident: {incident.id}; sweep {sweep.sweep_id} started {sweep.started_at.isoformat()}",
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
            title=f"{emoji} {headline}"[:250],
            description="\n".join(_incident_body(change, base_url, markdown=True)),
            nextSteps=[incident.recurrence.advice] if incident.recurrence and change.kind != "resolved" else [],
            keywords=["hyperpod", "nccl", "incident", sweep.cluster],
        ),
        metadata=ChatbotMetadata(
            threadId=incident.id,
            summary=headline,
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
    return Alert(subject=headline[:100], email="\n".join(email_lines), chatbot=chatbot)


def sns_message(alert: Alert) -> dict[str, Any]:
    """Publish arguments: one SNS message with a body per protocol."""
    chat = alert.chatbot.model_dump_json()
    return {
        "Subject": alert.subject,
        "MessageStructure": "json",
        "Message": json.dumps({"default": chat, "email": alert.email, "email-json": chat}),
    }
