"""Control-plane inventory: what DescribeCluster, ListClusterNodes, ListClusterEvents and
DescribeSecurityGroups say, normalised into typed models the checks evaluate."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

Orchestrator = Literal["eks", "slurm", "unknown"]
# DescribeCluster's NodeProvisioningMode (the API model's ClusterNodeProvisioningMode enum has this
# one value; a cluster without it provisions the older way). ListClusterEvents and
# DescribeClusterEvent are "only supported when the NodeProvisioningMode is set to Continuous".
CONTINUOUS_PROVISIONING = "Continuous"


class InstanceGroup(BaseModel):
    """One instance group of the cluster."""

    name: str
    instance_type: str
    current_count: int = 0
    target_count: int = 0
    status: str | None = None
    slurm_node_type: str | None = None
    override_security_group_ids: list[str] = Field(default_factory=list)
    efa_interface_type: str | None = None


class ClusterDescription(BaseModel):
    """DescribeCluster, the fields the checks use."""

    name: str
    arn: str
    status: str
    failure_message: str | None = None
    instance_groups: list[InstanceGroup] = Field(default_factory=list)
    security_group_ids: list[str] = Field(default_factory=list)
    subnet_ids: list[str] = Field(default_factory=list)
    orchestrator: Orchestrator = "unknown"
    eks_cluster_arn: str | None = None
    node_recovery: str | None = None
    node_provisioning_mode: str | None = None

    @property
    def has_cluster_events(self) -> bool:
        """Whether ListClusterEvents answers for this cluster (Continuous provisioning only)."""
        return self.node_provisioning_mode == CONTINUOUS_PROVISIONING

    @property
    def cluster_id(self) -> str:
        """The 12-character id at the end of the ARN (used in SSM targets and log groups)."""
        return self.arn.rsplit("/", 1)[-1]

    @property
    def eks_cluster_name(self) -> str | None:
        """The EKS cluster's name: the last path segment of the orchestrator ARN."""
        return self.eks_cluster_arn.rsplit("/", 1)[-1] if self.eks_cluster_arn else None

    @property
    def log_group_name(self) -> str:
        """The CloudWatch log group HyperPod writes this cluster's node logs to."""
        return f"/aws/sagemaker/Clusters/{self.name}/{self.cluster_id}"

    def group(self, name: str) -> InstanceGroup | None:
        """The instance group called `name`, if any."""
        return next((g for g in self.instance_groups if g.name == name), None)


class ClusterNode(BaseModel):
    """One ListClusterNodes summary."""

    instance_id: str
    instance_group: str
    instance_type: str
    status: str
    message: str | None = None
    launch_time: datetime | None = None
    private_dns_hostname: str | None = None

    @property
    def short_hostname(self) -> str | None:
        """`ip-10-1-0-15` of `ip-10-1-0-15.ec2.internal`: the name Slurm knows a HyperPod node by."""
        return self.private_dns_hostname.split(".", 1)[0] if self.private_dns_hostname else None


class ClusterEvent(BaseModel):
    """One ListClusterEvents record. `level` is None when the record has no EventLevel (the API
    model makes it optional): the level is unknown, the event is still read."""

    event_id: str
    event_time: datetime
    level: str | None = None
    resource_type: str | None = None
    instance_group: str | None = None
    instance_id: str | None = None
    description: str = ""


class SecurityGroupRule(BaseModel):
    """One IpPermissions entry, flattened to what the self-reference check needs."""

    protocol: str
    from_port: int | None = None
    to_port: int | None = None
    group_ids: list[str] = Field(default_factory=list)
    cidrs: list[str] = Field(default_factory=list)


class SecurityGroup(BaseModel):
    """DescribeSecurityGroups, one group."""

    group_id: str
    name: str | None = None
    vpc_id: str | None = None
    ingress: list[SecurityGroupRule] = Field(default_factory=list)
    egress: list[SecurityGroupRule] = Field(default_factory=list)


class ControlPlaneInventory(BaseModel):
    """Everything the control-plane collectors gathered; None where a source was unreadable."""

    cluster: ClusterDescription | None = None
    nodes: list[ClusterNode] | None = None
    nodes_complete: bool = True
    events: list[ClusterEvent] | None = None
    # False when DescribeCluster says the cluster has no cluster events to list (NodeProvisioningMode
    # not Continuous): ListClusterEvents was not called.
    events_supported: bool = True
    events_complete: bool = True
    security_groups: dict[str, SecurityGroup] | None = None
    security_group_attachments: dict[str, list[str]] = Field(default_factory=dict)
