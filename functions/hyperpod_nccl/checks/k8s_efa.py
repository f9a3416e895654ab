"""EFA, /dev/shm and memlock prerequisites of the training pods."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_nccl import instance_types, thresholds
from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._kubernetes import kube, main_container, pod_ref, pod_resources, where
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.kubernetes import EFA_RESOURCE, GPU_RESOURCE, Pod, parse_quantity
from hyperpod_nccl.reads import K8S_DAEMONSETS, K8S_NODES, K8S_PODS
from hyperpod_nccl.references import DBG_EFA_CONFIG, DBG_MEMLOCK_SHM


@check(
    id="k8s.efa_device_plugin",
    title="EFA device plugin DaemonSet",
    priority=Priority.P0,
    reference=DBG_EFA_CONFIG,
    source="kubernetes",
    orchestrators=("eks",),
    reads=(K8S_PODS, K8S_DAEMONSETS),
)
def efa_device_plugin(inv: Inventory) -> Iterator[Finding]:
    """Pods requesting vpc.amazonaws.com/efa need the EFA device plugin running on their nodes."""
    k8s = kube(inv)
    if k8s.daemonsets is None or k8s.pods is None:
        return
    requesting = [p for p in k8s.pods if p.total(EFA_RESOURCE)]
    plugins = [d for d in k8s.daemonsets if "efa" in d.name or any("efa" in image for image in d.images)]
    if not plugins:
        if requesting:
            yield efa_device_plugin.fail(
                f"no EFA device plugin DaemonSet, but {len(requesting)} pod(s) request {EFA_RESOURCE}",
                detail="without the plugin no node advertises EFA devices: those pods stay Pending",
                resources=[Resource(kind="pod", id=pod_ref(p)) for p in requesting[:8]],
            )
        else:
            yield efa_device_plugin.info("no EFA device plugin DaemonSet (no pod requests EFA either)")
        return
    for plugin in plugins:
        # No resource kind names a DaemonSet; the signature field keeps fingerprints apart.
        ref = f"{plugin.namespace}/{plugin.name}"
        if plugin.ready < plugin.desired:
            yield efa_device_plugin.warn(
                f"EFA device plugin {ref}: {plugin.ready}/{plugin.desired} pods ready",
                priority=Priority.P1,
                detail="nodes without a ready plugin pod advertise no EFA devices; EFA pods cannot land there",
                fields={"ready": plugin.ready, "desired": plugin.desired, "signature": ref},
            )
        else:
            yield efa_device_plugin.passed(
                f"EFA device plugin {ref} ready on {plugin.ready}/{plugin.desired} nodes",
                fields={"signature": ref},
            )


def _instance_type(inv: Inventory, pod: Pod) -> str | None:
    node = kube(inv).node(pod.node_name)
    return node.instance_type if node else None


@check(
    id="k8s.efa_requests",
    title="EFA requested by training pods on EFA instance types",
    priority=Priority.P1,
    reference=DBG_EFA_CONFIG,
    source="kubernetes",
    orchestrators=("eks",),
    reads=(K8S_PODS, K8S_NODES),
)
def efa_requests(inv: Inventory) -> Iterator[Finding]:
    """GPU pods on EFA instance types that request no EFA fall back to TCP sockets; a request
    below the instance type's adapter count leaves bandwidth unused."""
    k8s = kube(inv)
    problems = 0
    checked = 0
    for pod in k8s.training_pods():
        instance_type = _instance_type(inv, pod)
        if not instance_type or not instance_types.expects_efa_for_nccl(instance_type) or not pod.total(GPU_RESOURCE):
            continue
        checked += 1
        expected = instance_types.expected_efa(instance_type) or 0
        requested = pod.total(EFA_RESOURCE)
        gpus = pod.total(GPU_RESOURCE)
        full_node = gpus >= instance_types.GPUS_PER_INSTANCE.get(instance_type, 8)
        fields: dict[str, str | int | float | bool | None] = {
            "requested": requested,
            "expected": expected,
            "instance_type": instance_type,
        }
        if requested == 0:
            problems += 1
            yield efa_requests.fail(
                f"pod {pod_ref(pod)} uses {gpus} GPU(s) on {instance_type} but requests no {EFA_RESOURCE}",
                detail="without EFA devices in the container NCCL falls back to TCP sockets "
                "('Using network Socket'): inter-node bandwidth drops by an order of magnitude",
                resources=pod_resources(k8s, pod),
                fields=fields,
            )
        elif requested > expected:
            problems += 1
            yield efa_requests.fail(
                f"pod {pod_ref(pod)} requests {requested} EFA devices; {instance_type} has {expected}",
                detail="the pod can never be scheduled",
                resources=pod_resources(k8s, pod),
                fields=fields,
            )
        elif full_node and requested < expected:
            problems += 1
            yield efa_requests.warn(
                f"pod {pod_ref(pod)} takes the whole {instance_type} but only {requested} of {expected} EFA devices",
                priority=Priority.P2,
                detail="the unrequested adapters sit idle; request all of them for full inter-node bandwidth",
                resources=pod_resources(k8s, pod),
                fields=fields,
            )
    if checked and not problems:
        yield efa_requests.passed(f"{checked} GPU pod(s) on EFA instance types request all their EFA devices")


def _shm_problem(pod: Pod) -> str | None:
    container = main_container(pod)
    if container is None:
        return None
    mount = next((m for m in container.volume_mounts if m.mount_path.rstrip("/") == "/dev/shm"), None)
    if mount is None:
        return "no volume is mounted at /dev/shm: the container runtime's 64 MiB default applies"
    volume = next((v for v in pod.volumes if v.name == mount.name), None)
    if volume is None or volume.kind == "hostPath":
        return None
    if volume.kind != "emptyDir" or volume.medium != "Memory":
        return f"/dev/shm is a {volume.kind}{' on disk' if volume.kind == 'emptyDir' else ''}, not memory-backed"
    size = parse_quantity(volume.size_limit)
    if size is not None and size < thresholds.DEV_SHM_MIN_BYTES:
        return f"/dev/shm sizeLimit is only {volume.size_limit}"
    return None


@check(
    id="k8s.dev_shm",
    title="/dev/shm of training pods",
    priority=Priority.P1,
    reference=DBG_MEMLOCK_SHM,
    source="kubernetes",
    orchestrators=("eks",),
    reads=(K8S_PODS,),
)
def dev_shm(inv: Inventory) -> Iterator[Finding]:
    """Training pods need a memory-backed emptyDir at /dev/shm of a useful size."""
    k8s = kube(inv)
    training = [p for p in k8s.training_pods() if p.total(GPU_RESOURCE)]
    problems = 0
    for pod in training:
        problem = _shm_problem(pod)
        if problem:
            problems += 1
            yield dev_shm.warn(
                f"pod {pod_ref(pod)}: {problem}",
                detail="NCCL's intra-node transport and dataloader workers use /dev/shm; mount an emptyDir with "
                f"medium: Memory and sizeLimit {thresholds.DEV_SHM_RECOMMENDED} at /dev/shm "
                "(spec change: restart the job from a checkpoint)",
                resources=pod_resources(k8s, pod),
            )
    if training and not problems:
        yield dev_shm.passed(f"{len(training)} GPU pod(s) mount a memory-backed /dev/shm")


@check(
    id="k8s.memlock_ipc_lock",
    title="IPC_LOCK where EFA is used",
    priority=Priority.P1,
    reference=DBG_MEMLOCK_SHM,
    source="kubernetes",
    orchestrators=("eks",),
    reads=(K8S_PODS,),
)
def memlock_ipc_lock(inv: Inventory) -> Iterator[Finding]:
    """EFA registers (pins) large buffers; without IPC_LOCK the container's memlock limit caps
    that and registration fails."""
    k8s = kube(inv)
    users = [p for p in k8s.training_pods() if p.total(EFA_RESOURCE)]
    problems = 0
    for pod in users:
        container = main_container(pod)
        if container is None or container.privileged or "IPC_LOCK" in container.capabilities_add:
            continue
        problems += 1
        yield memlock_ipc_lock.warn(
            f"pod {pod_ref(pod)} uses EFA without the IPC_LOCK capability ({where(k8s, pod)})",
            detail="add securityContext.capabilities.add: [IPC_LOCK] to the training container; without it "
            "memory registration is bound by RLIMIT_MEMLOCK and fails with ENOMEM / ibv_reg_mr errors",
            resources=pod_resources(k8s, pod),
            fields={"container": container.name},
        )
    if users and not problems:
        yield memlock_ipc_lock.passed(f"{len(users)} EFA pod(s) have IPC_LOCK")
