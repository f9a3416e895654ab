"""Pure evaluation of the control-plane checks over hand-built inventories."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hyperpod_nccl.checks import discover
from hyperpod_nccl.models.cluster import (
    ClusterDescription,
    ClusterEvent,
    ClusterNode,
    ControlPlaneInventory,
    InstanceGroup,
    SecurityGroup,
    SecurityGroupRule,
)
from hyperpod_nccl.models.findings import Priority, Status
from hyperpod_nccl.models.inventory import Inventory
from tests.builders import inventory

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CHECKS = discover()


def _inventory(**cluster_fields: object) -> Inventory:
    fields: dict[str, object] = {
        "name": "c1",
        "arn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdef123456",
        "status": "InService",
        "instance_groups": [
            InstanceGroup(name="worker", instance_type="ml.p5.48xlarge", current_count=2, target_count=2)
        ],
    }
    fields.update(cluster_fields)
    cluster = ClusterDescription.model_validate(fields)
    return inventory(at=NOW, control_plane=ControlPlaneInventory(cluster=cluster, nodes=[], security_groups={}))


def _run(check_id: str, inventory: Inventory):  # type: ignore[no-untyped-def]
    return CHECKS[check_id].run(inventory)


@pytest.mark.parametrize(
    "status, label, priority",
    [
        ("InService", Status.PASS, None),
        ("Creating", Status.WARN, Priority.P2),
        ("SystemUpdating", Status.WARN, Priority.P2),
        ("RollingBack", Status.WARN, Priority.P1),
        ("Deleting", Status.WARN, Priority.P1),
        ("Failed", Status.FAIL, Priority.P0),
        ("SomethingNew", Status.WARN, Priority.P1),
    ],
)
def test_cluster_status_mapping(status: str, label: Status, priority: Priority | None) -> None:
    [finding] = _run("cluster.status", _inventory(status=status, failure_message="boom"))
    assert finding.status is label and finding.priority is priority


def test_failed_status_carries_the_failure_message() -> None:
    [finding] = _run("cluster.status", _inventory(status="Failed", failure_message="capacity"))
    assert "capacity" in finding.detail


def test_instance_group_short_of_target_and_degraded() -> None:
    groups = [
        InstanceGroup(name="a", instance_type="ml.p5.48xlarge", current_count=1, target_count=4),
        InstanceGroup(name="b", instance_type="ml.p5.48xlarge", current_count=2, target_count=2, status="Degraded"),
    ]
    findings = _run("cluster.instance_groups", _inventory(instance_groups=groups))
    assert {(f.status, f.resources[0].id) for f in findings} == {(Status.WARN, "a"), (Status.FAIL, "b")}


def test_nccl_applicability_neuron_and_cpu_groups() -> None:
    groups = [
        InstanceGroup(name="trn", instance_type="ml.trn2.48xlarge"),
        InstanceGroup(name="cpu", instance_type="ml.m5.xlarge"),
    ]
    findings = _run("cluster.nccl_applicability", _inventory(instance_groups=groups))
    neuron = next(f for f in findings if "Neuron" in f.title)
    assert neuron.status is Status.INFO and neuron.reference.pointer == "references/node-debugger.md § G.2"
    assert any(f.status is Status.WARN and "no instance group has NVIDIA" in f.title for f in findings)


def test_node_status_distinguishes_failures_from_transitions() -> None:
    # Every status of the API's enum: tests/unit/test_node_statuses.py.
    inventory = _inventory()
    inventory.control_plane.nodes = [
        ClusterNode(instance_id="i-0000000000000001", instance_group="w", instance_type="x", status="Running"),
        ClusterNode(instance_id="i-0000000000000002", instance_group="w", instance_type="x", status="Failure"),
        ClusterNode(instance_id="i-0000000000000003", instance_group="w", instance_type="x", status="ShuttingDown"),
        ClusterNode(instance_id="i-0000000000000004", instance_group="w", instance_type="x", status="SystemUpdating"),
    ]
    findings = _run("cluster.node_status", inventory)
    assert [f.resources[0].id for f in findings if f.status is Status.FAIL] == ["i-0000000000000002"]
    [moving] = [f for f in findings if f.status is Status.INFO]
    assert "wait and recheck" in moving.title and moving.fields["nodes"] == 2


def _sg(group_id: str, ingress: list[SecurityGroupRule], egress: list[SecurityGroupRule]) -> SecurityGroup:
    return SecurityGroup(group_id=group_id, ingress=ingress, egress=egress)


def test_partial_self_reference_is_flagged_with_p1() -> None:
    inventory = _inventory(security_group_ids=["sg-1"])
    partial = SecurityGroupRule(protocol="tcp", from_port=22, to_port=22, group_ids=["sg-1"])
    full = SecurityGroupRule(protocol="-1", group_ids=["sg-1"])
    inventory.control_plane.security_groups = {"sg-1": _sg("sg-1", [partial], [full])}
    inventory.control_plane.security_group_attachments = {"sg-1": ["cluster VpcConfig"]}
    [finding] = _run("network.security_group_self_reference", inventory)
    assert finding.status is Status.FAIL and finding.priority is Priority.P1 and "inbound" in finding.title


def test_cross_group_admission_between_override_groups() -> None:
    inventory = _inventory()
    self_a = SecurityGroupRule(protocol="-1", group_ids=["sg-a"])
    self_b = SecurityGroupRule(protocol="-1", group_ids=["sg-b"])
    from_a = SecurityGroupRule(protocol="-1", group_ids=["sg-a"])
    inventory.control_plane.security_groups = {
        "sg-a": _sg("sg-a", [self_a], [self_a]),
        "sg-b": _sg("sg-b", [self_b, from_a], [self_b]),
    }
    inventory.control_plane.security_group_attachments = {"sg-a": ["cluster"], "sg-b": ["group b"]}
    findings = _run("network.security_group_cross_group", inventory)
    assert [tuple(r.id for r in f.resources) for f in findings] == [("sg-a", "sg-b")]


def test_finding_fingerprint_ignores_wording() -> None:
    inventory = _inventory(status="Failed")
    first = _run("cluster.status", inventory)[0]
    second = first.model_copy(update={"title": "different words"})
    assert first.fingerprint == second.fingerprint


def test_cluster_events_not_listed_without_continuous_provisioning_is_info_saying_why() -> None:
    inventory = _inventory(node_provisioning_mode=None)
    inventory.control_plane.events_supported = False
    [finding] = _run("cluster.events", inventory)
    assert finding.status is Status.INFO and not finding.is_issue
    assert "not read" in finding.title
    assert "NodeProvisioningMode unset" in finding.detail and "skipped" in finding.detail


def test_a_cluster_event_without_event_level_is_read_with_its_level_unknown() -> None:
    inventory = _inventory(node_provisioning_mode="Continuous")
    inventory.control_plane.events = [
        ClusterEvent(event_id="e1", event_time=NOW, description="Instance creation failed: lifecycle script"),
        ClusterEvent(event_id="e2", event_time=NOW, description="Instance replacement completed"),
    ]
    findings = _run("cluster.events", inventory)
    [failed] = [f for f in findings if f.is_issue]
    assert failed.status is Status.FAIL and failed.fields["signature"] == "lifecycle_script"
    assert "level-unknown" in failed.evidence[0]


def test_a_cluster_whose_vpc_config_lists_no_security_group_warns() -> None:
    # issue 17, point 7: DescribeSecurityGroups was read, but VpcConfig names no group to read
    inventory = _inventory()
    inventory.control_plane.security_groups = {}
    inventory.control_plane.security_group_attachments = {}
    [finding] = _run("network.security_group_self_reference", inventory)
    assert finding.status is Status.WARN and finding.priority is Priority.P1
    assert finding.title == "the cluster's VpcConfig lists no security groups"
    # Not read at all (None) is no finding: the check has nothing to judge.
    inventory.control_plane.security_groups = None
    assert _run("network.security_group_self_reference", inventory) == []
