"""NetworkPolicy evaluation for training pods: do the policies that select them let the job's
pods reach each other (ingress and egress, on every TCP port NCCL may use) and reach DNS?

Kubernetes semantics: a pod is isolated for a direction once any policy selecting it lists
that direction in policyTypes (default: Ingress always, Egress when egress rules exist); then
only traffic some rule of those policies allows passes. A rule with no peers matches every peer,
with no ports every port; a peer with both selectors needs both to match.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._kubernetes import Job, kube, training_jobs
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.kubernetes import KubernetesInventory, NetworkPolicy, PolicyPeer, PolicyPort, PolicyRule
from hyperpod_nccl.reads import K8S_NAMESPACES, K8S_NETWORK_POLICIES, K8S_PODS
from hyperpod_nccl.references import OPS_REMEDIATIONS

Direction = Literal["Ingress", "Egress"]
# Pods compared per job: pairs grow quadratically, and a job's pods share their labels.
_MAX_PODS_COMPARED = 8
_DNS = ("kube-system", {"k8s-app": "kube-dns"})


@dataclass(frozen=True)
class _Endpoint:
    namespace: str
    labels: tuple[tuple[str, str], ...]
    ip: str | None
    name: str


def _namespace_labels(k8s: KubernetesInventory, namespace: str) -> dict[str, str]:
    labels = dict((k8s.namespace_labels or {}).get(namespace, {}))
    labels.setdefault("kubernetes.io/metadata.name", namespace)
    return labels


def _peer_matches(k8s: KubernetesInventory, peer: PolicyPeer, policy_ns: str, other: _Endpoint) -> bool:
    if peer.ip_block is not None:
        if other.ip is None:
            # An address we do not know is only certainly inside "everything".
            return peer.ip_block.cidr in ("0.0.0.0/0", "::/0")
        try:
            address = ipaddress.ip_address(other.ip)
            inside = address in ipaddress.ip_network(peer.ip_block.cidr, strict=False)
            excluded = any(address in ipaddress.ip_network(e, strict=False) for e in peer.ip_block.excepted)
        except ValueError:
            return False
        return inside and not excluded
    if peer.namespace_selector is None:
        namespace_ok = other.namespace == policy_ns
    else:
        namespace_ok = peer.namespace_selector.matches(_namespace_labels(k8s, other.namespace))
    pod_ok = peer.pod_selector is None or peer.pod_selector.matches(dict(other.labels))
    return namespace_ok and pod_ok


def _port_covers(port: PolicyPort, protocol: str, wanted: int | None) -> bool:
    """Whether a ports entry admits `wanted` (None = every port of the protocol)."""
    if port.protocol.upper() != protocol:
        return False
    if port.port is None:
        return True
    if isinstance(port.port, str) and not port.port.isdigit():
        return False  # a named port: only the container's port of that name
    start = int(port.port)
    end = port.end_port or start
    if wanted is None:
        return start <= 1 and end >= 65535
    return start <= wanted <= end


def _rule_allows(rule: PolicyRule, protocol: str, wanted: int | None) -> bool:
    return not rule.ports or any(_port_covers(p, protocol, wanted) for p in rule.ports)


@dataclass
class _Verdict:
    allowed: bool
    isolating: list[NetworkPolicy]
    partially: list[str]


def _evaluate(
    k8s: KubernetesInventory,
    policies: list[NetworkPolicy],
    subject: _Endpoint,
    direction: Direction,
    other: _Endpoint,
    protocol: str,
    port: int | None,
) -> _Verdict:
    """May `subject` receive from (Ingress) or send to (Egress) `other` on protocol/port?"""
    selecting = [
        p for p in policies if p.namespace == subject.namespace and p.pod_selector.matches(dict(subject.labels))
    ]
    isolating = [p for p in selecting if direction in p.policy_types]
    if not isolating:
        return _Verdict(True, [], [])
    partially: list[str] = []
    for policy in isolating:
        rules = policy.ingress if direction == "Ingress" else policy.egress
        for rule in rules:
            if rule.peers and not any(_peer_matches(k8s, peer, policy.namespace, other) for peer in rule.peers):
                continue
            if _rule_allows(rule, protocol, port):
                return _Verdict(True, isolating, [])
            partially += [
                f"{policy.name}: {p.protocol}/{p.port}" + (f"-{p.end_port}" if p.end_port else "") for p in rule.ports
            ]
    return _Verdict(False, isolating, partially)


def _endpoints(job: Job) -> list[_Endpoint]:
    return [
        _Endpoint(p.namespace, tuple(sorted(p.labels.items())), p.pod_ip, p.name) for p in job.pods[:_MAX_PODS_COMPARED]
    ]


def _names(policies: list[NetworkPolicy]) -> str:
    return ", ".join(sorted({f"{p.namespace}/{p.name}" for p in policies}))


@check(
    id="k8s.network_policies",
    title="NetworkPolicies allow the job's pod-to-pod and DNS traffic",
    priority=Priority.P0,
    reference=OPS_REMEDIATIONS,
    source="kubernetes",
    orchestrators=("eks",),
    reads=(K8S_PODS, K8S_NETWORK_POLICIES, K8S_NAMESPACES),
)
def network_policies(inv: Inventory) -> Iterator[Finding]:
    """Evaluate the policies selecting each training job's pods (not just "an empty ingress")."""
    k8s = kube(inv)
    if k8s.network_policies is None:
        return
    policies = k8s.network_policies
    for job in training_jobs(k8s):
        pods = _endpoints(job)
        if not any(p.namespace == job.namespace for p in policies):
            continue
        blocked: dict[str, list[str]] = {}
        culprits: list[NetworkPolicy] = []
        partial: list[str] = []
        for direction in ("Ingress", "Egress"):
            for subject in pods:
                for other in pods:
                    if subject is other:
                        continue
                    verdict = _evaluate(k8s, policies, subject, direction, other, "TCP", None)
                    if not verdict.allowed:
                        blocked.setdefault(direction, []).append(
                            f"{other.name} → {subject.name}"
                            if direction == "Ingress"
                            else f"{subject.name} → {other.name}"
                        )
                        culprits += verdict.isolating
                        partial += verdict.partially
        dns = _Endpoint(_DNS[0], tuple(sorted(_DNS[1].items())), None, "kube-dns")
        dns_blocked = []
        for subject in pods:
            verdict = _evaluate(k8s, policies, subject, "Egress", dns, "UDP", 53)
            if not verdict.allowed:
                dns_blocked.append(subject.name)
                culprits += verdict.isolating
        resources = [
            *job.resources(),
            *(
                Resource(kind="network_policy", id=f"{p.namespace}/{p.name}")
                for p in {(p.namespace, p.name): p for p in culprits}.values()
            ),
        ]
        note = (
            "NetworkPolicies only take effect with a policy engine (VPC CNI network policy, Calico, …); "
            "read the policy before changing it — it may be deliberate tenant isolation"
        )
        if blocked:
            ports = sorted(set(partial))
            directions = " and ".join(d.lower() for d in blocked)
            detail = (
                f"policies {_names(culprits)} isolate the pods for {directions} and no rule admits every TCP port "
                "between them"
                + (
                    f" (only {', '.join(ports)}): the rendezvous port alone is not enough, NCCL's bootstrap and "
                    "socket connections use ephemeral ports"
                    if ports
                    else ""
                )
            )
            evidence = [f"{d}: {', '.join(pairs[:6])}{' …' if len(pairs) > 6 else ''}" for d, pairs in blocked.items()]
            yield network_policies.fail(
                f"{job.ref}: NetworkPolicy blocks traffic between the job's pods",
                detail=f"{detail}. {note}",
                evidence=evidence,
                resources=resources,
                fields={"signature": "pod_to_pod", "partial_ports": bool(ports)},
            )
        if dns_blocked:
            yield network_policies.fail(
                f"{job.ref}: NetworkPolicy blocks DNS (UDP 53 to kube-dns)",
                priority=Priority.P1,
                detail=f"policies {_names(culprits)} isolate egress without a rule to kube-dns on UDP 53: "
                f"MASTER_ADDR and Service names cannot resolve. {note}",
                evidence=[f"pods without DNS egress: {', '.join(dns_blocked[:8])}"],
                resources=resources,
                fields={"signature": "dns"},
            )
        if not blocked and not dns_blocked:
            yield network_policies.passed(
                f"{job.ref}: the NetworkPolicies selecting its pods allow pod-to-pod traffic and DNS",
                resources=resources,
            )
