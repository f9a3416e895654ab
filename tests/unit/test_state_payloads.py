"""10,000 nodes within Step Functions' limits: every state's input and output the sweep definition
implies stays under the 256 KiB a state may carry, and a probe Map child ends inside the 5-minute
limit of an Express execution even when every node of its batch is held for the whole probe state.

The payloads are built from the models the handlers return, moved through the definition as its
paths select them (InputPath, Parameters/ItemSelector, ResultSelector, ResultPath, OutputPath and
each Catch's ResultPath), on every path through it. No sockets.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from hyperpod_nccl import thresholds
from hyperpod_nccl.aws_limits import (
    EXPRESS_EXECUTION_MAX_SECONDS,
    FAILURE_CAUSE_MAX_CHARS,
    FAILURE_ERROR_MAX_CHARS,
    STATE_PAYLOAD_MAX_BYTES,
)
from hyperpod_nccl.monitor import load_definition
from hyperpod_nccl.monitor.payloads import (
    AggregateOutput,
    DiscoverOutput,
    FirstRound,
    NotifyOutput,
    ProbeOutput,
    StepOutput,
    SweepRef,
    SweepState,
)
from hyperpod_nccl.monitor.settings import (
    ASL_FUNCTION_PLACEHOLDERS,
    ASL_MAP_CONCURRENCY_PLACEHOLDER,
    ASL_PROBE_TIMEOUT_PLACEHOLDER,
    DEFAULT_MAP_MAX_CONCURRENCY,
    EXPRESS_CHILD_OVERHEAD_SECONDS,
    PROBE_BATCH_CONCURRENCY,
    PROBE_BATCH_SIZE,
    PROBE_TIMEOUT_SECONDS,
    batch_targets,
    batches_at_once,
    express_child_worst_seconds,
)

NODES = 10_000
# HyperPod's longest cluster and instance group names (63 characters, the API model's pattern), a
# long region, an execution name of Step Functions' longest (80 characters).
CLUSTER = "c" * 63
REGION = "ap-southeast-5"
EXECUTION = "sweep-" + "e" * 74
# The largest failure a Catch can add to the state: the longest Error and Cause Step Functions keeps.
FAILURE = {"Error": "E" * FAILURE_ERROR_MAX_CHARS, "Cause": "c" * FAILURE_CAUSE_MAX_CHARS}

Json = Any
Record = Callable[[str, Json], Json]


def _definition() -> dict[str, Any]:
    values: dict[str, str | int] = {
        placeholder: f"arn:aws:lambda:{REGION}:123456789012:function:hyperpod-nccl-{module}-{'x' * 20}"
        for module, placeholder in ASL_FUNCTION_PLACEHOLDERS.items()
    }
    values[ASL_MAP_CONCURRENCY_PLACEHOLDER] = batches_at_once(DEFAULT_MAP_MAX_CONCURRENCY)
    values[ASL_PROBE_TIMEOUT_PLACEHOLDER] = PROBE_TIMEOUT_SECONDS
    return load_definition(values)


def _instance_ids(count: int) -> list[str]:
    # Real ids: "i-" and 17 hex digits.
    return [f"i-{0xF0000000000000000 + n * 7919:017x}" for n in range(count)]


def _sweep() -> SweepRef:
    # A follow-up sweep that folded many triggers: the largest reference the lock hands over.
    return SweepRef(
        sweep_id=f"{EXECUTION}-f3",
        execution=EXECUTION,
        cluster=CLUSTER,
        region=REGION,
        node=_instance_ids(1)[0],
        triggers=[f"trigger-{n:02d}-" + "t" * 60 for n in range(20)],
        reasons=[f"node-health event: {_instance_ids(1)[0]} Unhealthy in instance group {'g' * 63}"] * 20,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        follow_up=3,
        follow_up_of=f"{EXECUTION}-f2",
        after_failure=f"{EXECUTION}-f1",
    )


def _discover_output(count: int) -> DiscoverOutput:
    ids = _instance_ids(count)
    batches = batch_targets(ids)
    return DiscoverOutput(
        discovered=True,
        batches=batches,
        nodes=len(ids),
        first_round=FirstRound(paced_from=1_765_000_000.123456, batch_size=len(batches[0]), batches=64),
        orchestrator="eks",
    )


def _task_results(discover: DiscoverOutput) -> dict[str, Json]:
    """Each Task state's result (its Lambda's return value), by state name."""
    sweep = _sweep()
    aggregate = AggregateOutput(
        sweep_id=sweep.sweep_id,
        status="partial",
        notify=True,
        follow_up=True,
        next=sweep,
        changes=NODES,
        incident_changes=NODES,
        open_by_priority={"P0": NODES, "P1": NODES, "P2": NODES},
        nodes_probed=NODES,
        nodes_unreachable=NODES,
        duration_seconds=7200.0,
    )
    notify = NotifyOutput(published=True, message_id="m" * 100, reason="r" * 500, incident_messages=NODES)
    results = {
        "Discover": discover,
        "CollectLogs": StepOutput(source="logs", collected=True, degraded=100),
        "CollectKubernetes": StepOutput(source="kubernetes", collected=True, degraded=100),
        "ProbeNode": ProbeOutput(instance_id=_instance_ids(1)[0], reachable=True),
        "Aggregate": aggregate,
        "RecordAggregateFailure": aggregate,
        "Notify": notify,
    }
    return {name: model.model_dump(mode="json") for name, model in results.items()}


# --- the definition's paths, as Step Functions applies them --------------------------------------


def _select(path: str, data: Json, context: Json) -> Json:
    root, _, rest = path.partition(".") if not path.startswith("$$") else ("$$", "", path[3:])
    node = context if root == "$$" else data
    for key in filter(None, rest.split(".")):
        node = node[key]
    return node


def _template(template: Json, data: Json, context: Json) -> Json:
    if not isinstance(template, dict):
        return template
    return {
        (key[:-2] if key.endswith(".$") else key): (
            _select(value, data, context) if key.endswith(".$") else _template(value, data, context)
        )
        for key, value in template.items()
    }


def _place(result_path: str | None, raw: Json, result: Json) -> Json:
    if result_path is None:
        return raw
    keys = [k for k in result_path.split(".")[1:] if k]
    if not keys:
        return result
    combined = copy.deepcopy(raw)
    node = combined
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = result
    return combined


def _effective_input(state: dict[str, Any], raw: Json, context: Json) -> Json:
    input_path = state.get("InputPath", "$")
    selected = {} if input_path is None else _select(input_path, raw, context)
    if "Parameters" in state:
        return _template(state["Parameters"], selected, context)
    return selected


def _output(state: dict[str, Any], raw: Json, result: Json, context: Json) -> Json:
    if "ResultSelector" in state:
        result = _template(state["ResultSelector"], result, context)
    combined = _place(state.get("ResultPath", "$"), raw, result)
    if "OutputPath" in state and state["OutputPath"] is None:
        return {}
    return _select(state.get("OutputPath", "$"), combined, context)


def _matches(rule: dict[str, Any], data: Json) -> bool:
    """A Choice rule of the operators the definition uses."""
    if "And" in rule:
        return all(_matches(r, data) for r in rule["And"])
    try:
        value = _select(rule["Variable"], data, {})
    except (KeyError, TypeError):
        return rule.get("IsPresent") is False
    if "IsPresent" in rule:
        return bool(rule["IsPresent"])
    if "BooleanEquals" in rule:
        return bool(value == rule["BooleanEquals"])
    if "IsString" in rule:
        return isinstance(value, str) == rule["IsString"]
    raise AssertionError(f"Choice rule {rule} not modelled")


def _size(payload: Json) -> int:
    # json.dumps with its default separators: the Python runtime's serialisation of a Lambda's
    # return value, and never smaller than the compact form Step Functions may keep.
    return len(json.dumps(payload).encode())


def _largest(payloads: list[Json]) -> Json:
    return max(payloads, key=_size)


def _run(
    states: dict[str, Any], name: str, raw: Json, results: dict[str, Json], record: Record, seen: tuple[str, ...]
) -> list[Json]:
    """Every output the states from `name` on can end with given `raw`, each state's input, result
    and output recorded on the way; every Choice and every Catch followed."""
    state = states[name]
    context: Json = {}
    record(f"{name} input", raw)
    if name in seen:  # the follow-up loop back to Discover: its input is what mattered
        return []
    seen = (*seen, name)
    kind = state["Type"]
    if kind == "Choice":
        targets = [c["Next"] for c in state["Choices"] if _matches(c, raw)]
        targets = targets[:1] or [state["Default"]]
        return [out for target in targets for out in _run(states, target, raw, results, record, seen)]
    if kind in ("Succeed", "Fail"):
        return [raw]
    effective = record(f"{name} effective input", _effective_input(state, raw, context))
    if kind == "Task":
        result = results[name]
    elif kind == "Pass":
        result = state.get("Result", effective)
    elif kind == "Parallel":
        result = [
            _largest(_run(b["States"], b["StartAt"], effective, results, record, seen)) for b in state["Branches"]
        ]
    elif kind == "Map":
        items = _select(state["ItemsPath"], effective, context)
        if "MaxConcurrencyPath" in state:  # Step Functions fails the execution on a missing or non-integer value
            limit = _select(state["MaxConcurrencyPath"], effective, context)
            assert isinstance(limit, int) and limit >= 1, f"{name}: MaxConcurrencyPath gives {limit!r}"
        item = _largest(items)
        item_context = {"Map": {"Item": {"Value": item, "Index": len(items) - 1}}}
        child_input = record(f"{name} item", _template(state["ItemSelector"], effective, item_context))
        processor = state["ItemProcessor"]
        child = _largest(_run(processor["States"], processor["StartAt"], child_input, results, record, seen))
        result = [child] * len(items)
    else:
        raise AssertionError(f"state type {kind} not modelled")
    record(f"{name} result", result)
    output = record(f"{name} output", _output(state, raw, result, context))
    ends = [output] if state.get("End") else _run(states, state["Next"], output, results, record, seen)
    for catch in state.get("Catch", []):
        caught = _place(catch.get("ResultPath", "$"), raw, FAILURE)
        ends += _run(states, catch["Next"], caught, results, record, seen)
    return ends


def _sweep_payloads(discover: DiscoverOutput, carried: set[str] | None = None) -> dict[str, int]:
    """The largest size (bytes) of every payload of a sweep whose Discover returned `discover`;
    `carried` gets the payloads that hold the last node id of its batches."""
    sizes: dict[str, int] = {}
    marker = f'"{discover.batches[-1][-1]}"' if discover.batches else None

    def record(label: str, payload: Json) -> Json:
        text = json.dumps(payload)
        sizes[label] = max(sizes.get(label, 0), len(text.encode()))
        if carried is not None and marker is not None and marker in text:
            carried.add(label)
        return payload

    definition = _definition()
    start = {"sweep": _sweep().model_dump(mode="json")}
    _run(definition["States"], definition["StartAt"], start, _task_results(discover), record, ())
    return sizes


# The states of Collect's branches, which get the ids as their input and return {}.
_BRANCH_STATES = {
    "CollectLogs", "LogsNotCollected", "CollectKubernetes", "KubernetesNotCollected", "ProbeNodes",
}  # fmt: skip


# --- the tests ------------------------------------------------------------------------------------


def test_every_state_input_and_output_of_a_10000_node_sweep_fits_step_functions_limit() -> None:
    sizes = _sweep_payloads(_discover_output(NODES))
    over = {label: size for label, size in sizes.items() if size > STATE_PAYLOAD_MAX_BYTES}
    assert not over, f"over {STATE_PAYLOAD_MAX_BYTES} bytes at {NODES} nodes: {over}"
    # The walk reached every state a sweep passes through, the children's included.
    states = {label.rsplit(" ", 1)[0].removesuffix(" effective") for label in sizes}
    assert {"Discover", "Collect", "ProbeNodes", "ProbeBatch", "ProbeNode", "NodeUnreachable", "Aggregate"} <= states
    assert {"RecordAggregateFailure", "Notify", "NextSweep", "LogsNotCollected", "KubernetesNotCollected"} <= states


def test_the_state_carries_each_node_id_once_and_no_state_after_collect_carries_them() -> None:
    ids = _instance_ids(NODES)
    discover = _discover_output(NODES)
    text = discover.model_dump_json()
    assert all(text.count(f'"{i}"') == 1 for i in ids[:: NODES // 50])
    assert [i for batch in discover.batches for i in batch] == ids and discover.nodes == NODES
    carried: set[str] = set()
    sizes = _sweep_payloads(discover, carried)
    # Only Discover, Collect and the probe Map see the ids; Aggregate and every state after it never.
    states = {label.rsplit(" ", 1)[0].removesuffix(" effective") for label in carried}
    assert states == {"Discover", "CanCollect", "Collect", *_BRANCH_STATES}, states
    assert not {label for label in carried if label.endswith("output") and not label.startswith("Discover")}
    # Each Collect branch and each probe child returns nothing the next state needs (the parent Map
    # gathers every child's output into one result, under the same limit).
    assert sizes["ProbeBatch output"] == _size({}) and sizes["Collect result"] == _size([{}, {}, {}])
    # What Aggregate reads of the state after Collect still validates.
    after_collect = _place("$.discover", {"sweep": _sweep().model_dump(mode="json")}, {"discovered": True})
    assert SweepState.model_validate(after_collect).discover == DiscoverOutput(discovered=True)


def test_the_payload_check_sees_a_layout_over_the_limit() -> None:
    # The same walk fails a sweep whose ids are too many for one state (the check is not vacuous).
    sizes = _sweep_payloads(_discover_output(4 * NODES))
    assert max(sizes.values()) > STATE_PAYLOAD_MAX_BYTES


def test_an_express_child_ends_inside_five_minutes_with_every_node_held_for_the_whole_probe() -> None:
    # A batch's nodes all held for the whole probe state (its TimeoutSeconds, longer than the SSM
    # budget by the time to store what arrived), `concurrency` at a time, plus the child's overhead.
    assert PROBE_TIMEOUT_SECONDS >= thresholds.SSM_NODE_BUDGET_SECONDS
    worst = -(-PROBE_BATCH_SIZE // PROBE_BATCH_CONCURRENCY) * PROBE_TIMEOUT_SECONDS + EXPRESS_CHILD_OVERHEAD_SECONDS
    assert express_child_worst_seconds() == worst <= EXPRESS_EXECUTION_MAX_SECONDS
    # The definition probes a batch at the declared concurrency, each node within the declared timeout.
    probe_map = next(b for b in _definition()["States"]["Collect"]["Branches"] if b["StartAt"] == "ProbeNodes")
    child = probe_map["States"]["ProbeNodes"]["ItemProcessor"]
    assert child["ProcessorConfig"]["ExecutionType"] == "EXPRESS"
    batch = child["States"]["ProbeBatch"]
    assert batch["MaxConcurrency"] == PROBE_BATCH_CONCURRENCY
    assert batch["ItemProcessor"]["States"]["ProbeNode"]["TimeoutSeconds"] == PROBE_TIMEOUT_SECONDS
    assert max(len(b) for b in batch_targets(_instance_ids(NODES))) == PROBE_BATCH_SIZE


@pytest.mark.parametrize(("batch_size", "concurrency"), [(8, 2), (PROBE_BATCH_SIZE + 1, PROBE_BATCH_CONCURRENCY)])
def test_a_batch_that_takes_two_probe_rounds_would_outlive_an_express_child(batch_size: int, concurrency: int) -> None:
    assert express_child_worst_seconds(batch_size, concurrency) > EXPRESS_EXECUTION_MAX_SECONDS
