"""SSM node-probe collector (implemented by the node-probe work, issue 4).

Split in three so the monitor's state machine can run one state per node:
`plan_probes` (which nodes), `probe_node` (one node, never raises), `assemble` (inventory).
`collect_node_probes` composes them for the CLI.
"""

from __future__ import annotations

from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.models.cluster import ControlPlaneInventory
from hyperpod_nccl.models.node_probe import NodeProbeInventory, NodeProbeResult, ProbePlan, ProbeTarget


def plan_probes(ctx: CollectionContext, control_plane: ControlPlaneInventory) -> ProbePlan:
    """Choose the nodes to probe (`--node`, `--sample-nodes N|all`) and say why others are skipped."""
    return ProbePlan()


def probe_node(ctx: CollectionContext, target: ProbeTarget) -> NodeProbeResult:
    """Probe one node over SSM within its budget. Never raises: failures become unreachable."""
    return NodeProbeResult(instance_id=target.instance_id, reachable=False, error="not implemented")


def assemble(plan: ProbePlan, results: list[NodeProbeResult]) -> NodeProbeInventory:
    """Fold per-node results into the inventory the checks read."""
    return NodeProbeInventory(planned_instance_ids=[t.instance_id for t in plan.targets])


def collect_node_probes(ctx: CollectionContext, control_plane: ControlPlaneInventory) -> NodeProbeInventory | None:
    """Probe the planned nodes over SSM. Returns None when no node could be planned."""
    return None
