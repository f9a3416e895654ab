"""Rank → pod → node → instance id, and the sentence that names who hung a collective.

EKS: a pod's environment says which ranks it runs (``RANK`` for one process per pod, else
``NODE_RANK``/``PET_NODE_RANK``/``GROUP_RANK`` times the processes per node); its node name maps
to an instance id through the node's providerID. Slurm: no job layout is read, so a rank is
placed by the host RAS names, which maps to an instance through ListClusterNodes'
PrivateDnsHostname. debugging-guide.md § 22 describes the mapping for people.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field

from hyperpod_nccl.hang.flight_recorder import GroupDivergence, HangAnalysis
from hyperpod_nccl.hang.ras import RasStatus, dead_or_missing_ranks, lagging_ranks
from hyperpod_nccl.models.cluster import ClusterNode
from hyperpod_nccl.models.kubernetes import GPU_RESOURCE, K8sNode, Pod

RANK_ENV = ("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
NODE_RANK_ENV = ("PET_NODE_RANK", "NODE_RANK", "GROUP_RANK")
NPROC_ENV = ("PET_NPROC_PER_NODE", "NPROC_PER_NODE", "LOCAL_WORLD_SIZE")
Verdict = Literal["never_entered", "never_completed", "stuck_inside", "desync", "dead", "unresponsive", "lagging"]


class RankLocation(BaseModel):
    """Where one global rank runs."""

    rank: int
    pod: str | None = None
    namespace: str | None = None
    job: str | None = None
    node_name: str | None = None
    hostname: str | None = None
    instance_id: str | None = None
    instance_group: str | None = None
    local_rank: int | None = None

    def describe(self) -> str:
        """``pod train-4 / node i-0abc…`` — the most specific names known."""
        parts = []
        if self.pod:
            parts.append(f"pod {self.pod}")
        where = self.instance_id or self.node_name or self.hostname
        if where:
            parts.append(f"node {where}")
        return " / ".join(parts) or "an unknown node"


class RankMap(BaseModel):
    """Global rank → location, plus host/IP → location for RAS (which names hosts, not pods)."""

    ranks: dict[int, RankLocation] = Field(default_factory=dict)
    hosts: dict[str, RankLocation] = Field(default_factory=dict)

    def locate(self, rank: int, host: str | None = None) -> RankLocation:
        """The rank's location; falls back to the host RAS named, then to a bare rank."""
        if rank in self.ranks:
            return self.ranks[rank]
        if host and (by_host := self.hosts.get(_host_key(host))):
            return by_host.model_copy(update={"rank": rank, "pod": by_host.pod, "local_rank": None})
        return RankLocation(rank=rank, hostname=host)


def _host_key(host: str) -> str:
    """``ip-10-1-2-3.ec2.internal`` / ``ip-10-1-2-3`` / ``10.1.2.3`` → ``10.1.2.3``; else the short name."""
    short = host.split(".", 1)[0] if not re.fullmatch(r"\d+\.\d+\.\d+\.\d+", host) else host
    match = re.fullmatch(r"ip-(\d+)-(\d+)-(\d+)-(\d+)", short)
    return ".".join(match.groups()) if match else short


def _instance_by_host(cluster_nodes: Iterable[ClusterNode]) -> dict[str, ClusterNode]:
    found: dict[str, ClusterNode] = {}
    for node in cluster_nodes:
        if node.private_dns_hostname:
            found[_host_key(node.private_dns_hostname)] = node
    return found


def _env(pod: Pod) -> dict[str, str]:
    values: dict[str, str] = {}
    for container in pod.containers:
        for var in container.env:
            if var.value is not None:
                values.setdefault(var.name, var.value)
    return values


def _as_int(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


def pod_ranks(pod: Pod) -> list[tuple[int, int]]:
    """(global rank, local rank) pairs a pod runs, from its environment; [] when it does not say."""
    env = _env(pod)
    for name in RANK_ENV:
        if (rank := _as_int(env.get(name))) is not None:
            return [(rank, _as_int(env.get("LOCAL_RANK")) or 0)]
    node_rank = next((v for n in NODE_RANK_ENV if (v := _as_int(env.get(n))) is not None), None)
    if node_rank is None:
        node_rank = _as_int(pod.labels.get("batch.kubernetes.io/job-completion-index"))
    if node_rank is None:
        node_rank = _as_int(pod.labels.get("training.kubeflow.org/replica-index"))
    if node_rank is None:
        return []
    per_node = next((v for n in NPROC_ENV if (v := _as_int(env.get(n))) is not None), None)
    per_node = per_node or pod.total(GPU_RESOURCE) or 1
    return [(node_rank * per_node + local, local) for local in range(per_node)]


def rank_map_from_pods(
    pods: Iterable[Pod], k8s_nodes: Iterable[K8sNode] = (), cluster_nodes: Iterable[ClusterNode] = ()
) -> RankMap:
    """EKS: ranks from pod environments, instance ids from providerIDs (or private DNS names)."""
    nodes = {n.name: n for n in k8s_nodes}
    by_host = _instance_by_host(cluster_nodes)
    mapping = RankMap()
    for pod in pods:
        node = nodes.get(pod.node_name or "")
        instance_id = node.instance_id if node else None
        cluster_node = by_host.get(_host_key(pod.node_name)) if pod.node_name else None
        if instance_id is None and cluster_node:
            instance_id = cluster_node.instance_id
        if cluster_node is None and instance_id:
            cluster_node = next((c for c in by_host.values() if c.instance_id == instance_id), None)
        base = RankLocation(
            rank=-1,
            pod=pod.name,
            namespace=pod.namespace,
            job=pod.job_name,
            node_name=pod.node_name,
            hostname=cluster_node.private_dns_hostname if cluster_node else pod.node_name,
            instance_id=instance_id,
            instance_group=cluster_node.instance_group if cluster_node else None,
        )
        for host in (pod.node_name, pod.host_ip, pod.pod_ip):
            if host:
                mapping.hosts.setdefault(_host_key(host), base)
        for rank, local in pod_ranks(pod):
            mapping.ranks[rank] = base.model_copy(update={"rank": rank, "local_rank": local})
    return mapping


def rank_map_from_hosts(cluster_nodes: Iterable[ClusterNode]) -> RankMap:
    """Only hosts known (no job layout): enough to place ranks RAS names with their host."""
    mapping = RankMap()
    for key, node in _instance_by_host(cluster_nodes).items():
        mapping.hosts[key] = RankLocation(
            rank=-1,
            node_name=node.private_dns_hostname,
            hostname=node.private_dns_hostname,
            instance_id=node.instance_id,
            instance_group=node.instance_group,
        )
    return mapping


class AttributionFact(BaseModel):
    """One rank named as (part of) the cause of a hang, with where it runs and how we know."""

    rank: int
    verdict: Verdict
    source: Literal["flight_recorder", "ras"]
    location: RankLocation
    process_group: str | None = None
    seq: int | None = None
    op: str | None = None
    detail: str = ""

    @property
    def sentence(self) -> str:
        """``rank 37 on pod train-4 / node i-0abc… never entered ALLREDUCE #1580``."""
        where = self.location.describe()
        what = {
            "never_entered": f"never entered {self.op} #{self.seq}",
            "never_completed": f"entered but never completed {self.op} #{self.seq}",
            "stuck_inside": f"is stuck inside {self.op} #{self.seq} (kernel never started)",
            "desync": f"issued a different collective ({self.detail}) at #{self.seq}",
            "dead": "is considered dead by NCCL RAS (its process stopped answering)",
            "unresponsive": "did not answer NCCL RAS",
            "lagging": f"lags its communicator ({self.detail})",
        }[self.verdict]
        group = f" in process group {self.process_group}" if self.process_group and self.seq is not None else ""
        return f"rank {self.rank} on {where} {what}{group}"


def _from_divergence(divergence: GroupDivergence, mapping: RankMap) -> list[AttributionFact]:
    facts: list[AttributionFact] = []
    verdict = divergence.verdict
    ranks = sorted(divergence.mismatched_ops) if verdict == "desync" else divergence.culprits
    for rank in ranks:
        facts.append(
            AttributionFact(
                rank=rank,
                verdict=verdict,
                source="flight_recorder",
                location=mapping.locate(rank),
                process_group=divergence.pg_desc or divergence.pg_name,
                seq=divergence.divergent_seq,
                op=divergence.op,
                detail=divergence.mismatched_ops.get(rank, ""),
            )
        )
    return facts


def attribute(analysis: HangAnalysis | None, ras: RasStatus | None, mapping: RankMap) -> list[AttributionFact]:
    """Facts from both sources: Flight Recorder names the collective, RAS the dead/lagging ranks."""
    facts: list[AttributionFact] = []
    for divergence in analysis.divergences if analysis else []:
        facts.extend(_from_divergence(divergence, mapping))
    if ras is not None:
        for rank, missing in sorted(dead_or_missing_ranks(ras).items()):
            facts.append(
                AttributionFact(
                    rank=rank,
                    verdict="dead" if missing.considered_dead else "unresponsive",
                    source="ras",
                    location=mapping.locate(rank, missing.host),
                    detail=f"process {missing.pid} on {missing.host}" if missing.pid else "",
                )
            )
        for rank, counts in sorted(lagging_ranks(ras).items()):
            detail = ", ".join(f"{name} {mine}/{top}" for name, (mine, top) in sorted(counts.items()))
            host = next((r.host for c in ras.communicators for r in c.ranks if r.rank == rank and r.host), None)
            facts.append(
                AttributionFact(
                    rank=rank, verdict="lagging", source="ras", location=mapping.locate(rank, host), detail=detail
                )
            )
    return facts
