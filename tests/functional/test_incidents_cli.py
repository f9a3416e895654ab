"""`hyperpod-nccl incidents` against the emulated clusters: the verdict's root causes, each with its
story (the Xid 79 node's on eks-p5), and on every shipped scenario exactly the verdict's causes."""

from __future__ import annotations

import json
import re

import pytest

from hyperpod_nccl.references import section_heading
from hyperpod_nccl_sim.scenario import available_scenarios, load_scenario
from tests.functional.scenario_runs import diagnose_every_node


def test_incidents_json_joins_the_xid_node_story(simulate, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    failed = sim.instance_id("worker:5")
    run = cli("incidents", "--cluster", sim.scenario.cluster.name, "--region", sim.scenario.region, "--format", "json")
    assert run.code == 0, run.stderr
    document = json.loads(run.stdout)
    incidents = document["incidents"]
    xid = next(i for i in incidents if i["kind"] == "gpu_hardware" and failed in i["affected"]["instance_ids"])
    assert xid["priority"] == "P0" and xid["root_cause"]["xid"] == 79 and xid["scope"] == "node"
    # The health agent's detection and HyperPod's replacement, one entry each, beside its findings.
    sources = {(entry["source"], entry["kind"]) for entry in xid["timeline"]}
    assert {("hma", "detection"), ("cluster_event", "recovery"), ("node_status", "detection")} <= sources
    assert xid["outcome"] == "recovering"
    assert xid["findings_folded"] == len(xid["finding_fingerprints"]) > 1
    assert "already recovering" in xid["first_step"]
    # The job's watchdog timeouts are the NetworkPolicy's doing in the verdict, so its story, not the GPU's.
    hung = [i for i in incidents if any(entry["kind"] == "hang" for entry in i["timeline"])]
    assert [i["kind"] for i in hung] == ["network_policy"]
    for incident in incidents:
        assert section_heading_of(incident["root_cause"]["reference"]) is not None
    assert [e["number"] for e in document["escalation"]] == [1, 2, 3, 4, 5]

    # The same incidents as history: the Xid node is now a recurrence on the same instance.
    history = tmp_path / "history.json"
    history.write_text(run.stdout)
    again = cli(
        "incidents",
        "--cluster",
        sim.scenario.cluster.name,
        "--region",
        sim.scenario.region,
        "--format",
        "json",
        "--history",
        str(history),
    )
    assert again.code == 0, again.stderr
    ids = {i["id"] for i in json.loads(again.stdout)["incidents"]}
    assert xid["id"] in ids  # stable ids across runs


def section_heading_of(reference: dict[str, str]) -> str | None:
    from hyperpod_nccl.references import Reference

    return section_heading(Reference(**reference))


def test_incidents_text_and_errors(simulate, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    target = ["--cluster", sim.scenario.cluster.name, "--region", sim.scenario.region]
    run = cli("incidents", *target)
    assert run.code == 0, run.stderr
    assert "READ-ONLY" in run.stdout and "timeline:" in run.stdout
    assert "→ references/node-debugger.md § F" in run.stdout
    # Listed in the verdict's order, saying how many findings they fold.
    document = json.loads(cli("incidents", *target, "--format", "json").stdout)
    listed = re.findall(r"^\[P\d\] (rc-[0-9a-f]{12}) ", run.stdout, flags=re.MULTILINE)
    assert listed == [i["id"] for i in document["incidents"]] != []
    folded = document["findings_folded"]
    assert f"Incidents: {len(listed)} (the verdict's root causes, most urgent first; they fold {folded} findings)" in (
        run.stdout
    )
    assert sum(i["findings_folded"] for i in document["incidents"]) == folded
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    broken = cli(
        "incidents", "--cluster", sim.scenario.cluster.name, "--region", sim.scenario.region, "--history", str(bad)
    )
    assert broken.code == 2 and "cannot read --history" in broken.stderr
    missing = cli("incidents", "--cluster", "no-such-cluster", "--region", sim.scenario.region)
    assert missing.code == 1 and "Traceback" not in missing.stderr


@pytest.mark.parametrize("name", available_scenarios())
def test_incidents_are_the_verdicts_root_causes_and_fold_every_issue(simulate, cli, name: str) -> None:  # type: ignore[no-untyped-def]
    # The same cluster, diagnosed and told as incidents: one incident per root cause, in the
    # verdict's order and under its id, and every FAIL/WARN finding in exactly one of them.
    scenario = load_scenario(name)
    diagnosis = json.loads(diagnose_every_node(simulate, cli, scenario, "--format", "json").stdout)
    target = ["--cluster", scenario.cluster.name, "--region", scenario.region, "--sample-nodes", "all"]
    run = cli("incidents", *target, "--format", "json")
    assert run.code == 0, run.stderr
    incidents = json.loads(run.stdout)["incidents"]
    causes = diagnosis["verdict"]["root_causes"]
    assert [i["id"] for i in incidents] == [c["id"] for c in causes]
    issues = sorted(f["fingerprint"] for f in diagnosis["findings"] if f["status"] in ("FAIL", "WARN"))
    assert sorted(f for i in incidents for f in i["finding_fingerprints"]) == issues
    for incident, cause in zip(incidents, causes, strict=True):
        assert (incident["title"], incident["priority"], incident["scope"]) == (
            cause["title"],
            cause["priority"],
            cause["scope"],
        )
        assert incident["timeline"], f"{incident['id']} has no story"
