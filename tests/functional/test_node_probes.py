"""diagnose → SSM → findings against the simulated clusters: every on-node fault of the
scenarios becomes a finding with its priority and runbook section."""

from __future__ import annotations

from hyperpod_nccl.engine import diagnose
from hyperpod_nccl.models.findings import Priority, Scope, Status
from hyperpod_nccl.models.request import DiagnoseRequest


def _diagnose(sim, **scope):  # type: ignore[no-untyped-def]
    request = DiagnoseRequest(cluster=sim.scenario.cluster.name, region=sim.scenario.region, scope=Scope(**scope))
    return diagnose(request, sim.clients())


def _issues(result, check_id):  # type: ignore[no-untyped-def]
    return [f for f in result.findings if f.check_id == check_id and f.is_issue]


def _nodes(findings):  # type: ignore[no-untyped-def]
    return {r.id for f in findings for r in f.resources if r.kind == "node"}


def test_eks_scenario_reports_every_on_node_fault(simulate) -> None:
    sim = simulate("eks-p5")
    result = _diagnose(sim, sample_nodes="all")
    node = sim.instance_id

    xid = _issues(result, "node.gpu_xid")
    assert _nodes(xid) == {node("worker:1")}
    assert xid[0].priority is Priority.P0 and xid[0].fields["action"] == "replace"
    assert xid[0].reference.pointer == "references/node-debugger.md § G"
    assert any(
        "batch-replace-cluster-nodes" in c.command and node("worker:1") in c.command for c in xid[0].suggested_commands
    )

    remap = _issues(result, "node.gpu_row_remap")
    assert _nodes(remap) == {node("worker:2")} and remap[0].fields["state"] == "pending"
    assert remap[0].reference.pointer == "references/node-debugger.md § G.1.a"
    assert _nodes(_issues(result, "node.gpu_dcgm")) == {node("worker:2")}

    efa = _issues(result, "node.efa_devices")
    assert _nodes(efa) == {node("worker:3")} and efa[0].fields == {"expected": 32, "found": 28}
    assert efa[0].priority is Priority.P0

    memlock = _issues(result, "node.memlock")
    assert _nodes(memlock) == {node("worker:4")} and memlock[0].fields["memlock_kib"] == 64
    shm = _issues(result, "node.dev_shm")
    assert _nodes(shm) == {node("worker:6")} and shm[0].status is Status.FAIL

    drift = _issues(result, "fleet.version_drift")
    assert _nodes(drift) == {node("worker:7")}
    assert {f.fields["component"] for f in drift} == {"driver", "nccl"}
    assert _nodes(_issues(result, "fleet.efa_error_outliers")) == {node("worker:8")}
    assert _nodes(_issues(result, "node.remove_ipc")) == {node("worker:9")}
    assert _nodes(_issues(result, "node.stale_shm")) == {node("worker:9")}

    unreachable = _issues(result, "node.reachability")
    assert _nodes(unreachable) == {node("worker:5")}
    assert unreachable[0].fields["error_kind"] == "target_not_connected"
    assert unreachable[0].reference.pointer == "references/node-debugger.md § K"

    # Coverage: 16 probed, worker:5 unreachable, the Pending worker:12 not probed.
    assert (result.coverage.nodes_probed, result.coverage.nodes_unreachable, result.coverage.nodes_skipped) == (
        16,
        1,
        1,
    )
    assert result.coverage.unreachable_node_ids == [node("worker:5")]
    # Healthy signals stay quiet.
    quiet = (
        "node.gpu_ecc",
        "node.nvlink",
        "node.gpu_inventory",
        "node.efa_provider",
        "node.ofi_nccl_plugin",
        "node.gpudirect_rdma",
        "node.mtu",
        "node.firewall",
        "node.stack",
        "node.p2p_path",
        "node.nccl_driver_compat",
    )
    assert [f.title for f in result.findings if f.check_id in quiet and f.is_issue] == []


def test_slurm_controller_probe_maps_slurm_nodes_to_instances(simulate) -> None:
    sim = simulate("slurm-p5en")
    result = _diagnose(sim, sample_nodes="all")
    states = _issues(result, "slurm.node_states")
    by_state = {f.fields["state"]: f for f in states}
    assert set(by_state) == {"down*", "drained"}
    down = by_state["down*"]
    assert down.status is Status.FAIL and down.reference.pointer == "references/operations.md § 7"
    assert {(r.kind, r.id) for r in down.resources} >= {("node", sim.instance_id("compute:3"))}
    assert by_state["drained"].status is Status.WARN and by_state["drained"].fields["reason"] == "Kill task failed"
    assert [f.status for f in result.findings if f.check_id == "slurm.controller"] == [Status.PASS]
    [held] = _issues(result, "slurm.queue")
    # The pending job waits on ip-10-1-0-15: the Slurm name and the instance behind it.
    assert {r.kind for r in held.resources} == {"job", "slurm_node", "node"} and "ip-10-1-0-15" in held.title
    env = _issues(result, "slurm.nccl_env")
    assert env and env[0].priority is Priority.P1
    assert _issues(result, "slurm.remove_ipc") == []
    efa = _issues(result, "node.efa_devices")
    assert _nodes(efa) == {sim.instance_id("compute:6")} and efa[0].fields == {"expected": 16, "found": 12}


def test_slurm_controller_down_and_munge_inactive_are_p0(simulate) -> None:
    def edit(scenario):  # type: ignore[no-untyped-def]
        assert scenario.node_behaviours and scenario.node_behaviours.slurm
        scenario.node_behaviours.slurm.slurmctld_up = False
        scenario.node_behaviours.slurm.munge_active = False
        scenario.node_behaviours.slurm.remove_ipc = None

    sim = simulate("slurm-p5en", edit=edit)
    result = _diagnose(sim, sample_nodes=1)
    failures = _issues(result, "slurm.controller")
    assert len(failures) == 2 and all(f.priority is Priority.P0 for f in failures)
    assert len(_issues(result, "slurm.remove_ipc")) == 1


def test_healthy_cluster_has_no_node_issues(simulate) -> None:
    sim = simulate("healthy-eks")
    result = _diagnose(sim, sample_nodes="all")
    assert [f.title for f in result.issues] == []
    assert result.coverage.nodes_probed == 4


def test_default_sample_and_single_node(simulate) -> None:
    sim = simulate("eks-p5")
    sampled = _diagnose(sim)
    assert sampled.coverage.nodes_probed + sampled.coverage.nodes_unreachable == 3
    one = _diagnose(sim, node=sim.instance_id("worker:1"))
    assert one.coverage.nodes_probed == 1
    assert _nodes(_issues(one, "node.gpu_xid")) == {sim.instance_id("worker:1")}


def test_denied_start_session_names_the_iam_fix(simulate) -> None:
    from hyperpod_nccl_sim.scenario import FaultSpec

    sim = simulate("healthy-eks", faults=[FaultSpec(operation="ssm:StartSession", error_code="AccessDeniedException")])
    result = _diagnose(sim, sample_nodes=2)
    # The denial is the caller's, not the nodes': one finding naming the IAM fix and both nodes.
    [denied] = _issues(result, "node.reachability")
    assert denied.title == "2 node(s) not probed: ssm:StartSession denied"
    assert denied.reference.pointer == "references/operations.md § 2"
    assert "ssm:StartSession" in denied.detail
    assert len({r.id for r in denied.resources if r.kind == "node"}) == 2
    assert result.coverage.nodes_unreachable == 2


def test_without_a_group_marked_as_controller_slurm_is_asked_elsewhere_and_says_so(simulate) -> None:
    # No group typed Controller or named like one: the Slurm checks must not vanish (original probe:
    # the first Running node answers scontrol/sinfo/squeue, as any node of the cluster can).
    def edit(scenario):  # type: ignore[no-untyped-def]
        for group in scenario.cluster.instance_groups:
            if group.slurm_node_type == "Controller":
                group.slurm_node_type, group.name = None, "mgmt"

    sim = simulate("slurm-p5en", edit=edit)
    result = _diagnose(sim, sample_nodes=1)
    said = [f for f in result.findings if f.check_id == "slurm.controller" and f.status is Status.INFO]
    assert said and "typed or named as the Slurm controller" in said[0].detail
    assert [f for f in result.findings if f.check_id == "slurm.node_states"]
