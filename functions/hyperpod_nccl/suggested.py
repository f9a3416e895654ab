"""Suggested commands, filled with concrete ids. We print these; we never run them.

Each builder states the precondition and blast radius the runbook section gives, so that an
operator can judge a command without opening the runbook first. A Kubernetes change is YAML that
parses, with the nesting path it goes under; a command for a node comes with the session line that
opens the node's shell (`SuggestedCommand.session`), so nothing meant for the node runs on a laptop.
"""

from __future__ import annotations

import shlex

from hyperpod_nccl.models.findings import SuggestedCommand
from hyperpod_nccl.references import DBG_CONTAINER_OOM


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
        effect="read",
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
        effect="reboot",
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
        effect="replace",
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
        effect="read",
    )


def _session(region: str, ssm_target: str | None) -> str:
    """The line that opens a root shell on one node (operations.md § 3)."""
    target = _q(ssm_target) if ssm_target else "<SSM_TARGET>"
    return f"aws ssm start-session --region {_q(region)} --target {target}"


def node_memlock_limit(region: str, ssm_target: str | None, orchestrator: str) -> SuggestedCommand:
    """Raise the locked-memory limit (debugging-guide.md § 17): limits.conf on hosts and Slurm
    nodes, IPC_LOCK for Kubernetes pods (which have no rlimit field)."""
    if orchestrator == "eks":
        return SuggestedCommand(
            description="let every training container lock memory (or `ulimit -l 8388608` in the entrypoint, "
            "up to the hard limit)",
            command='securityContext:\n  capabilities:\n    add: ["IPC_LOCK"]',
            language="yaml",
            yaml_path="spec.template.spec.containers[]",
            preconditions="applies to pods created after the change; restart the job",
            blast_radius="the job's pods only",
        )
    lines = "printf '* soft memlock 8388608\\n* hard memlock 8388608\\n' >> /etc/security/limits.conf"
    return SuggestedCommand(
        description="raise memlock to 8388608 KiB for new sessions and Slurm jobs",
        command=lines,
        session=_session(region, ssm_target),
        preconditions="takes effect for new sessions/jobs (Slurm: also set it in the prolog or slurmd's "
        "LimitMEMLOCK); add the same line to the lifecycle script so replaced nodes get it",
        blast_radius="this node's new sessions; running jobs keep their old limit",
    )


def node_dev_shm(region: str, ssm_target: str | None, orchestrator: str) -> SuggestedCommand:
    """Give NCCL a large /dev/shm (debugging-guide.md § 17): emptyDir on EKS, a remount on hosts."""
    if orchestrator == "eks":
        return SuggestedCommand(
            description="mount a memory-backed emptyDir at /dev/shm in the training pods: the volume under "
            "spec.template.spec, the mount under each training container",
            command="volumes:\n  - name: dshm\n    emptyDir:\n      medium: Memory\n      sizeLimit: 10Gi\n"
            "containers:\n  - name: <training container>\n    volumeMounts:\n      - name: dshm\n"
            "        mountPath: /dev/shm",
            language="yaml",
            yaml_path="spec.template.spec",
            preconditions="applies to pods created after the change; restart the job",
            blast_radius=f"counts against the pod's memory limit ({DBG_CONTAINER_OOM.pointer})",
        )
    return SuggestedCommand(
        description="grow /dev/shm on the node",
        command="mount -o remount,size=50% /dev/shm",
        session=_session(region, ssm_target),
        preconditions="lasts until reboot: persist it in /etc/fstab from the lifecycle script",
        blast_radius="this node; tmpfs pages count as used memory",
    )


def node_remove_ipc(region: str, ssm_target: str | None) -> SuggestedCommand:
    """Stop systemd-logind deleting NCCL's shared memory at logout (operations.md § 7)."""
    commands = (
        "sed -i 's/^#\\?RemoveIPC=.*/RemoveIPC=no/' /etc/systemd/logind.conf\n"
        "grep -q '^RemoveIPC=no' /etc/systemd/logind.conf || echo 'RemoveIPC=no' >> /etc/systemd/logind.conf\n"
        "systemctl restart systemd-logind"
    )
    return SuggestedCommand(
        description="set RemoveIPC=no and restart systemd-logind",
        command=commands,
        session=_session(region, ssm_target),
        preconditions="no job running on the node (restarting logind can end idle sessions); "
        "put the same lines in the lifecycle script so replaced nodes get them",
        blast_radius="this node's idle user sessions",
    )


def node_hugepages(region: str, ssm_target: str | None, pages: int = 512) -> SuggestedCommand:
    """Reserve 2 MiB huge pages for libfabric's EFA buffers."""
    commands = (
        f"echo 'vm.nr_hugepages={pages}' > /etc/sysctl.d/90-hugepages.conf\nsysctl -p /etc/sysctl.d/90-hugepages.conf"
    )
    return SuggestedCommand(
        description=f"reserve {pages} huge pages of 2 MiB",
        command=commands,
        session=_session(region, ssm_target),
        preconditions="enough free memory to reserve them; persist it from the lifecycle script",
        blast_radius=f"{pages * 2} MiB of this node's memory is set aside",
    )


def node_stale_shm(region: str, ssm_target: str | None) -> SuggestedCommand:
    """Confirm no process holds the leftover NCCL segments, then remove them (debugging-guide.md § 15)."""
    commands = "fuser -v /dev/shm/nccl-* 2>&1 | head   # read-only: must list no process\nrm -f /dev/shm/nccl-*"
    return SuggestedCommand(
        description="remove the stale /dev/shm/nccl-* segments",
        command=commands,
        session=_session(region, ssm_target),
        preconditions="no job running on the node and fuser lists no process",
        blast_radius="breaks any NCCL job still running on the node",
    )
