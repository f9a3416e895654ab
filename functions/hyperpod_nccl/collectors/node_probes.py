"""SSM node-probe collector.

Split in three so the monitor's state machine can run one state per node:
`plan_probes` (which nodes), `probe_node` (one node, never raises), `assemble` (inventory).
`collect_node_probes` composes them for the CLI: a thread pool sized from the probes' own time
(`probes_at_once`), the run's StartSession pacer (`CollectionContext.start_pacer`) and a progress
line.

A node the account's StartSession rate left no start for inside its budget (the pacer refused, or
AWS throttled every try) was not probed: it is counted with the skipped nodes, not the
unreachable ones, and `rate_limited_source` names it as a partial source (docs/pacing.md).
"""

from __future__ import annotations

import bisect
import itertools
import os
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from pydantic import ValidationError

from hyperpod_nccl import instance_types, node_statuses, thresholds
from hyperpod_nccl.aws_errors import AWS_CALL_ERRORS
from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.models.cluster import ClusterNode, ControlPlaneInventory
from hyperpod_nccl.models.findings import DegradedSource
from hyperpod_nccl.models.node_probe import NodeProbeInventory, NodeProbeResult, ProbePlan, ProbeTarget
from hyperpod_nccl.pacing import probe_seconds_percentile, probes_to_keep_pace
from hyperpod_nccl.probe import documents, script
from hyperpod_nccl.probe.parsers import parse_node_probe, parse_slurm_controller
from hyperpod_nccl.probe.sections import describe_missing, missing_sections
from hyperpod_nccl.ssm.client import (
    DOCUMENT,
    NOT_STARTED_MESSAGE,
    SessionError,
    SessionErrorKind,
    SessionLimits,
    SessionRunner,
    wrap_command,
)

# Why a probe started no session at all: the account's StartSession rate, not the node.
NOT_STARTED_KINDS = frozenset({SessionErrorKind.RATE_LIMITED.value, SessionErrorKind.THROTTLED.value})
# Nodes named in the partial source before "and N more".
_NAMED_NOT_STARTED = 10
# Instance groups whose name marks them as utility nodes (the original's tiering).
_UTILITY_MARKERS = ("controller", "head", "master", "login")


def _is_utility(node: ClusterNode, control_plane: ControlPlaneInventory) -> bool:
    cluster = control_plane.cluster
    group = cluster.group(node.instance_group) if cluster else None
    if group is not None and group.slurm_node_type in ("Controller", "Login"):
        return True
    return any(marker in node.instance_group.lower() for marker in _UTILITY_MARKERS)


def _tier(node: ClusterNode, control_plane: ControlPlaneInventory) -> int:
    """Lower probes first: Running accelerator nodes, other Running nodes, utility nodes, then
    nodes HyperPod already reports unhealthy (probed last; they are often unreachable)."""
    if node.status != "Running":
        return 3
    if _is_utility(node, control_plane):
        return 2
    return 0 if instance_types.accelerator(node.instance_type) != "cpu" else 1


def _target(node: ClusterNode, cluster_id: str, role: str = "node") -> ProbeTarget:
    return ProbeTarget(
        instance_id=node.instance_id,
        instance_group=node.instance_group,
        instance_type=node.instance_type,
        cluster_id=cluster_id,
        role="slurm_controller" if role == "slurm_controller" else "node",
        hostname=node.private_dns_hostname,
        status=node.status,
    )


# Why the node asked for Slurm's state is not the controller, when no group is marked as one.
CONTROLLER_FALLBACK = (
    "no instance group is typed or named as the Slurm controller: Slurm's client commands answer from any "
    "node of the cluster, so this one was asked"
)


def _slurm_controller(control_plane: ControlPlaneInventory) -> tuple[ClusterNode, str | None] | None:
    """The node asked for Slurm's state, and why when it is a fallback: the Controller-typed group,
    else a group named like one, else (so that the Slurm checks never vanish) a login node, else
    the first Running node (original probe: the first Running node)."""
    cluster = control_plane.cluster
    running = [n for n in control_plane.nodes or [] if n.status == "Running"]
    for node in running:
        group = cluster.group(node.instance_group) if cluster else None
        if group is not None and group.slurm_node_type == "Controller":
            return node, None
    named = next(
        (n for n in running if any(m in n.instance_group.lower() for m in ("controller", "head", "master"))), None
    )
    if named is not None:
        return named, None
    login = next((n for n in running if "login" in n.instance_group.lower()), None)
    fallback = login or next(iter(running), None)
    return (fallback, CONTROLLER_FALLBACK) if fallback is not None else None


def plan_probes(ctx: CollectionContext, control_plane: ControlPlaneInventory) -> ProbePlan:
    """Choose the nodes to probe (`--node`, `--sample-nodes N|all`) and say why others are skipped."""
    cluster = control_plane.cluster
    nodes = control_plane.nodes or []
    if cluster is None or not nodes:
        return ProbePlan()
    scope = ctx.request.scope
    plan = ProbePlan()
    if scope.node:
        chosen = [n for n in nodes if n.instance_id == scope.node]
        if not chosen:
            plan.skipped[scope.node] = "not a node of this cluster (ListClusterNodes)"
        plan.targets = _valid_targets(chosen, cluster.cluster_id, plan)
        plan.skipped.update(
            {n.instance_id: "--node selects another node" for n in nodes if n.instance_id != scope.node}
        )
        return plan
    candidates = []
    for node in nodes:
        # Nodes without an instance behind them (Pending, ShuttingDown, NotFound): nothing to probe.
        if not node_statuses.has_instance(node.status):
            entry = node_statuses.status_entry(node.status)
            plan.skipped[node.instance_id] = f"status {node.status}: {entry.meaning if entry else 'no instance'}"
        else:
            candidates.append(node)
    candidates.sort(key=lambda n: _tier(n, control_plane))
    limit = len(candidates) if scope.sample_nodes == "all" else int(scope.sample_nodes)
    for node in candidates[limit:]:
        plan.skipped[node.instance_id] = f"not in the sample of {limit} (use --sample-nodes all)"
    plan.targets = _valid_targets(candidates[:limit], cluster.cluster_id, plan)
    if cluster.orchestrator == "slurm":
        picked = _slurm_controller(control_plane)
        if picked is not None:
            controller, because = picked
            plan.skipped.pop(controller.instance_id, None)
            plan.targets = [t for t in plan.targets if t.instance_id != controller.instance_id]
            targets = _valid_targets([controller], cluster.cluster_id, plan, "slurm_controller")
            plan.targets[:0] = [t.model_copy(update={"chosen_because": because}) for t in targets]
    return plan


def _valid_targets(nodes: list[ClusterNode], cluster_id: str, plan: ProbePlan, role: str = "node") -> list[ProbeTarget]:
    """Targets for `nodes`; a node whose ids could not form a well-formed SSM target is skipped
    with the reason, so no API-supplied value can change which session target is opened."""
    targets = []
    for node in nodes:
        try:
            targets.append(_target(node, cluster_id, role))
        except ValidationError as error:
            fields = ", ".join(str(e["loc"][0]) for e in error.errors())
            plan.skipped[node.instance_id] = f"not probed: malformed {fields} for an SSM target"
    return targets


def _runner(ctx: CollectionContext) -> SessionRunner:
    limits = SessionLimits(output_bytes=ctx.probe_output_max_bytes)
    return SessionRunner(ssm=ctx.aws.client("ssm", paced=True), limiter=ctx.start_pacer, limits=limits)


def deployed_documents(ctx: CollectionContext, stack_name: str) -> dict[str, str]:
    """The monitor stack's probe documents this version can use: each one that exists and whose
    content (GetDocument, read-only) is exactly the local probe's. A role whose document is
    missing, unreadable or different probes through the AWS managed document instead."""
    ssm = ctx.aws.client("ssm")
    found: dict[str, str] = {}
    for role, name in documents.document_names(stack_name).items():
        try:
            content = ssm.get_document(Name=name, DocumentFormat="JSON").get("Content", "")
        except AWS_CALL_ERRORS:
            continue
        if documents.matches_local(str(content), role):
            found[role] = name
    return found


def probe_node(ctx: CollectionContext, target: ProbeTarget, runner: SessionRunner | None = None) -> NodeProbeResult:
    """Probe one node over SSM within its budget. Never raises: failures become unreachable."""
    runner = runner or _runner(ctx)
    started = time.monotonic()
    result = NodeProbeResult(
        instance_id=target.instance_id,
        reachable=False,
        instance_group=target.instance_group,
        instance_type=target.instance_type,
        hostname=target.hostname,
        role=target.role,
        status=target.status,
        chosen_because=target.chosen_because,
    )
    result.started_at = time.time()
    document = (ctx.probe_documents or {}).get(target.role)
    result.session_document = document or DOCUMENT
    try:
        if document:
            outcome = runner.run(target.ssm_target, document=document)
        else:
            outcome = runner.run(target.ssm_target, wrap_command(script(target.role)))
    except SessionError as error:
        result.error = error.message
        result.error_kind = error.kind.value
        result.error_code = error.code or None
        result.attempts = error.attempts
        result.throttles = error.throttles
        result.paced_seconds = round(error.paced_seconds, 3)
        # Keep what arrived before the budget ran out: the sections it holds are still facts.
        if error.partial_output:
            _attach(result, error.partial_output.decode("utf-8", "replace"))
            result.output_bytes = len(error.partial_output)
            if error.kind is SessionErrorKind.BUDGET_EXPIRED:
                result.error = f"probe cut at {runner.budget_seconds:g} s: {_missing_sections(result)}"
    except Exception as error:  # noqa: BLE001 - one node's surprise must not end the sweep
        result.error = f"{type(error).__name__}: {error}"
        result.error_kind = "internal"
    else:
        result.reachable = True
        result.complete = outcome.exit_code is not None
        result.exit_code = outcome.exit_code
        result.attempts = outcome.attempts
        result.throttles = outcome.throttles
        result.paced_seconds = round(outcome.paced_seconds, 3)
        result.output_bytes = len(outcome.output)
        _attach(result, outcome.text)
    result.retries = max(0, result.attempts - 1)
    result.answered_at = time.time()
    result.duration_seconds = round(time.monotonic() - started, 3)
    return result


def not_started(result: NodeProbeResult) -> bool:
    """The probe started no session because of the account's StartSession rate (NOT_STARTED_KINDS)."""
    return not result.reachable and result.error_kind in NOT_STARTED_KINDS


def rate_limited_source(results: list[NodeProbeResult]) -> DegradedSource | None:
    """The partial source naming the nodes the StartSession rate left unprobed; None when none was."""
    missed = [r.instance_id for r in results if not_started(r)]
    if not missed:
        return None
    named = ", ".join(missed[:_NAMED_NOT_STARTED])
    more = f" and {len(missed) - _NAMED_NOT_STARTED} more" if len(missed) > _NAMED_NOT_STARTED else ""
    return DegradedSource(
        source="node probes",
        reason=f"{len(missed)} node(s) {NOT_STARTED_MESSAGE}: {named}{more}",
        fix="probe fewer nodes per sweep, sweep less often, or leave the account's StartSession rate to the monitor "
        "(other Session Manager users share it); docs/pacing.md",
        partial=True,
    )


def _missing_sections(result: NodeProbeResult) -> str:
    """Which sections of the role's script a cut-off answer lacks (not ended), in script order."""
    return describe_missing(missing_sections(result.role, result.ended_sections()))


def _attach(result: NodeProbeResult, text: str) -> None:
    if result.role == "slurm_controller":
        result.slurm = parse_slurm_controller(text)
    else:
        result.probe = parse_node_probe(text)


def assemble(plan: ProbePlan, results: list[NodeProbeResult]) -> NodeProbeInventory:
    """Fold per-node results into the inventory the checks read. A node the StartSession rate
    left unprobed is skipped, with the reason, not unreachable: nothing is known about it."""
    skipped = dict(plan.skipped)
    skipped.update({r.instance_id: NOT_STARTED_MESSAGE for r in results if not_started(r)})
    return NodeProbeInventory(
        planned_instance_ids=[t.instance_id for t in plan.targets],
        probed_instance_ids=[r.instance_id for r in results if r.reachable],
        unreachable_instance_ids=[r.instance_id for r in results if not r.reachable and not not_started(r)],
        skipped_instance_ids=list(skipped),
        skipped_reasons=skipped,
        results=results,
    )


def probe_workers_ceiling(memory_bytes: int | None) -> int:
    """The most probes the CLI runs at once on a machine of `memory_bytes` (None: unknown): what
    `SSM_PROBE_MEMORY_SHARE` of it holds at the most one session may hold, between
    `SSM_PROBE_WORKERS` and `SSM_PROBE_WORKERS_MAX`."""
    if memory_bytes is None:
        return thresholds.SSM_PROBE_WORKERS
    fits = int(memory_bytes * thresholds.SSM_PROBE_MEMORY_SHARE) // thresholds.SSM_SESSION_MAX_OUTPUT_BYTES
    return max(thresholds.SSM_PROBE_WORKERS, min(thresholds.SSM_PROBE_WORKERS_MAX, fits))


def probes_at_once(rate_per_second: float, session_times: list[float], ceiling: int) -> int:
    """How many probes the CLI keeps in flight: enough to keep the StartSession pace busy for
    probes of the high percentile of the session times of those that ended (`EXPECTED_PROBE_SECONDS`
    before any did: waiting for the first to end before widening would cost a whole probe time),
    never fewer than `SSM_PROBE_WORKERS`, at most `ceiling`."""
    measured = probe_seconds_percentile(session_times)
    seconds = thresholds.EXPECTED_PROBE_SECONDS if measured is None else measured
    wanted = max(thresholds.SSM_PROBE_WORKERS, probes_to_keep_pace(rate_per_second, seconds))
    return max(1, min(ceiling, wanted))


def session_seconds(result: NodeProbeResult) -> float | None:
    """How long a probe held its slot beyond waiting for its start (`paced_seconds`); None when it
    has no duration (its node was never probed) or its session never started (the rate left it
    none: its time was waiting, not probing)."""
    if result.duration_seconds <= 0 or not_started(result):
        return None
    return max(0.0, result.duration_seconds - result.paced_seconds)


def _machine_memory_bytes() -> int | None:
    """Physical memory of this machine, None where the platform does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def collect_node_probes(ctx: CollectionContext, control_plane: ControlPlaneInventory) -> NodeProbeInventory | None:
    """Probe the planned nodes over SSM in parallel. Returns None when no node could be planned."""
    plan = plan_probes(ctx, control_plane)
    if not plan.targets:
        return assemble(plan, []) if plan.skipped else None
    if ctx.probe_documents is None:
        ctx.probe_documents = deployed_documents(ctx, documents.monitor_stack_name())
    runner = _runner(ctx)
    results: list[NodeProbeResult] = []
    total = len(plan.targets)
    ctx.progress(f"probing {total} node(s) over SSM")
    ceiling = min(total, probe_workers_ceiling(_machine_memory_bytes()))
    rate = ctx.request.start_session_rate
    # Kept sorted (the percentile's sort is then linear): sizing runs after every completion.
    session_times: list[float] = []
    waiting = iter(plan.targets)
    in_flight: set[Future[NodeProbeResult]] = set()
    most_at_once = reached = paced = 0
    with ThreadPoolExecutor(max_workers=ceiling, thread_name_prefix="ssm-probe") as pool:
        while True:
            room = probes_at_once(rate, session_times, ceiling) - len(in_flight)
            in_flight |= {pool.submit(probe_node, ctx, t, runner) for t in itertools.islice(waiting, max(0, room))}
            most_at_once = max(most_at_once, len(in_flight))
            if not in_flight:
                break
            done, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in done:
                result = future.result()
                results.append(result)
                reached += result.reachable
                paced += not_started(result)
                held = session_seconds(result)
                if held is not None:
                    bisect.insort(session_times, held)
            missed = len(results) - reached - paced
            unprobed = f", {paced} not started (StartSession rate)" if paced else ""
            ctx.progress(f"SSM probes {len(results)}/{total} done ({reached} reached, {missed} unreachable{unprobed})")
    order = {t.instance_id: i for i, t in enumerate(plan.targets)}
    results.sort(key=lambda r: order.get(r.instance_id, len(order)))
    paced_out = rate_limited_source(results)
    if paced_out is not None:
        ctx.degrade(paced_out)
    inventory = assemble(plan, results)
    inventory.probes_at_once = most_at_once
    return inventory
