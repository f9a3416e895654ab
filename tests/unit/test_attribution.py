"""Rank → pod → node → instance id, on EKS (pod env) and by host (RAS), Slurm hostlists, and the sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperpod_nccl.hang.attribution import (
    attribute,
    pod_ranks,
    rank_map_from_hosts,
    rank_map_from_pods,
)
from hyperpod_nccl.hang.flight_recorder import analyze, load_dumps
from hyperpod_nccl.hang.ras import parse_ras_status
from hyperpod_nccl.models.cluster import ClusterNode
from hyperpod_nccl.models.kubernetes import Container, EnvVar, K8sNode, Pod
from hyperpod_nccl.slurm_hostlist import expand_hostlist

DATA = Path(__file__).resolve().parents[1] / "data"
NODES = [
    ClusterNode(
        instance_id=f"i-0abc00000000000{i}",
        instance_group="worker",
        instance_type="ml.p5.48xlarge",
        status="Running",
        private_dns_hostname=f"ip-10-1-0-1{i}.us-west-2.compute.internal",
    )
    for i in (1, 2)
]


def _pod(name: str, node: str, **env: str) -> Pod:
    container = Container(name="trainer", env=[EnvVar(name=k, value=v) for k, v in env.items()])
    return Pod(namespace="ml", name=name, node_name=node, containers=[container], labels={"job-name": "train"})


def _analysis():  # type: ignore[no-untyped-def]
    files = [(str(p), p.read_bytes()) for p in sorted((DATA / "flight_recorder" / "hung_rank13").iterdir())]
    return analyze(load_dumps(files)[0])


def test_pod_env_gives_ranks_per_node() -> None:
    assert pod_ranks(_pod("a", "n", RANK="5", LOCAL_RANK="5")) == [(5, 5)]
    assert pod_ranks(_pod("b", "n", PET_NODE_RANK="1", PET_NPROC_PER_NODE="8")) == [(8 + i, i) for i in range(8)]
    assert pod_ranks(_pod("c", "n")) == []


def test_eks_finding_names_pod_and_instance() -> None:
    k8s_nodes = [
        K8sNode(
            name=f"hyperpod-{n.instance_id}",
            instance_id=n.instance_id,
            provider_id=f"aws:///us-west-2a/{n.instance_id}",
        )
        for n in NODES
    ]
    pods = [
        _pod("train-worker-0", k8s_nodes[0].name, PET_NODE_RANK="0", PET_NPROC_PER_NODE="8"),
        _pod("train-worker-1", k8s_nodes[1].name, PET_NODE_RANK="1", PET_NPROC_PER_NODE="8"),
    ]
    mapping = rank_map_from_pods(pods, k8s_nodes, NODES)
    facts = attribute(_analysis(), None, mapping)
    assert [f.rank for f in facts] == [13]
    fact = facts[0]
    assert fact.location.pod == "train-worker-1" and fact.location.instance_id == "i-0abc000000000002"
    assert fact.location.local_rank == 5
    assert fact.sentence == (
        "rank 13 on pod train-worker-1 / node i-0abc000000000002 never entered ALLREDUCE #1580 "
        "in process group default_pg"
    )


def test_hostlist_expansion() -> None:
    assert expand_hostlist("ip-10-1-0-[11-12],login-01") == ["ip-10-1-0-11", "ip-10-1-0-12", "login-01"]
    assert expand_hostlist("gpu[001-003,7]") == ["gpu001", "gpu002", "gpu003", "gpu7"]  # each range keeps its own width


def test_ras_facts_locate_ranks_by_host_address() -> None:
    status = parse_ras_status((DATA / "ras" / "status_hung_rank13.txt").read_text())
    facts = attribute(None, status, rank_map_from_hosts(NODES))
    by_rank = {(f.rank, f.verdict) for f in facts}
    assert by_rank == {(13, "dead"), (14, "lagging")}
    dead = next(f for f in facts if f.verdict == "dead")
    assert dead.location.instance_id == "i-0abc000000000002"
    assert "considered dead" in dead.sentence
    lagging = next(f for f in facts if f.verdict == "lagging")
    assert "AllReduce 1579/1580" in lagging.sentence


def test_a_hostlist_range_beyond_any_cluster_is_refused() -> None:
    # (synthetic) a range that would expand to 10^8 names is not a node list.
    with pytest.raises(ValueError, match="spans more than"):
        expand_hostlist("ip-10-1-0-[0-99999999]")
    assert len(expand_hostlist("n[0-1023]")) == 1024
