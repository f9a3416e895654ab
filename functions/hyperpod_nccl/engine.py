"""The check engine: evaluate an inventory with every applicable check and assemble the
sweep result.

`evaluate` and `build_result` are pure but for the finish time `build_result` stamps: they read
only the inventory and the degraded sources, so the CLI and the monitor's Aggregate state (which
rebuilds both from the table) evaluate alike. `diagnose` is the CLI's whole path: it collects
first, and the collectors do all the I/O.

Never more certainty than the data: a PASS of a check that reads something a degraded source left
unread (`CheckMeta.reads` against `DegradedSource.unread`) is reported as a SKIP naming what was
not read, and a source that was not collected at all gets one SKIP line saying how many checks
did not run and why. Never a reboot or a replacement of a node whose ListClusterNodes status rules
it out (`withhold_for_status`): whichever check found something on it."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from hyperpod_nccl import node_statuses, suggested
from hyperpod_nccl.checks import COLLECTED_FROM, SOURCE_TITLES, Check, CheckMeta, Source, discover
from hyperpod_nccl.collectors import collect
from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.collectors.context import CollectionContext, ProgressSink
from hyperpod_nccl.models.findings import (
    Coverage,
    DegradedSource,
    Finding,
    NodeRow,
    ProbeOutcome,
    Status,
    SweepResult,
)
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.probe import documents
from hyperpod_nccl.references import CLUSTER_STATUS, OPS_CLOUDWATCH, OPS_CLUSTER_NAMES, OPS_SSM_TARGET, Reference
from hyperpod_nccl.ssm import client as ssm_client
from hyperpod_nccl.verdict import build_verdict


def applicable_checks(inventory: Inventory) -> list[Check]:
    """The registered checks whose source was collected and whose orchestrator matches."""
    return [c for _, c in sorted(discover().items()) if c.applies_to(inventory)]


# A reason quoted in a SKIP's detail is cut here (the degraded source below the report has it whole).
_REASON_MAX_CHARS = 160
# Where a SKIP line of a source that was not collected points when no degraded source says why.
_SOURCE_REFERENCES: dict[Source, Reference] = {
    "control_plane": CLUSTER_STATUS,
    "logs": OPS_CLOUDWATCH,
    "node_probes": OPS_SSM_TARGET,
    "kubernetes": OPS_CLUSTER_NAMES,
}


def unread_by(names: Iterable[str], degraded: Iterable[DegradedSource]) -> list[DegradedSource]:
    """The degraded sources that left one of `names` unread."""
    wanted = frozenset(names)
    return [d for d in degraded if wanted.intersection(d.unread)]


def _not_read(names: frozenset[str], source: DegradedSource) -> str:
    """What one degraded source left unread of `names`, and why, in a few words:
    `logs:FilterLogEvents denied`, `kubernetes:pod logs (Kubernetes RBAC forbids reading ...)`."""
    reason = source.reason.split(" (", 1)[0]
    if len(reason) > _REASON_MAX_CHARS:
        reason = reason[: _REASON_MAX_CHARS - 1] + "…"
    matched = sorted(names.intersection(source.unread))
    text = reason if any(reason.startswith(name) for name in matched) else f"{', '.join(matched)} ({reason})"
    return text + (", partly read" if source.partial else "")


def not_read_text(names: frozenset[str], sources: Iterable[DegradedSource]) -> str:
    """`not read: <what and why>; <what and why>` for the degraded sources that concern `names`."""
    return "not read: " + "; ".join(dict.fromkeys(_not_read(names, s) for s in sources))


def _unknown_title(meta: CheckMeta) -> str:
    return f"{meta.title}: unknown (what it reads was not fully read)"


def skipped(finding: Finding, meta: CheckMeta, sources: list[DegradedSource]) -> Finding:
    """A PASS whose check could not read all it reads, as the SKIP it really is: titled by the
    check, the detail naming what was not read, then what the data that was read showed."""
    shown = f"{finding.title} ({finding.detail})" if finding.detail else finding.title
    return finding.model_copy(
        update={
            "status": Status.SKIP,
            "title": _unknown_title(meta),
            "detail": f"{not_read_text(meta.reads, sources)}. The data that was read shows: {shown}",
        }
    )


def unknown(meta: CheckMeta, sources: list[DegradedSource]) -> Finding:
    """The SKIP of a check that could not read all it reads and said nothing: its silence would
    read as "nothing found"."""
    return Finding(
        check_id=meta.id,
        status=Status.SKIP,
        title=_unknown_title(meta),
        detail=not_read_text(meta.reads, sources),
        reference=meta.reference,
    )


def honest(produced: list[Finding], meta: CheckMeta, degraded: list[DegradedSource]) -> list[Finding]:
    """A check's findings as certain as its data: when a degraded source left something it reads
    unread, each PASS becomes a SKIP, and no finding at all becomes one SKIP; FAIL, WARN and INFO
    stand (what was read shows them)."""
    blind = unread_by(meta.reads, degraded)
    if not blind:
        return produced
    return [skipped(f, meta, blind) if f.status is Status.PASS else f for f in produced] or [unknown(meta, blind)]


def withhold_for_status(findings: list[Finding], inventory: Inventory) -> list[Finding]:
    """The findings without the reboot and replace commands that name a node whose
    ListClusterNodes status rules them out (HyperPod is moving it, no instance is behind it, or
    the status is one the API model does not list: `node_statuses.py`). Such a finding keeps a
    read of the node's status instead and says why in its detail; every other finding stands."""
    held = node_statuses.held_nodes(inventory.control_plane.nodes or [])
    if not held:
        return findings
    kept: list[Finding] = []
    for finding in findings:
        withheld = {
            id(command): sorted(held.keys() & set(shlex.split(command.command)))
            for command in finding.suggested_commands
            if command.effect in ("reboot", "replace")
        }
        named = sorted({node for nodes in withheld.values() for node in nodes})
        if not named:
            kept.append(finding)
            continue
        commands = [c for c in finding.suggested_commands if not withheld.get(id(c))]
        shown = {c.command for c in commands}
        for node in named:
            read = suggested.describe_cluster_node(inventory.cluster_name, node, inventory.region)
            if read.command not in shown:
                commands.append(read)
        note = "no reboot or replacement while HyperPod reports " + "; ".join(f"{n} {held[n]}" for n in named)
        note += ": read its status and diagnose again"
        detail = f"{finding.detail} ({note})" if finding.detail else note
        kept.append(finding.model_copy(update={"suggested_commands": commands, "detail": detail}))
    return kept


def not_collected(inventory: Inventory, degraded: list[DegradedSource]) -> list[Finding]:
    """One SKIP per source that was not collected at all while checks of it would apply: how many
    did not run, and the degraded sources that say why."""
    checks = discover()
    found: list[Finding] = []
    for source, title in SOURCE_TITLES.items():
        if getattr(inventory, source) is not None:
            continue
        waiting = [c for c in checks.values() if c.meta.source == source and c.fits_orchestrator(inventory)]
        if not waiting:
            continue
        causes = unread_by(COLLECTED_FROM[source], degraded)
        why = not_read_text(COLLECTED_FROM[source], causes) if causes else "nothing was collected for them"
        reference = next((c.reference for c in causes if c.reference is not None), _SOURCE_REFERENCES[source])
        found.append(
            Finding(
                check_id=source,
                status=Status.SKIP,
                title=f"{title}: {len(waiting)} check(s) not run, the source was not collected",
                detail=why,
                reference=reference,
                fields={"checks_not_run": len(waiting)},
            )
        )
    return found


# Told each check's metadata, its run time in seconds and what it produced (`--verbose`).
CheckObserver = Callable[[CheckMeta, float, list[Finding]], None]


def evaluate(
    inventory: Inventory, degraded: Iterable[DegradedSource] = (), observe: CheckObserver | None = None
) -> tuple[list[Finding], list[DegradedSource]]:
    """Run the applicable checks, each as certain as what it read of `degraded` (`honest`) and with
    no reboot or replacement of a node its status rules out (`withhold_for_status`), plus one
    SKIP per source not collected (`not_collected`). A check that raises is a bug: it becomes a
    degraded source naming the check, and the other checks still run. `observe`, when given, is
    told how long each check took and what it found."""
    unread = list(degraded)
    findings: list[Finding] = []
    errors: list[DegradedSource] = []
    for registered in applicable_checks(inventory):
        started = time.perf_counter()
        try:
            produced = registered.run(inventory)
            if observe is not None:
                observe(registered.meta, time.perf_counter() - started, produced)
        except Exception as error:  # noqa: BLE001 - one broken check must not hide the others
            errors.append(
                DegradedSource(
                    source=f"check {registered.meta.id}",
                    reason=f"internal error: {type(error).__name__}: {error}",
                    fix="report this as a bug in hyperpod-nccl with the JSON output",
                )
            )
            continue
        findings.extend(honest(produced, registered.meta, unread))
    return [*withhold_for_status(findings, inventory), *not_collected(inventory, unread)], errors


def coverage_of(inventory: Inventory) -> Coverage:
    """Node coverage: how many nodes exist, and how many the probes reached."""
    nodes = inventory.control_plane.nodes or []
    probes = inventory.node_probes
    if probes is None:
        return Coverage(nodes_total=len(nodes), nodes_skipped=len(nodes))
    used = sorted({r.session_document for r in probes.results if r.session_document})
    return Coverage(
        nodes_total=len(nodes),
        nodes_probed=len(probes.probed_instance_ids),
        nodes_unreachable=len(probes.unreachable_instance_ids),
        nodes_skipped=max(0, len(nodes) - len(probes.probed_instance_ids) - len(probes.unreachable_instance_ids)),
        unreachable_node_ids=list(probes.unreachable_instance_ids),
        probe_documents=used,
        probe_access_note=documents.managed_document_note() if ssm_client.DOCUMENT in used else None,
    )


def node_rows(inventory: Inventory) -> list[NodeRow]:
    """Every listed node with where it sits and whether the probes read it (`SweepResult.nodes`)."""
    probes = inventory.node_probes
    probed = set(probes.probed_instance_ids) if probes else set()
    unreachable = set(probes.unreachable_instance_ids) if probes else set()

    def outcome(instance_id: str) -> ProbeOutcome:
        if instance_id in probed:
            return "probed"
        return "unreachable" if instance_id in unreachable else "not_probed"

    return [
        NodeRow(
            instance_id=node.instance_id,
            instance_group=node.instance_group,
            instance_type=node.instance_type,
            status=node.status,
            probe=outcome(node.instance_id),
            hostname=node.short_hostname,
        )
        for node in inventory.control_plane.nodes or []
    ]


def build_result(
    inventory: Inventory, degraded: list[DegradedSource], started_at: datetime, observe: CheckObserver | None = None
) -> SweepResult:
    """Evaluate and assemble the sweep result (used by the CLI and the monitor alike)."""
    findings, check_errors = evaluate(inventory, degraded, observe)
    cluster = inventory.control_plane.cluster
    return SweepResult(
        cluster_name=inventory.cluster_name,
        cluster_arn=cluster.arn if cluster else None,
        region=inventory.region,
        orchestrator=inventory.orchestrator,
        eks_cluster_name=cluster.eks_cluster_name if cluster else None,
        started_at=started_at,
        finished_at=datetime.now(UTC),
        window_start=inventory.window_start,
        window_end=inventory.window_end,
        scope=inventory.scope,
        coverage=coverage_of(inventory),
        nodes=node_rows(inventory),
        findings=findings,
        verdict=build_verdict(findings, inventory),
        degraded_sources=[*degraded, *check_errors],
    )


def diagnose(
    request: DiagnoseRequest,
    aws: AwsClients,
    *,
    progress: ProgressSink | None = None,
    observe: CheckObserver | None = None,
) -> SweepResult:
    """Collect everything for `request` and evaluate it, in one process: the CLI's `diagnose`
    (and so the demo, and the bench's CLI measurement). The monitor collects state by state and
    calls `build_result` in Aggregate; `incidents.report.run_incidents` collects and evaluates
    the same way as this function, keeping the inventory.

    Raises `DiagnosisAborted` when credentials fail or the cluster does not exist.
    """
    ctx = CollectionContext(request=request, aws=aws)
    if progress is not None:
        ctx.progress = progress
    inventory = collect(ctx)
    return build_result(inventory, ctx.degraded, ctx.now, observe)
