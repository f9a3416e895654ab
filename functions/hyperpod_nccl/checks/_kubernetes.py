"""Helpers shared by the Kubernetes checks (k8s_*.py): resources naming a pod, its node and
instance, grouping of training pods into jobs, and a container's effective environment."""

from __future__ import annotations

from dataclasses import dataclass

from hyperpod_nccl.models.findings import Resource
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.kubernetes import Container, KubernetesInventory, Pod
from hyperpod_nccl.redaction import REDACTED, is_secret_name

# Resources listed per finding: enough to act on, short enough to read.
MAX_LISTED = 8


def kube(inv: Inventory) -> KubernetesInventory:
    """The Kubernetes inventory (checks with source "kubernetes" only run when it exists)."""
    assert inv.kubernetes is not None
    return inv.kubernetes


def pod_ref(pod: Pod) -> str:
    """namespace/name."""
    return f"{pod.namespace}/{pod.name}"


def pod_resources(k8s: KubernetesInventory, pod: Pod) -> list[Resource]:
    """The pod, its Kubernetes node and the node's EC2 instance id (when known)."""
    resources = [Resource(kind="pod", id=pod_ref(pod))]
    if pod.node_name:
        resources.append(Resource(kind="k8s_node", id=pod.node_name))
        node = k8s.node(pod.node_name)
        if node and node.instance_id:
            resources.append(Resource(kind="node", id=node.instance_id, name=pod.node_name))
    return resources


def where(k8s: KubernetesInventory, pod: Pod) -> str:
    """ "on node <name> (<instance id>)" for titles and evidence."""
    if not pod.node_name:
        return "not scheduled"
    node = k8s.node(pod.node_name)
    instance = f" ({node.instance_id})" if node and node.instance_id else ""
    return f"on {pod.node_name}{instance}"


@dataclass(frozen=True)
class Job:
    """Training pods that belong together (same namespace and job label/owner)."""

    namespace: str
    name: str
    pods: tuple[Pod, ...]

    @property
    def ref(self) -> str:
        """namespace/job."""
        return f"{self.namespace}/{self.name}"

    def resources(self, pods: list[Pod] | None = None) -> list[Resource]:
        """The job plus (up to MAX_LISTED of) the given pods."""
        listed = [Resource(kind="job", id=self.ref)]
        listed += [Resource(kind="pod", id=pod_ref(p)) for p in (pods or [])[:MAX_LISTED]]
        return listed


def training_jobs(k8s: KubernetesInventory) -> list[Job]:
    """Training pods grouped by job; a pod without a job is a job of its own."""
    groups: dict[tuple[str, str], list[Pod]] = {}
    for pod in k8s.training_pods():
        groups.setdefault((pod.namespace, pod.job_name or pod.name), []).append(pod)
    return [Job(namespace=ns, name=name, pods=tuple(pods)) for (ns, name), pods in sorted(groups.items())]


def main_container(pod: Pod) -> Container | None:
    """The container that trains: the one requesting GPUs/EFA, else the first."""
    for container in pod.containers:
        if container.resource("nvidia.com/gpu") or container.resource("vpc.amazonaws.com/efa"):
            return container
    return pod.containers[0] if pod.containers else None


@dataclass(frozen=True)
class EnvValue:
    """A variable's effective value and where it came from (value None = set from elsewhere,
    e.g. a Secret or the downward API)."""

    value: str | None
    source: str


def effective_env(k8s: KubernetesInventory, pod: Pod, container: Container) -> dict[str, EnvValue]:
    """The container's environment as Kubernetes builds it: envFrom first (in order), then env
    (which overrides). Secret-looking names never carry a value."""
    env: dict[str, EnvValue] = {}
    for ref in container.env_from:
        if ref.kind != "configMap":
            continue
        config_map = k8s.config_map(pod.namespace, ref.name)
        if config_map is None or not config_map.found:
            continue
        for key, value in config_map.data.items():
            env[ref.prefix + key] = EnvValue(value, f"configmap {ref.name}")
    for var in container.env:
        if var.value is not None:
            env[var.name] = EnvValue(var.value, "pod spec")
        elif var.value_from and var.value_from.startswith("configMapKeyRef:"):
            name, _, key = var.value_from.split(":", 1)[1].partition("/")
            config_map = k8s.config_map(pod.namespace, name)
            referenced = config_map.data.get(key) if config_map and config_map.found else None
            env[var.name] = EnvValue(referenced, f"configmap {name}")
        else:
            env[var.name] = EnvValue(None, var.value_from or "unknown")
    return {k: EnvValue(REDACTED, v.source) if is_secret_name(k) and v.value else v for k, v in env.items()}
