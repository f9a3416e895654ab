"""Hang attribution end to end on the `hung-job` scenario: the probe's NCCL RAS answer and Flight
Recorder dumps (served by the simulated SSM agent) name rank 37, its pod and its node."""

from __future__ import annotations

import json

from hyperpod_nccl.references import DBG_FLIGHT_RECORDER


def _args(sim) -> list[str]:  # type: ignore[no-untyped-def]
    return [
        "--cluster",
        sim.scenario.cluster.name,
        "--region",
        sim.scenario.region,
        "--sample-nodes",
        "all",
        "--format",
        "json",
    ]


def test_diagnose_names_the_rank_pod_node_and_collective(simulate, cli) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("hung-job")
    hung_node = sim.instance_id("worker:4")
    run = cli("diagnose", *_args(sim))
    findings = json.loads(run.stdout)["findings"]
    hang = [f for f in findings if f["check_id"] == "hang.attribution"]
    assert len(hang) == 1, [f["title"] for f in hang]
    finding = hang[0]
    assert finding["status"] == "FAIL" and finding["priority"] == "P0"
    assert finding["fields"]["rank"] == 37 and finding["fields"]["seq"] == 1580
    assert finding["fields"]["collective"] == "ALLREDUCE" and finding["fields"]["instance_id"] == hung_node
    assert finding["fields"]["pod"] == "gpt-pretrain-worker-4"
    assert finding["reference"]["section"] == DBG_FLIGHT_RECORDER.section
    assert finding["title"].startswith(
        f"rank 37 on pod gpt-pretrain-worker-4 / node {hung_node} never entered ALLREDUCE #1580"
    )
    assert "its node shows Xid 79 at " in finding["title"]
    # RAS corroborates: the same rank's process is considered dead.
    assert any("considered dead by NCCL RAS" in line for line in finding["evidence"])
    # Which process the evidence was read from (the lowest pid of the node's ranks 32-39, as root).
    assert f"rank 37's Flight Recorder dump read on {hung_node} from pid 4132 (python, uid 0)" in finding["evidence"]
    assert any(line.startswith("NCCL RAS answer read on i-") for line in finding["evidence"])
    [source] = [f for f in findings if f["check_id"] == "hang.evidence_source"]
    assert source["status"] == "INFO" and source["fields"] == {"nodes": 8, "uids": 0}


def test_incidents_tell_the_hang_as_one_incident(simulate, cli) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("hung-job")
    hung_node = sim.instance_id("worker:4")
    document = json.loads(cli("incidents", *_args(sim)).stdout)
    on_node = [i for i in document["incidents"] if hung_node in i["affected"]["instance_ids"]]
    assert len(on_node) == 1
    incident = on_node[0]
    assert incident["priority"] == "P0" and incident["root_cause"]["xid"] == 79
    assert 37 in incident["affected"]["ranks"]
    kinds = [entry["kind"] for entry in incident["timeline"]]
    assert "hang" in kinds and "detection" in kinds and "recovery" in kinds
    text = cli("incidents", *_args(sim)[:-2]).stdout
    assert f"rank 37 on pod gpt-pretrain-worker-4 / node {hung_node} never entered ALLREDUCE #1580" in text


def test_a_healthy_cluster_has_no_hang_finding(simulate, cli) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("healthy-eks")
    findings = json.loads(cli("diagnose", *_args(sim)).stdout)["findings"]
    assert not [f for f in findings if f["check_id"] == "hang.attribution"]
