"""Hostile or broken data from the systems we read: the diagnosis reports it and completes."""

from __future__ import annotations

import json
import pickle

import pytest

from hyperpod_nccl import thresholds
from hyperpod_nccl.engine import diagnose
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl_sim import nodes as simulated_nodes
from hyperpod_nccl_sim.hang_job import HungJob, flight_recorder_dump
from hyperpod_nccl_sim.runtime import SimulatedCluster
from hyperpod_nccl_sim.scenario import Scenario
from hyperpod_nccl_sim.serverless import LocalMonitor


def test_malformed_kubernetes_object_degrades_only_its_resource(simulate) -> None:  # type: ignore[no-untyped-def]
    def edit(scenario: Scenario) -> None:
        broken = {"kind": "Service", "metadata": {"name": "evil", "namespace": "training"}, "spec": "garbage"}
        scenario.kubernetes.objects.append(broken)

    sim = simulate("eks-p5", edit=edit)
    result = diagnose(DiagnoseRequest(cluster=sim.scenario.cluster.name, region=sim.scenario.region), sim.clients())
    kube = [d for d in result.degraded_sources if d.source == "kubernetes"]
    assert kube and "services: malformed object" in kube[0].reason and kube[0].partial
    # Everything else Kubernetes said is still evaluated.
    assert any(f.check_id == "k8s.network_policies" and f.is_issue for f in result.findings)
    assert any(f.check_id == "k8s.container_exit_codes" and f.is_issue for f in result.findings)


def _hostile_dumps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every node of the hung job writes crafted plain-data dumps: rank 36's is 2,500 lists deep
    (5 KB), the others' `ranks` string is 5,000 "-" (ast.literal_eval recursed on both)."""

    def crafted(job: HungJob, rank: int) -> bytes:
        if rank == 36:
            return b"\x80\x02" + b"]" * 2500 + b"a" * 2499 + b"."
        dump = flight_recorder_dump(job, rank)
        dump["pg_config"] = {"0": {"name": "0", "desc": "default_pg", "ranks": "-" * 5000 + "1"}}
        return pickle.dumps(dump, protocol=2)

    monkeypatch.setattr(simulated_nodes, "flight_recorder_pickle", crafted)


def _args(sim: SimulatedCluster, *extra: str) -> list[str]:
    return ["--cluster", sim.scenario.cluster.name, "--region", sim.scenario.region, "--sample-nodes", "all", *extra]


def test_crafted_flight_recorder_dumps_crash_nothing(simulate, cli, monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _hostile_dumps(monkeypatch)
    sim = simulate("hung-job")
    depth = thresholds.FLIGHT_RECORDER_MAX_DEPTH
    diagnosed = cli("diagnose", *_args(sim, "--format", "json"))
    assert "Traceback" not in diagnosed.stderr
    [hang] = [f for f in json.loads(diagnosed.stdout)["findings"] if f["check_id"] == "hang.attribution"]
    # The readable dumps still name the hung rank; the unreadable one says why it was not read.
    assert hang["fields"]["rank"] == 37
    assert any(f"unreadable dump: nested deeper than {depth} levels" in line for line in hang["evidence"])
    incidents = cli("incidents", *_args(sim, "--format", "json"))
    assert "Traceback" not in incidents.stderr and json.loads(incidents.stdout)["incidents"]
    bundle = cli("support-bundle", *_args(sim, "--output-dir", str(tmp_path / "bundle")))
    assert bundle.code == 0, bundle.stderr


def test_crafted_flight_recorder_dumps_leave_the_aggregate_running(simulate, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _hostile_dumps(monkeypatch)
    deployed = LocalMonitor(simulate("hung-job"), node_coverage="all").start()
    try:
        assert deployed.sweep().status == "SUCCEEDED"
    finally:
        deployed.stop()
