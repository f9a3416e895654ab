"""What a diagnosis reads, by name: the one vocabulary of `CheckMeta.reads` (what a check must have
read to pass) and `DegradedSource.unread` (what a collector could not read).

An AWS read is named by its IAM action, a Kubernetes API read by `kubernetes:<resource>` (the
resource as the Kubernetes collector names it in its messages). The engine turns the PASS of a
check whose reads meet a degraded source's `unread` into a SKIP: never more certainty than the data.
"""

from __future__ import annotations

# The control plane (collectors/control_plane.py).
DESCRIBE_CLUSTER = "sagemaker:DescribeCluster"
LIST_CLUSTER_NODES = "sagemaker:ListClusterNodes"
LIST_CLUSTER_EVENTS = "sagemaker:ListClusterEvents"
DESCRIBE_SECURITY_GROUPS = "ec2:DescribeSecurityGroups"

# The CloudWatch scan (collectors/logs.py).
DESCRIBE_LOG_GROUPS = "logs:DescribeLogGroups"
DESCRIBE_LOG_STREAMS = "logs:DescribeLogStreams"
FILTER_LOG_EVENTS = "logs:FilterLogEvents"

# The node probes (ssm/client.py): a session is started, then its data channel opened, each
# authorised separately (a refusal names the action it lacked).
START_SESSION = "ssm:StartSession"
OPEN_DATA_CHANNEL = "ssmmessages:OpenDataChannel"

# The Kubernetes collector (collectors/kubernetes.py): the EKS cluster, then the API's reads.
DESCRIBE_EKS_CLUSTER = "eks:DescribeCluster"
KUBERNETES_RESOURCES = (
    "nodes",
    "namespaces",
    "pods",
    "services",
    "endpoints",
    "networkpolicies",
    "daemonsets",
    "configmaps",
    "pod logs",
)


def kubernetes_read(resource: str) -> str:
    """The input name of one Kubernetes API read; a resource the collector does not read is a bug."""
    if resource not in KUBERNETES_RESOURCES:
        raise ValueError(f"unknown Kubernetes read {resource!r}: add it to reads.KUBERNETES_RESOURCES")
    return f"kubernetes:{resource}"


K8S_NODES = kubernetes_read("nodes")
K8S_NAMESPACES = kubernetes_read("namespaces")
K8S_PODS = kubernetes_read("pods")
K8S_SERVICES = kubernetes_read("services")
K8S_ENDPOINTS = kubernetes_read("endpoints")
K8S_NETWORK_POLICIES = kubernetes_read("networkpolicies")
K8S_DAEMONSETS = kubernetes_read("daemonsets")
K8S_CONFIGMAPS = kubernetes_read("configmaps")
K8S_POD_LOGS = kubernetes_read("pod logs")
# Every Kubernetes read: what a collection that could not start (no token, no endpoint) left unread.
KUBERNETES_READS = frozenset(kubernetes_read(r) for r in KUBERNETES_RESOURCES)

CONTROL_PLANE_READS = frozenset({DESCRIBE_CLUSTER, LIST_CLUSTER_NODES, LIST_CLUSTER_EVENTS, DESCRIBE_SECURITY_GROUPS})
LOG_READS = frozenset({DESCRIBE_LOG_GROUPS, DESCRIBE_LOG_STREAMS, FILTER_LOG_EVENTS})
# Every name a check may read, or a collector report unread.
ALL_READS = CONTROL_PLANE_READS | LOG_READS | {DESCRIBE_EKS_CLUSTER} | KUBERNETES_READS
