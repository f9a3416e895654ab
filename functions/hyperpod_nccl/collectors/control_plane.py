"""Control-plane collectors: STS, DescribeCluster, ListClusterNodes, ListClusterEvents and the
security groups of the cluster and of every instance group's OverrideVpcConfig."""

from __future__ import annotations

from typing import Any

from hyperpod_nccl import reads
from hyperpod_nccl.aws_errors import (
    AWS_CALL_ERRORS,
    CREDENTIAL_CODES,
    NOT_FOUND_CODES,
    error_code,
    error_message,
    is_access_denied,
)
from hyperpod_nccl.collectors.aws import degraded_from_error, transient_failure
from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.errors import ClusterNotFound, CredentialsError
from hyperpod_nccl.models.cluster import (
    ClusterDescription,
    ClusterEvent,
    ClusterNode,
    ControlPlaneInventory,
    InstanceGroup,
    Orchestrator,
    SecurityGroup,
    SecurityGroupRule,
)
from hyperpod_nccl.models.findings import DegradedSource
from hyperpod_nccl.redaction import scrub, scrub_optional
from hyperpod_nccl.references import CLUSTER_EVENTS

AwsError = AWS_CALL_ERRORS
PAGE_SIZE = 100


def verify_credentials(ctx: CollectionContext) -> str:
    """Return the caller ARN, or abort: without working credentials nothing else can run."""
    try:
        identity = ctx.aws.client("sts", first_contact=True).get_caller_identity()
    except AwsError as error:
        # Nothing runs without this check, but a throttled, failing or unreachable STS is not a
        # credentials problem: say what it is.
        transient = transient_failure(error)
        if transient is not None:
            what, fix = transient
            raise CredentialsError(
                f"AWS credentials check: sts:GetCallerIdentity {what} ({error_message(error)})",
                fix=f"sts:GetCallerIdentity {what}: {fix}",
            ) from error
        raise CredentialsError(
            f"AWS credentials check failed: {error_message(error)}",
            fix="fix AWS credentials (aws sts get-caller-identity must succeed) and re-run",
        ) from error
    return str(identity.get("Arn", ""))


def _is_cluster_missing(error: BaseException) -> bool:
    code = error_code(error)
    if code in NOT_FOUND_CODES:
        return True
    # DescribeCluster answers an unknown name with a ValidationException on some paths.
    return code == "ValidationException" and "not find" in error_message(error).lower()


def _existing_clusters(ctx: CollectionContext) -> list[str]:
    try:
        paginator = ctx.aws.client("sagemaker").get_paginator("list_clusters")
        return [
            f"{summary['ClusterName']} ({summary.get('ClusterStatus', '?')})"
            for page in paginator.paginate()
            for summary in page.get("ClusterSummaries", [])
        ]
    except AwsError as error:
        return [f"(could not list clusters: {error_message(error)})"]


def parse_cluster(raw: dict[str, Any]) -> ClusterDescription:
    """Normalise a DescribeCluster response."""
    groups = []
    for group in raw.get("InstanceGroups", []):
        override = group.get("OverrideVpcConfig") or {}
        groups.append(
            InstanceGroup(
                name=group.get("InstanceGroupName", "?"),
                instance_type=group.get("InstanceType", "?"),
                current_count=int(group.get("CurrentCount") or 0),
                target_count=int(group.get("TargetCount") or 0),
                status=group.get("Status"),
                slurm_node_type=(group.get("SlurmConfig") or {}).get("NodeType"),
                override_security_group_ids=list(override.get("SecurityGroupIds", [])),
                efa_interface_type=(group.get("NetworkInterface") or {}).get("InterfaceType"),
            )
        )
    orchestrator_block = raw.get("Orchestrator") or {}
    eks_arn = (orchestrator_block.get("Eks") or {}).get("ClusterArn")
    orchestrator: Orchestrator = "unknown"
    if eks_arn:
        orchestrator = "eks"
    elif "Slurm" in orchestrator_block or any(g.slurm_node_type for g in groups):
        orchestrator = "slurm"
    vpc = raw.get("VpcConfig") or {}
    return ClusterDescription(
        name=raw.get("ClusterName", "?"),
        arn=raw.get("ClusterArn", ""),
        status=raw.get("ClusterStatus", "Unknown"),
        failure_message=scrub_optional(raw.get("FailureMessage") or None),
        instance_groups=groups,
        security_group_ids=list(vpc.get("SecurityGroupIds", [])),
        subnet_ids=list(vpc.get("Subnets", [])),
        orchestrator=orchestrator,
        eks_cluster_arn=eks_arn,
        node_recovery=raw.get("NodeRecovery"),
        node_provisioning_mode=raw.get("NodeProvisioningMode"),
    )


def describe_cluster(ctx: CollectionContext) -> ClusterDescription | None:
    """DescribeCluster; abort when the cluster does not exist, degrade when access is denied."""
    try:
        raw = ctx.aws.client("sagemaker").describe_cluster(ClusterName=ctx.request.cluster)
    except AwsError as error:
        if _is_cluster_missing(error):
            raise ClusterNotFound(
                f"cluster {ctx.request.cluster!r} not found in {ctx.request.region}",
                fix="confirm the cluster name and region",
                details=_existing_clusters(ctx),
            ) from error
        if error_code(error) in CREDENTIAL_CODES:
            raise CredentialsError(
                f"AWS rejected the credentials: {error_message(error)}",
                fix="fix AWS credentials and re-run",
            ) from error
        ctx.degrade(degraded_from_error("cluster", reads.DESCRIBE_CLUSTER, error))
        return None
    return parse_cluster(raw)


def list_nodes(ctx: CollectionContext, cluster: str) -> tuple[list[ClusterNode] | None, bool]:
    """Every ListClusterNodes page; returns (nodes, complete). Nodes so far survive an error."""
    nodes: list[ClusterNode] = []
    try:
        paginator = ctx.aws.client("sagemaker").get_paginator("list_cluster_nodes")
        for page in paginator.paginate(ClusterName=cluster, PaginationConfig={"PageSize": PAGE_SIZE}):
            for summary in page.get("ClusterNodeSummaries", []):
                status = summary.get("InstanceStatus") or {}
                nodes.append(
                    ClusterNode(
                        instance_id=summary["InstanceId"],
                        instance_group=summary.get("InstanceGroupName", "?"),
                        instance_type=summary.get("InstanceType", "?"),
                        status=status.get("Status", "Unknown"),
                        message=scrub_optional(status.get("Message") or None),
                        launch_time=summary.get("LaunchTime"),
                        private_dns_hostname=summary.get("PrivateDnsHostname"),
                    )
                )
    except AwsError as error:
        ctx.degrade(degraded_from_error("nodes", reads.LIST_CLUSTER_NODES, error, partial=bool(nodes)))
        return (nodes or None), False
    return nodes, True


def list_events(ctx: CollectionContext, cluster: str) -> tuple[list[ClusterEvent] | None, bool]:
    """ListClusterEvents over the window; returns (events, complete). Events so far survive an error."""
    events: list[ClusterEvent] = []
    try:
        paginator = ctx.aws.client("sagemaker").get_paginator("list_cluster_events")
        pages = paginator.paginate(
            ClusterName=cluster,
            EventTimeAfter=ctx.window_start,
            EventTimeBefore=ctx.now,
            PaginationConfig={"PageSize": PAGE_SIZE},
        )
        for page in pages:
            for raw in page.get("Events", []):
                events.append(
                    ClusterEvent(
                        event_id=raw.get("EventId", "?"),
                        event_time=raw["EventTime"],
                        level=raw.get("EventLevel"),
                        resource_type=raw.get("ResourceType"),
                        instance_group=raw.get("InstanceGroupName"),
                        instance_id=raw.get("InstanceId"),
                        # Event text can quote a lifecycle script's output: redacted as it enters.
                        description=scrub(raw.get("Description", "")),
                    )
                )
    except AwsError as error:
        ctx.degrade(
            degraded_from_error(
                "cluster events",
                reads.LIST_CLUSTER_EVENTS,
                error,
                partial=bool(events),
                reference=None if is_access_denied(error) else CLUSTER_EVENTS,
            )
        )
        return (events or None), False
    return events, True


def _rules(permissions: list[dict[str, Any]]) -> list[SecurityGroupRule]:
    rules = []
    for permission in permissions:
        rules.append(
            SecurityGroupRule(
                protocol=str(permission.get("IpProtocol", "-1")),
                from_port=permission.get("FromPort"),
                to_port=permission.get("ToPort"),
                group_ids=[pair["GroupId"] for pair in permission.get("UserIdGroupPairs", []) if "GroupId" in pair],
                cidrs=[r["CidrIp"] for r in permission.get("IpRanges", []) if "CidrIp" in r],
            )
        )
    return rules


def security_group_attachments(cluster: ClusterDescription) -> dict[str, list[str]]:
    """Which security groups apply where: the cluster VpcConfig and each group's override."""
    attachments: dict[str, list[str]] = {}
    for group_id in cluster.security_group_ids:
        attachments.setdefault(group_id, []).append("cluster VpcConfig")
    for group in cluster.instance_groups:
        for group_id in group.override_security_group_ids:
            attachments.setdefault(group_id, []).append(f"instance group {group.name} OverrideVpcConfig")
    return attachments


def describe_security_groups(ctx: CollectionContext, group_ids: list[str]) -> dict[str, SecurityGroup] | None:
    """DescribeSecurityGroups for the given ids (one call; the API takes a list)."""
    if not group_ids:
        return {}
    try:
        response = ctx.aws.client("ec2").describe_security_groups(GroupIds=group_ids)
    except AwsError as error:
        ctx.degrade(degraded_from_error("security groups", reads.DESCRIBE_SECURITY_GROUPS, error))
        return None
    return {
        raw["GroupId"]: SecurityGroup(
            group_id=raw["GroupId"],
            name=raw.get("GroupName"),
            vpc_id=raw.get("VpcId"),
            ingress=_rules(raw.get("IpPermissions", [])),
            egress=_rules(raw.get("IpPermissionsEgress", [])),
        )
        for raw in response.get("SecurityGroups", [])
    }


def collect_control_plane(ctx: CollectionContext) -> ControlPlaneInventory:
    """Collect the whole control plane; abort only for missing credentials or a missing cluster."""
    ctx.progress("verifying AWS credentials")
    verify_credentials(ctx)
    ctx.progress("describing cluster")
    cluster = describe_cluster(ctx)
    # Without DescribeCluster we still know the name the operator gave us.
    cluster_ref = cluster.arn if cluster else ctx.request.cluster
    ctx.progress("listing cluster nodes")
    nodes, nodes_complete = list_nodes(ctx, cluster_ref)
    # DescribeCluster says whether the cluster has events to list; without it, ListClusterEvents
    # is asked anyway and whatever it answers is reported.
    events_supported = cluster is None or cluster.has_cluster_events
    events: list[ClusterEvent] | None = None
    events_complete = True
    if events_supported:
        ctx.progress("reading cluster events")
        events, events_complete = list_events(ctx, cluster_ref)
    security_groups = None
    attachments: dict[str, list[str]] = {}
    if cluster is not None:
        ctx.progress("reading security groups")
        attachments = security_group_attachments(cluster)
        security_groups = describe_security_groups(ctx, sorted(attachments))
    else:
        # The security groups come from DescribeCluster's VpcConfig: same cause, same fix.
        cause = next(d for d in reversed(ctx.degraded) if d.source == "cluster")
        ctx.degrade(
            DegradedSource(
                source="security groups",
                reason="skipped: the cluster's VpcConfig is unknown because DescribeCluster failed",
                fix=cause.fix,
                missing_action=cause.missing_action,
                reference=cause.reference,
                unread=[reads.DESCRIBE_SECURITY_GROUPS],
            )
        )
    return ControlPlaneInventory(
        cluster=cluster,
        nodes=nodes,
        nodes_complete=nodes_complete,
        events=events,
        events_supported=events_supported,
        events_complete=events_complete,
        security_groups=security_groups,
        security_group_attachments=attachments,
    )
