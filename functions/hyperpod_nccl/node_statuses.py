"""What each node status of ListClusterNodes means for a diagnosis: the SageMaker API's
`ClusterInstanceStatus` enum (`ClusterNodeSummary.InstanceStatus.Status`), spelled once.

The node-status check, the probe planner, the engine's guard on reboot/replace commands and the
safe plan read this table; `tests/unit/test_node_statuses.py` holds it equal to the API model's
enum, so a status AWS adds fails a test instead of being treated as a failure by default.

Three meanings matter: `Failure` is a fault on the node (the investigate → reboot → replace
ladder applies); a transition is HyperPod working on the node (wait and recheck: a reboot or a
replacement would fight it); `NotFound` is a record without an instance behind it (nothing to
reboot, and not a hardware fault: a capacity or bookkeeping question). A status outside the table
is unknown: reported, never rebooted or replaced on our word.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from hyperpod_nccl.models.cluster import ClusterNode


class NodeCondition(StrEnum):
    """What a status says about the node."""

    RUNNING = "running"
    FAILED = "failed"
    TRANSITION = "transition"
    NOT_FOUND = "not_found"


@dataclass(frozen=True)
class NodeStatus:
    """One `ClusterInstanceStatus` value: its condition, whether an instance is there to probe
    over SSM, and what it means in a sentence for the operator."""

    name: str
    condition: NodeCondition
    has_instance: bool
    meaning: str

    @property
    def may_reboot_or_replace(self) -> bool:
        """Whether a person may reboot or replace the node in this status (a fault found on a
        Running node, or a Failure): never while HyperPod is moving it, never without an instance."""
        return self.condition in (NodeCondition.RUNNING, NodeCondition.FAILED)


# ClusterInstanceStatus in botocore's sagemaker/2017-07-24/service-2.json (botocore 1.44.8), in the
# model's order. The meanings of AttachInProgress and DetachInProgress are not documented; the
# model adds them beside AttachClusterNodeVolume, DetachClusterNodeVolume and
# AttachClusterNodeNetworkInterface, so they are read as an attachment in progress on a live instance.
NODE_STATUSES: tuple[NodeStatus, ...] = (
    NodeStatus("Running", NodeCondition.RUNNING, True, "running"),
    NodeStatus("Failure", NodeCondition.FAILED, True, "HyperPod reports the instance failed"),
    NodeStatus("Pending", NodeCondition.TRANSITION, False, "being provisioned: no instance to reach yet"),
    NodeStatus("ShuttingDown", NodeCondition.TRANSITION, False, "being shut down (replaced, rebooted or removed)"),
    NodeStatus("SystemUpdating", NodeCondition.TRANSITION, True, "HyperPod is updating its software"),
    NodeStatus("DeepHealthCheckInProgress", NodeCondition.TRANSITION, True, "deep health checks are running on it"),
    NodeStatus(
        "NotFound",
        NodeCondition.NOT_FOUND,
        False,
        "listed by HyperPod but no instance was found behind it: not a hardware fault, nothing to reboot or replace",
    ),
    NodeStatus("DetachInProgress", NodeCondition.TRANSITION, True, "a detachment from the instance is in progress"),
    NodeStatus("AttachInProgress", NodeCondition.TRANSITION, True, "an attachment to the instance is in progress"),
)
_BY_NAME = {status.name: status for status in NODE_STATUSES}


def status_entry(name: str) -> NodeStatus | None:
    """The table's entry for a ListClusterNodes status, or None for a status the API model does
    not list (a newer one, or a mangled answer)."""
    return _BY_NAME.get(name)


def condition_of(name: str) -> NodeCondition | None:
    """The condition a status names, None when the status is unknown."""
    entry = _BY_NAME.get(name)
    return entry.condition if entry else None


def may_reboot_or_replace(name: str) -> bool:
    """Whether a node in status `name` may get a reboot or replace command: only Running (a fault
    the diagnosis found) and Failure; an unknown status is not rebooted or replaced on our word."""
    entry = _BY_NAME.get(name)
    return entry is not None and entry.may_reboot_or_replace


def held_nodes(nodes: Iterable[ClusterNode]) -> dict[str, str]:
    """The nodes whose status rules out a reboot or a replacement (`may_reboot_or_replace`), each
    with its status: what the engine withholds commands for and the plan only watches."""
    return {n.instance_id: n.status for n in nodes if not may_reboot_or_replace(n.status)}


def has_instance(name: str) -> bool:
    """Whether an instance is behind the node to probe (an unknown status is tried)."""
    entry = _BY_NAME.get(name)
    return entry is None or entry.has_instance
