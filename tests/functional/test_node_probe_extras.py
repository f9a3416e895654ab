"""On-node checks added after the first probe release: EFA loopback latency, NCCL transports
disabled in running jobs, hugepages and NUMA, and the suggested commands of node findings."""

from __future__ import annotations

from hyperpod_nccl.engine import diagnose
from hyperpod_nccl.models.findings import Priority, Scope, Status
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl_sim.node_behaviours import NodeBehaviour


def _diagnose(sim, **scope):  # type: ignore[no-untyped-def]
    request = DiagnoseRequest(cluster=sim.scenario.cluster.name, region=sim.scenario.region, scope=Scope(**scope))
    return diagnose(request, sim.clients())


def _findings(result, check_id, status=None):  # type: ignore[no-untyped-def]
    return [f for f in result.findings if f.check_id == check_id and (status is None or f.status is status)]


def _nodes(findings):  # type: ignore[no-untyped-def]
    return {r.id for f in findings for r in f.resources if r.kind == "node"}


def _with_nodes(group: str = "worker", **behaviours: NodeBehaviour):  # type: ignore[no-untyped-def]
    """A scenario edit giving nodes of `group` their own behaviour (keyword n3 -> "<group>:3")."""

    def edit(scenario):  # type: ignore[no-untyped-def]
        assert scenario.node_behaviours is not None
        for key, behaviour in behaviours.items():
            scenario.node_behaviours.nodes[f"{group}:{key.removeprefix('n')}"] = behaviour

    return edit


def _ssm_target(sim, key: str) -> str:  # type: ignore[no-untyped-def]
    cluster_id = sim.cluster_arn.rsplit("/", 1)[-1]
    return f"sagemaker-cluster:{cluster_id}_{key.split(':')[0]}-{sim.instance_id(key)}"


def test_eks_scenario_extras(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    result = _diagnose(sim, sample_nodes="all")

    # EFA loopback latency: worker:10 is slow; the others pass in one summary finding.
    slow = _findings(result, "node.efa_latency", Status.WARN)
    assert _nodes(slow) == {sim.instance_id("worker:10")}
    assert slow[0].priority is Priority.P2 and slow[0].fields == {"provider": "efa", "usec": 47.5}
    assert slow[0].reference.pointer == "references/performance-testing.md § 4"
    commands = " ".join(c.command for c in slow[0].suggested_commands)
    assert "fi_pingpong -p efa" in commands and "batch-replace-cluster-nodes" in commands
    # The pairwise test names the node's own private address.
    assert sim.scenario.hostname("worker:10").split(".")[0].removeprefix("ip-").replace("-", ".") in commands
    assert len(_findings(result, "node.efa_latency", Status.PASS)) == 1

    # NCCL_P2P_DISABLE=1 in the eight ranks running on worker:13.
    p2p = _findings(result, "node.nccl_p2p_env")
    assert _nodes(p2p) == {sim.instance_id("worker:13")}
    assert (p2p[0].status, p2p[0].priority) == (Status.WARN, Priority.P1)
    assert p2p[0].fields == {"variable": "NCCL_P2P_DISABLE", "value": "1"}
    assert p2p[0].reference.pointer == "references/debugging-guide.md § 14"
    assert "in 8 process(es)" in p2p[0].evidence[0]

    # Every 2 MiB huge page in use on worker:14; NUMA visible everywhere.
    exhausted = _findings(result, "node.hugepages", Status.WARN)
    assert _nodes(exhausted) == {sim.instance_id("worker:14")}
    assert exhausted[0].fields == {"hugepages_total": 1024, "hugepages_free": 0}
    assert exhausted[0].reference.pointer == "references/performance-testing.md § 8"
    assert "vm.nr_hugepages=2048" in exhausted[0].suggested_commands[0].command
    assert _findings(result, "node.numa") == []

    # Limits and shared memory: the fix for EKS pods, or on the node through its SSM target.
    def only_command(check_id: str) -> str:
        (finding,) = [f for f in result.findings if f.check_id == check_id and f.is_issue]
        (command,) = finding.suggested_commands
        return command.text

    assert "IPC_LOCK" in only_command("node.memlock")
    assert "medium: Memory" in only_command("node.dev_shm") and "mountPath: /dev/shm" in only_command("node.dev_shm")
    remove_ipc = only_command("node.remove_ipc")
    assert f"--target {_ssm_target(sim, 'worker:9')}" in remove_ipc
    assert "RemoveIPC=no" in remove_ipc and "systemctl restart systemd-logind" in remove_ipc
    stale = only_command("node.stale_shm")
    assert _ssm_target(sim, "worker:9") in stale and stale.index("fuser -v") < stale.index("rm -f")


def test_tcp_fallback_disabled_transports_hugepages_and_numa(simulate) -> None:  # type: ignore[no-untyped-def]
    env = {"NCCL_IB_DISABLE": "1", "NCCL_NVLS_ENABLE": "0", "NCCL_SHM_DISABLE": "0", "NCCL_P2P_DISABLE": "0"}
    sim = simulate(
        "healthy-eks",
        edit=_with_nodes(
            n0=NodeBehaviour(hugepages_total=0, hugepages_free=0),
            n1=NodeBehaviour(efa_provider_missing=True),
            n2=NodeBehaviour(nccl_job_env=env),
            n3=NodeBehaviour(numa_nodes=0),
        ),
    )
    result = _diagnose(sim, sample_nodes="all")

    fallback = _findings(result, "node.efa_latency", Status.INFO)
    assert _nodes(fallback) == {sim.instance_id("worker:1")} and fallback[0].fields["provider"] == "tcp"
    assert _findings(result, "node.efa_latency", Status.WARN) == []

    found = {f.fields["variable"]: f for f in _findings(result, "node.nccl_p2p_env")}
    # "0" for P2P/SHM means enabled: only the two switched-off transports are reported.
    assert set(found) == {"NCCL_IB_DISABLE", "NCCL_NVLS_ENABLE"}
    assert found["NCCL_IB_DISABLE"].reference.pointer == "references/debugging-guide.md § 13"
    nvls = found["NCCL_NVLS_ENABLE"]
    assert nvls.status is Status.INFO and nvls.reference.pointer == "references/debugging-guide.md § 19"
    assert _nodes([nvls]) == {sim.instance_id("worker:2")}

    none = _findings(result, "node.hugepages", Status.INFO)
    assert _nodes(none) == {sim.instance_id("worker:0")}
    assert "vm.nr_hugepages=512" in none[0].suggested_commands[0].command
    assert len(_findings(result, "node.hugepages", Status.PASS)) == 1
    numa = _findings(result, "node.numa")
    assert _nodes(numa) == {sim.instance_id("worker:3")} and numa[0].status is Status.WARN
    assert numa[0].reference.pointer == "references/operations.md § 5"


def test_slurm_memlock_fix_is_limits_conf_on_the_node(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("slurm-p5en", edit=_with_nodes("compute", n1=NodeBehaviour(memlock_kib=0, memlock_unlimited=False)))
    result = _diagnose(sim, node=sim.instance_id("compute:1"))
    (finding,) = [f for f in result.findings if f.check_id == "node.memlock" and f.is_issue]
    assert finding.priority is Priority.P0
    (command,) = finding.suggested_commands
    assert f"--target {_ssm_target(sim, 'compute:1')}" in command.text
    assert "* hard memlock 8388608" in command.command and "/etc/security/limits.conf" in command.command
    assert command.preconditions and "lifecycle script" in command.preconditions


def test_unset_remove_ipc_warns_on_slurm_and_is_only_listed_on_eks(simulate) -> None:  # type: ignore[no-untyped-def]
    unset = NodeBehaviour(remove_ipc=None)
    slurm = simulate("slurm-p5en", edit=_with_nodes("compute", n0=unset, n1=unset))
    result = _diagnose(slurm, sample_nodes="all")
    (finding,) = _findings(result, "node.remove_ipc")
    assert (finding.status, finding.priority) == (Status.WARN, Priority.P2)
    assert _nodes([finding]) == {slurm.instance_id("compute:0"), slurm.instance_id("compute:1")}
    assert "defaults to yes" in finding.title and finding.reference.pointer == "references/operations.md § 7"
    assert "RemoveIPC=no" in finding.suggested_commands[0].command

    eks = simulate("eks-p5", edit=_with_nodes(n2=unset))
    infos = _findings(_diagnose(eks, node=eks.instance_id("worker:2")), "node.remove_ipc")
    assert [(f.status, _nodes([f])) for f in infos] == [(Status.INFO, {eks.instance_id("worker:2")})]
