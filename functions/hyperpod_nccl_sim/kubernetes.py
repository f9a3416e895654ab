"""The simulated Kubernetes API of an EKS scenario.

A werkzeug app on 127.0.0.1 serves the real JSON shapes (NodeList, PodList, Status, …) of the
objects a scenario's `kubernetes` section describes over https, with a certificate signed by a
throwaway cluster CA (`tls`); it checks the `k8s-aws-v1.` bearer token and pages lists with
`limit`/`continue` (tokens can be made to expire: 410 Expired). Then moto's EKS cluster is pointed
at it (endpoint and CA), so the product finds the endpoint and verifies the server through
eks:DescribeCluster exactly as against AWS.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.wrappers import Request, Response

from hyperpod_nccl.kube.token import CLUSTER_ID_HEADER, decode_token
from hyperpod_nccl.models.kubernetes import (
    EFA_RESOURCE,
    FAULT_DETAILS_ANNOTATION,
    FAULT_REASON_LABELS,
    FAULT_TYPE_LABELS,
    GPU_RESOURCE,
    HEALTH_TAINT_EFFECT,
    HEALTH_TAINT_VALUE,
    NODE_HEALTH_LABEL,
    LabelSelector,
    SelectorRequirement,
)
from hyperpod_nccl_sim.scenario import (
    HmaFaultSpec,
    K8sNodeSpec,
    KubernetesScenario,
    PodVariation,
    Scenario,
    TrainingJobSpec,
)
from hyperpod_nccl_sim.tls import cluster_tls, unrelated_ca_pem

if TYPE_CHECKING:
    from hyperpod_nccl_sim.aws import EmulatedAws

Json = dict[str, Any]
_HEALTH = "sagemaker.amazonaws.com/"
# HyperPod statuses whose instance has not joined the EKS cluster (yet).
_NOT_JOINED = {"Pending", "ShuttingDown", "SystemUpdating"}


_KINDS = {
    "Node": ("", "v1", "nodes"),
    "Namespace": ("", "v1", "namespaces"),
    "Pod": ("", "v1", "pods"),
    "Service": ("", "v1", "services"),
    "Endpoints": ("", "v1", "endpoints"),
    "ConfigMap": ("", "v1", "configmaps"),
    "DaemonSet": ("apps", "v1", "daemonsets"),
    "NetworkPolicy": ("networking.k8s.io", "v1", "networkpolicies"),
}
_CLUSTER_SCOPED = {"nodes", "namespaces"}
_RESOURCE_VERSION = "1000"
# The version apiserver writes into its continue tokens.
_CONTINUE_VERSION = "meta.k8s.io/v1"
# apiserver's answer to a continue token whose revision etcd compacted away: storage/etcd3/errors.go
# (`inconsistentContinue`, returned as errors.NewResourceExpired: 410, reason Expired) in kubernetes/kubernetes
# staging/src/k8s.io/apiserver; the Status carries a token that continues from the latest revision (rv -1).
_EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list."
)
_LATEST_REVISION = -1
# The node-health-status HyperPod gives a node awaiting each repair (the labels page,
# https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-resiliency-node-labels.html).
_PENDING_REPAIR = {"Reboot": "UnschedulablePendingReboot", "Replace": "UnschedulablePendingReplacement"}
# The Availability Zone ID label: cloud-provider-aws adds it to every node
# (https://github.com/kubernetes/cloud-provider-aws/pull/855); EKS nodes carry it from Kubernetes 1.30 (EKS's
# version notes, read through a public summary here; the emulated kubelet is 1.31).
_ZONE_ID_LABEL = "topology.k8s.aws/zone-id"


def _uid(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _ip(hostname: str) -> str:
    """ip-10-1-0-12.us-west-2.compute.internal → 10.1.0.12."""
    return hostname.split(".", 1)[0].removeprefix("ip-").replace("-", ".")


def _node_info(instance_id: str) -> Json:
    """`status.nodeInfo` with every field NodeSystemInfo requires, as an EKS AL2023 node reports it."""
    digest = hashlib.sha256(instance_id.encode()).hexdigest()
    return {
        "architecture": "amd64",
        "bootID": _uid("boot", instance_id),
        "containerRuntimeVersion": "containerd://1.7.27",
        "kernelVersion": "6.1.132-147.221.amzn2023.x86_64",
        "kubeProxyVersion": "v1.31.4-eks-aeac579",
        "kubeletVersion": "v1.31.4-eks-aeac579",
        "machineID": digest[:32],
        "operatingSystem": "linux",
        "osImage": "Amazon Linux 2023.7.20250428",
        "systemUUID": _uid("system", instance_id),
    }


def _rfc3339(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _hma_fault(fault: HmaFaultSpec, now: datetime) -> tuple[dict[str, str], dict[str, str], Json, Json]:
    """What the health-monitoring agent writes on a node for a fault it detected (labels, annotations, taint,
    condition), as AWS documents it (`hyperpod_nccl.models.kubernetes`, HMA's "Fault Detection"). The labels
    use the plural spellings (`fault-types`, `fault-reasons`); the product reads both."""
    at = _rfc3339(now - timedelta(minutes=fault.minutes_ago))
    labels = {
        NODE_HEALTH_LABEL: _PENDING_REPAIR[fault.repair],
        FAULT_TYPE_LABELS[0]: fault.type,
        FAULT_REASON_LABELS[0]: fault.reason,
    }
    details = [{"timestamp": at, "type": fault.type, "reason": fault.reason, "message": fault.message}]
    annotations = {FAULT_DETAILS_ANNOTATION: json.dumps(details)}
    taint = {"key": NODE_HEALTH_LABEL, "value": HEALTH_TAINT_VALUE, "effect": HEALTH_TAINT_EFFECT}
    condition = {
        "type": fault.type,
        "status": "True",
        "reason": fault.reason,
        "message": fault.message,
        "lastHeartbeatTime": _rfc3339(now),
        "lastTransitionTime": at,
    }
    return labels, annotations, taint, condition


def _complete_daemonset(obj: Json) -> None:
    """What a stored DaemonSet always has: a selector matching its template's labels (apps/v1
    requires both) and every required status counter."""
    spec = obj.setdefault("spec", {})
    template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
    if not template_meta.get("labels"):
        template_meta["labels"] = {"name": obj["metadata"]["name"]}
    spec.setdefault("selector", {"matchLabels": dict(template_meta["labels"])})
    status = obj.setdefault("status", {})
    for counter in ("currentNumberScheduled", "desiredNumberScheduled", "numberMisscheduled", "numberReady"):
        status.setdefault(counter, 0)


class _Store:
    """Every object of the simulated cluster, by resource name."""

    def __init__(self, scenario: Scenario, spec: KubernetesScenario, now: datetime) -> None:
        self.scenario = scenario
        self.spec = spec
        self.now = now
        self.created = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        self.objects: dict[str, list[Json]] = {resource: [] for _, _, resource in _KINDS.values()}
        self.logs: dict[tuple[str, str, str, bool], list[str]] = {}
        self._nodes()
        for job in spec.jobs:
            self._job(job)
        for raw in spec.objects:
            self.add(json.loads(json.dumps(raw)))
        self._namespaces()

    def _metadata(self, obj: Json, resource: str) -> Json:
        meta = obj.setdefault("metadata", {})
        if resource not in _CLUSTER_SCOPED:
            meta.setdefault("namespace", "default")
        meta.setdefault("uid", _uid(self.scenario.name, resource, meta.get("namespace", ""), meta.get("name", "")))
        meta.setdefault("resourceVersion", _RESOURCE_VERSION)
        meta.setdefault("creationTimestamp", self.created)
        return obj

    def add(self, obj: Json) -> None:
        """Add a manifest (kind decides the resource), completed as the API server would store it."""
        group, version, resource = _KINDS[obj["kind"]]
        obj.setdefault("apiVersion", f"{group}/{version}" if group else version)
        self._metadata(obj, resource)
        if resource == "daemonsets":
            _complete_daemonset(obj)
        self.objects[resource].append(obj)

    def _namespaces(self) -> None:
        names = {"default", "kube-system", "kube-public", "kube-node-lease"}
        for resource, objs in self.objects.items():
            if resource not in _CLUSTER_SCOPED:
                names |= {o["metadata"]["namespace"] for o in objs}
        declared = {o["metadata"]["name"] for o in self.objects["namespaces"]}
        for name in sorted(names - declared):
            self.add({"kind": "Namespace", "metadata": {"name": name}, "status": {"phase": "Active"}})
        for namespace in self.objects["namespaces"]:
            labels = namespace["metadata"].setdefault("labels", {})
            labels.setdefault("kubernetes.io/metadata.name", namespace["metadata"]["name"])

    def _nodes(self) -> None:
        from hyperpod_nccl import instance_types

        variations = {n.node: n for n in self.spec.nodes}
        groups = {g.name: g for g in self.scenario.cluster.instance_groups}
        for key in self.scenario.node_keys():
            override = self.scenario.override(key)
            if override is not None and override.status in _NOT_JOINED:
                continue
            group = groups[key.split(":", 1)[0]]
            variation = variations.get(key) or K8sNodeSpec(node=key)
            hostname = self.scenario.hostname(key)
            name = self.scenario.k8s_node_name(key)
            capacity = {"cpu": "192", "memory": "2097152Mi", "pods": "110"}
            if instance_types.accelerator(group.instance_type) == "nvidia":
                capacity[GPU_RESOURCE] = str(instance_types.GPUS_PER_INSTANCE.get(group.instance_type, 8))
            efa = variation.efa_capacity
            if efa is None:
                efa = instance_types.expected_efa(group.instance_type) or 0
            allocatable = variation.efa_allocatable if variation.efa_allocatable is not None else efa
            if efa:
                capacity[EFA_RESOURCE] = str(efa)
            labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": group.instance_type,
                "topology.kubernetes.io/region": self.scenario.region,
                "topology.kubernetes.io/zone": f"{self.scenario.region}a",
                _ZONE_ID_LABEL: self.scenario.zone_id(),
                _HEALTH + "compute-type": "hyperpod",
                _HEALTH + "instance-group-name": group.name,
                _HEALTH + "node-health-status": "Schedulable",
                _HEALTH + "deep-health-check-status": "Passed",
            }
            annotations: dict[str, str] = {}
            taints: list[Json] = []
            conditions: list[Json] = []
            if variation.hma_fault is not None:
                fault_labels, annotations, taint, condition = _hma_fault(variation.hma_fault, self.now)
                labels |= fault_labels
                taints.append(taint)
                conditions.append(condition)
            labels |= variation.labels
            annotations |= variation.annotations
            for extra in variation.taints:
                taints = [t for t in taints if (t["key"], t["effect"]) != (extra.get("key"), extra.get("effect"))]
                taints.append(extra)
            ready = {
                "type": "Ready",
                "status": "True" if variation.ready else "False",
                "reason": "KubeletReady" if variation.ready else "KubeletNotReady",
                "message": variation.ready_message or ("kubelet is posting ready status" if variation.ready else ""),
                "lastTransitionTime": self.created,
            }
            self.add(
                {
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels, "annotations": annotations},
                    "spec": {
                        "providerID": self.scenario.provider_id(key),
                        **({"taints": taints} if taints else {}),
                    },
                    "status": {
                        "capacity": capacity,
                        "allocatable": {**capacity, **({EFA_RESOURCE: str(allocatable)} if efa else {})},
                        "conditions": [ready, *conditions],
                        "addresses": [
                            {"type": "InternalIP", "address": _ip(hostname)},
                            {"type": "InternalDNS", "address": hostname},
                            {"type": "Hostname", "address": name},
                        ],
                        "nodeInfo": _node_info(self.scenario.instance_id(key)),
                    },
                }
            )

    def _job(self, job: TrainingJobSpec) -> None:
        from hyperpod_nccl import instance_types

        variations = {v.index: v for v in job.pods}
        groups = {g.name: g for g in self.scenario.cluster.instance_groups}
        for rank, key in enumerate(job.nodes):
            var = variations.get(rank) or PodVariation(index=rank)
            name = job.pod_name(rank)
            hostname = self.scenario.hostname(key)
            values = {"pod": name, "rank": str(rank), "job": job.name, "namespace": job.namespace, "node": hostname}
            instance_type = groups[key.split(":", 1)[0]].instance_type
            efa = var.efa if var.efa is not None else job.efa
            if efa is None:
                efa = instance_types.expected_efa(instance_type) or 0
            resources: Json = {GPU_RESOURCE: str(job.gpus)} if job.gpus else {}
            if efa:
                resources[EFA_RESOURCE] = str(efa)
            container: Json = {
                "name": job.container,
                "image": job.image,
                "command": job.command,
                "args": [a.format(**values) for a in job.args],
                "env": [
                    {"name": "RANK", "value": str(rank)},
                    *({"name": k, "value": v.format(**values)} for k, v in job.env.items()),
                ],
                "ports": [{"containerPort": 29500, "protocol": "TCP"}],
                "resources": {"requests": {**resources, "memory": "512Gi"}, "limits": dict(resources)},
                "volumeMounts": [],
            }
            if job.env_from_configmaps:
                container["envFrom"] = [{"configMapRef": {"name": n}} for n in job.env_from_configmaps]
            volumes: list[Json] = []
            if job.shm_size_limit is not None and not var.omit_shm:
                empty: Json = {"sizeLimit": job.shm_size_limit}
                if job.shm_medium:
                    empty["medium"] = job.shm_medium
                volumes.append({"name": "dshm", "emptyDir": empty})
                container["volumeMounts"].append({"name": "dshm", "mountPath": "/dev/shm"})
            if job.ipc_lock and not var.omit_ipc_lock:
                container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
            phase = var.phase or "Running"
            digest = var.image_digest or job.image_digest
            status_entry: Json = {
                "name": job.container,
                "image": job.image,
                "imageID": f"{job.image.rsplit(':', 1)[0]}@{digest}",
                "restartCount": var.restarts,
                "ready": phase == "Running" and not var.waiting_reason,
                "started": phase == "Running",
            }
            if phase == "Pending":
                status_entry["state"] = {"waiting": {"reason": "ContainerCreating"}}
            elif var.waiting_reason:
                status_entry["state"] = {
                    "waiting": {"reason": var.waiting_reason, "message": "back-off restarting failed container"}
                }
            elif phase in ("Failed", "Succeeded"):
                status_entry["state"] = {
                    "terminated": {
                        "exitCode": var.last_exit_code or (0 if phase == "Succeeded" else 1),
                        "reason": var.last_reason or "Error",
                    }
                }
            else:
                status_entry["state"] = {"running": {"startedAt": self.created}}
            # The API server always sends lastState, `{}` until a container has terminated once.
            status_entry["lastState"] = {}
            if var.last_exit_code is not None and phase != "Failed":
                status_entry["lastState"] = {
                    "terminated": {
                        "exitCode": var.last_exit_code,
                        "reason": var.last_reason or "Error",
                        "startedAt": self.created,
                        "finishedAt": self.created,
                    }
                }
            conditions: list[Json] = [{"type": "PodScheduled", "status": "True"}]
            if var.unschedulable_message:
                conditions = [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": var.unschedulable_message,
                    }
                ]
            scheduled = not var.unschedulable_message
            spec: Json = {
                "containers": [container],
                "volumes": volumes,
                "restartPolicy": "OnFailure",
                **({"nodeName": self.scenario.k8s_node_name(key)} if scheduled else {}),
            }
            if job.headless_subdomain:
                spec["hostname"] = name
                spec["subdomain"] = job.headless_subdomain
            self.add(
                {
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": job.namespace,
                        "labels": {
                            "job-name": job.name,
                            "app.kubernetes.io/name": job.name,
                            "rank": str(rank),
                            **job.labels,
                        },
                        "ownerReferences": [
                            {
                                "apiVersion": "batch/v1",
                                "kind": "Job",
                                "name": job.name,
                                "uid": _uid(job.name),
                                "controller": True,
                            }
                        ],
                    },
                    "spec": spec,
                    "status": {
                        "phase": phase,
                        "conditions": conditions,
                        **(
                            {"hostIP": _ip(hostname), "podIP": f"10.1.{100 + rank // 250}.{10 + rank % 250}"}
                            if scheduled
                            else {}
                        ),
                        **({"containerStatuses": [status_entry]} if scheduled else {}),
                    },
                }
            )
            lines = var.log if var.log is not None else job.log
            self.logs[(job.namespace, name, job.container, False)] = [
                line.format(**values) for line in [*lines, *var.log_append]
            ]
            if var.restarts or var.previous_log:
                self.logs[(job.namespace, name, job.container, True)] = [
                    line.format(**values) for line in var.previous_log
                ]


def _timestamped(lines: list[str], now: datetime) -> list[str]:
    """Each line behind the time the kubelet recorded it, in Go's RFC3339Nano (trailing zeros of
    the fraction dropped), as `timestamps=true` returns them; the last line was written a second ago."""
    stamped = []
    for index, line in enumerate(lines):
        at = now - timedelta(seconds=len(lines) - index)
        nanos = f"{at.microsecond * 1000 + index % 1000:09d}".rstrip("0")
        stamped.append(f"{at.strftime('%Y-%m-%dT%H:%M:%S')}{'.' + nanos if nanos else ''}Z {line}")
    return stamped


def _selector_from_query(text: str) -> LabelSelector:
    """The equality-based subset of `labelSelector` (a=b, a!=b, a) that clients commonly send."""
    selector = LabelSelector()
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "!=" in part:
            key, value = part.split("!=", 1)
            selector.match_expressions.append(SelectorRequirement(key=key, operator="NotIn", values=[value]))
        elif "=" in part:
            key, value = part.split("=", 1)
            selector.match_labels[key.rstrip("=")] = value
        else:
            selector.match_expressions.append(SelectorRequirement(key=part, operator="Exists"))
    return selector


def _encode_continue(offset: int, revision: int = int(_RESOURCE_VERSION)) -> str:
    """A continue token shaped as apiserver's: unpadded base64url of {"v", "rv", "start"}."""
    token = {"v": _CONTINUE_VERSION, "rv": revision, "start": str(offset)}
    return base64.urlsafe_b64encode(json.dumps(token, separators=(",", ":")).encode()).decode().rstrip("=")


def _decode_continue(token: str) -> int:
    """The offset a continue token resumes at; ValueError with apiserver's wording when it is not one."""
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, binascii.Error) as error:
        raise ValueError(f"continue key is not valid: {error}") from error
    if not isinstance(decoded, dict) or decoded.get("v") != _CONTINUE_VERSION:
        raise ValueError("continue key is not valid: server does not recognize this encoded version")
    start = decoded.get("start")
    if not isinstance(decoded.get("rv"), int) or not isinstance(start, str) or not start.isdigit():
        raise ValueError(f"continue key is not valid: incorrect encoded start resourceVersion (version {decoded['v']})")
    return int(start)


def _status(code: int, reason: str, message: str, metadata: Json | None = None) -> Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": metadata or {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return Response(json.dumps(body), status=code, content_type="application/json")


class _Api:
    """The WSGI app."""

    def __init__(self, store: _Store) -> None:
        self.store = store
        self.requests: list[str] = []
        self._lock = threading.Lock()
        # When each list's continue token was last handed out (monotonic seconds), for its age.
        self._issued: dict[tuple[str, str], float] = {}
        self._expire_left = store.spec.expired_continues

    def __call__(self, environ: Json, start_response: Any) -> Any:
        request = Request(environ)
        with self._lock:
            self.requests.append(request.full_path.rstrip("?"))
        return self.handle(request)(environ, start_response)

    def _authenticated(self, request: Request) -> bool:
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer ") or self.store.spec.reject_tokens:
            return False
        url = decode_token(header.removeprefix("Bearer "))
        if url is None:
            return False
        query = parse_qs(urlparse(url).query)
        return (
            query.get("Action") == ["GetCallerIdentity"]
            and CLUSTER_ID_HEADER in query.get("X-Amz-SignedHeaders", [""])[0].split(";")
            and bool(query.get("X-Amz-Signature"))
        )

    def handle(self, request: Request) -> Response:
        if request.method != "GET":
            return _status(405, "MethodNotAllowed", f"{request.method} is not served by the simulation")
        if not self._authenticated(request):
            return _status(401, "Unauthorized", "Unauthorized")
        parts = [p for p in request.path.split("/") if p]
        # /api/v1/... or /apis/<group>/<version>/...
        rest = parts[2:] if parts[:1] == ["api"] else parts[3:] if parts[:1] == ["apis"] else None
        if rest is None or not rest:
            return _status(404, "NotFound", "the server could not find the requested resource")
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        resource, name, sub = rest[0], rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None
        if resource not in self.store.objects:
            return _status(404, "NotFound", "the server could not find the requested resource")
        forbidden_key = f"{resource}/{sub}" if sub else resource
        spec = self.store.spec
        if spec.latency_seconds and (not spec.slow_resources or forbidden_key in spec.slow_resources):
            time.sleep(spec.latency_seconds)
        if forbidden_key in self.store.spec.server_errors:
            # The shape of apimachinery's NewInternalError (500, reason InternalError, message
            # "Internal error occurred: <cause>"); the cause is synthetic.
            return _status(500, "InternalError", f"Internal error occurred: simulated failure serving {forbidden_key}")
        if forbidden_key in self.store.spec.forbidden:
            user = f"arn:aws:sts::{self.store.scenario.account_id}:assumed-role/simulated/caller"
            scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            return _status(
                403,
                "Forbidden",
                f'{forbidden_key} is forbidden: User "{user}" cannot {"get" if name else "list"} '
                f'resource "{forbidden_key}" {scope}',
            )
        objs = [
            o for o in self.store.objects[resource] if namespace is None or o["metadata"].get("namespace") == namespace
        ]
        if name is None:
            return self._list(request, resource, objs)
        found = next((o for o in objs if o["metadata"]["name"] == name), None)
        if found is None:
            return _status(404, "NotFound", f'{resource} "{name}" not found')
        if sub == "log" and resource == "pods":
            return self._log(request, found)
        if sub is not None:
            return _status(404, "NotFound", "the server could not find the requested resource")
        return Response(json.dumps(found), content_type="application/json")

    def _list(self, request: Request, resource: str, objs: list[Json]) -> Response:
        selector = request.args.get("labelSelector")
        if selector:
            wanted = _selector_from_query(selector)
            objs = [o for o in objs if wanted.matches(o["metadata"].get("labels") or {})]
        start = 0
        token = request.args.get("continue")
        if token:
            try:
                start = _decode_continue(token)
            except ValueError as error:
                # apiserver's etcd3 store: apierrors.NewBadRequest("invalid continue token: …")
                return _status(400, "BadRequest", f"invalid continue token: {error}")
            if self._expired(resource, token):
                return _status(
                    410, "Expired", _EXPIRED_CONTINUE, {"continue": _encode_continue(start, _LATEST_REVISION)}
                )
        limit = int(request.args.get("limit") or 0) or len(objs) or 1
        page = objs[start : start + limit]
        kind = next(k for k, (_, _, r) in _KINDS.items() if r == resource)
        group, version, _ = _KINDS[kind]
        metadata: Json = {"resourceVersion": _RESOURCE_VERSION}
        if start + limit < len(objs):
            metadata["continue"] = _encode_continue(start + limit)
            metadata["remainingItemCount"] = len(objs) - start - limit
            with self._lock:
                self._issued[(resource, metadata["continue"])] = time.monotonic()
        body = {
            "kind": f"{kind}List",
            "apiVersion": f"{group}/{version}" if group else version,
            "metadata": metadata,
            # A list's items carry neither kind nor apiVersion: the list's own say what they are.
            "items": [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in page],
        }
        return Response(json.dumps(body), content_type="application/json")

    def _expired(self, resource: str, token: str) -> bool:
        """Whether etcd has compacted the revision of this (well-formed) token: one of the first
        `expired_continues`, or handed out more than `continue_ttl_seconds` ago."""
        ttl = self.store.spec.continue_ttl_seconds
        with self._lock:
            if self._expire_left:
                self._expire_left -= 1
                return True
            issued = self._issued.get((resource, token))
        # A token this server never handed out has no known age (a client may hold one from before a restart).
        return ttl is not None and issued is not None and time.monotonic() - issued > ttl

    def _log(self, request: Request, pod: Json) -> Response:
        meta = pod["metadata"]
        containers = [c["name"] for c in pod["spec"].get("containers", [])]
        container = request.args.get("container") or (containers[0] if len(containers) == 1 else None)
        if container is None:
            return _status(
                400,
                "BadRequest",
                f"a container name must be specified for pod {meta['name']}, choose one of: {containers}",
            )
        if container not in containers:
            return _status(400, "BadRequest", f"container {container} is not valid for pod {meta['name']}")
        previous = request.args.get("previous", "false").lower() == "true"
        lines = self.store.logs.get((meta["namespace"], meta["name"], container, previous))
        if lines is None:
            if previous:
                return _status(
                    400, "BadRequest", f'previous terminated container "{container}" in pod "{meta["name"]}" not found'
                )
            lines = []
        # The API server's PodLogOptions rules: integers, tailLines >= 0, limitBytes > 0 (422).
        options: dict[str, int] = {}
        for option in ("tailLines", "limitBytes"):
            raw = request.args.get(option)
            if raw is None:
                continue
            try:
                options[option] = int(raw)
            except ValueError:
                return _status(400, "BadRequest", f'{option}: Invalid value: "{raw}": must be an integer')
        for option, lowest, bound in (
            ("tailLines", 0, "greater than or equal to 0"),
            ("limitBytes", 1, "greater than 0"),
        ):
            if options.get(option, lowest) < lowest:
                invalid = f"{option}: Invalid value: {options[option]}: must be {bound}"
                return _status(422, "Invalid", f'PodLogOptions "{meta["name"]}" is invalid: {invalid}')
        if request.args.get("timestamps", "false").lower() == "true":
            lines = _timestamped(lines, self.store.now)
        if "tailLines" in options:
            lines = lines[-options["tailLines"] :] if options["tailLines"] else []
        body = "".join(f"{line}\n" for line in lines).encode("utf-8")
        # limitBytes counts from the start of what tailLines selected (the kubelet's limited writer).
        if "limitBytes" in options and not self.store.spec.ignore_limit_bytes:
            body = body[: options["limitBytes"]]
        return Response(body, content_type="text/plain")


class KubernetesApi:
    """Handle on the running API emulation."""

    def __init__(self, server: BaseWSGIServer | None = None, api: _Api | None = None) -> None:
        self._server = server
        self.api = api
        self._thread: threading.Thread | None = None
        if server is not None:
            self._thread = threading.Thread(target=server.serve_forever, name="emulated-kube-api", daemon=True)
            self._thread.start()

    @property
    def endpoint(self) -> str | None:
        """The API server URL (None when no server runs)."""
        if self._server is None:
            return None
        host, port = self._server.server_address[:2]
        return f"https://{host!s}:{port}"

    @property
    def requests(self) -> list[str]:
        """Paths (with query) the API answered, in order."""
        return list(self.api.requests) if self.api else []

    def stop(self) -> None:
        """Stop the server."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _point_eks_cluster(scenario: Scenario, endpoint: str, ca_pem: bytes) -> None:
    from moto.eks.models import eks_backends

    name = scenario.cluster.eks_cluster_name or f"{scenario.cluster.name}-eks"
    cluster = eks_backends[scenario.account_id][scenario.region].clusters[name]
    cluster.endpoint = endpoint
    # As EKS returns it: the cluster CA's PEM, base64-encoded.
    cluster.certificate_authority = {"data": base64.b64encode(ca_pem).decode()}


def start_kubernetes_api(scenario: Scenario, emulation: EmulatedAws, now: datetime | None = None) -> KubernetesApi:
    """Serve the scenario's Kubernetes objects and point the EKS cluster's endpoint at them."""
    del emulation  # moto's backends are process-global; the emulation serves them over HTTP
    if scenario.cluster.orchestrator != "eks":
        return KubernetesApi()
    spec = scenario.kubernetes or KubernetesScenario()
    tls = cluster_tls()
    ca_pem = unrelated_ca_pem() if spec.wrong_ca else tls.ca_pem
    if spec.unreachable:
        _point_eks_cluster(scenario, f"https://127.0.0.1:{_closed_port()}", ca_pem)
        return KubernetesApi()
    api = _Api(_Store(scenario, spec, now or datetime.now(UTC)))
    server = make_server("127.0.0.1", 0, api, threaded=True, ssl_context=tls.server_context)
    handle = KubernetesApi(server, api)
    _point_eks_cluster(scenario, str(handle.endpoint), ca_pem)
    return handle
