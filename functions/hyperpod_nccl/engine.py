"""The check engine: evaluate an inventory with every applicable check and assemble the
sweep result.

`evaluate` and `build_result` are pure but for the finish time `build_result` stamps: they read
only the inventory, so the CLI and the monitor's Aggregate state (which rebuilds the inventory
from the table) evaluate alike. `diagnose` is the CLI's whole path: it collects first, and the
collectors do all the I/O."""

from __future__ import annotations

from datetime import UTC, datetime

from hyperpod_nccl.checks import Check, discover
from hyperpod_nccl.collectors import collect
from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.collectors.context import CollectionContext, ProgressSink
from hyperpod_nccl.models.findings import Coverage, DegradedSource, Finding, SweepResult
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.probe import documents
from hyperpod_nccl.ssm import client as ssm_client
from hyperpod_nccl.verdict import build_verdict


def applicable_checks(inventory: Inventory) -> list[Check]:
    """The registered checks whose source was collected and whose orchestrator matches."""
    return [c for _, c in sorted(discover().items()) if c.applies_to(inventory)]


def evaluate(inventory: Inventory) -> tuple[list[Finding], list[DegradedSource]]:
    """Run the applicable checks. A check that raises is a bug: it becomes a degraded source
    naming the check, and the other checks still run."""
    findings: list[Finding] = []
    degraded: list[DegradedSource] = []
    for registered in applicable_checks(inventory):
        try:
            findings.extend(registered.run(inventory))
        except Exception as error:  # noqa: BLE001 - one broken check must not hide the others
            degraded.append(
                DegradedSource(
                    source=f"check {registered.meta.id}",
                    reason=f"internal error: {type(error).__name__}: {error}",
                    fix="report this as a bug in hyperpod-nccl with the JSON output",
                )
            )
    return findings, degraded


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


def build_result(inventory: Inventory, degraded: list[DegradedSource], started_at: datetime) -> SweepResult:
    """Evaluate and assemble the sweep result (used by the CLI and the monitor alike)."""
    findings, check_errors = evaluate(inventory)
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
        findings=findings,
        verdict=build_verdict(findings, inventory),
        degraded_sources=[*degraded, *check_errors],
    )


def diagnose(
    request: DiagnoseRequest,
    aws: AwsClients,
    *,
    progress: ProgressSink | None = None,
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
    return build_result(inventory, ctx.degraded, ctx.now)
