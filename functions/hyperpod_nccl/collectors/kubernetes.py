"""Kubernetes collector: reads the EKS cluster behind a HyperPod cluster through its API (no
kubectl). The endpoint and CA come from eks:DescribeCluster, the token from a presigned STS
call. Every read is a GET; what cannot be read becomes a degraded source naming the fix.

A slow API server costs one read timeout, not one per request: after the first request that
times out, the rest are skipped and reported with what was read before.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import quote

from hyperpod_nccl import reads, thresholds
from hyperpod_nccl.aws_errors import AWS_CALL_ERRORS
from hyperpod_nccl.collectors.aws import degraded_from_error
from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.kube import (
    KubeClient,
    KubeError,
    KubeForbidden,
    KubeNotFound,
    KubeTimeout,
    KubeUnauthorized,
    KubeUnreachable,
    KubeUntrusted,
    convert,
    eks_bearer_token,
)
from hyperpod_nccl.kube.token import TokenError
from hyperpod_nccl.models.cluster import ControlPlaneInventory
from hyperpod_nccl.models.findings import DegradedSource
from hyperpod_nccl.models.kubernetes import (
    SYSTEM_NAMESPACES,
    ConfigMapEnv,
    ContainerLog,
    DaemonSet,
    KubernetesInventory,
    Pod,
)
from hyperpod_nccl.redaction import scrub
from hyperpod_nccl.references import OPS_CLUSTER_NAMES, OPS_IAM

SOURCE = "kubernetes"
READ_ROLE = "hyperpod-nccl-read"
# DaemonSets worth keeping: device plugins the EFA and GPU checks look for.
_DEVICE_PLUGIN_HINTS = ("efa", "nvidia", "neuron", "device-plugin")
T = TypeVar("T")
# What a collection that could not start, or was stopped, left unread: every Kubernetes read.
_EVERY_READ = sorted(reads.KUBERNETES_READS)


class _Abort(Exception):
    """Authentication or connectivity failed: nothing more can be read."""

    def __init__(self, error: KubeError) -> None:
        super().__init__(str(error))
        self.error = error


def collect_kubernetes(ctx: CollectionContext, control_plane: ControlPlaneInventory) -> KubernetesInventory | None:
    """Read the EKS cluster's objects. Returns None on Slurm clusters or when nothing could be
    read (the reason is then a degraded source)."""
    cluster = control_plane.cluster
    if cluster is None or cluster.orchestrator != "eks":
        return None
    eks_name = cluster.eks_cluster_name
    if not eks_name:
        ctx.degrade(
            DegradedSource(
                source=SOURCE,
                reason="DescribeCluster names no Orchestrator.Eks.ClusterArn: the EKS cluster is unknown",
                fix="check the HyperPod cluster's orchestrator with aws sagemaker describe-cluster",
                reference=OPS_CLUSTER_NAMES,
                unread=_EVERY_READ,
            )
        )
        return None
    ctx.progress(f"kubernetes: describing EKS cluster {eks_name}")
    try:
        described = ctx.aws.client("eks").describe_cluster(name=eks_name)["cluster"]
    except AWS_CALL_ERRORS as error:
        ctx.degrade(degraded_from_error(SOURCE, reads.DESCRIBE_EKS_CLUSTER, error, reference=OPS_IAM))
        return None
    endpoint = described.get("endpoint")
    if not endpoint:
        ctx.degrade(
            DegradedSource(
                source=SOURCE,
                reason=f"EKS cluster {eks_name} reports no API endpoint (status {described.get('status')})",
                fix="wait until the EKS cluster is ACTIVE, then re-run",
                reference=OPS_CLUSTER_NAMES,
                unread=_EVERY_READ,
            )
        )
        return None
    try:
        token = eks_bearer_token(eks_name, ctx.request.region, ctx.aws.session)
    except TokenError as error:
        ctx.degrade(
            DegradedSource(
                source=SOURCE, reason=str(error), fix="provide AWS credentials", reference=OPS_IAM, unread=_EVERY_READ
            )
        )
        return None
    ca_data = (described.get("certificateAuthority") or {}).get("data")
    client = KubeClient(endpoint=endpoint, token=token, ca_data=ca_data, page_size=thresholds.K8S_PAGE_SIZE)
    try:
        return _Reader(ctx, client, eks_name).read()
    except _Abort as abort:
        ctx.degrade(_abort_reason(ctx, eks_name, endpoint, abort.error))
        return None
    finally:
        client.close()


def _principal_arn(ctx: CollectionContext) -> str:
    try:
        return str(ctx.aws.client("sts").get_caller_identity()["Arn"])
    except AWS_CALL_ERRORS:
        return "<PRINCIPAL_ARN>"
    except KeyError:
        return "<PRINCIPAL_ARN>"


def _abort_reason(ctx: CollectionContext, eks_name: str, endpoint: str, error: KubeError) -> DegradedSource:
    region = ctx.request.region
    if isinstance(error, KubeUnauthorized):
        principal = _principal_arn(ctx)
        return DegradedSource(
            source=SOURCE,
            reason=f"the EKS API of {eks_name} rejected our token (401 Unauthorized): {principal} has no "
            "EKS access entry (or aws-auth mapping); every Kubernetes check was skipped",
            fix=f"aws eks create-access-entry --cluster-name {eks_name} --region {region} "
            f"--principal-arn {principal} --kubernetes-groups {READ_ROLE}; then apply the read-only "
            f"ClusterRole {READ_ROLE} and its binding ({OPS_IAM.pointer})",
            missing_action="eks:CreateAccessEntry (access entry for the caller)",
            reference=OPS_CLUSTER_NAMES,
            unread=_EVERY_READ,
        )
    if isinstance(error, KubeForbidden):
        return _forbidden_reason([error.path], partial=False, unread=_EVERY_READ)
    if isinstance(error, KubeTimeout):
        return _slow_reason(eks_name, region, error, read=[], skipped=["every Kubernetes read"], unread=_EVERY_READ)
    if isinstance(error, KubeUntrusted):
        return DegradedSource(
            source=SOURCE,
            reason=f"the EKS API endpoint {endpoint} does not prove it is {eks_name}: its certificate does not "
            f"verify against the cluster CA of eks:DescribeCluster ({error.message}); every Kubernetes check "
            "was skipped",
            fix="something between here and the endpoint re-signs TLS (a TLS-inspecting firewall or proxy), or "
            "the address reaches another server: exempt the EKS endpoint from TLS inspection, then compare "
            f"aws eks describe-cluster --name {eks_name} --region {region} --query "
            "cluster.certificateAuthority.data with the issuer of the certificate the endpoint presents",
            reference=OPS_CLUSTER_NAMES,
            unread=_EVERY_READ,
        )
    return DegradedSource(
        source=SOURCE,
        reason=f"cannot reach the EKS API endpoint {endpoint} ({error.message}); every Kubernetes check was skipped",
        fix="run from a network that reaches the endpoint: inside the cluster VPC when endpoint access is "
        "private-only (the monitor's Lambda needs VPC access), or allow your address under the public "
        f"access CIDRs (aws eks describe-cluster --name {eks_name} --region {region} "
        "--query cluster.resourcesVpcConfig); the cluster security group must admit 443 from here",
        reference=OPS_CLUSTER_NAMES,
        unread=_EVERY_READ,
    )


def _slow_reason(
    eks_name: str, region: str, error: KubeTimeout, *, read: list[str], skipped: list[str], unread: list[str]
) -> DegradedSource:
    """The API server answered too slowly: what timed out, what was read before, what was skipped."""
    kept = f"; read before it: {', '.join(read)}" if read else ""
    return DegradedSource(
        source=SOURCE,
        reason=f"the EKS API of {eks_name} is too slow: GET {error.path} got {error.message}{kept}; "
        f"not read: {', '.join(skipped)} (the checks that need them were skipped)",
        fix=f"check the EKS control plane's health and load (aws eks describe-cluster --name {eks_name} "
        f"--region {region} --query cluster.health; API server request latency and 429s in the control plane "
        "metrics; clients listing the whole cluster in a loop), then re-run: the diagnosis is read-only",
        reference=OPS_CLUSTER_NAMES,
        partial=bool(read),
        unread=unread,
    )


def _forbidden_reason(paths: list[str], *, partial: bool, unread: list[str]) -> DegradedSource:
    return DegradedSource(
        source=SOURCE,
        reason="Kubernetes RBAC forbids reading "
        + ", ".join(sorted(set(paths)))
        + " (403 Forbidden); the checks that need them were skipped",
        fix=f"kubectl apply -f {READ_ROLE}.yaml with the read-only ClusterRole {READ_ROLE} and its "
        f"ClusterRoleBinding of {OPS_IAM.pointer} (get/list/watch on nodes, pods, pods/log, "
        "namespaces, services, endpoints, configmaps, networkpolicies, daemonsets)",
        missing_action=f"kubernetes RBAC: ClusterRole {READ_ROLE}",
        reference=OPS_IAM,
        partial=partial,
        unread=unread,
    )


def _named(resources: list[str]) -> list[str]:
    """The input names of the reads `resources` (each once, in order)."""
    return [reads.kubernetes_read(r) for r in dict.fromkeys(resources)]


# What converting a JSON object that does not follow the Kubernetes schema can raise.
MALFORMED_OBJECT_ERRORS = (AttributeError, TypeError, KeyError, ValueError, IndexError)


class _Reader:
    """One collection: reads each resource independently so that one refusal costs only the
    checks that need it."""

    def __init__(self, ctx: CollectionContext, client: KubeClient, eks_name: str) -> None:
        self.ctx = ctx
        self.client = client
        self.eks_name = eks_name
        self.scope = ctx.request.scope
        self.forbidden: list[str] = []
        self.failed: list[str] = []
        # The reads (`reads.KUBERNETES_RESOURCES`) refused or failed, for the degraded sources' `unread`.
        self.forbidden_reads: list[str] = []
        self.failed_reads: list[str] = []
        # The first read that timed out; after it every read is skipped (named in `skipped`).
        self.timed_out: KubeTimeout | None = None
        self.done: list[str] = []
        self.skipped: list[str] = []

    def _skip_if_slow(self, what: str) -> KubeTimeout | None:
        """After the first read that timed out, every read is skipped (and named in `skipped`):
        that timeout, or None when reads go on."""
        if self.timed_out is not None:
            self.skipped.append(what)
        return self.timed_out

    def _note_timeout(self, error: KubeTimeout, what: str) -> None:
        self.timed_out = self.timed_out or error
        self.skipped.append(what)

    def _read(self, what: str, read: Callable[[], T]) -> T | None:
        if self._skip_if_slow(what):
            return None
        try:
            value = read()
        except KubeTimeout as error:
            self._note_timeout(error, what)
            return None
        except (KubeUnauthorized, KubeUnreachable) as error:
            raise _Abort(error) from error
        except KubeForbidden as error:
            self.forbidden.append(error.path)
            self.forbidden_reads.append(what)
        except KubeError as error:
            self.failed.append(f"{what}: {error}")
            self.failed_reads.append(what)
        except MALFORMED_OBJECT_ERRORS as error:
            # The API server validates objects against their schema; one that does not convert
            # means a broken proxy or a hostile endpoint: report it, keep everything else.
            self.failed.append(f"{what}: malformed object from the API ({type(error).__name__}: {str(error)[:120]})")
            self.failed_reads.append(what)
        else:
            self.done.append(what)
            return value
        return None

    def _in_scope(self, namespace: str) -> bool:
        if self.scope.namespace:
            return namespace == self.scope.namespace
        return namespace not in SYSTEM_NAMESPACES

    def _namespaced(self, group_path: str, resource: str) -> str:
        if self.scope.namespace:
            return f"{group_path}/namespaces/{quote(self.scope.namespace, safe='')}/{resource}"
        return f"{group_path}/{resource}"

    def read(self) -> KubernetesInventory:
        self.ctx.progress("kubernetes: listing nodes")
        nodes = self._read("nodes", lambda: [convert.node(o) for o in self.client.iter_list("/api/v1/nodes")])
        namespaces = self._read(
            "namespaces",
            lambda: {
                o["metadata"]["name"]: convert.strings(o["metadata"].get("labels"))
                for o in self.client.iter_list("/api/v1/namespaces")
            },
        )
        self.ctx.progress("kubernetes: listing pods")
        pods = self._read("pods", self._pods)
        wanted = {p.namespace for p in pods or []}
        if self.scope.namespace:
            wanted.add(self.scope.namespace)

        def scoped(objs: list[Any]) -> list[Any]:
            return [o for o in objs if o.namespace in wanted]

        services = self._read(
            "services",
            lambda: scoped(
                [convert.service(o) for o in self.client.iter_list(self._namespaced("/api/v1", "services"))]
            ),
        )
        endpoints = self._read(
            "endpoints",
            lambda: scoped(
                [convert.endpoints(o) for o in self.client.iter_list(self._namespaced("/api/v1", "endpoints"))]
            ),
        )
        policies = self._read(
            "networkpolicies",
            lambda: scoped(
                [
                    convert.network_policy(o)
                    for o in self.client.iter_list(self._namespaced("/apis/networking.k8s.io/v1", "networkpolicies"))
                ]
            ),
        )
        daemonsets = self._read("daemonsets", self._daemonsets)
        training = [p for p in pods or [] if p.is_training]
        config_maps = self._config_maps(training)
        self.ctx.progress("kubernetes: reading training pod logs")
        logs = self._logs(training)
        if self.timed_out is not None:
            if not self.done:
                raise _Abort(self.timed_out)
            skipped = list(dict.fromkeys(self.skipped))
            self.ctx.degrade(
                _slow_reason(
                    self.eks_name,
                    self.ctx.request.region,
                    self.timed_out,
                    read=self.done,
                    skipped=skipped,
                    unread=_named(skipped),
                )
            )
        if self.forbidden:
            self.ctx.degrade(_forbidden_reason(self.forbidden, partial=True, unread=_named(self.forbidden_reads)))
        if self.failed:
            self.ctx.degrade(
                DegradedSource(
                    source=SOURCE,
                    reason="Kubernetes API errors: " + "; ".join(self.failed[:5]),
                    fix="check the EKS control plane health, then re-run (the diagnosis is read-only)",
                    reference=OPS_CLUSTER_NAMES,
                    partial=True,
                    unread=_named(self.failed_reads),
                )
            )
        return KubernetesInventory(
            endpoint=self.client.endpoint,
            eks_cluster_name=self.eks_name,
            scope_namespace=self.scope.namespace,
            scope_job=self.scope.job,
            nodes=nodes,
            namespace_labels=namespaces,
            pods=pods,
            services=services,
            endpoints=endpoints,
            daemonsets=daemonsets,
            network_policies=policies,
            config_maps=config_maps,
            logs=logs,
        )

    def _pods(self) -> list[Pod]:
        pods = [convert.pod(o) for o in self.client.iter_list(self._namespaced("/api/v1", "pods"))]
        pods = [p for p in pods if self._in_scope(p.namespace)]
        if self.scope.job:
            pods = [p for p in pods if p.job_name == self.scope.job]
        return pods

    def _daemonsets(self) -> list[DaemonSet]:
        found = [convert.daemonset(o) for o in self.client.iter_list("/apis/apps/v1/daemonsets")]
        return [
            d
            for d in found
            if any(hint in d.name or any(hint in image for image in d.images) for hint in _DEVICE_PLUGIN_HINTS)
        ]

    def _config_maps(self, training: list[Pod]) -> list[ConfigMapEnv]:
        """Only the ConfigMaps training containers take environment variables from."""
        wanted: set[tuple[str, str]] = set()
        for pod in training:
            for container in pod.containers:
                wanted |= {(pod.namespace, ref.name) for ref in container.env_from if ref.kind == "configMap"}
                for env in container.env:
                    if env.value_from and env.value_from.startswith("configMapKeyRef:"):
                        wanted.add((pod.namespace, env.value_from.split(":", 1)[1].split("/", 1)[0]))
        result: list[ConfigMapEnv] = []
        for namespace, name in sorted(wanted):
            path = f"/api/v1/namespaces/{quote(namespace, safe='')}/configmaps/{quote(name, safe='')}"
            if self._skip_if_slow("configmaps"):
                break
            try:
                result.append(convert.config_map(self.client.get_json(path)))
            except KubeNotFound:
                result.append(ConfigMapEnv(namespace=namespace, name=name, found=False))
            except KubeTimeout as error:
                self._note_timeout(error, "configmaps")
            except (KubeUnauthorized, KubeUnreachable) as error:
                raise _Abort(error) from error
            except KubeForbidden as error:
                self.forbidden.append(error.path)
                self.forbidden_reads.append("configmaps")
            except KubeError as error:
                self.failed.append(f"configmap {namespace}/{name}: {error}")
                self.failed_reads.append("configmaps")
        return result

    def _logs(self, training: list[Pod]) -> list[ContainerLog] | None:
        """Tails of the training containers, and of the previous instance after a restart."""
        requests: list[tuple[Pod, str, bool]] = []
        for pod in [p for p in training if p.phase != "Pending"][: thresholds.K8S_LOG_MAX_PODS]:
            for container in pod.containers:
                status = pod.status_of(container.name)
                if (
                    status is None
                    or status.state is None
                    or (status.state.state == "waiting" and not status.restart_count)
                ):
                    continue
                requests.append((pod, container.name, False))
                if status.restart_count or (status.last_state and status.last_state.state == "terminated"):
                    requests.append((pod, container.name, True))
        if not requests:
            return []
        with ThreadPoolExecutor(max_workers=4, thread_name_prefix="pod-logs") as pool:
            results = list(pool.map(lambda r: self._log(*r), requests))
        if any(r is None for r in results):
            return None if all(r is None for r in results) else [r for r in results if r is not None]
        return [r for r in results if r is not None]

    def _log(self, pod: Pod, container: str, previous: bool) -> ContainerLog | None:
        path = f"/api/v1/namespaces/{quote(pod.namespace, safe='')}/pods/{quote(pod.name, safe='')}/log"
        params: dict[str, str | int | bool] = {"container": container, "tailLines": thresholds.K8S_LOG_TAIL_LINES}
        if previous:
            params["previous"] = True
        log = ContainerLog(namespace=pod.namespace, pod=pod.name, container=container, previous=previous)
        if (slow := self._skip_if_slow("pod logs")) is not None:
            log.error = f"skipped: the API server did not answer GET {slow.path} in time"
            return log
        try:
            read = self.client.get_log(path, params, thresholds.K8S_LOG_MAX_BYTES)
            log.truncated = read.truncated
            tail = read.text.splitlines()[-thresholds.K8S_LOG_TAIL_LINES :]
            log.lines = scrub("\n".join(tail)).splitlines()  # redacted where the job's output enters
        except KubeTimeout as error:
            self._note_timeout(error, "pod logs")
            log.error = str(error)
        except (KubeUnauthorized, KubeUnreachable) as error:
            log.error = str(error)
        except KubeForbidden:
            self.forbidden.append(path.rsplit("/pods/", 1)[0] + "/pods/*/log")
            self.forbidden_reads.append("pod logs")
            return None
        except KubeError as error:
            # e.g. 400 "previous terminated container not found": normal, keep the reason.
            log.error = error.message
        return log
