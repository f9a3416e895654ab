"""Scenario files: a whole simulated cluster with its faults, as data.

Scenarios live in `scenarios/*.json`; the demo, the tests and the benchmarks all load them
from there, so a fault is described once and exercised everywhere.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hyperpod_nccl_sim.node_behaviours import NodeBehaviours

SCENARIO_PACKAGE = "hyperpod_nccl_sim"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SecurityGroupSpec(_Strict):
    """A security group; `self_ingress`/`self_egress` control the self-referencing rules."""

    key: str
    name: str
    self_ingress: bool = True
    self_egress: bool = True
    ingress_from: list[str] = Field(default_factory=list, description="keys of other groups admitted")


class InstanceGroupSpec(_Strict):
    """An instance group and its node count."""

    name: str
    instance_type: str
    count: int
    status: str = "InService"
    target_count: int | None = None
    slurm_node_type: Literal["Controller", "Login", "Compute"] | None = None
    override_security_groups: list[str] = Field(default_factory=list)


class NodeOverride(_Strict):
    """Per-node state that differs from a healthy Running node. `node` is "group:index"."""

    node: str
    status: str = "Running"
    message: str | None = None


class EventSpec(_Strict):
    """A ListClusterEvents record, `minutes_ago` before the scenario's clock. `level: null` leaves
    EventLevel out of the record, as the API model allows."""

    minutes_ago: float
    level: Literal["Info", "Warn", "Error"] | None
    description: str
    resource_type: Literal["Cluster", "InstanceGroup", "Instance"] = "Cluster"
    node: str | None = None
    instance_group: str | None = None


class FaultSpec(_Strict):
    """An AWS API fault the emulation injects: `operation` is "service:Operation"."""

    operation: str
    error_code: str
    message: str = "injected by the simulation"
    http_status: int = 400
    times: int | None = Field(default=None, description="fail this many calls, then succeed; None = always")
    delay_seconds: float = 0.0
    request_contains: str | None = Field(
        default=None, description="fail only the calls whose request body contains this text (one item's write)"
    )


class ClusterSpec(_Strict):
    """The HyperPod cluster itself."""

    name: str
    orchestrator: Literal["eks", "slurm"]
    status: str = "InService"
    failure_message: str | None = None
    node_recovery: Literal["Automatic", "None"] | None = "Automatic"
    node_provisioning_mode: Literal["Continuous"] | None = "Continuous"
    eks_cluster_name: str | None = None
    security_groups: list[str] = Field(default_factory=lambda: ["cluster"])
    instance_groups: list[InstanceGroupSpec]


# The `logs` section (`<scenario>.logs.json`), seeded by `logs.py`.
SimStreamKind = Literal["health_agent", "lifecycle", "nccl", "training"]


class LogLineSpec(_Strict):
    """One line (repeated `repeat` times, `every_seconds` apart) at `minutes_ago`."""

    minutes_ago: float
    message: str
    repeat: int = Field(default=1, ge=1, le=10000)
    every_seconds: float = 1.0


class LogStreamSpec(_Strict):
    """The lines of one node's stream."""

    node: str
    kind: SimStreamKind
    lines: list[LogLineSpec]


class ChatterSpec(_Strict):
    """Lines every selected node writes (healthy NCCL INFO chatter), a second apart per line."""

    nodes: list[str] | Literal["all"] = "all"
    groups: list[str] | None = None
    except_nodes: list[str] = Field(default_factory=list)
    kind: SimStreamKind = "nccl"
    minutes_ago: float = 100
    lines: list[str]


class LogsSpec(_Strict):
    """The `logs` section of a scenario. `enabled: false` leaves the log group uncreated."""

    enabled: bool = True
    chatter: list[ChatterSpec] = Field(default_factory=list)
    streams: list[LogStreamSpec] = Field(default_factory=list)


# The `kubernetes` section (`<scenario>.kubernetes.json`), served by `kubernetes.py`.
# A Kubernetes label value: at most 63 characters of [A-Za-z0-9_.-], alphanumeric at both ends.
_LABEL_VALUE = r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$"


class HmaFaultSpec(_Strict):
    """A fault the HyperPod health-monitoring agent detected on a node. The emulation writes it on the node
    as the agent does (labels, taint, fault-details annotation, node condition: `kubernetes._hma_fault`)."""

    type: str = Field(pattern=_LABEL_VALUE, description="fault type, also the condition type: NvidiaErrorTerminate")
    reason: str = Field(pattern=_LABEL_VALUE, description="fault reason, also the condition reason: XidHardwareFailure")
    message: str = Field(min_length=1, description="what the agent saw, e.g. the kernel's NVRM Xid line")
    repair: Literal["Reboot", "Replace"] = Field(description="what HyperPod will do: the node-health-status it gets")
    minutes_ago: float = Field(default=30.0, ge=0.0, description="when the agent detected it")


class K8sNodeSpec(_Strict):
    """How one node ("group:index") differs from a healthy, Ready, Schedulable node. Explicit `labels`,
    `annotations` and `taints` apply over what `hma_fault` writes."""

    node: str
    hma_fault: HmaFaultSpec | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    ready: bool = True
    ready_message: str | None = None
    taints: list[dict[str, Any]] = Field(default_factory=list)
    efa_capacity: int | None = Field(
        default=None, ge=0, description="EFA devices the kubelet reports (capacity); None = the instance type's count"
    )
    efa_allocatable: int | None = Field(
        default=None, ge=0, description="EFA devices pods can request (allocatable); None = the node's capacity"
    )

    @model_validator(mode="after")
    def _allocatable_within_capacity(self) -> K8sNodeSpec:
        # The kubelet never advertises more of a device than it has.
        capacity, allocatable = self.efa_capacity, self.efa_allocatable
        if capacity is not None and allocatable is not None and allocatable > capacity:
            raise ValueError(f"{self.node}: efa_allocatable {allocatable} exceeds efa_capacity {capacity}")
        return self


class PodVariation(_Strict):
    """How pod `index` of a job differs from its siblings."""

    index: int
    phase: str | None = None
    image_digest: str | None = None
    omit_shm: bool = False
    omit_ipc_lock: bool = False
    efa: int | None = None
    restarts: int = 0
    last_exit_code: int | None = None
    last_reason: str | None = None
    waiting_reason: str | None = None
    unschedulable_message: str | None = None
    log: list[str] | None = Field(default=None, description="replaces the job's log template")
    log_append: list[str] = Field(default_factory=list)
    previous_log: list[str] = Field(default_factory=list)


class TrainingJobSpec(_Strict):
    """A distributed training job: one pod per node key, rendered as real Pod objects.

    Log lines and env values may use `{pod}`, `{rank}`, `{job}`, `{namespace}`, `{node}`.
    """

    name: str
    namespace: str
    nodes: list[str]
    image: str = "123456789012.dkr.ecr.us-west-2.amazonaws.com/training:latest"
    image_digest: str = "sha256:" + "a" * 64
    container: str = "pytorch"
    gpus: int = 8
    efa: int | None = Field(default=None, description="EFA devices per pod; None = the instance type's count")
    env: dict[str, str] = Field(default_factory=dict)
    env_from_configmaps: list[str] = Field(default_factory=list)
    command: list[str] = Field(default_factory=lambda: ["torchrun"])
    args: list[str] = Field(default_factory=list)
    shm_size_limit: str | None = "10Gi"
    shm_medium: str | None = "Memory"
    ipc_lock: bool = True
    labels: dict[str, str] = Field(default_factory=dict)
    headless_subdomain: str | None = Field(default=None, description="spec.subdomain (pods get hostname = name)")
    log: list[str] = Field(default_factory=list)
    pods: list[PodVariation] = Field(default_factory=list)

    @property
    def key(self) -> str:
        """The job as the product names it: "namespace/name"."""
        return f"{self.namespace}/{self.name}"

    def pod_name(self, rank: int) -> str:
        """The name of the job's pod of `rank` (one pod per entry of `nodes`)."""
        return f"{self.name}-worker-{rank}"


class KubernetesScenario(_Strict):
    """The `kubernetes` section of a scenario (`<scenario>.kubernetes.json`)."""

    nodes: list[K8sNodeSpec] = Field(default_factory=list)
    jobs: list[TrainingJobSpec] = Field(default_factory=list)
    objects: list[dict[str, Any]] = Field(
        default_factory=list,
        description="raw manifests (Service, NetworkPolicy, ConfigMap, DaemonSet, Namespace, Pod, Endpoints)",
    )
    reject_tokens: bool = Field(default=False, description="401 for every call: the caller has no access entry")
    forbidden: list[str] = Field(default_factory=list, description="resources answering 403, e.g. networkpolicies")
    server_errors: list[str] = Field(
        default_factory=list, description="resources answering 500 (an API server or aggregated API failing), e.g. pods"
    )
    latency_seconds: float = Field(
        default=0.0, ge=0.0, description="requests are answered this long after they arrive (a slow API server)"
    )
    slow_resources: list[str] = Field(
        default_factory=list, description="the resources latency_seconds applies to, e.g. pods/log; empty = all"
    )
    unreachable: bool = Field(default=False, description="point the EKS endpoint at a closed port")
    wrong_ca: bool = Field(
        default=False,
        description="eks:DescribeCluster returns a CA that did not sign the API server's certificate "
        "(a stale CA, or a TLS-intercepting proxy in the way)",
    )
    ignore_limit_bytes: bool = Field(
        default=False, description="pod logs are served whole whatever limitBytes says (a server or proxy ignoring it)"
    )
    continue_ttl_seconds: float | None = Field(
        default=None,
        ge=0.0,
        description="a continue token older than this answers 410 Expired, as after etcd compacted its revision "
        "(apiserver compacts every 5 minutes by default); None = tokens never expire",
    )
    expired_continues: int = Field(
        default=0, ge=0, description="the first N list requests carrying a continue token answer 410 Expired"
    )


CLUSTER_ANCHOR = "cluster"


class PlantedRootCause(_Strict):
    """A fault the scenario's author planted, as the verdict should name it: the ground truth that
    `tests/functional/test_verdict_ground_truth.py` holds every diagnosis of the scenario to."""

    kind: str = Field(min_length=1, description="a key of hyperpod_nccl.verdict.kinds.CAUSE_KINDS")
    anchor: str = Field(
        min_length=1,
        description='where it was planted: "cluster", a node key ("worker:5"), a Kubernetes job '
        '("namespace/name") or a Slurm job id',
    )
    what: str = Field(min_length=1, pattern=r"^[^\n]+$", description="what was planted, in one line")


def zone_id_of(region: str) -> str:
    """The Availability Zone ID the simulated nodes of `region` run in (us-west-2 → usw2-az1)."""
    parts = region.split("-")
    return f"{parts[0]}{''.join(p[0] for p in parts[1:-1])}{parts[-1]}-az1"


class Scenario(_Strict):
    """A simulated HyperPod cluster with its faults."""

    name: str
    description: str
    # None: the scenario does not say what it planted (a hand-written file given to `demo`);
    # a shipped scenario must say, even when that is nothing (`[]`).
    planted_root_causes: list[PlantedRootCause] | None = None
    region: str = "us-west-2"
    account_id: str = Field(default="123456789012", pattern=r"^\d{12}$", description="the account every caller is")
    cluster: ClusterSpec
    security_groups: list[SecurityGroupSpec] = Field(default_factory=list)
    nodes: list[NodeOverride] = Field(default_factory=list)
    events: list[EventSpec] = Field(default_factory=list)
    faults: list[FaultSpec] = Field(default_factory=list)
    # Sections owned by the log, node-probe and Kubernetes simulations.
    logs: LogsSpec | None = None
    node_behaviours: NodeBehaviours | None = None
    kubernetes: KubernetesScenario | None = None

    @model_validator(mode="after")
    def _slurm_jobs_run_on_this_scenario(self) -> Scenario:
        slurm = self.node_behaviours.slurm if self.node_behaviours else None
        keys = set(self.node_keys())
        for job in slurm.queue() if slurm else []:
            unknown = [key for key in job.nodes if key not in keys]
            if unknown:
                raise ValueError(f"Slurm job {job.id} holds nodes the scenario does not have: {unknown}")
        return self

    @model_validator(mode="after")
    def _planted_causes_name_this_scenario(self) -> Scenario:
        seen: set[tuple[str, str]] = set()
        for planted in self.planted_root_causes or []:
            if self.anchor_kind(planted.anchor) is None:
                raise ValueError(
                    f"planted root cause {planted.kind} at {planted.anchor!r}: the anchor is neither "
                    f"{CLUSTER_ANCHOR!r} nor a node key, Kubernetes job or Slurm job of the scenario"
                )
            if (planted.kind, planted.anchor) in seen:
                raise ValueError(f"planted root cause {planted.kind} at {planted.anchor!r} is stated twice")
            seen.add((planted.kind, planted.anchor))
        return self

    def anchor_kind(self, anchor: str) -> Literal["cluster", "node", "job"] | None:
        """What a planted cause's anchor names in this scenario, or None when it names nothing."""
        if anchor == CLUSTER_ANCHOR:
            return "cluster"
        if anchor in self.node_keys():
            return "node"
        if self.job(anchor) is not None or anchor in self.slurm_job_ids():
            return "job"
        return None

    def verdict_anchor(self, anchor: str) -> str:
        """A planted cause's anchor as the verdict spells it: a node key becomes its instance id."""
        return self.instance_id(anchor) if anchor in self.node_keys() else anchor

    def job(self, key: str) -> TrainingJobSpec | None:
        """The Kubernetes job named "namespace/name", if the scenario runs it."""
        jobs = self.kubernetes.jobs if self.kubernetes else []
        return next((job for job in jobs if job.key == key), None)

    def slurm_job_ids(self) -> list[str]:
        """The ids of the Slurm jobs in the simulated queue."""
        slurm = self.node_behaviours.slurm if self.node_behaviours else None
        return [job.id for job in slurm.queue()] if slurm else []

    def node_keys(self) -> list[str]:
        """Every node as "group:index", in creation order."""
        return [f"{g.name}:{i}" for g in self.cluster.instance_groups for i in range(g.count)]

    def instance_id(self, node_key: str) -> str:
        """The deterministic EC2-style instance id of a node key ("worker:3")."""
        digest = hashlib.sha256(f"{self.name}/{node_key}".encode()).hexdigest()
        return f"i-0{digest[:16]}"

    def cluster_id(self) -> str:
        """The 12-character id that ends the HyperPod cluster's ARN (moto would put the name there)."""
        return hashlib.sha256(f"{self.name}/{self.cluster.name}".encode()).hexdigest()[:12]

    def k8s_node_name(self, node_key: str) -> str:
        """The Kubernetes node name HyperPod gives an instance: `hyperpod-<instance id>`."""
        return f"hyperpod-{self.instance_id(node_key)}"

    def zone_id(self) -> str:
        """The Availability Zone ID every node of the scenario runs in (us-west-2 → usw2-az1)."""
        return zone_id_of(self.region)

    def provider_id(self, node_key: str) -> str:
        """A HyperPod node's `spec.providerID`: aws:///<AZ id>/sagemaker/cluster/hyperpod-<cluster id>-<instance id>."""
        return f"aws:///{self.zone_id()}/sagemaker/cluster/hyperpod-{self.cluster_id()}-{self.instance_id(node_key)}"

    def hostname(self, node_key: str) -> str:
        """A deterministic private DNS hostname (ip-10-1-x-y.<region>.compute.internal)."""
        index = self.node_keys().index(node_key)
        return f"ip-10-1-{index // 250}-{10 + index % 250}.{self.region}.compute.internal"

    def override(self, node_key: str) -> NodeOverride | None:
        """The override of a node, if any."""
        return next((n for n in self.nodes if n.node == node_key), None)

    def event_time(self, event: EventSpec, now: datetime) -> datetime:
        """When an event happened, relative to `now`."""
        return now - timedelta(minutes=event.minutes_ago)


def scenario_dir() -> Path:
    """Where the shipped scenario files live."""
    return Path(str(resources.files(SCENARIO_PACKAGE) / "scenarios"))


SIDECAR_SECTIONS = ("logs", "node_behaviours", "kubernetes")


def available_scenarios() -> list[str]:
    """Names of the shipped scenarios (sidecar files `<name>.<section>.json` excluded)."""
    return sorted(p.stem for p in scenario_dir().glob("*.json") if "." not in p.stem)


def load_scenario(name_or_path: str) -> Scenario:
    """Load a shipped scenario by name, or a scenario file by path.

    Raises `ValueError` with a readable message for unknown names and invalid files.
    """
    path = Path(name_or_path)
    if not path.suffix:
        path = scenario_dir() / f"{name_or_path}.json"
    if not path.is_file():
        raise ValueError(f"unknown scenario {name_or_path!r}; available: {', '.join(available_scenarios())}")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        # Each simulated source keeps its part of a scenario in a sidecar file beside the main
        # one (`eks-p5.logs.json`), so that sources evolve without editing one shared file.
        for section in SIDECAR_SECTIONS:
            sidecar = path.with_name(f"{path.stem}.{section}.json")
            if sidecar.is_file():
                document[section] = json.loads(sidecar.read_text(encoding="utf-8"))
        return Scenario.model_validate(document)
    except (json.JSONDecodeError, ValueError) as error:
        raise ValueError(f"invalid scenario file {path}: {error}") from error
