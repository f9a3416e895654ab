"""Seed the AWS emulation from a scenario through the public APIs (EC2, SageMaker, EKS), then
fill in what moto cannot represent (instance ids, node statuses, events, orchestrator)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hyperpod_nccl_sim.aws import EmulatedAws, cluster_extras
from hyperpod_nccl_sim.scenario import EventSpec, Scenario

LIFECYCLE_URI = "s3://sagemaker-simulated-lifecycle/scripts/"
EXECUTION_ROLE = "arn:aws:iam::{account}:role/SimulatedHyperPodExecutionRole"


def _sim_node_class() -> type:
    from moto.sagemaker.models import ClusterNode

    class SimulatedClusterNode(ClusterNode):
        """A moto node carrying the fields ListClusterNodes returns on real clusters."""

        message: str | None = None
        hostname: str | None = None

        def summary(self) -> dict[str, Any]:
            summary: dict[str, Any] = super().summary()
            summary["InstanceStatus"] = {"Status": self.status, **({"Message": self.message} if self.message else {})}
            if self.hostname:
                summary["PrivateDnsHostname"] = self.hostname
            return summary

        def describe(self) -> dict[str, Any]:
            described: dict[str, Any] = super().describe()
            described["InstanceStatus"] = {
                "Status": self.status,
                **({"Message": self.message} if self.message else {}),
            }
            if self.hostname:
                described["PrivateDnsHostname"] = self.hostname
            return described

    return SimulatedClusterNode


def _event_group(event: EventSpec) -> str | None:
    if event.instance_group:
        return event.instance_group
    return event.node.split(":", 1)[0] if event.node else None


def seed_network(scenario: Scenario, emulation: EmulatedAws) -> dict[str, str]:
    """Create the VPC, a subnet and the scenario's security groups; return key -> group id."""
    ec2 = emulation.client("ec2", scenario.region)
    vpc_id = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.1.0.0/20")
    ids: dict[str, str] = {}
    for spec in scenario.security_groups:
        ids[spec.key] = ec2.create_security_group(
            GroupName=spec.name, Description=f"simulated {spec.name}", VpcId=vpc_id
        )["GroupId"]
    for spec in scenario.security_groups:
        group_id = ids[spec.key]
        if spec.self_ingress:
            ec2.authorize_security_group_ingress(
                GroupId=group_id, IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group_id}]}]
            )
        if spec.self_egress:
            ec2.authorize_security_group_egress(
                GroupId=group_id, IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group_id}]}]
            )
        for other in spec.ingress_from:
            ec2.authorize_security_group_ingress(
                GroupId=group_id, IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": ids[other]}]}]
            )
    return ids


def seed_cluster(scenario: Scenario, emulation: EmulatedAws, now: datetime) -> str:
    """Create the HyperPod cluster (and its EKS cluster) and return the cluster ARN."""
    from moto.sagemaker.models import sagemaker_backends

    group_ids = seed_network(scenario, emulation)
    spec = scenario.cluster
    subnets = [
        s["SubnetId"]
        for s in emulation.client("ec2", scenario.region).describe_subnets()["Subnets"]
        if s["CidrBlock"] == "10.1.0.0/20"
    ]
    role = EXECUTION_ROLE.format(account=scenario.account_id)
    arn = emulation.client("sagemaker", scenario.region).create_cluster(
        ClusterName=spec.name,
        InstanceGroups=[
            {
                "InstanceCount": g.count,
                "InstanceGroupName": g.name,
                "InstanceType": g.instance_type,
                "LifeCycleConfig": {"SourceS3Uri": LIFECYCLE_URI, "OnCreate": "on_create.sh"},
                "ExecutionRole": role,
                "ThreadsPerCore": 1,
            }
            for g in spec.instance_groups
        ],
        VpcConfig={"SecurityGroupIds": [group_ids[k] for k in spec.security_groups], "Subnets": subnets},
    )["ClusterArn"]

    # Real cluster ARNs end in a 12-character id; moto puts the name there.
    cluster_id = scenario.cluster_id()
    arn = f"arn:aws:sagemaker:{scenario.region}:{scenario.account_id}:cluster/{cluster_id}"
    extras = cluster_extras(spec.name)
    extras.cluster_id = cluster_id
    extras.node_recovery = spec.node_recovery
    extras.node_provisioning_mode = spec.node_provisioning_mode
    if spec.orchestrator == "eks":
        eks_name = spec.eks_cluster_name or f"{spec.name}-eks"
        eks_arn = emulation.client("eks", scenario.region).create_cluster(
            name=eks_name,
            roleArn=f"arn:aws:iam::{scenario.account_id}:role/SimulatedEksRole",
            resourcesVpcConfig={"subnetIds": subnets, "securityGroupIds": [group_ids[k] for k in spec.security_groups]},
        )["cluster"]["arn"]
        extras.orchestrator = {"Eks": {"ClusterArn": eks_arn}}
    else:
        extras.orchestrator = {"Slurm": {"SlurmConfigStrategy": "Managed"}}
    for group in spec.instance_groups:
        group_extra: dict[str, Any] = {"Status": group.status}
        if group.target_count is not None:
            group_extra["TargetCount"] = group.target_count
        if group.slurm_node_type:
            group_extra["SlurmConfig"] = {"NodeType": group.slurm_node_type}
        if group.override_security_groups:
            group_extra["OverrideVpcConfig"] = {
                "SecurityGroupIds": [group_ids[k] for k in group.override_security_groups],
                "Subnets": subnets,
            }
        extras.group_extras[group.name] = group_extra

    backend = sagemaker_backends[scenario.account_id][scenario.region]
    cluster = backend.clusters[spec.name]
    cluster.arn = arn
    cluster.status = spec.status
    cluster.failure_message = spec.failure_message or ""
    node_class = _sim_node_class()
    nodes: dict[str, Any] = {}
    for key in scenario.node_keys():
        group_name = key.split(":", 1)[0]
        group = next(g for g in spec.instance_groups if g.name == group_name)
        override = scenario.override(key)
        instance_id = scenario.instance_id(key)
        node = node_class(
            region_name=scenario.region,
            account_id=scenario.account_id,
            cluster_name=spec.name,
            instance_group_name=group_name,
            instance_type=group.instance_type,
            life_cycle_config={"SourceS3Uri": LIFECYCLE_URI, "OnCreate": "on_create.sh"},
            execution_role=role,
            node_id=instance_id,
            threads_per_core=1,
        )
        node.status = override.status if override else "Running"
        node.message = override.message if override else None
        node.hostname = scenario.hostname(key)
        # moto's paginator keys pages on `arn`, which its own nodes lack.
        node.arn = f"{arn}/node/{instance_id}"
        nodes[instance_id] = node
    cluster.nodes = nodes

    extras.events = [_event_record(scenario, event, index, arn, now) for index, event in enumerate(scenario.events)]
    return str(arn)


def _event_record(scenario: Scenario, event: EventSpec, index: int, arn: str, now: datetime) -> dict[str, Any]:
    record: dict[str, Any] = {
        "EventId": f"00000000-0000-4000-8000-{index:012d}",
        "ClusterArn": arn,
        "ClusterName": scenario.cluster.name,
        "ResourceType": event.resource_type,
        "EventTime": scenario.event_time(event, now),
        "Description": event.description,
    }
    if event.level is not None:
        record["EventLevel"] = event.level
    if event.node:
        record["InstanceId"] = scenario.instance_id(event.node)
    group = _event_group(event)
    if group:
        record["InstanceGroupName"] = group
    return record
