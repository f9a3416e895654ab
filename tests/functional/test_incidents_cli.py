"""`hyperpod-nccl incidents` against the emulated eks-p5 cluster: the Xid 79 node's story."""

from __future__ import annotations

import json

from hyperpod_nccl.references import section_heading


def test_incidents_json_joins_the_xid_node_story(simulate, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    failed = sim.instance_id("worker:5")
    run = cli("incidents", "--cluster", sim.scenario.cluster.name, "--region", sim.scenario.region, "--format", "json")
    assert run.code == 0, run.stderr
    document = json.loads(run.stdout)
    incidents = document["incidents"]
    xid = next(i for i in incidents if failed in i["affected"]["instance_ids"])
    assert xid["priority"] == "P0" and xid["root_cause"]["xid"] == 79
    kinds = [entry["kind"] for entry in xid["timeline"]]
    assert "detection" in kinds and "recovery" in kinds and "hang" in kinds
    assert xid["outcome"] == "recovering"
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
    run = cli("incidents", "--cluster", sim.scenario.cluster.name, "--region", sim.scenario.region)
    assert run.code == 0, run.stderr
    assert "READ-ONLY" in run.stdout and "timeline:" in run.stdout
    assert "→ references/node-debugger.md § F" in run.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    broken = cli(
        "incidents", "--cluster", sim.scenario.cluster.name, "--region", sim.scenario.region, "--history", str(bad)
    )
    assert broken.code == 2 and "cannot read --history" in broken.stderr
    missing = cli("incidents", "--cluster", "no-such-cluster", "--region", sim.scenario.region)
    assert missing.code == 1 and "Traceback" not in missing.stderr
