"""Pod and job status: phases, CrashLoopBackOff, restarts, init containers and exit codes, and
whether a `--namespace` / `--job` scope matched any pod at all."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_nccl import thresholds
from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._kubernetes import kube, pod_ref, pod_resources, where
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.kubernetes import JOB_LABELS, ContainerState, ContainerStatus, KubernetesInventory, Pod
from hyperpod_nccl.reads import K8S_PODS
from hyperpod_nccl.references import DBG_CONTAINER_OOM, DBG_POD_FAILURES, DBG_VERSION_MISMATCH, OPS_SCOPE

_BAD_WAITING = {
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "InvalidImageName",
    "RunContainerError",
}


def _state_text(state: ContainerState | None) -> str:
    if state is None:
        return "-"
    parts = [state.state, state.reason or ""]
    if state.exit_code is not None:
        parts.append(f"exit {state.exit_code}")
    return " ".join(p for p in parts if p)


@check(
    id="k8s.pod_status",
    title="Pod phases, CrashLoopBackOff and restarts",
    priority=Priority.P1,
    reference=DBG_POD_FAILURES,
    source="kubernetes",
    orchestrators=("eks",),
    reads=(K8S_PODS,),
)
def pod_status(inv: Inventory) -> Iterator[Finding]:
    """Failed/Unknown/Pending pods, containers stuck waiting, and restart counts."""
    k8s = kube(inv)
    if k8s.pods is None:
        return
    issues = 0
    for pod in k8s.pods:
        resources = pod_resources(k8s, pod)
        if pod.phase in ("Failed", "Unknown"):
            issues += 1
            yield pod_status.fail(
                f"pod {pod_ref(pod)} is {pod.phase} ({where(k8s, pod)})",
                detail=pod.message or pod.reason or "",
                evidence=[f"{s.name}: {_state_text(s.state)}" for s in pod.container_statuses],
                resources=resources,
                fields={"phase": pod.phase},
            )
            continue
        if pod.phase == "Pending":
            issues += 1
            yield pod_status.warn(
                f"pod {pod_ref(pod)} is Pending ({where(k8s, pod)})",
                detail=pod.unschedulable_message or pod.message or "waiting for its containers to start",
                evidence=[f"{s.name}: {_state_text(s.state)}" for s in pod.container_statuses],
                resources=resources,
                fields={"phase": "Pending"},
            )
            continue
        for status in pod.container_statuses:
            waiting = status.state.reason if status.state and status.state.state == "waiting" else None
            if waiting in _BAD_WAITING:
                issues += 1
                yield pod_status.fail(
                    f"pod {pod_ref(pod)} container {status.name} is in {waiting} ({where(k8s, pod)})",
                    detail=f"{status.restart_count} restarts; last run: {_state_text(status.last_state)}",
                    evidence=[status.state.message] if status.state and status.state.message else [],
                    resources=resources,
                    fields={"waiting_reason": waiting, "restarts": status.restart_count},
                )
            elif status.restart_count > thresholds.K8S_POD_RESTARTS_WARN:
                issues += 1
                yield pod_status.warn(
                    f"pod {pod_ref(pod)} container {status.name} restarted {status.restart_count} times",
                    detail=f"last run: {_state_text(status.last_state)}; {where(k8s, pod)}",
                    resources=resources,
                    fields={"restarts": status.restart_count},
                )
    if not issues and k8s.pods:
        yield pod_status.passed(f"{len(k8s.pods)} pod(s) in scope, none failing, pending or crash-looping")


def _init_failure(status: ContainerStatus) -> str | None:
    state = status.state
    if state and state.state == "waiting" and state.reason in _BAD_WAITING:
        return state.reason
    if state and state.state == "terminated" and state.exit_code:
        return f"exited {state.exit_code} ({state.reason or 'Error'})"
    last = status.last_state
    if status.restart_count and last and last.state == "terminated" and last.exit_code:
        return f"restarted {status.restart_count}x, last exit {last.exit_code}"
    return None


@check(
    id="k8s.init_containers",
    title="Init-container failures",
    priority=Priority.P1,
    reference=DBG_POD_FAILURES,
    source="kubernetes",
    orchestrators=("eks",),
    reads=(K8S_PODS,),
)
def init_containers(inv: Inventory) -> Iterator[Finding]:
    """Init containers that crash or cannot start keep the pod in Init forever."""
    k8s = kube(inv)
    if k8s.pods is None:
        return
    found = False
    for pod in k8s.pods:
        for status in pod.init_container_statuses:
            failure = _init_failure(status)
            if failure:
                found = True
                yield init_containers.fail(
                    f"pod {pod_ref(pod)} init container {status.name}: {failure}",
                    detail=(status.state.message if status.state and status.state.message else "")
                    or "the app containers will not start until it succeeds",
                    resources=pod_resources(k8s, pod),
                    fields={"container": status.name},
                )
    if not found and any(p.init_container_statuses for p in k8s.pods):
        yield init_containers.passed("every init container completed")


# What an exit code says, with the runbook section that explains it.
_EXIT_EXPLAINED = {
    137: (
        "SIGKILL: the kernel's OOM killer or the kubelet killed it at the memory limit",
        DBG_CONTAINER_OOM,
        Priority.P1,
    ),
    139: (
        "SIGSEGV: a segmentation fault, often a CUDA/NCCL/aws-ofi-nccl library mismatch in the image",
        DBG_VERSION_MISMATCH,
        Priority.P1,
    ),
    143: (
        "SIGTERM: it was asked to stop (eviction, node drain or replacement, preemption, or a peer rank's "
        "failure tearing the job down) — look for the first failing rank",
        DBG_POD_FAILURES,
        Priority.P2,
    ),
}


def _terminations(pod: Pod) -> Iterator[tuple[ContainerStatus, ContainerState]]:
    for status in pod.container_statuses:
        for state in (status.state, status.last_state):
            if state is not None and state.state == "terminated":
                yield status, state


@check(
    id="k8s.container_exit_codes",
    title="OOMKilled and signal exit codes (137, 139, 143)",
    priority=Priority.P1,
    reference=DBG_CONTAINER_OOM,
    source="kubernetes",
    orchestrators=("eks",),
    reads=(K8S_PODS,),
)
def container_exit_codes(inv: Inventory) -> Iterator[Finding]:
    """Explain the terminations of training containers: OOMKilled / 137, 139 and 143."""
    k8s = kube(inv)
    if k8s.pods is None:
        return
    seen: set[tuple[str, str, int]] = set()
    for pod in k8s.pods:
        for status, state in _terminations(pod):
            code = 137 if state.reason == "OOMKilled" else state.exit_code
            if code not in _EXIT_EXPLAINED or (pod_ref(pod), status.name, code) in seen:
                continue
            seen.add((pod_ref(pod), status.name, code))
            meaning, reference, priority = _EXIT_EXPLAINED[code]
            oom = state.reason == "OOMKilled"
            title = f"pod {pod_ref(pod)} container {status.name} was {'OOMKilled' if oom else f'killed by exit {code}'}"
            limit = next((c.limits.get("memory") for c in pod.containers if c.name == status.name), None)
            build = container_exit_codes.warn if priority is Priority.P2 else container_exit_codes.fail
            yield build(
                f"{title} ({where(k8s, pod)})",
                priority=priority,
                reference=reference,
                detail=meaning + (f"; memory limit {limit}" if oom and limit else ""),
                evidence=[f"{state.reason or 'terminated'} exit={state.exit_code} at {state.finished_at or '-'}"],
                resources=pod_resources(k8s, pod),
                fields={"exit_code": code, "signature": f"exit_{code}"},
            )
    if not seen and k8s.pods:
        yield container_exit_codes.passed("no container was OOMKilled or killed by a signal")


# Namespaces named in the detail of a scope that matched nothing, before "and N more".
_NAMESPACES_LISTED = 8


def _why_nothing_matched(k8s: KubernetesInventory) -> str:
    namespace, job = k8s.scope_namespace, k8s.scope_job
    known = sorted(k8s.namespace_labels or {})
    if namespace and k8s.namespace_labels is not None and namespace not in k8s.namespace_labels:
        more = f" and {len(known) - _NAMESPACES_LISTED} more" if len(known) > _NAMESPACES_LISTED else ""
        return f"namespace {namespace} does not exist; the cluster's: {', '.join(known[:_NAMESPACES_LISTED])}{more}"
    where = f"namespace {namespace}" if namespace else "any non-system namespace"
    if job:
        return f"no pod in {where} has a job label ({', '.join(JOB_LABELS)}) or an owner named {job}"
    return f"{where} has no pods"


@check(
    id="k8s.scope",
    title="The --namespace / --job scope matches pods",
    priority=Priority.P2,
    reference=OPS_SCOPE,
    source="kubernetes",
    orchestrators=("eks",),
    reads=(K8S_PODS,),
)
def scope(inv: Inventory) -> Iterator[Finding]:
    """A scope that matches no pod leaves every Kubernetes check silent: that is a WARN, never
    "No issues found"."""
    k8s = kube(inv)
    namespace, job = k8s.scope_namespace, k8s.scope_job
    if k8s.pods is None or k8s.pods or not (namespace or job):
        return
    asked = " ".join(
        part for part in (f"--namespace {namespace}" if namespace else "", f"--job {job}" if job else "") if part
    )
    resources = [Resource(kind="namespace", id=namespace)] if namespace else []
    if job:
        resources.append(Resource(kind="job", id=f"{namespace}/{job}" if namespace else job))
    yield scope.warn(
        f"0 pods matched {asked}: the Kubernetes checks had nothing to check",
        detail=_why_nothing_matched(k8s),
        resources=resources,
    )
