"""The safe plan per root cause: what a person runs, in which order, under which condition.

Node faults follow one ladder: investigate → drain → (job: restart from the last checkpoint
without the node) → reboot → recheck → replace, only if the recheck still fails → resume. The
fault's own classification decides where the ladder starts: an Xid whose action is `replace`
(79, 64) skips the reboot that would only hide it. A node HyperPod is already recovering
(NodeRecovery Automatic and a replacement or reboot under way) gets no manual step at all: the
plan says so and how to watch it; so does a node whose ListClusterNodes status rules a reboot or a
replacement out, whatever NodeRecovery says (a transition, NotFound, a status the API model does not
list: `node_statuses.py`). A P2 cause never gets a reboot or a replacement. Node ids are
batched 25 per call (the API's limit); every id and name is shell-quoted.

Other causes take the fix commands their checks already built (a security group rule, a pod-spec
change, an on-node setting), minus any reboot or replacement: only the ladder issues those.
Pure: a function of the root cause, its findings and the inventory.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from hyperpod_nccl import node_statuses, suggested
from hyperpod_nccl.checks.cluster_events import categorise
from hyperpod_nccl.models.findings import Finding, Priority, SuggestedCommand
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.verdict import PlanStep, RootCause
from hyperpod_nccl.xid import xid_info

# HyperPod's BatchRebootClusterNodes / BatchReplaceClusterNodes take at most 25 node ids per call.
NODE_IDS_PER_CALL = 25
# Root causes whose fix is the node itself (the hardware ladder).
LADDER_KINDS = frozenset({"gpu_hardware", "efa_hardware", "gpu_memory_health", "node_unhealthy"})
_RECOVERY_EVENTS = frozenset({"replacement", "reboot"})


@dataclass(frozen=True)
class PlanContext:
    """What the plan needs to know about the cluster: its name and region, whether HyperPod
    recovers nodes itself and which it is recovering now, the nodes whose ListClusterNodes status
    rules out a reboot or a replacement (`held`: a transition, NotFound, a status the API model does
    not list; node → status), and each instance's other names."""

    cluster: str
    region: str
    orchestrator: str = "unknown"
    automatic_recovery: bool = False
    recovering: frozenset[str] = frozenset()
    held: dict[str, str] = field(default_factory=dict)
    k8s_name: dict[str, str] = field(default_factory=dict)
    slurm_name: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, inventory: Inventory) -> PlanContext:
        """The context the inventory gives (names from Kubernetes nodes and Slurm's sinfo)."""
        cp = inventory.control_plane
        automatic = bool(cp.cluster and (cp.cluster.node_recovery or "").lower() == "automatic")
        held = node_statuses.held_nodes(cp.nodes or [])
        recovering = {
            e.instance_id for e in cp.events or [] if e.instance_id and categorise(e).name in _RECOVERY_EVENTS
        }
        k8s = (
            {n.instance_id: n.name for n in (inventory.kubernetes.nodes or []) if n.instance_id}
            if (inventory.kubernetes)
            else {}
        )
        # Slurm knows a HyperPod node by its short private DNS name (as the Slurm checks map them).
        slurm = (
            {n.instance_id: n.short_hostname for n in cp.nodes or [] if n.short_hostname}
            if inventory.orchestrator == "slurm"
            else {}
        )
        return cls(
            cluster=inventory.cluster_name,
            region=inventory.region,
            orchestrator=inventory.orchestrator,
            automatic_recovery=automatic,
            recovering=frozenset(recovering) if automatic else frozenset(),
            held=held,
            k8s_name=k8s,
            slurm_name=slurm,
        )


def _q(value: str) -> str:
    return shlex.quote(value)


def _chunks(ids: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(ids), NODE_IDS_PER_CALL):
        yield ids[start : start + NODE_IDS_PER_CALL]


def _nodes_of(cause: RootCause) -> list[str]:
    return sorted({r.id for r in cause.resources if r.kind == "node"})


def _replace_first(findings: Iterable[Finding]) -> bool:
    """Whether the fault's own classification says replace, not reboot (Xid 79, 64 ...)."""
    for finding in findings:
        code = finding.fields.get("xid")
        if isinstance(code, int | str) and str(code).isdigit() and xid_info(int(code)).action == "replace":
            return True
        if finding.fields.get("action") == "replace":
            return True
    return False


def _drain(ctx: PlanContext, nodes: list[str], reason: str) -> list[PlanStep]:
    steps: list[PlanStep] = []
    k8s = [ctx.k8s_name[n] for n in nodes if n in ctx.k8s_name]
    slurm = [ctx.slurm_name[n] for n in nodes if n in ctx.slurm_name]
    if k8s:
        names = " ".join(_q(n) for n in k8s)
        steps.append(
            PlanStep(
                stage="drain",
                description="stop new pods landing on the node(s) and move the running ones off",
                command=f"kubectl cordon {names}\n"
                f"kubectl drain {names} --ignore-daemonsets --delete-emptydir-data --timeout=10m",
                precondition="the job can lose these pods (it restarts from its checkpoint)",
            )
        )
    if slurm:
        steps.append(
            PlanStep(
                stage="drain",
                description="let running steps finish and schedule nothing new on the node(s)",
                command=f"scontrol update nodename={_q(','.join(slurm))} state=drain reason={_q(reason)}",
            )
        )
    if not steps:
        steps.append(
            PlanStep(
                stage="drain",
                description="take the node(s) out of scheduling before touching them "
                "(kubectl cordon/drain <node> or scontrol update nodename=<name> state=drain)",
                precondition="the node's Kubernetes or Slurm name was not read in this diagnosis",
            )
        )
    return steps


def _job_step(ctx: PlanContext, nodes: list[str]) -> PlanStep:
    slurm = [ctx.slurm_name[n] for n in nodes if n in ctx.slurm_name]
    exclude = f" (sbatch/srun --exclude={_q(','.join(slurm))})" if slurm else ""
    return PlanStep(
        stage="job",
        description=f"restart the affected job from its last checkpoint without the node(s){exclude}",
    )


def _reboot(ctx: PlanContext, nodes: list[str]) -> list[PlanStep]:
    return [
        PlanStep(
            stage="reboot",
            description=f"reboot {len(batch)} node(s): clears a transient fault (and applies pending row remaps)",
            command=f"aws sagemaker batch-reboot-cluster-nodes --region {_q(ctx.region)} "
            f"--cluster-name {_q(ctx.cluster)} --node-ids {' '.join(_q(i) for i in batch)}",
            precondition="drained; jobs on these nodes are interrupted, volumes are kept",
        )
        for batch in _chunks(nodes)
    ]


def _recheck(ctx: PlanContext, nodes: list[str]) -> list[PlanStep]:
    return [
        PlanStep(
            stage="recheck",
            description=f"diagnose {node} again once it is Running",
            command=f"hyperpod-nccl diagnose --cluster {_q(ctx.cluster)} --region {_q(ctx.region)} --node {_q(node)}",
        )
        for node in nodes
    ]


def _recheck_cluster(ctx: PlanContext) -> PlanStep:
    return PlanStep(
        stage="recheck",
        description="diagnose the cluster again once the replacement node is Running",
        command=f"hyperpod-nccl diagnose --cluster {_q(ctx.cluster)} --region {_q(ctx.region)}",
    )


def _replace(ctx: PlanContext, nodes: list[str], *, conditional: bool) -> list[PlanStep]:
    return [
        PlanStep(
            stage="replace",
            description=f"replace {len(batch)} node(s)"
            + (" only if the recheck still shows the fault" if conditional else ": the fault's own action is replace"),
            command=f"aws sagemaker batch-replace-cluster-nodes --region {_q(ctx.region)} "
            f"--cluster-name {_q(ctx.cluster)} --node-ids {' '.join(_q(i) for i in batch)}",
            precondition="the root and secondary volumes of these nodes are destroyed; never the Slurm controller",
            conditional=conditional,
        )
        for batch in _chunks(nodes)
    ]


def _resume(ctx: PlanContext, nodes: list[str]) -> list[PlanStep]:
    steps: list[PlanStep] = []
    k8s = [ctx.k8s_name[n] for n in nodes if n in ctx.k8s_name]
    slurm = [ctx.slurm_name[n] for n in nodes if n in ctx.slurm_name]
    if k8s:
        steps.append(
            PlanStep(
                stage="resume",
                description="let pods land on the node(s) again once the recheck passes (a replaced node joins new)",
                command="kubectl uncordon " + " ".join(_q(n) for n in k8s),
                conditional=True,
            )
        )
    if slurm:
        steps.append(
            PlanStep(
                stage="resume",
                description="return the node(s) to Slurm once the recheck passes",
                command=f"scontrol update nodename={_q(','.join(slurm))} state=resume",
                conditional=True,
            )
        )
    return steps


def _watch(ctx: PlanContext, nodes: list[str]) -> list[PlanStep]:
    return [
        PlanStep(
            stage="watch",
            description=f"HyperPod is already recovering {node} (NodeRecovery Automatic): do not reboot or "
            "replace it by hand; watch its status until it is Running, then recheck",
            command=_status_command(ctx, node),
        )
        for node in nodes
    ]


def _hold(ctx: PlanContext, nodes: list[str]) -> list[PlanStep]:
    steps = []
    for node in nodes:
        status = ctx.held[node]
        entry = node_statuses.status_entry(status)
        if entry is None:
            why = f"reports {node} {status!r}, a status the SageMaker API model does not list"
        else:
            why = f"reports {node} {status} ({entry.meaning})"
        moving = entry is not None and entry.condition is node_statuses.NodeCondition.TRANSITION
        wait = ", wait and recheck once it is Running" if moving else ""
        steps.append(
            PlanStep(
                stage="watch",
                description=f"HyperPod {why}: do not reboot or replace it{wait}; read its status first",
                command=_status_command(ctx, node),
            )
        )
    return steps


def _status_command(ctx: PlanContext, node: str) -> str:
    return (
        f"aws sagemaker describe-cluster-node --region {_q(ctx.region)} "
        f"--cluster-name {_q(ctx.cluster)} --node-id {_q(node)} --query NodeDetails.InstanceStatus"
    )


def _investigate(ctx: PlanContext, nodes: list[str]) -> list[PlanStep]:
    return [
        PlanStep(
            stage="investigate",
            description=f"read HyperPod's view of {node} (read-only)",
            command=suggested.describe_cluster_node(ctx.cluster, node, ctx.region).command,
        )
        for node in nodes
    ]


def _ladder(cause: RootCause, findings: list[Finding], ctx: PlanContext) -> list[PlanStep]:
    nodes = _nodes_of(cause)
    held = [n for n in nodes if n in ctx.held]
    watched = [n for n in nodes if n in ctx.recovering and n not in ctx.held]
    manual = [n for n in nodes if n not in ctx.recovering and n not in ctx.held]
    steps = _hold(ctx, held) + _watch(ctx, watched)
    if not manual:
        left_alone = [*held, *watched]
        return [*steps, _job_step(ctx, left_alone)] if left_alone else steps
    steps += _investigate(ctx, manual)
    steps += _drain(ctx, manual, f"hyperpod-nccl: {cause.kind}")
    steps.append(_job_step(ctx, manual))
    if cause.priority is Priority.P2:
        return steps  # advisory: never a reboot or a replacement
    if _replace_first(findings):
        # The replacement joins as a new node (new id, nothing to uncordon): recheck the cluster.
        return [*steps, *_replace(ctx, manual, conditional=False), _recheck_cluster(ctx)]
    steps += _reboot(ctx, manual) + _recheck(ctx, manual) + _replace(ctx, manual, conditional=True)
    return steps + _resume(ctx, manual)


def _is_ladder_command(command: SuggestedCommand) -> bool:
    return command.effect in ("reboot", "replace")


def _fix_steps(findings: Iterable[Finding]) -> list[PlanStep]:
    seen: set[str] = set()
    steps: list[PlanStep] = []
    for finding in findings:
        for command in finding.suggested_commands:
            if _is_ladder_command(command) or command.command in seen:
                continue
            seen.add(command.command)
            steps.append(
                PlanStep(
                    stage="fix",
                    description=command.description,
                    command=command.command,
                    language=command.language,
                    yaml_path=command.yaml_path,
                    session=command.session,
                    precondition="; ".join(p for p in (command.preconditions, command.blast_radius) if p) or None,
                )
            )
    return steps


def plan_for(cause: RootCause, findings: list[Finding], ctx: PlanContext) -> list[PlanStep]:
    """The ordered steps for one root cause, given its own findings (its evidence)."""
    if cause.kind in LADDER_KINDS:
        return _ladder(cause, findings, ctx)
    return _fix_steps(findings)
