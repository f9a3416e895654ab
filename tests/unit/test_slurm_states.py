"""Slurm node states as Slurm defines them (issue 17, point 4): every state sinfo can print is read,
one finding per node whatever its partitions, and a node drained for a missing GPU is a GPU fault."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hyperpod_nccl.checks import discover
from hyperpod_nccl.models.cluster import ClusterNode, ControlPlaneInventory
from hyperpod_nccl.models.findings import Priority, Status
from hyperpod_nccl.models.node_probe import NodeProbeResult, SlurmControllerData, SlurmNodeState
from hyperpod_nccl.probe import script
from hyperpod_nccl.probe.parsers import parse_sinfo, parse_slurm_controller
from hyperpod_nccl.references import NODE_GPU, OPS_SLURM
from hyperpod_nccl.slurm_states import BASE_STATES, FLAGS, SlurmCondition, read_state
from hyperpod_nccl.verdict.kinds import classify
from tests.builders import inventory, probed

CHECKS = discover()
CONTROLLER = "i-0c0c0c0c0c0c0c0c0"

# Every name SchedMD/slurm's src/common/slurm_protocol_defs.c (commit 284c3b95) prints:
# node_state_string() (what `sinfo -o %T` lower-cases) ...
LONG_NAMES = [
    "INVAL",
    "MAINT",
    "REBOOT",
    "DRAINING",
    "DRAINED",
    "FAILING",
    "FAIL",
    "REBOOT_ISSUED",
    "CANCEL_REBOOT",
    "CLOUD",
    "EXTERNAL",
    "POWER_DOWN",
    "POWER_UP",
    "POWERING_DOWN",
    "POWERED_DOWN",
    "POWERING_UP",
    "UNDRAIN",
    "DYNAMIC_FUTURE",
    "DYNAMIC_NORM",
    "DOWN",
    "ALLOCATED",
    "COMPLETING",
    "FUTURE",
    "IDLE",
    "MIXED",
    "PLANNED",
    "RESERVED",
    "RESUME",
    "UNKNOWN",
    "BLOCKED",
]
# ... and node_state_string_compact() (`%t`, and what people paste).
COMPACT_NAMES = [
    "ALLOC",
    "BLOCK",
    "BOOT",
    "CANC_R",
    "CLOUD",
    "COMP",
    "DOWN",
    "DRAIN",
    "DRNG",
    "EXT",
    "FAIL",
    "FAILG",
    "FUTR",
    "IDLE",
    "INVAL",
    "MAINT",
    "MIX",
    "PLND",
    "POWERED_DN",
    "POWERING_UP",
    "POWRING_DN",
    "POW_DN",
    "POW_UP",
    "RESM",
    "RESV",
    "UNK",
]
# The suffixes of sinfo(1), NODE STATE CODES.
SUFFIXES = "*~#!%$@^-+"


@pytest.mark.parametrize("name", sorted(set(LONG_NAMES + COMPACT_NAMES)))
def test_every_state_slurm_prints_is_in_the_table(name: str) -> None:
    assert name.lower() in BASE_STATES
    assert read_state(name.lower()).condition is not SlurmCondition.NOT_UNDERSTOOD


def test_every_suffix_is_read_and_only_ever_makes_a_state_worse() -> None:
    assert set(FLAGS) == set(SUFFIXES)
    order = list(SlurmCondition)
    for base, (condition, _) in BASE_STATES.items():
        for flag in SUFFIXES:
            flagged = read_state(base + flag)
            assert flagged.condition is not SlurmCondition.NOT_UNDERSTOOD
            assert order.index(flagged.condition) >= order.index(condition), base + flag
    assert read_state("idle*").condition is SlurmCondition.UNUSABLE  # not responding
    assert read_state("drained*").condition is SlurmCondition.UNUSABLE
    assert read_state("mixed-").condition is SlurmCondition.USABLE  # planned by the backfill scheduler


@pytest.mark.parametrize(
    "state, condition",
    [
        ("inval", SlurmCondition.UNUSABLE),  # registered with fewer resources than configured
        ("unknown", SlurmCondition.UNDETERMINED),
        ("fail", SlurmCondition.UNUSABLE),
        ("maint", SlurmCondition.TRANSITION),
        ("reboot^", SlurmCondition.TRANSITION),
        ("planned", SlurmCondition.USABLE),
        ("drain", SlurmCondition.DRAINED),  # the compact form of DRAINED
        ("bogus", SlurmCondition.NOT_UNDERSTOOD),
        ("idle extra", SlurmCondition.NOT_UNDERSTOOD),
    ],
)
def test_states_the_old_substring_test_misread(state: str, condition: SlurmCondition) -> None:
    assert read_state(state).condition is condition


def _inventory(rows: list[str], nodes: list[ClusterNode] | None = None):  # type: ignore[no-untyped-def]
    slurm = SlurmControllerData(nodes=parse_sinfo(rows))
    result = NodeProbeResult(
        instance_id=CONTROLLER, reachable=True, instance_group="controller", role="slurm_controller", slurm=slurm
    )
    return inventory(node_probes=probed([result]), control_plane=ControlPlaneInventory(nodes=nodes or [])).model_copy(
        update={"orchestrator": "slurm"}
    )


def _states(rows: list[str]):  # type: ignore[no-untyped-def]
    return CHECKS["slurm.node_states"].run(_inventory(rows))


def test_a_node_in_two_partitions_is_one_row() -> None:
    # HyperPod puts a node in its group's partition and the default one: sinfo -N prints it twice.
    findings = _states(
        ["ip-10-1-0-15|ip-10-1-0-15|10.1.0.15|down*|Not responding"] * 2
        + ["ip-10-1-0-16|ip-10-1-0-16|10.1.0.16|idle|none"] * 2
    )
    assert [(f.status, f.title) for f in findings] == [
        (Status.FAIL, "Slurm node ip-10-1-0-15 is down*: Not responding"),
        (Status.PASS, "1 Slurm node(s) in a usable state"),
    ]


def test_each_condition_has_its_status() -> None:
    findings = _states(
        [
            "a|a||inval|Low RealMemory (reported:1000 < 100.00% of configured:2000)",
            "b|b||unknown|none",
            "c|c||reboot^|Reboot ASAP",
            "d|d||drained|Kill task failed",
            "e|e||bogus|none",
        ]
    )
    by_node = {f.resources[0].id: (f.status, f.priority) for f in findings}
    assert by_node == {
        "a": (Status.FAIL, Priority.P1),
        "b": (Status.WARN, Priority.P2),
        "c": (Status.INFO, None),
        "d": (Status.WARN, Priority.P1),
        "e": (Status.WARN, Priority.P2),
    }
    assert all(f.status is not Status.PASS for f in findings)  # none of them counts as usable


def test_a_node_drained_for_a_missing_gpu_fails_at_the_gpu_section() -> None:
    # slurmctld's reason, src/interfaces/gres.c: "%s count reported lower than configured (%lu < %lu)"
    node = ClusterNode(
        instance_id="i-0f1e2d3c4b5a69788",
        instance_group="worker",
        instance_type="ml.p5.48xlarge",
        status="Running",
        private_dns_hostname="ip-10-1-0-17.us-west-2.compute.internal",
    )
    rows = ["ip-10-1-0-17|ip-10-1-0-17|10.1.0.17|drained|gres/gpu count reported lower than configured (7 < 8)"]
    (finding,) = CHECKS["slurm.node_states"].run(_inventory(rows, [node]))
    assert (finding.status, finding.reference) == (Status.FAIL, NODE_GPU)
    assert (finding.fields["gpus_found"], finding.fields["gpus_configured"]) == (7, 8)
    assert "i-0f1e2d3c4b5a69788" in finding.title
    assert classify(finding) == "gpu_hardware"
    # an ordinary drain stays a Slurm question
    (drain,) = _states(["x|x||drained|Kill task failed"])
    assert drain.reference == OPS_SLURM and classify(drain) == "slurm_node_state"


def test_a_hostile_state_or_reason_is_data_not_a_command() -> None:
    (finding,) = _states(["n1|n1||$(reboot)|`id`; reboot"])
    assert finding.status is Status.WARN and finding.fields["condition"] == "not_understood"
    assert not finding.suggested_commands
    assert SlurmNodeState(name="n1", state="$(reboot)").state == "$(reboot)"  # kept as text, shown escaped


# --- the controller's `scontrol ping`: retried, and an empty or missing answer said -----------------
def _ping_block(path_dir: Path) -> str:
    text = script("slurm_controller")
    start, stop = text.index("begin slurm_ping"), text.index('end slurm_ping "$ping_rc"')
    head = text[: text.index("begin slurm_ping")].split("\n# slurmctld may be")[0]
    return f'{head}\nexport PATH="{path_dir}:$PATH"\n{text[start:stop]}end slurm_ping "$ping_rc"\n'


def _fake(path_dir: Path, name: str, body: str) -> None:
    tool = path_dir / name
    tool.write_text(f"#!/bin/bash\n{body}\n", encoding="utf-8")
    tool.chmod(0o755)


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_scontrol_ping_is_asked_again_until_slurmctld_answers(tmp_path: Path) -> None:
    # slurmctld restarting: DOWN twice, then UP (the probe's own lines, with scontrol and sleep faked)
    count = tmp_path / "count"
    _fake(
        tmp_path,
        "scontrol",
        f"n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo $n > {count}\n"
        'if [ "$n" -lt 3 ]; then echo "Slurmctld(primary) at ctl is DOWN"; exit 1; fi\n'
        'echo "Slurmctld(primary) at ctl is UP"',
    )
    _fake(tmp_path, "sleep", "exit 0")
    run = subprocess.run(["bash", "-c", _ping_block(tmp_path)], capture_output=True, text=True, check=False)
    slurm = parse_slurm_controller(run.stdout)
    assert slurm.ping_attempts == 3 and [c.state for c in slurm.controllers] == ["UP"], run.stdout + run.stderr
    (finding,) = CHECKS["slurm.controller"].run(_controller_inventory(slurm))
    assert finding.status is Status.PASS and "asked 3 time(s)" in finding.evidence[1]


def _controller_inventory(slurm: SlurmControllerData):  # type: ignore[no-untyped-def]
    result = NodeProbeResult(
        instance_id=CONTROLLER, reachable=True, instance_group="controller", role="slurm_controller", slurm=slurm
    )
    return inventory(node_probes=probed([result])).model_copy(update={"orchestrator": "slurm"})


def test_a_missing_scontrol_or_an_empty_answer_is_said() -> None:
    missing = parse_slurm_controller(
        "@@BEGIN slurm_ping\nattempt 1\nbash: line 1: scontrol: command not found\n@@END slurm_ping rc=127\n"
    )
    (finding,) = CHECKS["slurm.controller"].run(_controller_inventory(missing))
    assert finding.status is Status.INFO and finding.title.startswith("scontrol not found")
    silent = parse_slurm_controller("@@BEGIN slurm_ping\nattempt 1\nattempt 2\nattempt 3\n@@END slurm_ping rc=1\n")
    (finding,) = CHECKS["slurm.controller"].run(_controller_inventory(silent))
    assert finding.status is Status.INFO and "no answer after 3 attempt(s)" in finding.title


def _env_findings(lines: list[str]):  # type: ignore[no-untyped-def]
    return CHECKS["slurm.nccl_env"].run(_controller_inventory(SlurmControllerData(nccl_env=lines)))


def test_the_slurm_environment_files_audit() -> None:
    # original Check 7 [Slurm]: TRACE → P0, INFO → P1, FI_PROVIDER=efa / NCCL_SOCKET_IFNAME missing → warn
    trace = _env_findings(["export NCCL_DEBUG=TRACE", "export FI_PROVIDER=efa", "export NCCL_SOCKET_IFNAME=^lo"])
    assert [(f.status, f.priority) for f in trace if f.is_issue] == [(Status.WARN, Priority.P0)]
    missing = _env_findings(["export NCCL_DEBUG=WARN", "export FI_PROVIDER=tcp"])
    warned = {f.fields["signature"]: f for f in missing if f.status is Status.WARN}
    assert set(warned) == {"FI_PROVIDER", "NCCL_SOCKET_IFNAME"}
    assert "'tcp', not efa" in warned["FI_PROVIDER"].title and warned["FI_PROVIDER"].priority is Priority.P2
    # nothing in the files: normal (jobs set their own), said as INFO, no warning
    nothing = _env_findings([])
    assert [f.status for f in nothing if f.is_issue] == [] and nothing[0].title.startswith("no NCCL/FI variable")
