"""NCCL environment audit from pod specs, and rendezvous (MASTER_ADDR / torchrun endpoint)
resolution to a headless Service."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass

from hyperpod_nccl import instance_types
from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._debug_env import debug_gaps
from hyperpod_nccl.checks._kubernetes import EnvValue, Job, effective_env, kube, main_container, training_jobs
from hyperpod_nccl.models.findings import Finding, Priority, Resource, Status
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.kubernetes import EFA_RESOURCE, KubernetesInventory, Pod, Service
from hyperpod_nccl.nccl_env import is_nccl_variable
from hyperpod_nccl.references import (
    DBG_DNS,
    DBG_P2P_ACS,
    DBG_SOCKET_IFNAME,
    DBG_TCP_FALLBACK,
    DBG_TUNING_NVLS,
    OPS_NCCL_ENV,
    PERF_DEBUG_IMPACT,
    Reference,
)

DEFAULT_RENDEZVOUS_PORT = 29500


def _job_env(k8s: KubernetesInventory, job: Job) -> tuple[Pod, dict[str, EnvValue]] | None:
    for pod in sorted(job.pods, key=lambda p: (p.phase != "Running", p.name)):
        container = main_container(pod)
        if container is not None:
            return pod, effective_env(k8s, pod, container)
    return None


@dataclass(frozen=True)
class _Rule:
    """One observation about one variable."""

    variable: str
    status: Status
    priority: Priority | None
    title: str
    detail: str
    reference: Reference = OPS_NCCL_ENV


def _runs_pytorch(pod: Pod, env: dict[str, EnvValue]) -> bool:
    """torchrun / python entry point or torch.distributed variables: Flight Recorder applies (an
    nccl-tests binary, say, has no ProcessGroupNCCL to record)."""
    container = main_container(pod)
    words = [*container.command, *container.args] if container else []
    launched = any(re.search(r"torchrun|python|torch\.distributed", word) for word in words)
    return launched or any(name.startswith(("TORCH_", "PET_")) for name in env)


def _audit(
    env: dict[str, EnvValue],
    uses_efa: bool,
    instance_type: str | None,
    *,
    pytorch: bool = False,
    command: tuple[str, ...] = (),
    pods: int = 1,
) -> list[_Rule]:
    """Every rule that fires for one job's environment, in a stable order: the rendezvous, debuggability
    gaps, the debug level, error handling, intra-node transport, then (EFA pods only) the network path."""
    value = {k: (v.value or "").strip() for k, v in env.items()}
    # Set means any value, or one taken from elsewhere (a Secret, the downward API: value None).
    present = {k for k, v in env.items() if v.value is None or v.value.strip()}
    # Only ranks spread over several pods rendezvous across the network (one pod's ranks meet locally).
    rules: list[_Rule] = list(_rendezvous_rules(present, command)) if pytorch and pods > 1 else []
    rules += [
        _Rule(gap.variable, Status.INFO, Priority.P2, gap.title, gap.detail, gap.reference)
        for gap in debug_gaps(value, pytorch=pytorch)
    ]
    rules.extend(_debug_level_rules(value))
    rules.extend(_error_handling_rules(value))
    rules.extend(_intra_node_rules(value))
    if uses_efa:
        rules.extend(_efa_transport_rules(value))
        rules.extend(_gpudirect_rdma_rules(value, instance_type))
        rules.extend(_bootstrap_interface_rules(value))
    return rules


# torch.distributed's env:// rendezvous reads these (original Check 7: each counted when unset).
_RENDEZVOUS_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")
_LAUNCHER = re.compile(r"torchrun|torch\.distributed\.(?:run|launch)")
_LAUNCHER_ENDPOINT = re.compile(r"^--(?:rdzv[-_]endpoint|master[-_]addr|standalone)\b")


def _rendezvous_rules(present: set[str], command: tuple[str, ...]) -> Iterator[_Rule]:
    """A PyTorch job's ranks need MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK, set in the pod
    spec (a training operator writes them there) or, for torchrun, the PET_ form it reads. torchrun
    computes WORLD_SIZE and RANK for its workers itself, and takes the endpoint from its flags."""
    missing = [name for name in _RENDEZVOUS_VARIABLES if name not in present and f"PET_{name}" not in present]
    if any(_LAUNCHER.search(word) for word in command):
        endpoint = any(_LAUNCHER_ENDPOINT.match(word) for word in command) or "PET_RDZV_ENDPOINT" in present
        missing = [] if endpoint else [name for name in missing if name in ("MASTER_ADDR", "MASTER_PORT")]
    if missing:
        yield _Rule(
            missing[0],
            Status.WARN,
            Priority.P2,
            f"torch.distributed rendezvous variables unset: {', '.join(missing)}",
            "init_process_group(init_method='env://') reads them; unset, every rank waits for a rendezvous that "
            "never forms (or uses the defaults of one node). Set them in the pod spec, or let the training "
            "operator or torchrun's rendezvous flags provide them",
        )


def _debug_level_rules(value: dict[str, str]) -> Iterator[_Rule]:
    """NCCL_DEBUG left at a verbose level in a training job."""
    debug = value.get("NCCL_DEBUG", "").upper()
    if debug == "TRACE":
        yield _Rule(
            "NCCL_DEBUG",
            Status.WARN,
            Priority.P1,
            "NCCL_DEBUG=TRACE in a training job",
            "TRACE logs every operation: large slowdowns and log volume; use WARN in production",
            PERF_DEBUG_IMPACT,
        )
    elif debug == "INFO":
        yield _Rule(
            "NCCL_DEBUG",
            Status.WARN,
            Priority.P2,
            "NCCL_DEBUG=INFO left on in a long-running job",
            "INFO is for an incident; it adds log volume and some overhead — set WARN once diagnosed",
            PERF_DEBUG_IMPACT,
        )


def _error_handling_rules(value: dict[str, str]) -> Iterator[_Rule]:
    """How a failed or slow collective surfaces: timeout, async error handling, blocking waits."""
    if "NCCL_TIMEOUT" in value:
        yield _Rule(
            "NCCL_TIMEOUT",
            Status.INFO,
            None,
            "NCCL_TIMEOUT is set but nothing reads it",
            "NCCL_TIMEOUT is not an NCCL or PyTorch variable; the collective timeout is the "
            "timeout= argument of torch.distributed.init_process_group (default 10 minutes)",
        )
    if value.get("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "0" or value.get("NCCL_ASYNC_ERROR_HANDLING") == "0":
        yield _Rule(
            "TORCH_NCCL_ASYNC_ERROR_HANDLING",
            Status.WARN,
            Priority.P1,
            "async NCCL error handling is turned off",
            "a failed collective then hangs until the watchdog instead of aborting the job; "
            "leave TORCH_NCCL_ASYNC_ERROR_HANDLING at its default (or 1)",
        )
    elif "NCCL_ASYNC_ERROR_HANDLING" in value:
        yield _Rule(
            "NCCL_ASYNC_ERROR_HANDLING",
            Status.INFO,
            None,
            "NCCL_ASYNC_ERROR_HANDLING is the deprecated name",
            "current PyTorch reads TORCH_NCCL_ASYNC_ERROR_HANDLING",
        )
    if value.get("TORCH_NCCL_BLOCKING_WAIT") == "1":
        yield _Rule(
            "TORCH_NCCL_BLOCKING_WAIT",
            Status.WARN,
            Priority.P2,
            "TORCH_NCCL_BLOCKING_WAIT=1 (debug only)",
            "blocking waits serialise the host thread with every collective; remove after debugging",
        )


def _intra_node_rules(value: dict[str, str]) -> Iterator[_Rule]:
    """NVLink P2P and NVLink SHARP switches."""
    if value.get("NCCL_P2P_DISABLE") == "1":
        yield _Rule(
            "NCCL_P2P_DISABLE",
            Status.WARN,
            Priority.P1,
            "NCCL_P2P_DISABLE=1 disables NVLink P2P",
            "intra-node traffic goes through host memory instead of NVLink; remove it unless a P2P fault is proven",
            DBG_P2P_ACS,
        )
    if "NCCL_NVLS_ENABLE" in value:
        yield _Rule(
            "NCCL_NVLS_ENABLE",
            Status.INFO,
            None,
            f"NCCL_NVLS_ENABLE={value['NCCL_NVLS_ENABLE']}",
            "NVLink SHARP is a tuning switch; 0 is a workaround for NVLS init failures and costs "
            "intra-node all-reduce bandwidth on NVSwitch systems",
            DBG_TUNING_NVLS,
        )


def _efa_transport_rules(value: dict[str, str]) -> Iterator[_Rule]:
    """Settings that force an EFA pod's inter-node traffic off EFA (or look as if they do)."""
    provider = value.get("FI_PROVIDER")
    if provider and provider.lower() != "efa":
        yield _Rule(
            "FI_PROVIDER",
            Status.WARN,
            Priority.P1,
            f"FI_PROVIDER={provider} on an EFA pod",
            "libfabric is forced off EFA: NCCL runs over TCP",
            DBG_TCP_FALLBACK,
        )
    elif not provider:
        yield _Rule(
            "FI_PROVIDER",
            Status.INFO,
            None,
            "FI_PROVIDER is not set",
            "set FI_PROVIDER=efa so libfabric cannot silently pick another provider",
        )
    if value.get("NCCL_NET", "").lower() == "socket":
        yield _Rule(
            "NCCL_NET",
            Status.WARN,
            Priority.P1,
            "NCCL_NET=Socket on an EFA pod",
            "NCCL is forced onto TCP sockets and ignores EFA",
            DBG_TCP_FALLBACK,
        )
    if value.get("NCCL_IB_DISABLE") == "1":
        yield _Rule(
            "NCCL_IB_DISABLE",
            Status.INFO,
            None,
            "NCCL_IB_DISABLE=1 is harmless on EFA",
            "EFA traffic goes through the aws-ofi-nccl net plugin, not NCCL's InfiniBand "
            "transport; this only stops NCCL probing for IB",
        )


def _gpudirect_rdma_rules(value: dict[str, str], instance_type: str | None) -> Iterator[_Rule]:
    """GPUDirect RDMA off (or not asked for) on an instance type that supports it."""
    if not (instance_type and instance_types.supports_gpudirect_rdma(instance_type)):
        return
    rdma = value.get("FI_EFA_USE_DEVICE_RDMA")
    if rdma == "0":
        yield _Rule(
            "FI_EFA_USE_DEVICE_RDMA",
            Status.WARN,
            Priority.P1,
            f"FI_EFA_USE_DEVICE_RDMA=0 on {instance_type}",
            "GPUDirect RDMA is turned off: every transfer bounces through host memory",
        )
    elif rdma is None:
        yield _Rule(
            "FI_EFA_USE_DEVICE_RDMA",
            Status.INFO,
            None,
            "FI_EFA_USE_DEVICE_RDMA is not set",
            f"{instance_type} supports GPUDirect RDMA; set FI_EFA_USE_DEVICE_RDMA=1",
        )


def _bootstrap_interface_rules(value: dict[str, str]) -> Iterator[_Rule]:
    """NCCL_SOCKET_IFNAME unset, or naming an interface that does not route between nodes."""
    ifname = value.get("NCCL_SOCKET_IFNAME")
    if ifname is None:
        yield _Rule(
            "NCCL_SOCKET_IFNAME",
            Status.INFO,
            None,
            "NCCL_SOCKET_IFNAME is not set",
            "the bootstrap may pick a bridge or loopback interface; ^lo,docker,efa,veth,virbr excludes them",
            DBG_SOCKET_IFNAME,
        )
    elif re.fullmatch(r"(lo|docker0?)", ifname):
        yield _Rule(
            "NCCL_SOCKET_IFNAME",
            Status.WARN,
            Priority.P1,
            f"NCCL_SOCKET_IFNAME={ifname}",
            "the bootstrap interface is not routable between nodes",
            DBG_SOCKET_IFNAME,
        )


@check(
    id="k8s.nccl_env",
    title="NCCL environment of training pods",
    priority=Priority.P2,
    reference=OPS_NCCL_ENV,
    source="kubernetes",
    orchestrators=("eks",),
)
def nccl_env(inv: Inventory) -> Iterator[Finding]:
    """Audit NCCL / libfabric / torch.distributed variables from the pod spec and its ConfigMaps
    (never printing values of secret-looking variables)."""
    k8s = kube(inv)
    for job in training_jobs(k8s):
        found = _job_env(k8s, job)
        if found is None:
            continue
        pod, env = found
        node = k8s.node(pod.node_name)
        uses_efa = any(p.total(EFA_RESOURCE) for p in job.pods)
        container = main_container(pod)
        command = (*container.command, *container.args) if container else ()
        rules = _audit(
            env,
            uses_efa,
            node.instance_type if node else None,
            pytorch=_runs_pytorch(pod, env),
            command=command,
            pods=len(job.pods),
        )
        shown = [
            f"{k}={v.value if v.value is not None else '<' + v.source + '>'} ({v.source})"
            for k, v in sorted(env.items())
            if is_nccl_variable(k)
        ]
        for rule in rules:
            yield nccl_env.finding(
                rule.status,
                f"{job.ref}: {rule.title}",
                priority=rule.priority,
                reference=rule.reference,
                detail=rule.detail,
                evidence=shown[:20],
                resources=job.resources(list(job.pods)),
                fields={"signature": rule.variable, "job": job.ref},
            )
        if not any(r.status in (Status.WARN, Status.FAIL) for r in rules):
            yield nccl_env.passed(
                f"{job.ref}: no NCCL environment problem in the pod spec",
                resources=job.resources(),
                evidence=shown[:20],
            )


_ENDPOINT_FLAGS = re.compile(r"^--(rdzv[-_]endpoint|master[-_]addr)(?:=(.*))?$")


@dataclass(frozen=True)
class _Rendezvous:
    host: str
    port: int
    source: str


def _rendezvous(k8s: KubernetesInventory, job: Job) -> _Rendezvous | None:
    found = _job_env(k8s, job)
    if found is None:
        return None
    pod, env = found
    container = main_container(pod)
    words = [*container.command, *container.args] if container else []
    port_value = (env.get("MASTER_PORT") or EnvValue(None, "")).value
    port = int(port_value) if port_value and port_value.isdigit() else DEFAULT_RENDEZVOUS_PORT
    for index, word in enumerate(words):
        match = _ENDPOINT_FLAGS.match(word)
        if not match:
            continue
        value = match.group(2) if match.group(2) is not None else (words[index + 1] if index + 1 < len(words) else "")
        host, _, maybe_port = value.partition(":")
        if host:
            flag = match.group(1).replace("_", "-")
            if flag == "rdzv-endpoint" and maybe_port.isdigit():
                port = int(maybe_port)
            return _Rendezvous(host.lower(), port, f"--{flag}")
    master = (env.get("MASTER_ADDR") or EnvValue(None, "")).value
    if master:
        return _Rendezvous(master.lower(), port, "MASTER_ADDR")
    return None


def _candidates(host: str, namespace: str) -> list[tuple[str | None, str, str]]:
    """(pod hostname, service, namespace) readings of a DNS name, most specific first."""
    name = re.sub(r"\.svc(\.cluster\.local)?\.?$", "", host)
    labels = name.split(".")
    if len(labels) == 1:
        return [(None, labels[0], namespace)]
    if len(labels) == 2:
        return [(None, labels[0], labels[1]), (labels[0], labels[1], namespace)]
    return [(labels[0], labels[1], labels[2])]


def _selected(service: Service, pods: tuple[Pod, ...]) -> list[Pod]:
    if not service.selector:
        return []
    return [p for p in pods if all(p.labels.get(k) == v for k, v in service.selector.items())]


@check(
    id="k8s.rendezvous_service",
    title="Rendezvous address resolves to a headless Service",
    priority=Priority.P1,
    reference=DBG_DNS,
    source="kubernetes",
    orchestrators=("eks",),
)
def rendezvous_service(inv: Inventory) -> Iterator[Finding]:
    """MASTER_ADDR / --rdzv-endpoint must name a Service that exists, is headless, selects the
    job's pods and exposes the rendezvous port."""
    k8s = kube(inv)
    if k8s.services is None:
        return
    for job in training_jobs(k8s):
        rdzv = _rendezvous(k8s, job)
        if rdzv is None:
            continue
        resources = job.resources()
        evidence = [f"{rdzv.source}={rdzv.host} port {rdzv.port}"]
        try:
            ipaddress.ip_address(rdzv.host)
            yield rendezvous_service.warn(
                f"{job.ref}: rendezvous address {rdzv.host} is a fixed IP",
                priority=Priority.P2,
                detail="pod IPs change when a pod is rescheduled; use the headless Service DNS name of rank 0",
                evidence=evidence,
                resources=resources,
            )
            continue
        except ValueError:
            pass
        candidates = _candidates(rdzv.host, job.namespace)
        match = next(
            (
                (hostname, svc)
                for hostname, name, ns in candidates
                for svc in k8s.services
                if svc.name == name and svc.namespace == ns
            ),
            None,
        )
        if match is None:
            names = ", ".join(f"{ns}/{name}" for _, name, ns in candidates)
            yield rendezvous_service.fail(
                f"{job.ref}: {rdzv.source} {rdzv.host} resolves to no Service",
                detail=f"no Service {names} exists, so the name does not resolve and rendezvous hangs until "
                "its timeout; create a headless Service (clusterIP: None) selecting the job's pods",
                evidence=evidence,
                resources=resources,
                fields={"host": rdzv.host},
            )
            continue
        hostname, service = match
        resources = [*resources, Resource(kind="service", id=f"{service.namespace}/{service.name}")]
        selected = _selected(service, job.pods)
        problems: list[str] = []
        if hostname and not service.headless:
            problems.append(f"{rdzv.host} is a per-pod name, which only headless Services publish")
        elif not service.headless and len(selected) > 1:
            problems.append(
                f"Service {service.name} has a cluster IP and selects {len(selected)} pods: connections are "
                "load-balanced to any of them instead of rank 0"
            )
        if not selected and service.selector:
            problems.append(f"Service {service.name} (selector {service.selector}) selects none of the job's pods")
        if hostname and not any(p.hostname == hostname and p.subdomain == service.name for p in job.pods):
            problems.append(f"no pod of the job has hostname {hostname} and subdomain {service.name}")
        if service.ports and rdzv.port not in {p.port for p in service.ports}:
            problems.append(f"Service {service.name} does not list port {rdzv.port}")
        if problems:
            yield rendezvous_service.fail(
                f"{job.ref}: rendezvous Service {service.namespace}/{service.name} is misconfigured",
                detail="; ".join(problems),
                evidence=evidence,
                resources=resources,
                fields={"host": rdzv.host},
            )
        else:
            yield rendezvous_service.passed(
                f"{job.ref}: {rdzv.source} resolves through headless Service {service.namespace}/{service.name}",
                evidence=evidence,
                resources=resources,
            )
