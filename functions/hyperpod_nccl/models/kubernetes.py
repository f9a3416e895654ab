"""Kubernetes inventory (issue 5): the objects the EKS checks evaluate, as read through the API.

Only what the checks need is kept. Values of environment variables whose names look like
secrets are replaced at collection time (`REDACTED`), so no report, log or stored sweep can
carry them.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from hyperpod_nccl import thresholds
from hyperpod_nccl.bounded import loads_json

HEALTH_LABEL_PREFIX = "sagemaker.amazonaws.com/"
NODE_HEALTH_LABEL = HEALTH_LABEL_PREFIX + "node-health-status"
DEEP_HEALTH_LABEL = HEALTH_LABEL_PREFIX + "deep-health-check-status"
# Both spellings exist in the field (plural in current tooling, singular in the AWS docs).
FAULT_TYPE_LABELS = (HEALTH_LABEL_PREFIX + "fault-types", HEALTH_LABEL_PREFIX + "fault-type")
FAULT_REASON_LABELS = (HEALTH_LABEL_PREFIX + "fault-reasons", HEALTH_LABEL_PREFIX + "fault-reason")
FAULT_DETAILS_ANNOTATION = HEALTH_LABEL_PREFIX + "fault-details"
# What the HyperPod health-monitoring agent (HMA) writes on a node when it detects a fault, per AWS's
# "Fault Detection" section of the HMA page
# (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-health-monitoring-agent.html):
# the node-health-status and fault-type(s)/fault-reason(s) labels, the taint
# `sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule`, the fault-details annotation, and a node
# condition whose type is the fault type, status True, reason the fault reason (False again once recovered).
# The stored copy of that page read here breaks off after its first part (the labels); the taint, annotation
# and condition parts were read from a public summary of the section, and agree with the example below.
HEALTH_TAINT_VALUE = "Unschedulable"
HEALTH_TAINT_EFFECT = "NoSchedule"
# Fault types (so node condition types) AWS documents HMA writing: `NvidiaErrorReboot` in the HMA page's example
# detection ("Node condition NvidiaErrorReboot is now: True, reason: XidHardwareFailure", same page), and
# `NvidiaErrorTerminate` in the node health sample event of
# https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html ("HMA has detected
# fault type NvidiaErrorTerminate"). Any other type a node's fault-type(s) label names counts as well.
HMA_FAULT_TYPES = frozenset({"NvidiaErrorReboot", "NvidiaErrorTerminate"})
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
EFA_RESOURCE = "vpc.amazonaws.com/efa"
GPU_RESOURCE = "nvidia.com/gpu"
# Labels that name the job a pod belongs to: batch Job, Kubeflow training operator, JobSet.
JOB_LABELS = (
    "job-name",
    "batch.kubernetes.io/job-name",
    "training.kubeflow.org/job-name",
    "jobset.sigs.k8s.io/jobset-name",
)
SYSTEM_NAMESPACES = frozenset(
    {
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "aws-hyperpod",
        "amazon-cloudwatch",
        "amazon-guardduty",
        "cert-manager",
        "gpu-operator",
    }
)
_INSTANCE_ID = re.compile(r"(i-[0-9a-f]{8,17})$")


def instance_id_from_provider_id(provider_id: str | None) -> str | None:
    """`aws:///us-west-2a/i-0abc…` (EKS) or `aws:///usw2-az1/sagemaker/cluster/hyperpod-<cluster id>-i-0abc…`
    (HyperPod) → `i-0abc…`."""
    if not provider_id:
        return None
    match = _INSTANCE_ID.search(provider_id)
    return match.group(1) if match else None


_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_UNITS = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def parse_quantity(value: str | None) -> float | None:
    """A Kubernetes quantity ("10Gi", "512Mi", "2") as a number, None when unparseable."""
    if value is None:
        return None
    match = _QUANTITY.match(value.strip())
    if not match or match.group(2) not in _UNITS:
        return None
    return float(match.group(1)) * _UNITS[match.group(2)]


class SelectorRequirement(BaseModel):
    """One `matchExpressions` entry."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)

    def matches(self, labels: dict[str, str]) -> bool:
        """Kubernetes semantics of the operator."""
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values


class LabelSelector(BaseModel):
    """A label selector; the empty selector selects everything."""

    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[SelectorRequirement] = Field(default_factory=list)

    def matches(self, labels: dict[str, str]) -> bool:
        """All matchLabels and all matchExpressions hold."""
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )

    def describe(self) -> str:
        """kubectl-style text (`{}` for the empty selector)."""
        parts = [f"{k}={v}" for k, v in self.match_labels.items()]
        parts += [f"{r.key} {r.operator} ({','.join(r.values)})" for r in self.match_expressions]
        return ",".join(parts) or "{}"


class NodeCondition(BaseModel):
    """One node condition."""

    type: str
    status: str
    reason: str | None = None
    message: str | None = None


class Taint(BaseModel):
    """One node taint."""

    key: str
    value: str | None = None
    effect: str


class K8sNode(BaseModel):
    """A Kubernetes node with the HyperPod health labels."""

    name: str
    provider_id: str | None = None
    instance_id: str | None = None
    instance_type: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict, description="sagemaker.amazonaws.com/* only")
    conditions: list[NodeCondition] = Field(default_factory=list)
    unschedulable: bool = False
    taints: list[Taint] = Field(default_factory=list)
    capacity: dict[str, str] = Field(default_factory=dict)
    allocatable: dict[str, str] = Field(default_factory=dict)

    def condition(self, kind: str) -> NodeCondition | None:
        """The condition of that type, if reported."""
        return next((c for c in self.conditions if c.type == kind), None)

    @property
    def ready(self) -> bool | None:
        """Ready condition True/False, None when unknown or missing."""
        ready = self.condition("Ready")
        if ready is None or ready.status == "Unknown":
            return None
        return ready.status == "True"

    @property
    def health_status(self) -> str | None:
        """`node-health-status` label."""
        return self.labels.get(NODE_HEALTH_LABEL)

    @property
    def deep_health_status(self) -> str | None:
        """`deep-health-check-status` label."""
        return self.labels.get(DEEP_HEALTH_LABEL)

    @property
    def fault_types(self) -> list[str]:
        """Fault types from either label spelling."""
        return _label_values(self.labels, FAULT_TYPE_LABELS)

    @property
    def fault_reasons(self) -> list[str]:
        """Fault reasons from either label spelling."""
        return _label_values(self.labels, FAULT_REASON_LABELS)

    @property
    def hma_fault_conditions(self) -> list[NodeCondition]:
        """The conditions HMA holds True for a fault: a documented fault type, or one the fault-type(s) label names."""
        fault_types = HMA_FAULT_TYPES | set(self.fault_types)
        return [c for c in self.conditions if c.status == "True" and c.type in fault_types]

    @property
    def fault_details(self) -> list[dict[str, object]]:
        """The `fault-details` annotation (a JSON list); [] when absent or unparseable."""
        raw = self.annotations.get(FAULT_DETAILS_ANNOTATION)
        if not raw:
            return []
        try:
            # Anyone who can annotate the node writes this: bounded in size and depth.
            parsed = loads_json(raw, max_bytes=thresholds.K8S_ANNOTATIONS_MAX_BYTES)
        except ValueError:
            return [{"message": raw}]
        if isinstance(parsed, dict):
            parsed = [parsed]
        return [item for item in parsed if isinstance(item, dict)] if isinstance(parsed, list) else []


def _label_values(labels: dict[str, str], keys: tuple[str, ...]) -> list[str]:
    # Label values cannot hold commas, but annotations copied into labels by hand sometimes do.
    values: list[str] = []
    for key in keys:
        for value in labels.get(key, "").split(","):
            if value.strip() and value.strip() not in values:
                values.append(value.strip())
    return values


class EnvVar(BaseModel):
    """A container environment variable; `value` is REDACTED for secret-looking names."""

    name: str
    value: str | None = None
    value_from: str | None = Field(default=None, description="e.g. configMapKeyRef:nccl-env/NCCL_DEBUG")


class EnvFromSource(BaseModel):
    """An `envFrom` reference."""

    kind: Literal["configMap", "secret"]
    name: str
    prefix: str = ""
    optional: bool = False


class VolumeMount(BaseModel):
    """A container's volume mount."""

    name: str
    mount_path: str
    read_only: bool = False


class Volume(BaseModel):
    """A pod volume, reduced to what the checks read."""

    name: str
    kind: str = Field(description="emptyDir, hostPath, configMap, secret, persistentVolumeClaim, …")
    medium: str | None = None
    size_limit: str | None = None
    host_path: str | None = None


class ContainerState(BaseModel):
    """waiting / running / terminated, with reason and exit code."""

    state: Literal["waiting", "running", "terminated"]
    reason: str | None = None
    message: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    finished_at: str | None = None


class ContainerStatus(BaseModel):
    """A container's status in a pod."""

    name: str
    ready: bool = False
    restart_count: int = 0
    image: str | None = None
    image_id: str | None = None
    state: ContainerState | None = None
    last_state: ContainerState | None = None

    @property
    def digest(self) -> str | None:
        """The `sha256:…` digest of the running image, when the runtime reports one."""
        if self.image_id and "sha256:" in self.image_id:
            return "sha256:" + self.image_id.rsplit("sha256:", 1)[1]
        return None


class Container(BaseModel):
    """A container spec, reduced to what the checks read."""

    name: str
    image: str | None = None
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)
    env_from: list[EnvFromSource] = Field(default_factory=list)
    volume_mounts: list[VolumeMount] = Field(default_factory=list)
    requests: dict[str, str] = Field(default_factory=dict)
    limits: dict[str, str] = Field(default_factory=dict)
    capabilities_add: list[str] = Field(default_factory=list)
    privileged: bool = False
    ports: list[int] = Field(default_factory=list)

    def resource(self, name: str) -> int:
        """Requested count of an extended resource (limits win: they imply the request)."""
        quantity = parse_quantity(self.limits.get(name) or self.requests.get(name))
        return int(quantity or 0)


class OwnerReference(BaseModel):
    """The controller that owns a pod."""

    kind: str
    name: str


class Pod(BaseModel):
    """A pod with spec and status parts the checks read."""

    namespace: str
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    owner: OwnerReference | None = None
    node_name: str | None = None
    hostname: str | None = None
    subdomain: str | None = None
    phase: str | None = None
    reason: str | None = None
    message: str | None = None
    pod_ip: str | None = None
    host_ip: str | None = None
    unschedulable_message: str | None = None
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    container_statuses: list[ContainerStatus] = Field(default_factory=list)
    init_container_statuses: list[ContainerStatus] = Field(default_factory=list)
    volumes: list[Volume] = Field(default_factory=list)

    @property
    def job_name(self) -> str | None:
        """The job this pod belongs to (job labels first, then the owning controller)."""
        for key in JOB_LABELS:
            if self.labels.get(key):
                return self.labels[key]
        return self.owner.name if self.owner and self.owner.kind not in {"ReplicaSet", "DaemonSet", "Node"} else None

    def total(self, resource: str) -> int:
        """The pod's total request of an extended resource over its app containers."""
        return sum(c.resource(resource) for c in self.containers)

    @property
    def is_training(self) -> bool:
        """Pods that use GPUs or EFA, or that carry NCCL / torch.distributed settings."""
        if self.total(GPU_RESOURCE) or self.total(EFA_RESOURCE):
            return True
        return any(e.name.startswith("NCCL_") or e.name == "MASTER_ADDR" for c in self.containers for e in c.env)

    def status_of(self, container: str) -> ContainerStatus | None:
        """The status of an app container by name."""
        return next((s for s in self.container_statuses if s.name == container), None)


class ServicePort(BaseModel):
    """A Service port."""

    name: str | None = None
    port: int
    target_port: str | None = None
    protocol: str = "TCP"


class Service(BaseModel):
    """A Service; headless when clusterIP is None."""

    namespace: str
    name: str
    cluster_ip: str | None = None
    type: str = "ClusterIP"
    selector: dict[str, str] = Field(default_factory=dict)
    ports: list[ServicePort] = Field(default_factory=list)
    publish_not_ready: bool = False

    @property
    def headless(self) -> bool:
        """clusterIP: None."""
        return self.cluster_ip == "None"


class Endpoints(BaseModel):
    """An Endpoints object, counted."""

    namespace: str
    name: str
    ready_addresses: int = 0
    not_ready_addresses: int = 0


class DaemonSet(BaseModel):
    """A DaemonSet's rollout state."""

    namespace: str
    name: str
    desired: int = 0
    current: int = 0
    ready: int = 0
    available: int = 0
    images: list[str] = Field(default_factory=list)


class IpBlock(BaseModel):
    """A NetworkPolicy ipBlock."""

    cidr: str
    excepted: list[str] = Field(default_factory=list)


class PolicyPeer(BaseModel):
    """A from/to entry. Both selectors None and no ipBlock cannot occur in a valid policy."""

    pod_selector: LabelSelector | None = None
    namespace_selector: LabelSelector | None = None
    ip_block: IpBlock | None = None


class PolicyPort(BaseModel):
    """A ports entry; `port` None means every port of the protocol."""

    protocol: str = "TCP"
    port: int | str | None = None
    end_port: int | None = None


class PolicyRule(BaseModel):
    """An ingress or egress rule: empty peers = every peer, empty ports = every port."""

    peers: list[PolicyPeer] = Field(default_factory=list)
    ports: list[PolicyPort] = Field(default_factory=list)


class NetworkPolicy(BaseModel):
    """A NetworkPolicy with its effective policyTypes (API defaults applied at collection)."""

    namespace: str
    name: str
    pod_selector: LabelSelector = Field(default_factory=LabelSelector)
    policy_types: list[str] = Field(default_factory=list)
    ingress: list[PolicyRule] = Field(default_factory=list)
    egress: list[PolicyRule] = Field(default_factory=list)


class ConfigMapEnv(BaseModel):
    """A ConfigMap referenced by a training container's env; secret-looking values redacted."""

    namespace: str
    name: str
    found: bool = True
    data: dict[str, str] = Field(default_factory=dict)


class ContainerLog(BaseModel):
    """The tail of one container's log (`previous` = the instance before the last restart)."""

    namespace: str
    pod: str
    container: str
    previous: bool = False
    lines: list[str] = Field(default_factory=list)
    error: str | None = None
    # True when the tail went past K8S_LOG_MAX_BYTES: the lines after the cut were not read.
    truncated: bool = False


class KubernetesInventory(BaseModel):
    """Kubernetes objects read through the EKS API.

    A list is None when it could not be read (the reason is a degraded source); checks that
    need it then say nothing instead of reporting an empty cluster as healthy.
    """

    endpoint: str | None = None
    eks_cluster_name: str | None = None
    scope_namespace: str | None = None
    scope_job: str | None = None
    nodes: list[K8sNode] | None = None
    namespace_labels: dict[str, dict[str, str]] | None = None
    pods: list[Pod] | None = None
    services: list[Service] | None = None
    endpoints: list[Endpoints] | None = None
    daemonsets: list[DaemonSet] | None = None
    network_policies: list[NetworkPolicy] | None = None
    config_maps: list[ConfigMapEnv] = Field(default_factory=list)
    logs: list[ContainerLog] | None = None

    def node(self, name: str | None) -> K8sNode | None:
        """A node by name."""
        if not name or self.nodes is None:
            return None
        return next((n for n in self.nodes if n.name == name), None)

    def config_map(self, namespace: str, name: str) -> ConfigMapEnv | None:
        """A collected ConfigMap."""
        return next((c for c in self.config_maps if c.namespace == namespace and c.name == name), None)

    def training_pods(self) -> list[Pod]:
        """Pods that use GPUs/EFA or carry NCCL settings."""
        return [p for p in self.pods or [] if p.is_training]
