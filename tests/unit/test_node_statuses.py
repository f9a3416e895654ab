"""Every node status of the SageMaker API handled as what it is (issue 15, point 6): one table
(`node_statuses.py`) equal to the API model's `ClusterInstanceStatus` enum; a transition is waited
for, never rebooted or replaced; `NotFound` is neither a hardware fault nor a replacement candidate;
and no check, plan or command path gives a node in such a status a reboot or a replacement."""

from __future__ import annotations

from datetime import UTC, datetime

import botocore
import botocore.loaders
import pytest

from hyperpod_nccl import node_statuses, suggested
from hyperpod_nccl.checks import discover
from hyperpod_nccl.engine import evaluate, withhold_for_status
from hyperpod_nccl.models.cluster import ClusterDescription, ClusterNode, ControlPlaneInventory
from hyperpod_nccl.models.findings import Finding, Priority, Resource, Status
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import NodeProbeData, NodeProbeInventory, NodeProbeResult, XidEvent
from hyperpod_nccl.node_statuses import NODE_STATUSES, NodeCondition
from hyperpod_nccl.references import NODE_HARDWARE
from hyperpod_nccl.verdict import build_verdict
from tests.builders import inventory

# The `ClusterInstanceStatus` enum of botocore/data/sagemaker/2017-07-24/service-2.json in
# botocore 1.44.8 (requirements/runtime.txt), copied here in the model's order.
API_MODEL_VERSION = "1.44.8"
CLUSTER_INSTANCE_STATUS = (
    "Running",
    "Failure",
    "Pending",
    "ShuttingDown",
    "SystemUpdating",
    "DeepHealthCheckInProgress",
    "NotFound",
    "DetachInProgress",
    "AttachInProgress",
)
TRANSITIONS = (
    "Pending",
    "ShuttingDown",
    "SystemUpdating",
    "DeepHealthCheckInProgress",
    "DetachInProgress",
    "AttachInProgress",
)
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
NODE = "i-0aaaaaaaaaaaaaaa1"
CHECKS = discover()


def _inventory(*statuses: str) -> Inventory:
    cluster = ClusterDescription(
        name="c1", arn="arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdef123456", status="InService"
    )
    nodes = [
        ClusterNode(
            instance_id=f"i-0aaaaaaaaaaaaaaa{n + 1}", instance_group="worker", instance_type="ml.p5.48xlarge", status=s
        )
        for n, s in enumerate(statuses)
    ]
    return inventory(at=NOW, control_plane=ControlPlaneInventory(cluster=cluster, nodes=nodes, security_groups={}))


def _destructive(findings: list[Finding]) -> list[str]:
    return [c.command for f in findings for c in f.suggested_commands if c.effect in ("reboot", "replace")]


def test_the_table_is_the_api_models_enum() -> None:
    assert tuple(s.name for s in NODE_STATUSES) == CLUSTER_INSTANCE_STATUS


def test_the_vendored_enum_is_the_installed_models() -> None:
    # A botocore upgrade that adds a status fails here: decide what it means in node_statuses.py,
    # then copy the new enum above.
    model = botocore.loaders.Loader().load_service_model("sagemaker", "service-2")
    assert botocore.__version__ == API_MODEL_VERSION, "botocore moved: re-read its ClusterInstanceStatus enum"
    assert tuple(model["shapes"]["ClusterInstanceStatus"]["enum"]) == CLUSTER_INSTANCE_STATUS


def test_only_running_and_failure_may_be_rebooted_or_replaced() -> None:
    allowed = {s for s in CLUSTER_INSTANCE_STATUS if node_statuses.may_reboot_or_replace(s)}
    assert allowed == {"Running", "Failure"}
    assert not node_statuses.may_reboot_or_replace("SomethingNewer")
    assert {s.name for s in NODE_STATUSES if s.condition is NodeCondition.TRANSITION} == set(TRANSITIONS)


def test_only_a_failure_is_a_failed_node_with_the_reboot_replace_ladder() -> None:
    [finding] = [f for f in CHECKS["cluster.node_status"].run(_inventory("Failure")) if f.status is Status.FAIL]
    assert finding.reference is NODE_HARDWARE
    assert {c.effect for c in finding.suggested_commands} == {"read", "reboot", "replace"}


@pytest.mark.parametrize("status", TRANSITIONS)
def test_a_transition_is_waited_for_never_rebooted_or_replaced(status: str) -> None:
    findings = CHECKS["cluster.node_status"].run(_inventory("Running", status))
    assert [f.status for f in findings] == [Status.INFO, Status.PASS]
    moving = findings[0]
    assert "wait and recheck" in moving.title and status in moving.evidence[0]
    assert not moving.suggested_commands


def test_not_found_is_neither_a_hardware_fault_nor_a_replacement_candidate() -> None:
    [finding] = CHECKS["cluster.node_status"].run(_inventory("NotFound"))
    assert finding.status is Status.WARN and finding.reference is not NODE_HARDWARE
    assert "not a hardware fault" in finding.detail
    assert [c.effect for c in finding.suggested_commands] == ["read"]


def test_a_status_the_model_does_not_list_is_reported_without_a_destructive_command() -> None:
    [finding] = CHECKS["cluster.node_status"].run(_inventory("Hibernating"))
    assert finding.status is Status.WARN and "does not list" in finding.title
    assert [c.effect for c in finding.suggested_commands] == ["read"]


def _hardware_fault(node: str) -> Finding:
    """A finding of another check that names the node with its own reboot and replace commands."""
    return Finding(
        check_id="node.gpu_xid",
        status=Status.FAIL,
        priority=Priority.P0,
        title=f"Xid 48 on {node}",
        detail="double-bit ECC error",
        resources=[Resource(kind="node", id=node)],
        reference=NODE_HARDWARE,
        fields={"xid": 48},
        suggested_commands=[
            suggested.batch_reboot("c1", [node], "us-west-2"),
            suggested.batch_replace("c1", [node], "us-west-2"),
        ],
    )


@pytest.mark.parametrize("status", [*TRANSITIONS, "NotFound", "Hibernating"])
def test_no_check_gives_a_node_its_status_rules_out_a_reboot_or_a_replacement(status: str) -> None:
    inventory = _inventory(status)
    [kept] = withhold_for_status([_hardware_fault(NODE)], inventory)
    assert _destructive([kept]) == []
    assert [c.effect for c in kept.suggested_commands] == ["read"]
    assert status in kept.detail and kept.detail.startswith("double-bit ECC error")
    # The same finding on a Running or a Failed node keeps its commands.
    for allowed in ("Running", "Failure"):
        assert _destructive(withhold_for_status([_hardware_fault(NODE)], _inventory(allowed))) != []


def test_the_engine_applies_the_guard_to_every_check() -> None:
    # Every node, whatever its status, answered the probe with Xid 79: `node.gpu_xid` gives each a
    # replace command; only the Running and the Failed node keep theirs.
    statuses = (*CLUSTER_INSTANCE_STATUS, "Hibernating")
    inventory = _inventory(*statuses)
    nodes = [n.instance_id for n in inventory.control_plane.nodes or []]
    xid = XidEvent(bus_id="0000:53:00", code=79, line="NVRM: Xid (PCI:0000:53:00): 79, GPU has fallen off the bus.")
    inventory.node_probes = NodeProbeInventory(
        probed_instance_ids=nodes,
        results=[
            NodeProbeResult(instance_id=node, reachable=True, instance_group="worker", probe=NodeProbeData(xids=[xid]))
            for node in nodes
        ],
    )
    findings, _ = evaluate(inventory)
    replaced = {node for node in nodes for command in _destructive(findings) if node in command.split()}
    assert replaced == {nodes[statuses.index("Running")], nodes[statuses.index("Failure")]}
    moving = next(f for f in findings if f.check_id == "node.gpu_xid" and nodes[2] in {r.id for r in f.resources})
    assert "Pending" in moving.detail and [c.effect for c in moving.suggested_commands] == ["read"]


@pytest.mark.parametrize("status", [*TRANSITIONS, "NotFound", "Hibernating"])
def test_the_plan_never_reboots_or_replaces_a_node_its_status_rules_out(status: str) -> None:
    inventory = _inventory(status)
    [cause] = build_verdict([_hardware_fault(NODE)], inventory).root_causes
    stages = [step.stage for step in cause.plan]
    assert "reboot" not in stages and "replace" not in stages and "drain" not in stages
    assert stages == ["watch", "job"]
    assert status in cause.plan[0].description and "do not reboot or replace" in cause.plan[0].description
    if status in TRANSITIONS:
        assert "wait and recheck" in cause.plan[0].description


def test_the_plan_climbs_the_ladder_for_a_failed_node() -> None:
    [cause] = build_verdict([_hardware_fault(NODE)], _inventory("Failure")).root_causes
    assert {"reboot", "replace"} <= {step.stage for step in cause.plan}
