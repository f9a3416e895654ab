"""Step Functions limits the emulation enforces on top of moto's engine (`moto.stepfunctions.parser`),
each as AWS documents it, each switchable (`StepFunctionsLimits`, all on by default).

**Payloads (256 KiB).** AWS fails a state with `States.DataLimitExceeded` "when the output of a
connector is larger than payload size quota", "when the output of a state is larger than payload size
quota" and "when, after Parameters processing, the input of a state is larger than the payload size
quota"; it is "a terminal error that cannot be caught by the States.ALL error type" (Step Functions
Developer Guide, "Handling errors in Step Functions workflows", error names). The quota is
`aws_limits.STATE_PAYLOAD_MAX_BYTES` (service quotas, "Maximum input or output size for a task, state,
or execution"; the API reference's "Maximum length of 262144"): a payload of exactly that many bytes
passes, one byte more fails. Enforced here:

- a task's result: a Lambda task's response payload, a service integration's output;
- a state's output (after ResultSelector, ResultPath and OutputPath), which moto checks already,
  here against our bound;
- a state's input after Parameters (and a Map's ItemSelector, which is Parameters for each item);
- `States.ALL` in a Catch or a Retry no longer matches `States.DataLimitExceeded`, so the execution
  fails (the guide speaks of catching; a Retry on the wildcard is taken not to match it either); a
  Catch that names `States.DataLimitExceeded` itself still matches (the guide only rules out the
  wildcard) [unverified]. A Distributed Map child that exceeds the limit fails that child execution only;
- an error of a Parallel branch or an inline Map item reaches its state under its own name, as ASL
  says: moto turned any `States.*` error of a branch or item (this one, `States.Timeout`, ...) into
  `States.Runtime`. This fix is not switchable (it is no limit, only moto's bug).

A payload's size is the UTF-8 length of `json.dumps(value)` with Python's default separators (what
the Python Lambda runtime returns, and what `tests/unit/test_state_payloads.py` measures); a string
counts as itself, as moto counts one. [unverified] The exact serialisation AWS measures for state
input and output: a compact one would be a few percent smaller, so here the emulation errs strict.

**Express children (5 minutes).** An Express execution runs at most
`aws_limits.EXPRESS_EXECUTION_MAX_SECONDS` (Developer Guide, "Choosing workflow type": maximum
duration five minutes). moto's ASL grammar has no `EXPRESS` token, so a Distributed Map whose
`ProcessorConfig.ExecutionType` is `EXPRESS` could not even be created: the definition is now
accepted as AWS accepts it (stored and described unchanged) and rewritten to `STANDARD` only for
moto's parser, the Map remembered as having Express children. Each of its children is stopped
at `express_max_seconds` (configurable, so that a test can make it a few seconds): the child fails
with `States.Timeout` and counts as timed out in the Map Run (DescribeMapRun's `itemCounts.timedOut`);
the states it had not started never start, and a task already in flight (a Lambda invocation) runs
to its end with its result dropped, as in AWS, where stopping an execution does not stop the
invocations it made.

**Tolerated failures.** moto parses `ToleratedFailureCount`/`ToleratedFailurePercentage` and ignores
them, so a Distributed Map never failed for its children. AWS: "Step Functions calculates the
percentage of failed items as the result of the total number of failed or timed out items divided by
the total number of items"; the default percentage is zero ("the workflow fails if any one of its
child workflow executions fails or times out"); "if you specify both values, the workflow fails when
it exceeds either value"; the error is `States.ExceedToleratedFailureThreshold` (Developer Guide,
"Tolerated failure threshold for Distributed Map state"). Enforced once the Map Run has ended (AWS
may stop it earlier: its children then stop sooner, the outcome is the same).

Emulation gaps: a failed or timed-out child's place in the Map's result is null (moto's; what AWS
puts there is not documented); a child's history is not kept (moto runs children in-process, without
executions of their own), so DescribeMapRun's `executionCounts` stay moto's (only `itemCounts` say
timed out) and a child's own States.Timeout is seen nowhere but in that count; the failure cause
texts of the Express timeout, of an oversized input and of the threshold are ours (AWS's wording is
not documented); `States.Runtime`, which `States.ALL` cannot catch either, is still caught by it
here; StartExecution does not refuse an execution input over 256 KiB.

`install_stepfunctions_limits` installs it (once; `aws.install_moto_extensions` calls it). The rules
are read at each use, so `stepfunctions_limits_changed(...)` applies to executions already running.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

from hyperpod_nccl.aws_limits import EXPRESS_EXECUTION_MAX_SECONDS, STATE_PAYLOAD_MAX_BYTES

DATA_LIMIT_EXCEEDED = "States.DataLimitExceeded"
STATES_TIMEOUT = "States.Timeout"
EXCEED_TOLERATED_FAILURE_THRESHOLD = "States.ExceedToleratedFailureThreshold"


@dataclasses.dataclass(frozen=True)
class StepFunctionsLimits:
    """The rules in force (see the module docstring): each one can be turned off, which gives
    moto's own behaviour back; `express_max_seconds` is how long an Express child may run."""

    payload_limit: bool = True
    express_time_limit: bool = True
    express_max_seconds: float = EXPRESS_EXECUTION_MAX_SECONDS
    tolerated_failure_threshold: bool = True


_limits = StepFunctionsLimits()
_install_lock = threading.Lock()
_installed = False
# The attribute of a moto Distributed Map iteration component that holds its `_DistributedMap`.
_DISTRIBUTED_MAP_ATTRIBUTE = "_hyperpod_distributed_map"


def stepfunctions_limits() -> StepFunctionsLimits:
    """The rules in force now."""
    return _limits


def set_stepfunctions_limits(limits: StepFunctionsLimits) -> None:
    """Put `limits` in force (for every execution of the process, running ones included)."""
    global _limits
    _limits = limits


@contextlib.contextmanager
def stepfunctions_limits_changed(**changes: Any) -> Iterator[StepFunctionsLimits]:
    """`with stepfunctions_limits_changed(express_max_seconds=2):` the rules with `changes`, restored
    on exit."""
    previous = _limits
    changed = dataclasses.replace(previous, **changes)
    set_stepfunctions_limits(changed)
    try:
        yield changed
    finally:
        set_stepfunctions_limits(previous)


def payload_bytes(value: Any) -> int:
    """The size of a payload as this emulation counts it against STATE_PAYLOAD_MAX_BYTES."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return len(text.encode("utf-8"))


def install_stepfunctions_limits() -> None:
    """Patch moto's Step Functions engine with the rules of this module. Idempotent."""
    global _installed
    with _install_lock:
        if _installed:
            return
        _patch_parser()
        _patch_express_children()
        _patch_tolerated_failures()
        _patch_payload_limit()
        _installed = True


# --- the definition: Express children accepted, Distributed Maps remembered ---------------------------


@dataclasses.dataclass(frozen=True)
class _DistributedMap:
    """What the definition says of one Distributed Map that moto's parsed program does not keep."""

    express: bool
    count_declared: bool
    percentage_declared: bool


def _distributed_maps(states: Any, found: dict[str, _DistributedMap]) -> None:
    """Collect the Distributed Maps of a `States` object (at any depth) by state name (unique in a
    whole state machine, ASL), rewriting EXPRESS children to STANDARD in place for moto's parser."""
    if not isinstance(states, dict):
        return
    for name, state in states.items():
        if not isinstance(state, dict):
            continue
        for branch in state.get("Branches") or []:
            if isinstance(branch, dict):
                _distributed_maps(branch.get("States"), found)
        processor = state.get("ItemProcessor", state.get("Iterator"))
        if state.get("Type") != "Map" or not isinstance(processor, dict):
            continue
        config = processor.get("ProcessorConfig")
        if isinstance(config, dict) and config.get("Mode") == "DISTRIBUTED":
            express = config.get("ExecutionType") == "EXPRESS"
            if express:
                config["ExecutionType"] = "STANDARD"
            found[name] = _DistributedMap(
                express=express,
                count_declared=bool({"ToleratedFailureCount", "ToleratedFailureCountPath"} & state.keys()),
                percentage_declared=bool(
                    {"ToleratedFailurePercentage", "ToleratedFailurePercentagePath"} & state.keys()
                ),
            )
        _distributed_maps(processor.get("States"), found)


def _mark_distributed_maps(program: Any, maps: dict[str, _DistributedMap]) -> None:
    """Attach each Distributed Map's `_DistributedMap` to its iteration component in moto's program."""
    from moto.stepfunctions.parser.asl.component.component import Component
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.distributed_iteration_component import (
        DistributedIterationComponent,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.state_map import StateMap

    seen: set[int] = set()
    pending: list[Any] = [program]
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, StateMap) and node.name in maps:
            component = getattr(node, "iteration_component", None)
            if isinstance(component, DistributedIterationComponent):
                setattr(component, _DISTRIBUTED_MAP_ATTRIBUTE, maps[node.name])
        for value in vars(node).values():
            members = (
                value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else [value]
            )
            pending.extend(member for member in members if isinstance(member, Component))


def _patch_parser() -> None:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    parse = AmazonStateLanguageParser.parse

    def parse_accepting_express(definition: str) -> Any:
        try:
            parsed = json.loads(definition)
        except ValueError:
            return parse(definition)  # moto's own syntax error
        maps: dict[str, _DistributedMap] = {}
        if isinstance(parsed, dict):
            _distributed_maps(parsed.get("States"), maps)
        loadable = json.dumps(parsed) if any(found.express for found in maps.values()) else definition
        program, tree = parse(loadable)
        _mark_distributed_maps(program, maps)
        return program, tree

    AmazonStateLanguageParser.parse = staticmethod(parse_accepting_express)  # type: ignore[method-assign]


def _distributed_map(component: Any) -> _DistributedMap | None:
    found = getattr(component, _DISTRIBUTED_MAP_ATTRIBUTE, None)
    return found if isinstance(found, _DistributedMap) else None


# --- Express children: stopped at the Express limit ------------------------------------------------------


def _patch_express_children() -> None:
    from moto.stepfunctions.parser.api import ExecutionFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import EvalTimeoutError
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent
    from moto.stepfunctions.parser.asl.component.program.program import Program
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.distributed_iteration_component import (
        DistributedIterationComponent,
    )
    from moto.stepfunctions.parser.utils import TMP_THREADS

    class ExpressChildProgram(Program):
        """One child execution of a Distributed Map with Express children."""

        def eval(self, env: Any) -> None:
            limits = _limits
            if not limits.express_time_limit:
                super().eval(env)
                return
            # As Program.eval, with the Express limit as the timeout; a child is a frame of the
            # parent's environment, so moto's own execution timeout would only end it as "timed out"
            # and let the parent count it a success.
            env.next_state_name = self.start_at.start_at_name
            child = threading.Thread(target=EvalComponent.eval, args=(self, env), name="express-child", daemon=True)
            TMP_THREADS.append(child)
            child.start()
            child.join(timeout=limits.express_max_seconds)
            if child.is_alive():
                # The error stops the child at its next state; the worker counts it as timed out.
                env.set_error(
                    ExecutionFailedEventDetails(
                        error=STATES_TIMEOUT,
                        cause=f"The Express execution ran longer than {limits.express_max_seconds:g} seconds.",
                    )
                )
                raise EvalTimeoutError()

    iteration_program = DistributedIterationComponent._get_iteration_program

    def express_aware_iteration_program(self: Any) -> Any:
        program = iteration_program(self)
        found = _distributed_map(self)
        if found is None or not found.express:
            return program
        return ExpressChildProgram(
            query_language=program.query_language,
            start_at=program.start_at,
            states=program.states,
            timeout_seconds=None,
            comment=program.comment,
        )

    component: Any = DistributedIterationComponent
    component._get_iteration_program = express_aware_iteration_program


# --- Distributed Map: the tolerated failure threshold ----------------------------------------------------


def _exceeds_tolerance(
    failed: int, total: int, found: _DistributedMap, tolerated_count: int, tolerated_percentage: float
) -> bool:
    """Whether `failed` (failed or timed out) of `total` items fail the Map Run (module docstring)."""
    if failed == 0:
        return False
    exceeded: list[bool] = []
    if found.count_declared:
        exceeded.append(failed > tolerated_count)
    if found.percentage_declared:
        exceeded.append(total > 0 and failed * 100.0 / total > tolerated_percentage)
    # Neither declared: the default percentage, zero.
    return any(exceeded) if exceeded else True


def _patch_tolerated_failures() -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.distributed_iteration_component import (
        DistributedIterationComponent,
    )

    map_run = DistributedIterationComponent._map_run

    def map_run_within_tolerance(self: Any, env: Any, eval_input: Any) -> None:
        map_run(self, env, eval_input)
        found = _distributed_map(self)
        if found is None or not _limits.tolerated_failure_threshold:
            return
        items = eval_input.map_run_record.item_counter
        failed = items.failed.get() + items.timed_out.get()
        total = items.total.get()
        count, percentage = eval_input.tolerated_failure_count, eval_input.tolerated_failure_percentage
        if not _exceeds_tolerance(failed, total, found, count, percentage):
            return
        cause = (
            f"{failed} of {total} items failed or timed out, more than the Map tolerates "
            f"(ToleratedFailureCount {count}, ToleratedFailurePercentage {percentage:g})."
        )
        raise _failure(env, EXCEED_TOLERATED_FAILURE_THRESHOLD, cause)

    DistributedIterationComponent._map_run = map_run_within_tolerance  # type: ignore[method-assign]


# --- payloads: 256 KiB, States.DataLimitExceeded not caught by States.ALL --------------------------------


def _patch_payload_limit() -> None:
    from moto.stepfunctions.parser import quotas
    from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
    from moto.stepfunctions.parser.asl.component.common.parargs import Parargs
    from moto.stepfunctions.parser.asl.component.state import state
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.item_selector import ItemSelector
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration import iteration_worker
    from moto.stepfunctions.parser.asl.component.state.exec.state_parallel import branches_decl
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import state_task_lambda
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service

    moto_within_quota = quotas.is_within_size_quota

    def within_payload_limit(value: Any) -> bool:
        if not _limits.payload_limit:
            return bool(moto_within_quota(value))
        return payload_bytes(value) <= STATE_PAYLOAD_MAX_BYTES

    # moto's checks of a state's output and of a task's result, each module holding its own import.
    for module in (state, state_task_lambda, state_task_service):
        module.is_within_size_quota = within_payload_limit  # type: ignore[attr-defined]

    # moto measures a Lambda task's whole Invoke response; the result is its payload.
    verify_lambda = state_task_lambda.StateTaskLambda._verify_size_quota

    def verify_lambda_payload(self: Any, env: Any, value: Any) -> None:
        if _limits.payload_limit and isinstance(value, dict) and "Payload" in value:
            value = value["Payload"]
        verify_lambda(self, env, value)

    state_task_lambda.StateTaskLambda._verify_size_quota = verify_lambda_payload  # type: ignore[method-assign]

    for component in (Parargs, ItemSelector):
        component._eval_body = _checking_input_size(component._eval_body)  # type: ignore[method-assign, assignment]

    # A branch's or an item's error reaches its Parallel or Map state under its own name (ASL); moto
    # names it with CustomErrorName, which refuses a "States." name: States.DataLimitExceeded (or any
    # States.* error) of a branch became a States.Runtime error instead.
    for module in (branches_decl, iteration_worker):
        module.CustomErrorName = _error_name_of(module.CustomErrorName)  # type: ignore[attr-defined]

    match = ErrorEqualsDecl._eval_body

    def match_unless_wildcard_on_data_limit(self: Any, env: Any) -> None:
        error_name = env.stack[-1]
        if (
            _limits.payload_limit
            and getattr(error_name, "error_name", None) == DATA_LIMIT_EXCEEDED
            and error_name not in self.error_names
        ):
            env.stack.pop()
            env.stack.append(False)
            return
        match(self, env)

    ErrorEqualsDecl._eval_body = match_unless_wildcard_on_data_limit  # type: ignore[method-assign]


def _error_name_of(custom_error_name: Callable[..., Any]) -> Callable[..., Any]:
    """moto's CustomErrorName, except that a "States." name it knows becomes its StatesErrorName."""
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName

    def error_name(error_name: str | None) -> Any:
        if error_name is not None and error_name.startswith("States."):
            with contextlib.suppress(ValueError):
                return StatesErrorName.from_name(error_name)
        return custom_error_name(error_name=error_name)

    return error_name


def _checking_input_size(evaluate: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    """`evaluate` (Parameters or ItemSelector, which leave the state's new input on the stack), failing
    the state with States.DataLimitExceeded when that input is over the limit."""

    def evaluate_checked(self: Any, env: Any) -> None:
        evaluate(self, env)
        if not _limits.payload_limit or not env.stack or payload_bytes(env.stack[-1]) <= STATE_PAYLOAD_MAX_BYTES:
            return
        name = (env.states.context_object.context_object_data.get("State") or {}).get("Name", "?")
        cause = (
            f"The state '{name}' has an input after Parameters processing with a size exceeding "
            "the maximum number of bytes service limit."
        )
        # As moto fails a state whose output is over the limit.
        raise _failure(env, DATA_LIMIT_EXCEEDED, cause, event_type="TaskFailed")

    return evaluate_checked


def _failure(env: Any, error: str, cause: str, event_type: str = "ExecutionFailed") -> Exception:
    """The exception by which moto's engine fails the current state with the States error `error`,
    recorded in the history as an `event_type` event if a Retry or Catch sees it."""
    from moto.stepfunctions.parser.api import ExecutionFailedEventDetails, HistoryEventType
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    details = ExecutionFailedEventDetails(error=error, cause=cause)
    return FailureEventException(
        failure_event=FailureEvent(
            env=env,
            error_name=StatesErrorName.from_name(error),
            event_type=HistoryEventType(event_type),
            event_details=EventDetails(executionFailedEventDetails=details),  # type: ignore[typeddict-item]
        )
    )
