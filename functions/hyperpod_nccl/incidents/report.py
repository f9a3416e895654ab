"""Run a diagnosis and tell its verdict as incidents; render them as text or JSON.

Shared by `hyperpod-nccl incidents` and `hyperpod-nccl support-bundle` (and usable by the
monitor): the same collection, checks and verdict as `diagnose`, then `build_incidents` over the
sweep result and its inventory: one incident per root cause, in the verdict's order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TextIO

from pydantic import TypeAdapter

from hyperpod_nccl import thresholds
from hyperpod_nccl.bounded import loads_json
from hyperpod_nccl.collectors import collect
from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.collectors.context import CollectionContext, ProgressSink
from hyperpod_nccl.engine import build_result
from hyperpod_nccl.hang.attribution import AttributionFact
from hyperpod_nccl.hang.evidence import hang_evidence
from hyperpod_nccl.incidents.build import build_incidents
from hyperpod_nccl.incidents.escalation import Escalation, judge
from hyperpod_nccl.incidents.models import Incident
from hyperpod_nccl.models.findings import SweepResult
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.sanitize import one_line

INCIDENT_LIST = TypeAdapter(list[Incident])


@dataclass
class IncidentRun:
    """A diagnosis with its inventory, the incidents built from it and the escalation verdicts."""

    result: SweepResult
    inventory: Inventory
    incidents: list[Incident]
    escalations: list[Escalation]
    attributions: list[AttributionFact] = field(default_factory=list)


def attributions_of(inventory: Inventory) -> list[AttributionFact]:
    """Hang attribution facts from the node probes' NCCL RAS answers and Flight Recorder dumps."""
    return hang_evidence(inventory).facts


def run_incidents(
    request: DiagnoseRequest,
    aws: AwsClients,
    *,
    history: Iterable[Incident] = (),
    progress: ProgressSink | None = None,
) -> IncidentRun:
    """Collect and evaluate exactly as `engine.diagnose` does, keeping the inventory for the join.

    Raises `DiagnosisAborted` like `diagnose` (credentials, unknown cluster).
    """
    ctx = CollectionContext(request=request, aws=aws)
    if progress is not None:
        ctx.progress = progress
    inventory = collect(ctx)
    result = build_result(inventory, ctx.degraded, ctx.now)
    attributions = attributions_of(inventory)
    incidents = build_incidents(result, inventory, attributions=attributions, history=history)
    return IncidentRun(result, inventory, incidents, judge(result, incidents, inventory), attributions)


def load_history(text: str) -> list[Incident]:
    """Incidents of an earlier run (`incidents --format json` output, or its `incidents` list)."""
    # The operator's own file, so no size cap; still bounded in depth (UnreadableData is the
    # ValueError the command reports), since what it holds came from the cluster.
    document = loads_json(text, max_bytes=None)
    if isinstance(document, dict):
        document = document.get("incidents", [])
    return INCIDENT_LIST.validate_python(document)


def incidents_json(run: IncidentRun) -> dict[str, object]:
    """The JSON document of `incidents --format json`."""
    result = run.result
    return {
        "cluster_name": result.cluster_name,
        "cluster_arn": result.cluster_arn,
        "region": result.region,
        "window_start": result.window_start.isoformat(),
        "window_end": result.window_end.isoformat(),
        "findings_folded": result.verdict.findings_folded,
        "incidents": [
            {**i.model_dump(mode="json"), "root_cause_pointer": i.root_cause.reference.pointer} for i in run.incidents
        ],
        "escalation": [e.model_dump(mode="json") for e in run.escalations],
        "degraded_sources": [d.model_dump(mode="json") for d in result.degraded_sources],
    }


def _limited(items: list[str]) -> str:
    shown = items[: thresholds.INCIDENT_LIST_LIMIT]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" … and {more} more" if more > 0 else "")


def _line_writer(stream: TextIO) -> Callable[..., None]:
    """`line(text)` writes `text` as one line of a report meant for people.

    Titles, summaries, timeline text and names are cluster data: `one_line` shows their control
    characters escaped and keeps each on its own line, so no value can drive the terminal or
    forge a line of the report.
    """

    def line(text: str = "") -> None:
        stream.write(one_line(text) + "\n")

    return line


def write_incident(stream: TextIO, incident: Incident) -> None:
    """One incident: headline, its scope and how many findings it folds, its plan's first step,
    root cause with its runbook, affected set, outcome, timeline."""
    line = _line_writer(stream)
    line(f"[{incident.priority.value}] {incident.id}  {incident.title}")
    folded = incident.findings_folded
    line(f"      scope: {incident.scope}; folds {folded} finding{'' if folded == 1 else 's'}")
    if incident.first_step:
        line(f"      first step: {incident.first_step}")
    line(f"      root cause: {incident.root_cause.summary}")
    line(f"       → {incident.root_cause.reference.pointer}")
    affected = incident.affected
    parts = [
        ("instances", affected.instance_ids),
        ("nodes reporting the failure", affected.nodes),
        ("groups", affected.instance_groups),
        ("pods", affected.pods),
        ("ranks", [str(r) for r in affected.ranks]),
        ("jobs", affected.jobs),
        ("GPUs", affected.gpus),
    ]
    for label, values in parts:
        if values:
            line(f"      {label}: {_limited(values)}")
    line(f"      outcome: {incident.outcome}")
    if incident.recurrence:
        line(f"      RECURRENCE ({incident.recurrence.kind}): {incident.recurrence.detail}")
        line(f"        {incident.recurrence.advice}")
    line("      timeline:")
    for entry in incident.timeline:
        when = f"{entry.time:%Y-%m-%d %H:%M:%S}" if entry.time else "at sweep".ljust(19)
        line(f"        {when}  {entry.source:<15} {entry.kind:<9} {entry.text[:200]}")


def write_escalations(stream: TextIO, escalations: list[Escalation]) -> None:
    """The five situations and which apply."""
    line = _line_writer(stream)
    line("Escalate to AWS Support when (skill.md):")
    for item in escalations:
        mark = {"applies": "APPLIES", "confirm": "CONFIRM", "no": "no"}[item.verdict]
        line(f"  {item.number}. [{mark}] {item.situation}")
        line(f"       {item.why}")


def render_incidents_text(stream: TextIO, run: IncidentRun) -> None:
    """The text report of `hyperpod-nccl incidents`."""
    result = run.result
    line = _line_writer(stream)
    line("hyperpod-nccl incidents (READ-ONLY: nothing on the cluster is changed)")
    line(f"Cluster: {result.cluster_name}" + (f"  ({result.cluster_arn})" if result.cluster_arn else ""))
    line(f"Region:  {result.region}")
    line(f"Window:  {result.window_start:%Y-%m-%d %H:%M:%S} → {result.window_end:%Y-%m-%d %H:%M:%S} UTC")
    folded = sum(i.findings_folded for i in run.incidents)
    line(f"Incidents: {len(run.incidents)} (the verdict's root causes, most urgent first; they fold {folded} findings)")
    line()
    for incident in run.incidents:
        write_incident(stream, incident)
        line()
    if not run.incidents:
        line("No incidents: no FAIL or WARN finding in the window, so no root cause.")
        line()
    for degraded in result.degraded_sources:
        line(f"[WARN] {degraded.source}: {degraded.reason} (fix: {degraded.fix})")
    applicable = [e for e in run.escalations if e.verdict != "no"]
    if applicable:
        line()
        write_escalations(stream, applicable)
