"""On-node checks added after the first probe release: EFA loopback latency, NCCL transports
disabled in running jobs, hugepages and NUMA, and the suggested commands of node findings."""

from __future__ import annotations

from hyperpod_nccl.engine import diagnose
from hyperpod_nccl.models.findings import Priority, Scope, Status
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.simulation.node_behaviours import NodeBehaviour


def _diagnose(sim, **scope):  # type: ignore[no-untyped-def]
    request = DiagnoseRequest(cluster=sim.scenario.cluster.name, region=sim.scenario.region, scope=Scope(**scope))
    return diagnose(request, sim.clients())


def _findings(result, check_id, status=None):  # type: ignore[no-untyped-def]
    return [f for f in result.findings if f.check_id == check_id and (status is None or f.status is status)]


def _nodes(findings):  # type: ignore[no-untyped-def]
    return {r.id for f in findings for r in f.resources if r.kind == "node"}


def _with_nodes(**behaviours: NodeBehaviour):  # type: ignore[no-untyped-def]
    """A scenario edit giving `worker:<n>` nodes their own behaviour (keys like w0 -> worker:0)."""

    def edit(scenario):  # type: ignore[no-untyped-def]
        assert scenario.node_behaviours is not None
        for key, behaviour in behaviours.items():
            scenario.node_behaviours.nodes[f"worker:{key.removeprefix('w')}"] = behaviour

    return edit


def test_slow_efa_loopback_warns_and_tcp_fallback_informs(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    result = _diagnose(sim, sample_nodes="all")
    slow = _findings(result, "node.efa_latency", Status.WARN)
    assert _nodes(slow) == {sim.instance_id("worker:10")}
    assert slow[0].priority is Priority.P2 and slow[0].fields == {"provider": "efa", "usec": 47.5}
    assert slow[0].reference.pointer == "references/performance-testing.md § 4"
    commands = " ".join(c.command for c in slow[0].suggested_commands)
    assert "fi_pingpong -p efa" in commands and "batch-replace-cluster-nodes" in commands
    # The pairwise test names the node's own private address.
    assert sim.scenario.hostname("worker:10").split(".")[0].removeprefix("ip-").replace("-", ".") in commands
    assert [f.status for f in _findings(result, "node.efa_latency") if f.status is Status.PASS] == [Status.PASS]

    fallback = simulate("healthy-eks", edit=_with_nodes(w1=NodeBehaviour(efa_provider_missing=True)))
    result = _diagnose(fallback, sample_nodes="all")
    info = _findings(result, "node.efa_latency", Status.INFO)
    assert _nodes(info) == {fallback.instance_id("worker:1")} and info[0].fields["provider"] == "tcp"
    assert _findings(result, "node.efa_latency", Status.WARN) == []


def test_transports_disabled_in_running_jobs(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    result = _diagnose(sim, sample_nodes="all")
    p2p = _findings(result, "node.nccl_p2p_env")
    assert _nodes(p2p) == {sim.instance_id("worker:13")}
    assert (p2p[0].status, p2p[0].priority) == (Status.WARN, Priority.P1)
    assert p2p[0].fields == {"variable": "NCCL_P2P_DISABLE", "value": "1"}
    assert p2p[0].reference.pointer == "references/debugging-guide.md § 14"
    assert "in 8 process(es)" in p2p[0].evidence[0]

    env = {"NCCL_IB_DISABLE": "1", "NCCL_NVLS_ENABLE": "0", "NCCL_SHM_DISABLE": "0", "NCCL_P2P_DISABLE": "0"}
    edited = simulate("healthy-eks", edit=_with_nodes(w2=NodeBehaviour(nccl_job_env=env)))
    found = {f.fields["variable"]: f for f in _findings(_diagnose(edited, sample_nodes="all"), "node.nccl_p2p_env")}
    # "0" for P2P/SHM means enabled: only the two switched-off transports are reported.
    assert set(found) == {"NCCL_IB_DISABLE", "NCCL_NVLS_ENABLE"}
    assert found["NCCL_IB_DISABLE"].reference.pointer == "references/debugging-guide.md § 13"
    nvls = found["NCCL_NVLS_ENABLE"]
    assert nvls.status is Status.INFO and nvls.reference.pointer == "references/debugging-guide.md § 19"
    assert _nodes([nvls]) == {edited.instance_id("worker:2")}


def test_hugepages_and_numa(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    result = _diagnose(sim, sample_nodes="all")
    exhausted = _findings(result, "node.hugepages", Status.WARN)
    assert _nodes(exhausted) == {sim.instance_id("worker:14")}
    assert exhausted[0].fields == {"hugepages_total": 1024, "hugepages_free": 0}
    assert exhausted[0].reference.pointer == "references/debugging-guide.md § 17"
    assert "vm.nr_hugepages=2048" in exhausted[0].suggested_commands[0].command
    assert _findings(result, "node.numa") == []

    edited = simulate(
        "healthy-eks",
        edit=_with_nodes(w0=NodeBehaviour(hugepages_total=0, hugepages_free=0), w3=NodeBehaviour(numa_nodes=0)),
    )
    result = _diagnose(edited, sample_nodes="all")
    none = _findings(result, "node.hugepages", Status.INFO)
    assert _nodes(none) == {edited.instance_id("worker:0")}
    assert "vm.nr_hugepages=512" in none[0].suggested_commands[0].command
    assert [f.status for f in _findings(result, "node.hugepages") if f.status is Status.PASS] == [Status.PASS]
    numa = _findings(result, "node.numa")
    assert _nodes(numa) == {edited.instance_id("worker:3")} and numa[0].status is Status.WARN
    assert numa[0].reference.pointer == "references/debugging-guide.md § 19"
    # "No huge pages" is information; only the NUMA warning is an issue.
    assert {f.check_id for f in result.issues} == {"node.numa"}
