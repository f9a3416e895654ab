"""Suggested commands, filled with concrete ids. We print these; we never run them.

Each builder states the precondition and blast radius the runbook section gives, so that an
operator can judge a command without opening the runbook first.
"""

from __future__ import annotations

import shlex

from hyperpod_nccl.models.findings import SuggestedCommand


def _q(value: str) -> str:
    return shlex.quote(value)


def sg_self_reference(group_id: str, region: str, direction: str) -> SuggestedCommand:
    """Add the all-traffic self-referencing rule EFA and NCCL need (operations.md § 8)."""
    verb = "authorize-security-group-ingress" if direction == "ingress" else "authorize-security-group-egress"
    permissions = f"IpProtocol=-1,UserIdGroupPairs=[{{GroupId={group_id}}}]"
    return SuggestedCommand(
        description=f"allow all {direction} traffic between members of {group_id}",
        command=f"aws ec2 {verb} --region {_q(region)} --group-id {_q(group_id)} --ip-permissions {_q(permissions)}",
        preconditions="the group is attached to the cluster's nodes; "
        "idempotent (InvalidPermission.Duplicate if present)",
        blast_radius="every ENI in this security group; reversible with the matching revoke-* command",
    )


def describe_cluster_node(cluster: str, instance_id: str, region: str) -> SuggestedCommand:
    """Read the node's details (read-only, deeper than ListClusterNodes)."""
    return SuggestedCommand(
        description=f"show HyperPod's view of {instance_id}",
        command=f"aws sagemaker describe-cluster-node --region {_q(region)} --cluster-name {_q(cluster)} "
        f"--node-id {_q(instance_id)}",
    )


def batch_reboot(cluster: str, instance_ids: list[str], region: str) -> SuggestedCommand:
    """Reboot nodes (first step of the investigate → reboot → replace ladder)."""
    ids = " ".join(_q(i) for i in instance_ids[:25])
    return SuggestedCommand(
        description="reboot the node(s) (try before replacing)",
        command=f"aws sagemaker batch-reboot-cluster-nodes --region {_q(region)} --cluster-name {_q(cluster)} "
        f"--node-ids {ids}",
        preconditions="drain/cordon first (Slurm: scontrol update state=drain; EKS: kubectl drain); "
        "at most 25 ids per call",
        blast_radius="jobs on these nodes are interrupted; volumes are kept",
    )


def batch_replace(cluster: str, instance_ids: list[str], region: str) -> SuggestedCommand:
    """Replace nodes with a confirmed hardware fault (node-debugger.md § F)."""
    ids = " ".join(_q(i) for i in instance_ids[:25])
    return SuggestedCommand(
        description="replace the node(s) with a confirmed hardware fault",
        command=f"aws sagemaker batch-replace-cluster-nodes --region {_q(region)} --cluster-name {_q(cluster)} "
        f"--node-ids {ids}",
        preconditions="hardware fault confirmed and a reboot did not clear it; never the Slurm controller",
        blast_radius="root and secondary volumes of these nodes are destroyed",
    )


def update_kubeconfig(eks_cluster: str, region: str) -> SuggestedCommand:
    """Point kubectl at the EKS cluster behind a HyperPod cluster (operations.md § 1)."""
    return SuggestedCommand(
        description="configure kubectl for the orchestrating EKS cluster",
        command=f"aws eks update-kubeconfig --region {_q(region)} --name {_q(eks_cluster)}",
        blast_radius="writes your local ~/.kube/config only",
    )


def efa_pingpong_pair(server_ip: str | None) -> SuggestedCommand:
    """Pairwise fi_pingpong between a suspect node and a known-good one (performance-testing.md § 4)."""
    server = _q(server_ip) if server_ip else "<SUSPECT_NODE_PRIVATE_IP>"
    return SuggestedCommand(
        description="measure EFA latency between this node (server) and a known-good node (client)",
        command="/opt/amazon/efa/bin/fi_pingpong -p efa -e rdm -I 1000   # on the suspect node\n"
        f"/opt/amazon/efa/bin/fi_pingpong -p efa -e rdm -I 1000 {server}   # on a known-good node",
        preconditions="both nodes idle, same subnet, security group self-reference in place",
        blast_radius="a short burst of test traffic between the two nodes",
    )
