"""What the simulator can plant, read back with the product's own parsers: per-node Kubernetes EFA
capacity, any number of ranks NCCL RAS considers dead, Xid lines with their own pid, DCGM incidents
on the GPU given, and a Slurm queue in any state, printed as the probe's squeue command asks."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from hyperpod_nccl.hang.ras import parse_ras_status
from hyperpod_nccl.probe import script
from hyperpod_nccl.probe.parsers import parse_node_probe, parse_slurm_controller
from hyperpod_nccl.slurm_hostlist import expand_hostlist
from hyperpod_nccl_sim.hang_job import HungJob, ras_status_json, ras_status_text
from hyperpod_nccl_sim.kubernetes import EFA_RESOURCE, _Store
from hyperpod_nccl_sim.node_behaviours import HungJobSpec, NodeBehaviour, SlurmJobSpec, XidSpec
from hyperpod_nccl_sim.nodes import render_node_probe, render_slurm_controller
from hyperpod_nccl_sim.scenario import K8sNodeSpec, Scenario, load_scenario
from hyperpod_nccl_sim.slurm_queue import compress_hostlist, squeue_command, squeue_rows

RAS_FIXTURES = Path(__file__).resolve().parents[1] / "data" / "ras"


def test_a_nodes_kubernetes_efa_capacity_is_its_own_not_its_instance_types() -> None:
    scenario = load_scenario("eks-p5")
    spec = scenario.kubernetes
    assert spec is not None
    first, second = scenario.node_keys()[:2]
    spec = spec.model_copy(
        update={
            "nodes": [
                *[n for n in spec.nodes if n.node not in (first, second)],
                K8sNodeSpec(node=first, efa_capacity=16, efa_allocatable=0),
                K8sNodeSpec(node=second),
            ]
        }
    )
    nodes = {n["metadata"]["name"]: n["status"] for n in _Store(scenario, spec, datetime.now(UTC)).objects["nodes"]}
    planted, default = nodes[scenario.k8s_node_name(first)], nodes[scenario.k8s_node_name(second)]
    assert (planted["capacity"][EFA_RESOURCE], planted["allocatable"][EFA_RESOURCE]) == ("16", "0")
    assert default["capacity"][EFA_RESOURCE] == default["allocatable"][EFA_RESOURCE] == "32"  # ml.p5.48xlarge
    with pytest.raises(ValidationError, match="exceeds efa_capacity"):
        K8sNodeSpec(node=first, efa_capacity=4, efa_allocatable=8)


def test_nccl_ras_reports_every_dead_rank_given() -> None:
    job = HungJob(world_size=32, dead_ranks=(30, 2, 13))
    hosts = ["10.1.0.11", "10.1.0.12", "10.1.0.13", "10.1.0.14"]
    for text in (ras_status_text(job, hosts), ras_status_json(job, hosts)):
        status = parse_ras_status(text)
        missing = [(m.rank, m.host, m.considered_dead) for c in status.communicators for m in c.missing_ranks]
        assert sorted(missing) == [(2, "10.1.0.11", True), (13, "10.1.0.12", True), (30, "10.1.0.14", True)]
    assert "3 job processes are considered dead" in ras_status_text(job, hosts)
    # One dead rank by default: the stored fixtures are what the default job prints.
    default = HungJob()
    assert ras_status_text(default, hosts[:2]) == (RAS_FIXTURES / "status_hung_rank13.txt").read_text()
    with pytest.raises(ValidationError, match="outside the job"):
        HungJobSpec(nodes=["worker:0"], dead_ranks=[8])


def test_xid_lines_carry_their_pid_and_dcgm_names_the_gpu_given() -> None:
    behaviour = NodeBehaviour(
        xids=[XidSpec(gpu=5, code=48, pid=51234, process="python"), XidSpec(gpu=1, code=79)],
        dcgm_overall="Warning",
        dcgm_gpu=6,
    )
    output = render_node_probe(behaviour, "ml.p5en.48xlarge", "ip-10-1-0-11.us-west-2.compute.internal", "compute:0")
    probe = parse_node_probe(output)
    assert [(x.code, "pid=51234, name=python" in x.line) for x in probe.xids] == [(48, True), (79, False)]
    assert "pid=48213, name=python3" in probe.xids[1].line
    assert any("GPU 6" in incident for incident in probe.dcgm_incidents) and probe.dcgm_overall == "Warning"
    assert not any("GPU 3" in incident for incident in probe.dcgm_incidents)


def test_squeue_prints_the_queue_as_the_probe_asks_for_it() -> None:
    scenario = load_scenario("slurm-shared-symptoms")
    running = SlurmJobSpec(id="3101", name="pretrain", state="RUNNING", nodes=["compute:0", "compute:1", "compute:3"])
    pending = SlurmJobSpec(id="3102", name="eval", state="PENDING", reason="Resources")

    def host(key: str) -> str:
        return scenario.hostname(key).split(".", 1)[0]

    everything = squeue_command("timeout 15 squeue -h -o '%i|%j|%T|%R' 2>&1 | head -n 50")
    rows = squeue_rows(everything, [running, pending], host)
    assert rows == ["3101|pretrain|RUNNING|ip-10-1-0-[11-12,14]", "3102|eval|PENDING|(Resources)"]
    assert expand_hostlist(rows[0].rsplit("|", 1)[1]) == [host(k) for k in running.nodes]
    # The product's script asks for pending and completing jobs only: a running job is not shown.
    shipped = squeue_command(script("slurm_controller"))
    assert shipped.states == {"PENDING", "COMPLETING"}
    assert squeue_rows(shipped, [running, pending], host) == ["3102|eval|PENDING|(Resources)"]
    assert scenario.node_behaviours is not None
    controller = parse_slurm_controller(render_slurm_controller(scenario, scenario.node_behaviours))
    assert controller.queue == []  # the scenario's job 3101 runs
    with pytest.raises(ValidationError, match="holds nodes"):
        SlurmJobSpec(id="1", name="x", state="RUNNING")
    with pytest.raises(ValidationError, match="has a reason"):
        SlurmJobSpec(id="1", name="x", state="PENDING")


def test_pending_job_shorthand_reads_as_before() -> None:
    scenario = load_scenario("slurm-p5en")
    assert scenario.node_behaviours is not None
    controller = parse_slurm_controller(render_slurm_controller(scenario, scenario.node_behaviours))
    assert [(e.job_id, e.state, e.reason) for e in controller.queue] == [
        ("1207", "PENDING", "(ReqNodeNotAvail, UnavailableNodes:ip-10-1-0-15)")
    ]
    assert compress_hostlist(["login", "ip-10-1-0-9"]) == "login,ip-10-1-0-9"


def test_a_scenario_names_a_real_account_and_only_its_own_nodes() -> None:
    document = load_scenario("slurm-shared-symptoms").model_dump(mode="json")
    with pytest.raises(ValidationError, match="account_id"):
        Scenario.model_validate({**document, "account_id": "12345"})
    slurm = document["node_behaviours"]["slurm"]
    jobs = [{**slurm["jobs"][0], "nodes": ["compute:99"]}]
    bad = {**document, "node_behaviours": {**document["node_behaviours"], "slurm": {**slurm, "jobs": jobs}}}
    with pytest.raises(ValidationError, match="does not have"):
        Scenario.model_validate(bad)
