"""Slurm checks from the controller probe over SSM (original Check 0, 2 and 7 [Slurm])."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._debug_env import debug_gaps
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import NodeProbeResult, SlurmControllerData
from hyperpod_nccl.references import NODE_GPU, OPS_NCCL_ENV, OPS_SLURM, PERF_DEBUG_IMPACT
from hyperpod_nccl.slurm_hostlist import expand_hostlist
from hyperpod_nccl.slurm_states import MISSING_GPU_REASON, SlurmCondition, read_state

_ASSIGNMENT = re.compile(r"^\s*(?:export\s+)?(?P<name>[A-Z_][A-Z0-9_]*)=(?P<value>.*)$")


def _controller(inv: Inventory) -> tuple[NodeProbeResult, SlurmControllerData] | None:
    if inv.node_probes is None:
        return None
    for result in inv.node_probes.results:
        if result.role == "slurm_controller" and result.slurm is not None:
            return result, result.slurm
    return None


def _controller_resource(result: NodeProbeResult) -> Resource:
    return Resource(kind="node", id=result.instance_id, name=f"{result.instance_group} (Slurm controller)")


def _instance_by_host(inv: Inventory) -> dict[str, str]:
    """Slurm node names are the short private DNS names: map them to instance ids."""
    return {node.short_hostname: node.instance_id for node in inv.control_plane.nodes or [] if node.short_hostname}


@check(
    id="slurm.controller",
    title="slurmctld and munge",
    priority=Priority.P0,
    reference=OPS_SLURM,
    source="node_probes",
    orchestrators=("slurm",),
)
def controller(inv: Inventory) -> Iterator[Finding]:
    """Every slurmctld of `scontrol ping` should be UP (none UP blocks every job; a down primary
    with a backup UP degrades), Slurm commands must reach it, and munge must be active."""
    found = _controller(inv)
    if found is None:
        return
    result, slurm = found
    resource = [_controller_resource(result)]
    if result.chosen_because:
        yield controller.info(
            f"Slurm's state was read on {result.instance_id} ({result.instance_group})",
            detail=result.chosen_because,
            resources=resource,
            fields={"signature": "controller_fallback"},
        )
    ping = [slurm.ping_output or "", f"scontrol ping asked {slurm.ping_attempts} time(s)"]
    down = [c for c in slurm.controllers if c.state != "UP"]
    if slurm.controllers and len(down) == len(slurm.controllers):
        yield controller.fail("slurmctld is not UP", evidence=ping, resources=resource)
    elif down:
        for ctl in down:
            yield controller.warn(
                f"slurmctld {ctl.role} at {ctl.host} is {ctl.state}",
                priority=Priority.P1,
                detail="another controller answers, so jobs still schedule; without it there is no failover",
                evidence=ping,
                resources=resource,
                fields={"signature": f"{ctl.role}@{ctl.host}"},
            )
    elif slurm.controllers:
        yield controller.passed("slurmctld is UP", evidence=ping, resources=resource)
    elif slurm.contact_errors:
        yield controller.fail(
            "Slurm commands cannot contact slurmctld",
            detail="sinfo and squeue on the controller node got no answer: slurmctld is down or unreachable",
            evidence=slurm.contact_errors,
            resources=resource,
        )
    elif slurm.scontrol_missing:
        yield controller.info(
            f"scontrol not found on {result.instance_id}: slurmctld's state was not read",
            detail="the node taken for the controller has no Slurm client commands; name the controller's "
            "instance group, or check that the node is the controller",
            resources=resource,
        )
    else:
        yield controller.info(
            f"scontrol ping gave no answer after {slurm.ping_attempts} attempt(s): slurmctld's state was not read",
            detail="the Slurm checks that need slurmctld say nothing about it; run `scontrol ping` on the controller",
            resources=resource,
        )
    if slurm.munge_state and slurm.munge_state != "active":
        yield controller.fail(
            f"munge is {slurm.munge_state} on the controller",
            detail="without munge no Slurm daemon authenticates: jobs cannot start",
            resources=resource,
        )


@check(
    id="slurm.node_states",
    title="Slurm node states",
    priority=Priority.P1,
    reference=OPS_SLURM,
    source="node_probes",
    orchestrators=("slurm",),
)
def node_states(inv: Inventory) -> Iterator[Finding]:
    """Each Slurm node once (sinfo -N prints a node once per partition), its state read as Slurm
    defines it (`hyperpod_nccl.slurm_states`): down, failing, draining, not responding or registered
    with fewer resources fail; drained warns; a node slurmctld has not heard from yet, or a state
    this tool does not know, warns; rebooting, powering or in maintenance is said (INFO). A node
    Slurm took out because it reported fewer GPUs than configured fails at the GPU section."""
    found = _controller(inv)
    if found is None:
        return
    by_host = _instance_by_host(inv)
    usable = 0
    seen: set[str] = set()
    for node in found[1].nodes:
        if node.name in seen:
            continue  # the same node in another partition
        seen.add(node.name)
        state = read_state(node.state)
        if state.condition is SlurmCondition.USABLE:
            usable += 1
            continue
        instance_id = by_host.get(node.name) or by_host.get(node.hostname or "")
        resources = [Resource(kind="slurm_node", id=node.name)]
        if instance_id:
            resources.append(Resource(kind="node", id=instance_id, name=node.name))
        label = f"{node.name} ({instance_id})" if instance_id else node.name
        title = f"Slurm node {label} is {node.state}" + (f": {node.reason}" if node.reason else "")
        fields: dict[str, str | int | float | bool | None] = {
            "state": node.state,
            "reason": node.reason,
            "condition": state.condition.value,
            "signature": state.base,
        }
        missing_gpu = MISSING_GPU_REASON.search(node.reason or "")
        if missing_gpu:
            found_gpus, configured = int(missing_gpu.group("found")), int(missing_gpu.group("configured"))
            yield node_states.fail(
                title,
                reference=NODE_GPU,
                detail=f"slurmd found {found_gpus} of the {configured} GPUs slurm.conf gives the node: a GPU is "
                "lost (fallen off the bus, or not brought up by the driver); read its Xid lines, then reboot, "
                "and replace the node if the GPU stays missing",
                resources=resources,
                fields={**fields, "gpus_found": found_gpus, "gpus_configured": configured, "cause": "gpu_missing"},
            )
        elif state.condition in (SlurmCondition.UNUSABLE, SlurmCondition.DRAINED):
            finding = node_states.warn if state.condition is SlurmCondition.DRAINED else node_states.fail
            yield finding(
                title,
                detail=f"{state.meaning}. Resume it after fixing the cause, or reboot/replace the instance behind it",
                resources=resources,
                fields=fields,
            )
        elif state.condition is SlurmCondition.TRANSITION:
            yield node_states.info(
                title, detail=f"{state.meaning}: wait and recheck", resources=resources, fields=fields
            )
        else:  # undetermined, or a state this tool does not know: never counted as usable
            yield node_states.warn(
                title,
                priority=Priority.P2,
                detail=f"{state.meaning}: read the node's record with `scontrol show node` on the controller",
                resources=resources,
                fields=fields,
            )
    if usable:
        yield node_states.passed(f"{usable} Slurm node(s) in a usable state")


# Pending reasons that name a broken node or partition rather than ordinary scheduling.
_NODE_FAULT_REASONS = re.compile(
    r"NodeDown|launch failed requeued held|UnavailableNodes:|Nodes required for job are (?:DOWN|DRAINED)"
    r"|Partition(?:Inactive|Down|NodeLimit)",
    re.IGNORECASE,
)
_UNAVAILABLE = re.compile(r"UnavailableNodes:(?P<nodes>[^)\s]+(?:\[[^\]]*\])?)")


def _unavailable_nodes(reason: str) -> list[str]:
    """The Slurm node names of `UnavailableNodes:<hostlist>` in a pending reason (the hostlist
    as written when it cannot be expanded)."""
    unavailable = _UNAVAILABLE.search(reason)
    if unavailable is None:
        return []
    try:
        return expand_hostlist(unavailable.group("nodes"))
    except ValueError:
        return [unavailable.group("nodes")]


@check(
    id="slurm.queue",
    title="Slurm queue",
    priority=Priority.P1,
    reference=OPS_SLURM,
    source="node_probes",
    orchestrators=("slurm",),
)
def queue(inv: Inventory) -> Iterator[Finding]:
    """Jobs held back by a broken node or partition warn, naming the nodes and their instances;
    ordinary scheduling reasons (Resources, Priority, Dependency, ...) are listed for information."""
    found = _controller(inv)
    if found is None or not found[1].queue:
        return
    by_host = _instance_by_host(inv)
    waiting = []
    for entry in found[1].queue:
        if not _NODE_FAULT_REASONS.search(entry.reason):
            waiting.append(entry)
            continue
        resources = [Resource(kind="job", id=entry.job_id, name=entry.name)]
        for name in _unavailable_nodes(entry.reason):
            resources.append(Resource(kind="slurm_node", id=name))
            if name in by_host:
                resources.append(Resource(kind="node", id=by_host[name], name=name))
        yield queue.warn(
            f"job {entry.job_id} ({entry.name}) is {entry.state}: {entry.reason}",
            detail="the job waits on a node or partition that is down: fix or replace the node "
            "(slurm.node_states names it), then the job starts",
            resources=resources,
            fields={"reason": entry.reason, "signature": entry.reason},
        )
    if waiting:
        yield queue.info(
            f"{len(waiting)} job(s) pending or completing",
            evidence=[f"job {e.job_id} {e.name}: {e.state} {e.reason}" for e in waiting[:10]],
            resources=[Resource(kind="job", id=e.job_id, name=e.name) for e in waiting[:10]],
        )


@check(
    id="slurm.nccl_env",
    title="NCCL and libfabric environment on the controller",
    priority=Priority.P1,
    reference=OPS_NCCL_ENV,
    source="node_probes",
    orchestrators=("slurm",),
)
def nccl_env(inv: Inventory) -> Iterator[Finding]:
    """NCCL_DEBUG=TRACE (P0) or INFO (P1) in profile/prolog files; FI_PROVIDER is informative;
    Flight Recorder off or NCCL_DEBUG unset there is a recommendation (INFO, P2)."""
    found = _controller(inv)
    if found is None:
        return
    result, slurm = found
    lines = slurm.nccl_env
    resource = [_controller_resource(result)]
    debug = next((line.split("=", 1)[1].strip("'\" ") for line in lines if "NCCL_DEBUG=" in line), None)
    if debug and debug.upper() == "TRACE":
        yield nccl_env.warn(
            "NCCL_DEBUG=TRACE in the Slurm environment files",
            priority=Priority.P0,
            reference=PERF_DEBUG_IMPACT,
            evidence=lines,
            resources=resource,
        )
    elif debug and debug.upper() == "INFO":
        yield nccl_env.warn(
            "NCCL_DEBUG=INFO in the Slurm environment files",
            reference=PERF_DEBUG_IMPACT,
            detail="INFO logging has a measurable cost on every job; keep it for debugging runs (WARN otherwise)",
            evidence=lines,
            resources=resource,
        )
    elif lines:
        yield nccl_env.info("NCCL/FI variables set in the Slurm environment files", evidence=lines, resources=resource)
    else:
        yield nccl_env.info(
            "no NCCL/FI variable in the Slurm environment files",
            detail="usual: jobs set them in their own scripts (node.nccl_job_env reads the running ranks)",
            resources=resource,
        )
    assigned = {m["name"]: m["value"].strip("'\" ") for line in lines if (m := _ASSIGNMENT.match(line))}
    if lines:
        # The files set the cluster's NCCL environment: the two settings EFA jobs need should be in it
        # (original Check 7 [Slurm]: a warning, a job script may still set them).
        for variable, wanted in (("FI_PROVIDER", "efa"), ("NCCL_SOCKET_IFNAME", None)):
            value = assigned.get(variable)
            if value is None or (wanted is not None and value != wanted):
                yield nccl_env.warn(
                    f"Slurm environment files: {variable} " + ("unset" if value is None else f"is {value!r}, not efa"),
                    priority=Priority.P2,
                    detail=f"set {variable}={wanted or '^lo,docker,veth'} there, or make sure every job script does",
                    evidence=lines,
                    resources=resource,
                    fields={"signature": variable},
                )
    for gap in debug_gaps(assigned):
        yield nccl_env.info(
            f"Slurm environment files: {gap.title}",
            priority=Priority.P2,
            reference=gap.reference,
            detail=f"{gap.detail} (a job script may still set it: node.nccl_job_env reads the running ranks)",
            evidence=lines,
            resources=resource,
            fields={"signature": gap.variable},
        )


@check(
    id="slurm.remove_ipc",
    title="RemoveIPC on the Slurm controller",
    priority=Priority.P2,
    reference=OPS_SLURM,
    source="node_probes",
    orchestrators=("slurm",),
)
def slurm_remove_ipc(inv: Inventory) -> Iterator[Finding]:
    """RemoveIPC unset or yes removes shared memory under running jobs (operations § 7)."""
    found = _controller(inv)
    if found is None:
        return
    result, slurm = found
    if slurm.remove_ipc is None or slurm.remove_ipc.lower() in ("yes", "true", "1"):
        yield slurm_remove_ipc.warn(
            f"RemoveIPC is {slurm.remove_ipc or 'unset (defaults to yes)'} on the controller",
            resources=[_controller_resource(result)],
        )
