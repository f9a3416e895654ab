"""Kubernetes JSON → inventory models. Secrets are redacted here, at the first moment they exist
in our process, so no later step can leak them: env and ConfigMap values by name or shape (a URL
keeps its host, only its userinfo goes), free text (condition, status and state messages,
annotations, command lines) by `redaction.scrub`."""

from __future__ import annotations

from typing import Any

from hyperpod_nccl.models.kubernetes import (
    HEALTH_LABEL_PREFIX,
    INSTANCE_TYPE_LABELS,
    ConfigMapEnv,
    Container,
    ContainerState,
    ContainerStatus,
    DaemonSet,
    Endpoints,
    EnvFromSource,
    EnvVar,
    IpBlock,
    K8sNode,
    LabelSelector,
    NetworkPolicy,
    NodeCondition,
    OwnerReference,
    Pod,
    PolicyPeer,
    PolicyPort,
    PolicyRule,
    SelectorRequirement,
    Service,
    ServicePort,
    Taint,
    Volume,
    VolumeMount,
    instance_id_from_provider_id,
)
from hyperpod_nccl.redaction import redact_argv, redact_value, scrub, scrub_optional

Json = dict[str, Any]


def _meta(obj: Json) -> Json:
    return obj.get("metadata") or {}


def strings(mapping: Any) -> dict[str, str]:
    """A JSON mapping (labels, selectors, data) as str → str."""
    return {str(k): str(v) for k, v in (mapping or {}).items()}


def node(obj: Json) -> K8sNode:
    """A Node object."""
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    labels = strings(meta.get("labels"))
    provider_id = spec.get("providerID")
    name = str(meta.get("name", ""))
    return K8sNode(
        name=name,
        provider_id=provider_id,
        # HyperPod names its nodes hyperpod-<instance id>: the name says it when providerID does not.
        instance_id=instance_id_from_provider_id(provider_id)
        or (instance_id_from_provider_id(name) if name.startswith("hyperpod-i-") else None),
        instance_type=next((labels[k] for k in INSTANCE_TYPE_LABELS if labels.get(k)), None),
        labels=labels,
        annotations={
            k: scrub(v) for k, v in strings(meta.get("annotations")).items() if k.startswith(HEALTH_LABEL_PREFIX)
        },
        conditions=[
            NodeCondition(
                type=c.get("type", ""),
                status=c.get("status", "Unknown"),
                reason=c.get("reason"),
                message=scrub_optional(c.get("message")),
            )
            for c in status.get("conditions") or []
        ],
        unschedulable=bool(spec.get("unschedulable")),
        taints=[
            Taint(key=t.get("key", ""), value=t.get("value"), effect=t.get("effect", ""))
            for t in spec.get("taints") or []
        ],
        capacity=strings(status.get("capacity")),
        allocatable=strings(status.get("allocatable")),
    )


def _env(item: Json) -> EnvVar:
    name = str(item.get("name", ""))
    value_from = item.get("valueFrom") or {}
    source: str | None = None
    if "configMapKeyRef" in value_from:
        ref = value_from["configMapKeyRef"]
        source = f"configMapKeyRef:{ref.get('name')}/{ref.get('key')}"
    elif "secretKeyRef" in value_from:
        ref = value_from["secretKeyRef"]
        source = f"secretKeyRef:{ref.get('name')}/{ref.get('key')}"
    elif "fieldRef" in value_from:
        source = f"fieldRef:{value_from['fieldRef'].get('fieldPath')}"
    elif "resourceFieldRef" in value_from:
        source = f"resourceFieldRef:{value_from['resourceFieldRef'].get('resource')}"
    value = item.get("value")
    return EnvVar(name=name, value=None if value is None else redact_value(name, str(value)), value_from=source)


def _env_from(item: Json) -> EnvFromSource | None:
    for key, kind in (("configMapRef", "configMap"), ("secretRef", "secret")):
        if key in item:
            ref = item[key] or {}
            return EnvFromSource(
                kind=kind,
                name=str(ref.get("name", "")),
                prefix=str(item.get("prefix") or ""),
                optional=bool(ref.get("optional")),
            )
    return None


def _container(item: Json) -> Container:
    resources = item.get("resources") or {}
    security = item.get("securityContext") or {}
    return Container(
        name=str(item.get("name", "")),
        image=item.get("image"),
        command=redact_argv([str(c) for c in item.get("command") or []]),
        args=redact_argv([str(a) for a in item.get("args") or []]),
        env=[_env(e) for e in item.get("env") or []],
        env_from=[ref for ref in (_env_from(e) for e in item.get("envFrom") or []) if ref is not None],
        volume_mounts=[
            VolumeMount(name=m.get("name", ""), mount_path=m.get("mountPath", ""), read_only=bool(m.get("readOnly")))
            for m in item.get("volumeMounts") or []
        ],
        requests=strings(resources.get("requests")),
        limits=strings(resources.get("limits")),
        capabilities_add=[str(c) for c in (security.get("capabilities") or {}).get("add") or []],
        privileged=bool(security.get("privileged")),
        ports=[int(p["containerPort"]) for p in item.get("ports") or [] if "containerPort" in p],
    )


def _state(state: Json | None) -> ContainerState | None:
    if not state:
        return None
    for kind in ("terminated", "waiting", "running"):
        if kind in state:
            detail = state[kind] or {}
            return ContainerState(
                state=kind,
                reason=detail.get("reason"),
                message=(detail.get("message") or None) and scrub(str(detail["message"]))[:500],
                exit_code=detail.get("exitCode"),
                signal=detail.get("signal"),
                finished_at=detail.get("finishedAt"),
            )
    return None


def _container_status(item: Json) -> ContainerStatus:
    return ContainerStatus(
        name=str(item.get("name", "")),
        ready=bool(item.get("ready")),
        restart_count=int(item.get("restartCount") or 0),
        image=item.get("image"),
        image_id=item.get("imageID"),
        state=_state(item.get("state")),
        last_state=_state(item.get("lastState")),
    )


def _volume(item: Json) -> Volume:
    name = str(item.get("name", ""))
    if "emptyDir" in item:
        empty = item["emptyDir"] or {}
        return Volume(name=name, kind="emptyDir", medium=empty.get("medium") or None, size_limit=empty.get("sizeLimit"))
    if "hostPath" in item:
        return Volume(name=name, kind="hostPath", host_path=(item["hostPath"] or {}).get("path"))
    kind = next((k for k in item if k != "name"), "unknown")
    return Volume(name=name, kind=kind)


def pod(obj: Json) -> Pod:
    """A Pod object."""
    meta, spec, status = _meta(obj), obj.get("spec") or {}, obj.get("status") or {}
    owners = [o for o in meta.get("ownerReferences") or [] if o.get("controller", True)]
    scheduled: Json = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
    return Pod(
        namespace=meta.get("namespace", "default"),
        name=meta.get("name", ""),
        labels=strings(meta.get("labels")),
        owner=OwnerReference(kind=owners[0].get("kind", ""), name=owners[0].get("name", "")) if owners else None,
        node_name=spec.get("nodeName"),
        hostname=spec.get("hostname"),
        subdomain=spec.get("subdomain"),
        phase=status.get("phase"),
        reason=status.get("reason"),
        message=scrub_optional(status.get("message")),
        pod_ip=status.get("podIP"),
        host_ip=status.get("hostIP"),
        unschedulable_message=scrub_optional(scheduled.get("message")) if scheduled.get("status") == "False" else None,
        containers=[_container(c) for c in spec.get("containers") or []],
        init_containers=[_container(c) for c in spec.get("initContainers") or []],
        container_statuses=[_container_status(c) for c in status.get("containerStatuses") or []],
        init_container_statuses=[_container_status(c) for c in status.get("initContainerStatuses") or []],
        volumes=[_volume(v) for v in spec.get("volumes") or []],
    )


def service(obj: Json) -> Service:
    """A Service object."""
    meta, spec = _meta(obj), obj.get("spec") or {}
    return Service(
        namespace=meta.get("namespace", "default"),
        name=meta.get("name", ""),
        cluster_ip=spec.get("clusterIP"),
        type=spec.get("type") or "ClusterIP",
        selector=strings(spec.get("selector")),
        ports=[
            ServicePort(
                name=p.get("name"),
                port=int(p.get("port", 0)),
                target_port=None if p.get("targetPort") is None else str(p["targetPort"]),
                protocol=p.get("protocol") or "TCP",
            )
            for p in spec.get("ports") or []
        ],
        publish_not_ready=bool(spec.get("publishNotReadyAddresses")),
    )


def endpoints(obj: Json) -> Endpoints:
    """An Endpoints object, counted."""
    meta = _meta(obj)
    subsets = obj.get("subsets") or []
    return Endpoints(
        namespace=meta.get("namespace", "default"),
        name=meta.get("name", ""),
        ready_addresses=sum(len(s.get("addresses") or []) for s in subsets),
        not_ready_addresses=sum(len(s.get("notReadyAddresses") or []) for s in subsets),
    )


def daemonset(obj: Json) -> DaemonSet:
    """A DaemonSet object."""
    meta, status = _meta(obj), obj.get("status") or {}
    containers = ((obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
    return DaemonSet(
        namespace=meta.get("namespace", "default"),
        name=meta.get("name", ""),
        desired=int(status.get("desiredNumberScheduled") or 0),
        current=int(status.get("currentNumberScheduled") or 0),
        ready=int(status.get("numberReady") or 0),
        available=int(status.get("numberAvailable") or 0),
        images=[str(c.get("image")) for c in containers if c.get("image")],
    )


def selector(obj: Json | None) -> LabelSelector:
    """A LabelSelector (None or {} selects everything)."""
    obj = obj or {}
    return LabelSelector(
        match_labels=strings(obj.get("matchLabels")),
        match_expressions=[
            SelectorRequirement(
                key=e.get("key", ""), operator=e.get("operator", "Exists"), values=e.get("values") or []
            )
            for e in obj.get("matchExpressions") or []
        ],
    )


def _peer(obj: Json) -> PolicyPeer:
    block = obj.get("ipBlock")
    return PolicyPeer(
        pod_selector=selector(obj["podSelector"]) if "podSelector" in obj else None,
        namespace_selector=selector(obj["namespaceSelector"]) if "namespaceSelector" in obj else None,
        ip_block=IpBlock(cidr=block.get("cidr", ""), excepted=block.get("except") or []) if block else None,
    )


def _rule(obj: Json, peers_key: str) -> PolicyRule:
    return PolicyRule(
        peers=[_peer(p) for p in obj.get(peers_key) or []],
        ports=[
            PolicyPort(protocol=p.get("protocol") or "TCP", port=p.get("port"), end_port=p.get("endPort"))
            for p in obj.get("ports") or []
        ],
    )


def network_policy(obj: Json) -> NetworkPolicy:
    """A NetworkPolicy with the API's policyTypes default applied: Ingress always, Egress
    only when the policy has egress rules."""
    meta, spec = _meta(obj), obj.get("spec") or {}
    types = list(spec.get("policyTypes") or [])
    if not types:
        types = ["Ingress", *(["Egress"] if spec.get("egress") else [])]
    return NetworkPolicy(
        namespace=meta.get("namespace", "default"),
        name=meta.get("name", ""),
        pod_selector=selector(spec.get("podSelector")),
        policy_types=types,
        ingress=[_rule(r, "from") for r in spec.get("ingress") or []],
        egress=[_rule(r, "to") for r in spec.get("egress") or []],
    )


def config_map(obj: Json) -> ConfigMapEnv:
    """A ConfigMap's data, secret values (by key name or value shape) redacted."""
    meta = _meta(obj)
    return ConfigMapEnv(
        namespace=meta.get("namespace", "default"),
        name=meta.get("name", ""),
        data={k: redact_value(k, v) for k, v in strings(obj.get("data")).items()},
    )
