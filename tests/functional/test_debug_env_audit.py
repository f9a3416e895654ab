"""The environment audits recommend Flight Recorder and NCCL_DEBUG=WARN where a job runs without
them: from the pod spec (`k8s.nccl_env`), the Slurm environment files (`slurm.nccl_env`) and the
running ranks' own environment on probed nodes (`node.nccl_job_env`)."""

from __future__ import annotations

from hyperpod_nccl.checks._debug_env import debug_gaps, flight_recorder_enabled
from hyperpod_nccl.engine import diagnose
from hyperpod_nccl.models.findings import Finding, Priority, Scope, Status, SweepResult
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.references import DBG_FLIGHT_RECORDER, OPS_NCCL_ENV
from hyperpod_nccl_sim.scenario import Scenario


def _diagnose(sim, **scope) -> SweepResult:  # type: ignore[no-untyped-def]
    request = DiagnoseRequest(cluster=sim.scenario.cluster.name, region=sim.scenario.region, scope=Scope(**scope))
    return diagnose(request, sim.clients())


def _recommendations(result: SweepResult, check_id: str) -> dict[str, Finding]:
    """INFO findings of the check by the variable they are about."""
    return {
        str(f.fields["signature"]): f
        for f in result.findings
        if f.check_id == check_id and f.status is Status.INFO and "signature" in f.fields
    }


def test_pod_spec_without_flight_recorder_gets_the_recommendation(simulate) -> None:  # type: ignore[no-untyped-def]
    result = _diagnose(simulate("eks-p5"))
    by_job: dict[str, dict[str, Finding]] = {}
    for f in result.findings:
        if f.check_id == "k8s.nccl_env" and f.status is Status.INFO:
            by_job.setdefault(str(f.fields["job"]), {})[str(f.fields["signature"])] = f
    llama = by_job["training/llama-pretrain"]
    fr = llama["TORCH_NCCL_TRACE_BUFFER_SIZE"]
    assert fr.priority is Priority.P2 and fr.reference.section == DBG_FLIGHT_RECORDER.section
    assert "never entered or never completed" in fr.detail and "TORCH_NCCL_DUMP_ON_TIMEOUT=1" in fr.detail
    # NCCL_DEBUG=INFO is set there: the existing warning stands, no "unset" recommendation.
    assert "NCCL_DEBUG" not in llama
    # nccl-tests is no PyTorch job: Flight Recorder does not apply to it.
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in by_job.get("research/nccl-tests", {})
    # Recommendations are not issues: the healthy-looking summary is unchanged by them.
    assert not fr.is_issue


def test_pod_spec_with_flight_recorder_and_warn_gets_none(simulate) -> None:  # type: ignore[no-untyped-def]
    result = _diagnose(simulate("hung-job"))
    recommended = [
        f
        for f in result.findings
        if f.check_id == "k8s.nccl_env" and f.reference.section in (DBG_FLIGHT_RECORDER.section,)
    ]
    assert recommended == []


def test_unset_nccl_debug_in_a_pod_spec_recommends_warn(simulate) -> None:  # type: ignore[no-untyped-def]
    def edit(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        del scenario.kubernetes.jobs[0].env["NCCL_DEBUG"]

    result = _diagnose(simulate("healthy-eks", edit=edit))
    debug = _recommendations(result, "k8s.nccl_env")["NCCL_DEBUG"]
    assert "NCCL_DEBUG=WARN" in debug.title and debug.reference.pointer == OPS_NCCL_ENV.pointer
    assert "failing peer" in debug.detail


def test_running_ranks_without_nccl_debug_on_probed_nodes(simulate) -> None:  # type: ignore[no-untyped-def]
    def edit(scenario: Scenario) -> None:
        assert scenario.node_behaviours is not None and scenario.node_behaviours.hung_job is not None
        scenario.node_behaviours.hung_job.nccl_debug = None

    sim = simulate("hung-job", edit=edit)
    result = _diagnose(sim, sample_nodes="all")
    found = _recommendations(result, "node.nccl_job_env")
    # The hung job's ranks run with Flight Recorder (it produced the dumps) but without NCCL_DEBUG.
    assert set(found) == {"NCCL_DEBUG"}
    debug = found["NCCL_DEBUG"]
    assert debug.priority is Priority.P2 and debug.fields["nodes"] == 8
    assert {r.id for r in debug.resources} == {sim.instance_id(f"worker:{i}") for i in range(8)}
    hung_node = sim.instance_id("worker:4")
    assert any(line.endswith("ranks 32-39 run without it") and hung_node in line for line in debug.evidence)


def test_running_ranks_with_both_settings_pass(simulate) -> None:  # type: ignore[no-untyped-def]
    result = _diagnose(simulate("hung-job"), sample_nodes="all")
    statuses = [f.status for f in result.findings if f.check_id == "node.nccl_job_env"]
    assert statuses == [Status.PASS]


def test_slurm_environment_files_without_flight_recorder(simulate) -> None:  # type: ignore[no-untyped-def]
    result = _diagnose(simulate("slurm-p5en"), sample_nodes=1)
    found = _recommendations(result, "slurm.nccl_env")
    assert set(found) == {"TORCH_NCCL_TRACE_BUFFER_SIZE"}  # NCCL_DEBUG=INFO is set there
    assert found["TORCH_NCCL_TRACE_BUFFER_SIZE"].reference.section == DBG_FLIGHT_RECORDER.section

    def edit(scenario: Scenario) -> None:
        assert scenario.node_behaviours is not None and scenario.node_behaviours.slurm is not None
        scenario.node_behaviours.slurm.nccl_env = [
            "export TORCH_NCCL_TRACE_BUFFER_SIZE=2000",
            "export TORCH_NCCL_DUMP_ON_TIMEOUT=true",
        ]

    result = _diagnose(simulate("slurm-p5en", edit=edit), sample_nodes=1)
    assert set(_recommendations(result, "slurm.nccl_env")) == {"NCCL_DEBUG"}


def test_flight_recorder_needs_a_buffer_and_dump_on_timeout() -> None:
    assert flight_recorder_enabled({"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "T"})
    assert not flight_recorder_enabled({"TORCH_NCCL_TRACE_BUFFER_SIZE": "0", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"})
    assert not flight_recorder_enabled({"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "0"})
    missing = [g.variable for g in debug_gaps({"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "NCCL_DEBUG": "WARN"})]
    assert missing == ["TORCH_NCCL_DUMP_ON_TIMEOUT"]
    assert debug_gaps({"NCCL_DEBUG": "WARN"}, pytorch=False) == []
