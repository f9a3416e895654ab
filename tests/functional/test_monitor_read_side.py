"""The monitor's read side (`hyperpod-nccl status` and `history`) against a monitor deployed in the
emulation: what it prints is what the sweeps stored, the same root causes the CLI's own diagnosis
names, and every failure to find or read the table is one line."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from hyperpod_nccl.monitor.settings import (
    PARTITION_KEY,
    STACK_OUTPUT_TABLE,
    STACK_OUTPUT_TRIGGER_FUNCTION,
    STACK_OUTPUT_WATCHED_CLUSTERS,
)
from hyperpod_nccl.monitor.store import GPU, SWEEP, cluster_key
from hyperpod_nccl_sim.aws import EmulatedAws
from hyperpod_nccl_sim.runtime import SimulatedCluster
from hyperpod_nccl_sim.scenario import load_scenario
from hyperpod_nccl_sim.serverless import TABLE_NAME, LocalMonitor

SCENARIO = "eks-p5"


@pytest.fixture(scope="module")
def swept(emulation: EmulatedAws) -> Iterator[LocalMonitor]:
    """eks-p5 swept twice by the deployed monitor, every node probed: shared by the module's tests,
    which only read it (two sweeps of every node are most of the module's time)."""
    simulation = SimulatedCluster(load_scenario(SCENARIO), emulation=emulation)
    with simulation, LocalMonitor(simulation, node_coverage="all") as deployed:
        assert deployed.sweep().status == "SUCCEEDED"
        assert deployed.sweep().status == "SUCCEEDED"
        yield deployed


def _where(deployed: LocalMonitor) -> list[str]:
    return ["--table", TABLE_NAME, "--region", deployed.region]


def test_status_lists_the_root_causes_the_cli_names_with_what_the_sweeps_saw(swept: LocalMonitor, cli) -> None:  # type: ignore[no-untyped-def]
    cluster = swept.simulation.scenario.cluster.name
    run = cli("status", "--cluster", cluster, *_where(swept), "--format", "json")
    assert run.code == 0, run.stderr
    [status] = json.loads(run.stdout)["clusters"]
    # The other face of the same engine, on the same cluster: the same root causes.
    incidents = cli(
        "incidents", "--cluster", cluster, "--region", swept.region, "--sample-nodes", "all", "--format", "json"
    )
    expected = {i["id"]: i for i in json.loads(incidents.stdout)["incidents"]}
    causes = status["open_root_causes"]
    assert {c["id"] for c in causes} == set(expected)
    for cause in causes:
        assert (cause["title"], cause["priority"]) == (
            expected[cause["id"]]["title"],
            expected[cause["id"]]["priority"],
        )
        assert cause["occurrences"] == 2, cause  # both sweeps saw it
        assert cause["first_seen"] < cause["last_seen"], cause
    ranks = [{"P0": 0, "P1": 1, "P2": 2, "P3": 3}[c["priority"]] for c in causes]
    assert ranks == sorted(ranks), "most urgent first"
    sweep = status["last_sweep"]
    assert sweep["status"] in ("complete", "partial")
    records = sorted(swept.store().query(cluster_key(swept.region, cluster), SWEEP), key=lambda r: r["started_at"])
    assert sweep["sweep_id"] == records[-1]["sweep_id"], "the newest of the two sweeps"
    assert sweep["coverage"]["nodes_total"] == len(swept.simulation.scenario.node_keys())

    text = cli("status", "--cluster", cluster, *_where(swept))
    assert text.code == 0 and f"{len(causes)} open root causes:" in text.stdout
    assert text.stdout.index(causes[0]["title"]) < text.stdout.index(causes[-1]["title"])


def _faulty_gpu(swept: LocalMonitor) -> tuple[str, str, str]:
    """(instance id, GPU serial, check id) of a finding the sweeps stored that names a GPU."""
    cluster = swept.simulation.scenario.cluster.name
    for item in swept.store().open_findings(swept.region, cluster):
        finding = json.loads(item["finding"])
        gpus = [r["id"] for r in finding["resources"] if r["kind"] == "gpu"]
        nodes = [r["id"] for r in finding["resources"] if r["kind"] == "node"]
        if gpus and nodes:
            return nodes[0], gpus[0], finding["check_id"]
    raise AssertionError("eks-p5 plants GPU faults (Xid, ECC, row remap): some finding must name its GPU")


def test_history_of_a_node_and_of_its_faulty_gpu(swept: LocalMonitor, cli) -> None:  # type: ignore[no-untyped-def]
    node, serial, check_id = _faulty_gpu(swept)
    by_node = cli("history", "--node", node, *_where(swept), "--format", "json")
    assert by_node.code == 0, by_node.stderr
    faults = json.loads(by_node.stdout)["faults"]
    assert check_id in {f["check_id"] for f in faults}
    assert len({f["sweep_id"] for f in faults}) == 2, "one entry per sweep that saw it"
    assert [f["seen_at"] for f in faults] == sorted(f["seen_at"] for f in faults), "oldest first"

    by_gpu = cli("history", "--gpu", serial, *_where(swept), "--format", "json")
    gpu_faults = json.loads(by_gpu.stdout)["faults"]
    assert check_id in {f["check_id"] for f in gpu_faults}
    assert {f["cluster"] for f in gpu_faults} == {swept.simulation.scenario.cluster.name}

    clean = cli("history", "--gpu", "0000000000000", *_where(swept))
    assert clean.code == 0 and "no fault recorded" in clean.stdout


def test_a_gpus_history_follows_it_across_a_node_replacement(swept: LocalMonitor, cli) -> None:  # type: ignore[no-untyped-def]
    # The GPU a sweep found faulty on node A is found again, by a later sweep, in node B (A was
    # replaced and the board moved): the later sighting is written by the monitor's own write path
    # (Store.add_fault_history, what the Aggregate state calls) with the stored finding re-homed.
    from datetime import UTC, datetime, timedelta

    from hyperpod_nccl.models.findings import Finding
    from hyperpod_nccl.monitor.payloads import SweepRef

    node_a, serial, check_id = _faulty_gpu(swept)
    cluster, store = swept.simulation.scenario.cluster.name, swept.store()
    named = {("gpu", serial), ("node", node_a)}
    [stored, *_] = [
        finding
        for finding in (
            Finding.model_validate_json(str(i["finding"])) for i in store.open_findings(swept.region, cluster)
        )
        if {(r.kind, r.id) for r in finding.resources} >= named
    ]
    node_b = "i-0b0b0b0b0b0b0b0b0"
    moved = stored.model_copy(
        update={"resources": [r.model_copy(update={"id": node_b}) if r.kind == "node" else r for r in stored.resources]}
    )
    later = SweepRef(
        sweep_id="sweep-after-replacement",
        execution="sweep-after-replacement",
        cluster=cluster,
        region=swept.region,
        started_at=datetime.now(UTC) + timedelta(minutes=5),
    )
    store.add_fault_history(later, {moved.fingerprint: moved}, expires_at=int(later.started_at.timestamp()) + 3600)

    def history(*subject: str) -> list[dict[str, str]]:
        run = cli("history", *subject, *_where(swept), "--format", "json")
        assert run.code == 0, run.stderr
        return list(json.loads(run.stdout)["faults"])

    faults = history("--gpu", serial)
    on_a = {f["sweep_id"] for f in history("--node", node_a)}
    on_b = history("--node", node_b)
    assert [f["sweep_id"] for f in on_b] == ["sweep-after-replacement"] and "sweep-after-replacement" not in on_a
    # Both nodes' sightings of the GPU, oldest first: the sweeps on A, then the one on B.
    assert [f["sweep_id"] for f in faults][-1] == "sweep-after-replacement", faults
    assert {f["sweep_id"] for f in faults[:-1]} & on_a, "the sightings on node A are listed too"
    assert all(f["check_id"] == check_id for f in faults if f["sweep_id"] in on_a | {"sweep-after-replacement"})
    text = cli("history", "--gpu", serial, *_where(swept))
    assert f"GPU {serial}: {len(faults)} faults recorded, oldest first" in text.stdout, text.stdout
    assert text.stdout.count("sweep sweep-after-replacement") == 1


def _stack(deployed: LocalMonitor, name: str, outputs: dict[str, str]) -> None:
    """A CloudFormation stack in the emulation that carries the monitor stack's outputs."""
    template: dict[str, Any] = {
        "Resources": {"Marker": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    deployed.client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))


# moto creates no WaitConditionHandle (it says so): the stack only needs to carry its outputs.
@pytest.mark.filterwarnings("ignore:Tried to parse AWS")
def test_status_finds_the_table_and_the_clusters_from_the_stack(swept: LocalMonitor, cli) -> None:  # type: ignore[no-untyped-def]
    cluster = swept.simulation.scenario.cluster.name
    watched = json.dumps([{"name": cluster, "region": swept.region}])
    _stack(swept, "MyMonitor", {STACK_OUTPUT_TABLE: TABLE_NAME, STACK_OUTPUT_WATCHED_CLUSTERS: watched})
    run = cli("status", "--stack", "MyMonitor", "--region", swept.region, "--format", "json")
    assert run.code == 0, run.stderr
    assert [c["cluster"] for c in json.loads(run.stdout)["clusters"]] == [cluster]


@pytest.mark.parametrize(
    ("arguments", "told"),
    [
        (["--stack", "NoSuchStack"], "no stack NoSuchStack in us-west-2"),
        (["--table", "no-such-table", "--cluster", "c1"], "no table no-such-table in this region"),
        (["--table", "x"], "invalid table"),
    ],
    ids=["unknown-stack", "unknown-table", "invalid-table"],
)
def test_a_monitor_that_cannot_be_found_is_one_line(cli, arguments: list[str], told: str) -> None:  # type: ignore[no-untyped-def]
    run = cli("status", *arguments, "--region", "us-west-2")
    assert run.code in (1, 2) and told in run.messages, run.stderr
    assert len(run.messages.strip().splitlines()) == 1 and "Traceback" not in run.stderr


def test_stored_text_is_escaped_in_the_terminal(swept: LocalMonitor, cli) -> None:  # type: ignore[no-untyped-def]
    # A title is built from cluster text: a stored one carrying a terminal escape prints escaped
    # (a copy of a GPU's fault under a serial of its own, so the other tests' items stay as stored).
    _, serial, _ = _faulty_gpu(swept)
    store = swept.store()
    forged = {**store.fault_history("gpu", serial)[0], "title": "GPU \x1b[2J fault\nforged line"}
    forged[PARTITION_KEY] = f"{GPU}9999999999999"
    store.table.put_item(Item={k: v for k, v in forged.items() if k not in ("seen_at", "sweep_id")})
    run = cli("history", "--gpu", "9999999999999", *_where(swept))
    assert run.code == 0, run.stderr
    assert "\x1b" not in run.stdout and "\\x1b[2J" in run.stdout and "\\nforged line" in run.stdout


def test_sweep_now_starts_one_sweep_through_the_trigger_and_only_of_a_watched_cluster(simulate, cli) -> None:  # type: ignore[no-untyped-def]
    with LocalMonitor(simulate("healthy-eks"), node_coverage=2) as deployed:
        cluster, function = deployed.simulation.scenario.cluster.name, deployed.function_arns["trigger"]
        target = ["--region", deployed.region, "--function", function]
        run = cli("sweep-now", "--cluster", cluster, *target)
        assert run.code == 0, run.stderr
        # (The emulated trigger's own log lines reach this process's stdout too, as Lambda's logs.)
        match = re.search(rf"^{cluster}: sweep started \(sweep (?P<sweep>[\w-]+)\)$", run.stdout, re.MULTILINE)
        assert match, run.stdout
        swept = deployed.wait(deployed.execution_arn(match["sweep"]))
        assert swept.status == "SUCCEEDED" and len(deployed.executions()) == 1
        [record] = deployed.store().query(cluster_key(deployed.region, cluster), SWEEP)
        assert record["sweep_id"] == match["sweep"]
        # The trigger sweeps only what the stack watches, whoever asks.
        other = cli("sweep-now", "--cluster", "not-watched", *target)
        assert other.code == 2 and "names unwatched cluster(s): 'not-watched'" in other.messages
        assert len(deployed.executions()) == 1


# moto creates no WaitConditionHandle (it says so): the stack only needs to carry its outputs.
@pytest.mark.filterwarnings("ignore:Tried to parse AWS")
def test_sweep_now_finds_the_trigger_from_the_stack_outputs(simulate, cli) -> None:  # type: ignore[no-untyped-def]
    with LocalMonitor(simulate("healthy-eks"), node_coverage=2) as deployed:
        cluster = deployed.simulation.scenario.cluster.name
        # What CloudFormation puts there: the function's name (a Ref), not its ARN.
        function = deployed.function_arns["trigger"].rsplit(":", 1)[-1]
        _stack(deployed, "SweepNowMonitor", {STACK_OUTPUT_TRIGGER_FUNCTION: function, STACK_OUTPUT_TABLE: TABLE_NAME})
        run = cli("sweep-now", "--cluster", cluster, "--stack", "SweepNowMonitor", "--region", deployed.region)
        assert run.code == 0, run.stderr
        match = re.search(rf"^{cluster}: sweep started \(sweep (?P<sweep>[\w-]+)\)$", run.stdout, re.MULTILINE)
        assert match, run.stdout
        assert deployed.wait(deployed.execution_arn(match["sweep"])).status == "SUCCEEDED"
        assert len(deployed.executions()) == 1
        # A stack without the output is told, and nothing is invoked.
        _stack(deployed, "SweepNowNoTrigger", {STACK_OUTPUT_TABLE: TABLE_NAME})
        missing = cli("sweep-now", "--cluster", cluster, "--stack", "SweepNowNoTrigger", "--region", deployed.region)
        told = f"stack SweepNowNoTrigger has no {STACK_OUTPUT_TRIGGER_FUNCTION} output"
        assert missing.code == 1 and told in missing.messages, missing.stderr
        assert len(deployed.executions()) == 1
