"""The plan per root cause (issue 14, point 5): the safe order, nothing manual for a node HyperPod
is recovering, the fault's own action, never a destructive step for a P2, 25 ids per call."""

from __future__ import annotations

import shlex
import subprocess

from hyperpod_nccl import suggested
from hyperpod_nccl.models.findings import Finding, Priority, Resource, Status
from hyperpod_nccl.references import NODE_HARDWARE, PERF_FI_PING
from hyperpod_nccl.verdict import build_verdict
from hyperpod_nccl.verdict.plan import NODE_IDS_PER_CALL, PlanContext

LADDER = ["investigate", "drain", "job", "reboot", "recheck", "replace", "resume"]


def _xid(node: str, code: int) -> Finding:
    return Finding(
        check_id="node.gpu_xid",
        status=Status.FAIL,
        priority=Priority.P0,
        title=f"Xid {code} on {node}",
        resources=[Resource(kind="node", id=node)],
        reference=NODE_HARDWARE,
        fields={"xid": code},
    )


def _context(**kwargs: object) -> PlanContext:
    defaults: dict[str, object] = {"cluster": "ml-train", "region": "us-west-2", "orchestrator": "eks"}
    return PlanContext(**{**defaults, **kwargs})  # type: ignore[arg-type]


def _stages(plan: list) -> list[str]:  # type: ignore[type-arg]
    return [step.stage for step in plan]


def test_a_rebootable_fault_climbs_the_whole_ladder_in_the_safe_order() -> None:
    ctx = _context(k8s_name={"i-0aaa": "ip-10-1-0-1.ec2.internal"})
    cause = build_verdict([_xid("i-0aaa", 48)], context=ctx).root_causes[0]
    assert _stages(cause.plan) == LADDER
    by_stage = {step.stage: step for step in cause.plan}
    assert by_stage["replace"].conditional and "only if the recheck" in by_stage["replace"].description
    assert by_stage["drain"].command and "kubectl drain ip-10-1-0-1.ec2.internal" in by_stage["drain"].command
    assert by_stage["recheck"].command == "hyperpod-nccl diagnose --cluster ml-train --region us-west-2 --node i-0aaa"
    assert by_stage["resume"].command == "kubectl uncordon ip-10-1-0-1.ec2.internal"


def test_the_faults_own_action_decides_xid_79_is_replaced_not_rebooted() -> None:
    cause = build_verdict([_xid("i-0aaa", 79)], context=_context()).root_causes[0]
    assert "reboot" not in _stages(cause.plan)
    replace = next(step for step in cause.plan if step.stage == "replace")
    assert not replace.conditional and "own action is replace" in replace.description
    assert _stages(cause.plan) == ["investigate", "drain", "job", "replace", "recheck"]  # a new node: no resume


def test_nothing_manual_for_a_node_hyperpod_is_already_recovering() -> None:
    ctx = _context(automatic_recovery=True, recovering=frozenset({"i-0aaa"}))
    cause = build_verdict([_xid("i-0aaa", 79)], context=ctx).root_causes[0]
    assert _stages(cause.plan) == ["watch", "job"]
    commands = " ".join(step.command or "" for step in cause.plan)
    assert "batch-re" not in commands and "drain" not in commands
    assert "describe-cluster-node" in commands and "do not reboot or replace" in cause.plan[0].description


def test_slurm_nodes_are_drained_and_resumed_by_their_slurm_name() -> None:
    ctx = _context(orchestrator="slurm", slurm_name={"i-0aaa": "ip-10-1-0-15"})
    cause = build_verdict([_xid("i-0aaa", 48)], context=ctx).root_causes[0]
    commands = [step.command for step in cause.plan if step.command]
    assert "scontrol update nodename=ip-10-1-0-15 state=drain reason='hyperpod-nccl: gpu_hardware'" in commands
    assert "scontrol update nodename=ip-10-1-0-15 state=resume" in commands
    assert "--exclude=ip-10-1-0-15" in next(s.description for s in cause.plan if s.stage == "job")


def test_node_ids_are_batched_25_per_call_and_none_is_lost() -> None:
    nodes = [f"i-{n:017x}" for n in range(30)]
    finding = _xid(nodes[0], 48).model_copy(update={"resources": [Resource(kind="node", id=n) for n in nodes]})
    cause = build_verdict([finding], context=_context()).root_causes[0]
    reboots = [step.command or "" for step in cause.plan if step.stage == "reboot"]
    assert len(reboots) == 2
    named = [word for command in reboots for word in shlex.split(command) if word.startswith("i-")]
    assert named == nodes and len(shlex.split(reboots[0])) - shlex.split(reboots[0]).index("--node-ids") - 1 == (
        NODE_IDS_PER_CALL
    )


def test_a_p2_cause_never_gets_a_reboot_or_a_replacement() -> None:
    advisory = Finding(
        check_id="node.efa_latency",
        status=Status.WARN,
        priority=Priority.P2,
        title="EFA loopback latency 47 us",
        resources=[Resource(kind="node", id="i-0aaa")],
        reference=PERF_FI_PING,
        suggested_commands=[
            suggested.efa_pingpong_pair(None),
            suggested.batch_replace("ml-train", ["i-0aaa"], "us-west-2"),
        ],
    )
    cause = build_verdict([advisory], context=_context()).root_causes[0]
    assert cause.priority is Priority.P2
    assert cause.plan and not any("batch-re" in (step.command or "") for step in cause.plan)


def test_every_command_of_a_plan_is_shell_that_parses_even_with_hostile_names() -> None:
    hostile = "ip-10-1-0-1;rm -rf /"
    ctx = _context(k8s_name={"i-0aaa": hostile}, orchestrator="eks")
    cause = build_verdict([_xid("i-0aaa", 48)], context=ctx).root_causes[0]
    for step in cause.plan:
        if step.command:
            assert subprocess.run(["bash", "-n", "-c", step.command], check=False).returncode == 0, step.command
            assert hostile not in step.command.replace(shlex.quote(hostile), "")  # only ever quoted
