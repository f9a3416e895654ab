"""Kubernetes node checks: the Ready condition and the HyperPod health labels, per node."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_nccl import suggested
from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._kubernetes import kube
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.kubernetes import K8sNode
from hyperpod_nccl.reads import K8S_NODES
from hyperpod_nccl.references import NODE_HARDWARE, OPS_NODE_HEALTH_LABELS

# What HyperPod does for each node-health-status value (operations.md § 6).
_HEALTH_MEANING = {
    "Unschedulable": "deep health checks are running (about 2 hours); no new pods are scheduled here",
    "UnschedulablePendingReboot": "HyperPod flagged the node for a reboot",
    "UnschedulablePendingReplacement": "the node failed a health check and is waiting to be replaced",
}


def _node_resources(node: K8sNode) -> list[Resource]:
    resources = [Resource(kind="k8s_node", id=node.name)]
    if node.instance_id:
        resources.append(Resource(kind="node", id=node.instance_id, name=node.name))
    return resources


def _label(node: K8sNode) -> str:
    return f"{node.name} ({node.instance_id})" if node.instance_id else node.name


@check(
    id="k8s.node_ready",
    title="Kubernetes nodes Ready",
    priority=Priority.P1,
    reference=NODE_HARDWARE,
    source="kubernetes",
    orchestrators=("eks",),
    reads=(K8S_NODES,),
)
def node_ready(inv: Inventory) -> Iterator[Finding]:
    """Every node whose kubelet does not report Ready is a finding of its own."""
    nodes = kube(inv).nodes
    if nodes is None:
        return
    bad = [n for n in nodes if n.ready is not True]
    for node in bad:
        ready = node.condition("Ready")
        state = "NotReady" if node.ready is False else "Unknown (kubelet stopped reporting)"
        yield node_ready.fail(
            f"node {_label(node)} is {state}",
            detail=(ready.message or ready.reason or "") if ready else "no Ready condition reported",
            resources=_node_resources(node),
            evidence=[f"Ready={ready.status} reason={ready.reason} message={ready.message}"] if ready else [],
            suggested_commands=(
                [suggested.describe_cluster_node(inv.cluster_name, node.instance_id, inv.region)]
                if node.instance_id
                else []
            ),
        )
    if not bad and nodes:
        yield node_ready.passed(f"all {len(nodes)} Kubernetes nodes are Ready")


def _is_healthy(node: K8sNode) -> bool:
    return (
        node.health_status in (None, "Schedulable")
        and node.deep_health_status in (None, "Passed")
        and not node.fault_types
        and not node.fault_reasons
        and not node.hma_fault_conditions
    )


def _fault_conditions(node: K8sNode) -> str:
    """The fault conditions HMA holds True, as `type (reason)`."""
    return ", ".join(f"{c.type} ({c.reason})" if c.reason else c.type for c in node.hma_fault_conditions)


@check(
    id="k8s.node_health_labels",
    title="HyperPod node health labels",
    priority=Priority.P1,
    reference=OPS_NODE_HEALTH_LABELS,
    source="kubernetes",
    orchestrators=("eks",),
    reads=(K8S_NODES,),
)
def node_health_labels(inv: Inventory) -> Iterator[Finding]:
    """One finding per node whose HyperPod health labels are not healthy, saying what HyperPod
    is doing about it (both fault-type(s)/fault-reason(s) spellings, fault-details, and the node condition the
    health-monitoring agent sets per fault: type the fault type, reason the fault reason)."""
    nodes = kube(inv).nodes
    if nodes is None:
        return
    cluster = inv.control_plane.cluster
    automatic = cluster is not None and cluster.node_recovery == "Automatic"
    unhealthy = [n for n in nodes if not _is_healthy(n)]
    for node in unhealthy:
        status = node.health_status or "Schedulable"
        deep = node.deep_health_status
        doing = _HEALTH_MEANING.get(status, f"node-health-status is {status}")
        if deep == "InProgress" and status == "Schedulable":
            doing = "deep health checks are in progress"
        elif status == "Schedulable" and node.hma_fault_conditions:
            # The agent labels a node as it sets the condition: a True condition on a Schedulable node
            # means the label was changed by hand or the agent's update is under way.
            doing = f"the health-monitoring agent reports {_fault_conditions(node)}"
        evidence = [f"node-health-status={status}", f"deep-health-check-status={deep or '-'}"]
        if node.fault_types:
            evidence.append("fault-type(s)=" + ",".join(node.fault_types))
        if node.fault_reasons:
            evidence.append("fault-reason(s)=" + ",".join(node.fault_reasons))
        evidence += [
            f"condition {c.type}=True reason={c.reason or '-'}" + (f": {c.message}" if c.message else "")
            for c in node.hma_fault_conditions[:3]
        ]
        evidence += [f"fault-details: {detail}" for detail in node.fault_details[:3]]
        commands = []
        if node.instance_id:
            commands.append(suggested.describe_cluster_node(inv.cluster_name, node.instance_id, inv.region))
        replacing = status == "UnschedulablePendingReplacement" or deep == "Failed"
        if replacing:
            reference = NODE_HARDWARE
            recovery = (
                "NodeRecovery is Automatic: HyperPod replaces it by itself; keep jobs off it until then"
                if automatic
                else "NodeRecovery is not Automatic: nobody will replace it unless you do"
            )
            if node.instance_id and not automatic:
                commands.append(suggested.batch_replace(inv.cluster_name, [node.instance_id], inv.region))
            yield node_health_labels.fail(
                f"node {_label(node)}: {doing}",
                detail=recovery,
                reference=reference,
                evidence=evidence,
                resources=_node_resources(node),
                suggested_commands=commands,
                fields={"node_health_status": status, "deep_health_check_status": deep},
            )
            continue
        in_progress = status == "Unschedulable" or deep == "InProgress"
        yield node_health_labels.warn(
            f"node {_label(node)}: {doing}",
            priority=Priority.P2 if in_progress else Priority.P1,
            detail="the node is out of scheduling until HyperPod clears the label"
            + ("" if automatic else "; NodeRecovery is not Automatic, so a flagged node stays flagged"),
            evidence=evidence,
            resources=_node_resources(node),
            suggested_commands=commands,
            fields={"node_health_status": status, "deep_health_check_status": deep},
        )
    if not unhealthy and nodes:
        yield node_health_labels.passed(f"all {len(nodes)} nodes Schedulable with no HyperPod fault labels")
