"""Fault injection over every AWS operation, on both faces of the product.

CLI path: every operation a diagnosis makes is failed in turn with AccessDenied, throttling, a
5xx and a timeout. Whatever the fault, the diagnosis either aborts cleanly (only for the
prerequisites the skill names) or completes with the failed source reported as degraded and
the rest of the report intact.

State machine path: every operation a scheduled sweep of the serverless monitor makes (the
collectors inside the Lambdas, and the monitor's own DynamoDB, SNS and Step Functions calls) is
failed while the real state machine definition runs in the emulation. The execution completes
with a stored sweep record naming what failed (the IAM action when access was denied) and at
most one alert, or it fails or never starts with a cause that names the action.

The operations are declared (CLI_OPERATIONS, STATE_MACHINE_OPERATIONS) so that pytest-xdist can
spread one test per operation and fault; a test per path records a clean run in the emulation
and fails when the product starts or stops calling an operation. Each test checks its own cell
of docs/fault-matrix.md, which UPDATE_FAULT_MATRIX=1 rewrites (one renderer for the whole page).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hyperpod_nccl.checks import REGISTRY
from hyperpod_nccl.engine import diagnose
from hyperpod_nccl.errors import DiagnosisAborted
from hyperpod_nccl.handlers import AwsCallFailed
from hyperpod_nccl.models.findings import Coverage, Finding, Status
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.monitor import lambda_timeouts
from hyperpod_nccl.monitor.alert_messages import MAX_LISTED_RESOURCES, SNS_MESSAGE_MAX_BYTES, resource_ids
from hyperpod_nccl.monitor.diff import SweepDiff
from hyperpod_nccl.monitor.payloads import SweepRef
from hyperpod_nccl.monitor.settings import SCHEDULE_SOURCE
from hyperpod_nccl.monitor.states.notify import _keep_pending
from hyperpod_nccl.monitor.states.probe_node import load_probe_results
from hyperpod_nccl.monitor.store import ALERT_PENDING, DIFF, DYNAMODB_ITEM_MAX_BYTES, cluster_key, sweep_key
from hyperpod_nccl.ssm.client import SessionRunner
from hyperpod_nccl_sim import hang_job
from hyperpod_nccl_sim.scenario import FaultSpec
from hyperpod_nccl_sim.serverless import FunctionError, LocalMonitor, SweepRun
from tests.functional.test_monitor_faults import hanging_gpu_tools, ssm_budget, stall_aggregate_at
from tests.functional.test_monitor_sizes import STARTED, _finding, _new
from tests.functional.test_monitor_sweep import _store, _sweep_messages, _sweep_records, monitor  # noqa: F401

DOC = Path(__file__).resolve().parents[2] / "docs" / "fault-matrix.md"
UPDATE = bool(os.environ.get("UPDATE_FAULT_MATRIX"))
# The emulation answers within milliseconds; a call held this long trips the client's read timeout.
# Set only in the Timeout rows: on a loaded 2-core machine an unheld answer can take a few hundred
# milliseconds, which a read timeout in every row turned into a "network" cell now and then.
TIMEOUT_DELAY_S = 1.0
READ_TIMEOUT_S = 0.5
# In the state machine the Lambdas, the Step Functions engine and the emulation share one process:
# a wider margin, so that only the held call times out. 1.0 s was not enough on CI's 2 cores: an
# unheld DescribeLogGroups once took longer, so the held FilterLogEvents was never reached.
SM_TIMEOUT_DELAY_S = 5.0
SM_READ_TIMEOUT_S = 2.5
# The CLI rows' SSM budget per node (test_cli_path_under_fault), before CLI_SSM_TIME_SCALE.
CLI_SSM_BUDGET_S = 20.0
# The StartSession rows' budget and retry backoff, scaled: every wait of those rows is a sleep.
CLI_SSM_TIME_SCALE = 0.2
NOT_RUN = "—"


@dataclass(frozen=True)
class Fault:
    """One kind of failure, with the error code each protocol family uses for it."""

    name: str
    json_code: str
    query_code: str
    http_status: int
    delay: float = 0.0


FAULTS = (
    Fault("AccessDenied", "AccessDeniedException", "UnauthorizedOperation", 403),
    Fault("Throttling", "ThrottlingException", "RequestLimitExceeded", 400),
    Fault("5xx", "InternalFailure", "InternalError", 500),
    Fault("Timeout", "InternalFailure", "InternalError", 500, delay=TIMEOUT_DELAY_S),
)
FAULT = {f.name: f for f in FAULTS}

# --- what is run ------------------------------------------------------------------------------

# Scenarios a diagnosis is recorded on; an operation's row uses the first one that calls it.
CLI_SCENARIOS = ("eks-p5", "slurm-p5en")
CLI_OPERATIONS: dict[str, str] = {
    "ec2:DescribeSecurityGroups": "eks-p5",
    "eks:DescribeCluster": "eks-p5",
    "logs:DescribeLogGroups": "eks-p5",
    "logs:DescribeLogStreams": "eks-p5",
    "logs:FilterLogEvents": "eks-p5",
    "sagemaker:DescribeCluster": "eks-p5",
    "sagemaker:ListClusterEvents": "eks-p5",
    "sagemaker:ListClusterNodes": "eks-p5",
    "ssm:GetDocument": "eks-p5",
    "ssm:StartSession": "eks-p5",
    "sts:GetCallerIdentity": "eks-p5",
}

# Smallest first: an operation's row uses the smallest scenario whose sweep calls it.
SM_SCENARIOS = ("healthy-eks", "slurm-p5en", "eks-p5")
STATE_MACHINE_OPERATIONS: dict[str, str] = {
    "dynamodb:BatchWriteItem": "healthy-eks",
    "dynamodb:DeleteItem": "healthy-eks",
    "dynamodb:GetItem": "healthy-eks",
    "dynamodb:PutItem": "healthy-eks",
    "dynamodb:Query": "healthy-eks",
    "dynamodb:UpdateItem": "healthy-eks",
    "ec2:DescribeSecurityGroups": "healthy-eks",
    "eks:DescribeCluster": "healthy-eks",
    "logs:DescribeLogGroups": "healthy-eks",
    "logs:DescribeLogStreams": "healthy-eks",
    "logs:FilterLogEvents": "healthy-eks",
    "sagemaker:DescribeCluster": "healthy-eks",
    "sagemaker:ListClusterEvents": "healthy-eks",
    "sagemaker:ListClusterNodes": "healthy-eks",
    "sns:Publish": "slurm-p5en",
    "ssm:StartSession": "healthy-eks",
    "states:StartExecution": "healthy-eks",
    "sts:GetCallerIdentity": "healthy-eks",
}
# The faults run through the state machine (a documented subset, see SM_INTRO): AccessDenied and
# Timeout are the two ways a call fails (botocore's ClientError and a transport error);
# throttling and a 5xx are ClientErrors that follow AccessDenied's path with another fix text.
SM_FAULTS = ("AccessDenied", "Timeout")
SM_FAULT_EXCEPTIONS: dict[str, tuple[str, ...]] = {
    # The SSM client retries a transient StartSession failure 5 times with 1-8 s backoff (15 s)
    # before the node is reported unreachable, as the CLI row shows.
    "ssm:StartSession": ("AccessDenied",),
    # Notify retries a failed task 3 times (2 + 4 + 8 s) before the execution fails.
    "sns:Publish": ("AccessDenied",),
}
# What the local monitor itself calls to run and read back a sweep (not the product's calls).
HARNESS_SERVICES = ("stepfunctions", "sqs")


def sm_faults(operation: str) -> tuple[str, ...]:
    """The faults the state machine path runs for `operation`."""
    return SM_FAULT_EXCEPTIONS.get(operation, SM_FAULTS)


# --- the document -----------------------------------------------------------------------------

Table = dict[str, dict[str, str]]  # operation -> fault name -> observed behaviour
TITLE = "# Fault matrix (generated by tests/functional/test_fault_matrix.py)"
CLI_HEADING = "## CLI path"
SM_HEADING = "## State machine path"
CLI_INTRO = (
    "Every AWS operation a diagnosis makes, failed in turn against the emulation. "
    "`exit 1` means the CLI stopped with that fix (only for credentials and an unknown cluster); "
    "`degraded` means the report completed and named the source it could not read and the fix; "
    "`SKIP` lists the checks that then said SKIP (they could not tell) instead of PASS or of nothing, "
    "and `<source> not collected` a source none of whose checks ran. "
    "Faults persist for every retry (a burst that retries absorb is tested separately)."
)
SM_INTRO = (
    "Every AWS operation a scheduled sweep of the serverless monitor makes (recorded from a clean sweep: "
    "the collectors inside the Lambdas and the monitor's own DynamoDB, SNS and Step Functions calls), "
    "failed persistently while the real state machine definition runs in the emulation with the "
    "handlers in their own Lambda sandboxes (`LocalMonitor`), each on the smallest scenario whose sweep "
    "makes the call. "
    "A cell says how the execution ended, what the stored sweep record says "
    "(`DEGRADED` sources and what to grant, or why the sweep `failed`), and what was sent to the alerts topic. "
    "`trigger failed` means the trigger function raised, so Lambda retries the asynchronous invocation "
    "(twice), then keeps the event in the failed-triggers queue: "
    "the test re-delivers the same event and checks that it sweeps exactly once. "
    f"Faults run: {' and '.join(SM_FAULTS)} for every operation; Throttling and 5xx (`{NOT_RUN}`) raise the "
    "same botocore ClientError as AccessDenied and take its path through the same handler and collector code "
    "with another fix text (the CLI table shows each fix; DynamoDB throttling bursts and SNS outages that "
    "retries absorb are tested in test_monitor_faults.py). `ssm:StartSession` and `sns:Publish` run "
    "AccessDenied only: a transient StartSession failure is retried for 15 s before the node is reported "
    "unreachable (the CLI row), and a failed Notify task is retried for 14 s before the execution fails, "
    "whatever the error."
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _render_table(table: Table, operations: dict[str, str], faults_of: Callable[[str], tuple[str, ...]]) -> list[str]:
    lines = [
        "| operation | scenario | " + " | ".join(f.name for f in FAULTS) + " |",
        "|---|---|" + "---|" * len(FAULTS),
    ]
    for operation in sorted(operations):
        run = faults_of(operation)
        cells = [_cell(table.get(operation, {}).get(f.name, "?")) if f.name in run else NOT_RUN for f in FAULTS]
        lines.append(f"| `{operation}` | {operations[operation]} | " + " | ".join(cells) + " |")
    return lines


def render(
    cli: Table, state_machine: Table, sizes: dict[str, str] | None = None, timeouts: dict[str, str] | None = None
) -> str:
    """The whole page from the two tables, the size rows and the timeout rows (cells not observed
    yet render as `?`)."""
    lines = [
        TITLE,
        "",
        "Regenerate with `UPDATE_FAULT_MATRIX=1 make test` (or that variable and "
        "`pytest tests/functional/test_fault_matrix.py`).",
        "",
        CLI_HEADING,
        "",
        CLI_INTRO,
        "",
        *_render_table(cli, CLI_OPERATIONS, lambda _: tuple(FAULT)),
        "",
        SM_HEADING,
        "",
        SM_INTRO,
        "",
        *_render_table(state_machine, STATE_MACHINE_OPERATIONS, sm_faults),
        *render_sizes(sizes or {}),
        *render_timeouts(timeouts or {}),
    ]
    return "\n".join(lines) + "\n"


_ROW = re.compile(r"^\| `(?P<operation>[^`]+)` \| [^|]+ \| (?P<cells>.*) \|$")


def parse(text: str) -> tuple[Table, Table]:
    """The observed cells of both tables of a rendered page."""
    tables: dict[str, Table] = {CLI_HEADING: {}, SM_HEADING: {}}
    section: str | None = None
    for line in text.splitlines():
        if line in tables:
            section = line
            continue
        match = _ROW.match(line)
        if section is None or match is None:
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", match["cells"])]
        tables[section][match["operation"]] = {
            f.name: cell for f, cell in zip(FAULTS, cells, strict=False) if cell not in (NOT_RUN, "?")
        }
    return tables[CLI_HEADING], tables[SM_HEADING]


@contextmanager
def _locked_doc() -> Iterator[Any]:
    """The page, opened and locked against the other xdist workers updating it."""
    DOC.parent.mkdir(parents=True, exist_ok=True)
    with DOC.open("a+", encoding="utf-8") as stream:
        fcntl.flock(stream, fcntl.LOCK_EX)
        try:
            yield stream
        finally:
            fcntl.flock(stream, fcntl.LOCK_UN)


def check_cell(section: str, operation: str, fault: Fault, outcome: str) -> None:
    """Compare an observed cell with the page, or (UPDATE_FAULT_MATRIX=1) write it there."""
    if UPDATE:
        with _locked_doc() as stream:
            stream.seek(0)
            text = stream.read()
            cli, state_machine = parse(text)
            table = cli if section == CLI_HEADING else state_machine
            table.setdefault(operation, {})[fault.name] = outcome
            stream.seek(0)
            stream.truncate()
            stream.write(render(cli, state_machine, parse_sizes(text), parse_timeouts(text)))
        return
    assert DOC.is_file(), "docs/fault-matrix.md missing: run UPDATE_FAULT_MATRIX=1 make test"
    cli, state_machine = parse(DOC.read_text(encoding="utf-8"))
    documented = (cli if section == CLI_HEADING else state_machine).get(operation, {}).get(fault.name)
    assert documented == outcome, (
        f"docs/fault-matrix.md is stale ({section}, {operation}, {fault.name}): UPDATE_FAULT_MATRIX=1\n"
        f"documented: {documented}\nobserved:   {outcome}"
    )


# --- size limits (a block of its own: one row per AWS size limit the data itself passes) ---------

SIZE_HEADING = "## Size limits"
SIZE_INTRO = (
    "What the monitor does when the data itself passes an AWS size limit: a DynamoDB item is at most "
    "400 KB, an SNS message (every protocol's body, the subject and the attributes, in UTF-8 bytes) at "
    'most 256 KiB. The emulation refuses both as AWS does (`ValidationException` "Item size has exceeded '
    'the maximum allowed size", `InvalidParameter` "Message too long"). Each row runs the real state '
    "machine. Beyond the rows (tests/functional/test_monitor_sizes.py): a probe result past 6 MiB keeps its "
    'parsed sections and drops its oldest raw dumps, each marked "flight recorder dump truncated" and named '
    "as a degraded source; a finding naming 10,000 nodes keeps a shortened copy in its item and its whole "
    "text in a blob that the open-findings read returns; an alert SNS still refuses is replaced by a short "
    "stand-in saying so; a pending alert refused for good is dropped with an `ALERT_DROPPED#` record; one "
    "failing for a reason that may pass stays pending while newer alerts go out."
)
# Limit -> the scenario its row runs.
SIZE_ROWS: dict[str, str] = {"item > 400 KB": "hung-job", "message > 256 KB": "healthy-eks"}
_SIZE_ROW = re.compile(r"^\| (?P<case>[^|`]+?) \| (?P<scenario>[^|]+?) \| (?P<outcome>.*) \|$")


def render_sizes(sizes: dict[str, str]) -> list[str]:
    """The size block of the page (rows not observed yet render as `?`)."""
    rows = [f"| {case} | {scenario} | {_cell(sizes.get(case, '?'))} |" for case, scenario in SIZE_ROWS.items()]
    return ["", SIZE_HEADING, "", SIZE_INTRO, "", "| limit passed | scenario | outcome |", "|---|---|---|", *rows]


def parse_sizes(text: str) -> dict[str, str]:
    """The observed rows of the size block of a rendered page."""
    return _parse_block(text, SIZE_HEADING, SIZE_ROWS)


def check_size_row(case: str, outcome: str) -> None:
    """Compare an observed size row with the page, or (UPDATE_FAULT_MATRIX=1) write it there."""
    _check_block_row(SIZE_HEADING, case, outcome)


# --- Lambda killed at its timeout (a block of its own: one row per function stopped by Lambda) ----

TIMEOUT_HEADING = "## Lambda killed at its timeout"
TIMEOUT_INTRO = (
    "What a sweep does when Lambda stops one of its functions at the function's timeout, which is its "
    "task's `TimeoutSeconds` less 5 s (`monitor.lambda_timeouts`, as infra deploys it). The emulation enforces it as "
    'Lambda does: the task gets the function error `Sandbox.Timedout` ("Task timed out after N seconds"), '
    "what the invocation wrote until then stays, and it writes nothing more. Each row shortens one "
    "function's timeout (`LocalMonitor(function_timeouts=...)`) and holds it past it: Aggregate in its "
    "third findings update, ProbeNode in a node whose GPU tools hang (its Lambda timeout below the SSM "
    "budget, as it was when both were 180 s), the CloudWatch scan in a FilterLogEvents call. Deployed, "
    "ProbeNode has 25 s after the 180 s SSM budget to store what arrived "
    "(test_monitor_faults.py: the node's partial sections are checked, its Xid 79 is found)."
)
# Function stopped -> the scenario its row runs.
TIMEOUT_ROWS: dict[str, str] = {"Aggregate": "eks-p5", "ProbeNode": "healthy-eks", "CollectLogs": "healthy-eks"}


def render_timeouts(rows: dict[str, str]) -> list[str]:
    """The timeout block of the page (rows not observed yet render as `?`)."""
    lines = [f"| {case} | {scenario} | {_cell(rows.get(case, '?'))} |" for case, scenario in TIMEOUT_ROWS.items()]
    return [
        "",
        TIMEOUT_HEADING,
        "",
        TIMEOUT_INTRO,
        "",
        "| function stopped | scenario | outcome |",
        "|---|---|---|",
        *lines,
    ]


def parse_timeouts(text: str) -> dict[str, str]:
    """The observed rows of the timeout block of a rendered page."""
    return _parse_block(text, TIMEOUT_HEADING, TIMEOUT_ROWS)


def check_timeout_row(case: str, outcome: str) -> None:
    """Compare an observed timeout row with the page, or (UPDATE_FAULT_MATRIX=1) write it there."""
    _check_block_row(TIMEOUT_HEADING, case, outcome)


# --- the blocks of one row per case (sizes, timeouts) ---------------------------------------------


def _parse_block(text: str, heading: str, cases: dict[str, str]) -> dict[str, str]:
    """The observed rows (case -> outcome) under `heading` of a rendered page."""
    found: dict[str, str] = {}
    inside = False
    for line in text.splitlines():
        if line.startswith("## "):
            inside = line == heading
            continue
        match = _SIZE_ROW.match(line) if inside else None
        if match and match["case"] in cases and match["outcome"] != "?":
            found[match["case"]] = match["outcome"].replace("\\|", "|")
    return found


def _check_block_row(heading: str, case: str, outcome: str) -> None:
    """Compare one observed row of the block under `heading` with the page, or
    (UPDATE_FAULT_MATRIX=1) write it there, keeping every other row and block."""
    parsers = {SIZE_HEADING: parse_sizes, TIMEOUT_HEADING: parse_timeouts}
    if UPDATE:
        with _locked_doc() as stream:
            stream.seek(0)
            text = stream.read()
            blocks = {h: parse_block(text) for h, parse_block in parsers.items()}
            blocks[heading][case] = outcome
            stream.seek(0)
            stream.truncate()
            stream.write(render(*parse(text), blocks[SIZE_HEADING], blocks[TIMEOUT_HEADING]))
        return
    assert DOC.is_file(), "docs/fault-matrix.md missing: run UPDATE_FAULT_MATRIX=1 make test"
    documented = parsers[heading](DOC.read_text(encoding="utf-8")).get(case)
    assert documented == outcome, (
        f"docs/fault-matrix.md is stale ({heading}, {case}): UPDATE_FAULT_MATRIX=1\n"
        f"documented: {documented}\nobserved:   {outcome}"
    )


def _short(text: str) -> str:
    """A failure's first clause: up to its parenthesised detail or its fix; the emulation's
    endpoint (a random port) is not part of what the page records."""
    first = re.split(r" \(|; fix: ", text, maxsplit=1)[0].strip()
    return re.sub(r"https?://127\.0\.0\.1:\d+/?", "<endpoint>", first)


def _spec(operation: str, fault: Fault, delay: float | None = None) -> FaultSpec:
    service = operation.split(":", 1)[0]
    code = fault.query_code if service == "ec2" else fault.json_code
    if service == "sts" and fault.name == "AccessDenied":
        code = "AccessDenied"
    held = fault.delay if delay is None or not fault.delay else delay
    return FaultSpec(operation=operation, error_code=code, http_status=fault.http_status, delay_seconds=held)


# --- CLI path ---------------------------------------------------------------------------------


def _recorded_operations(simulate, scenario: str) -> list[str]:  # type: ignore[no-untyped-def]
    sim = simulate(scenario)
    sim.emulation.faults.calls.clear()
    diagnose(DiagnoseRequest(cluster=sim.scenario.cluster.name, region=sim.scenario.region), sim.clients())
    calls = sorted(set(sim.emulation.faults.calls))
    sim.stop()
    return calls


def _observe(simulate, scenario: str, operation: str, fault: Fault) -> str:  # type: ignore[no-untyped-def]
    sim = simulate(scenario, faults=[_spec(operation, fault)])
    request = DiagnoseRequest(cluster=sim.scenario.cluster.name, region=sim.scenario.region)
    # One attempt: the matrix shows what happens when a fault outlasts botocore's retries
    # (test_control_plane shows a burst being absorbed by them).
    clients = sim.clients(max_attempts=1)
    if fault.delay:
        clients.read_timeout = READ_TIMEOUT_S
    try:
        result = diagnose(request, clients)
    except DiagnosisAborted as aborted:
        sim.stop()
        return f"exit 1: {aborted.fix}"
    sim.stop()
    assert result.findings, f"{operation}/{fault.name}: the rest of the report must survive"
    degraded = [d for d in result.degraded_sources if not d.source.startswith("check ")]
    assert not [d for d in result.degraded_sources if d.source.startswith("check ")], "a check crashed"
    unreachable = [f for f in result.findings if f.check_id == "node.reachability" and f.is_issue]
    if unreachable and operation.startswith("ssm:"):
        # SSM failures are per node: each node becomes an unreachable finding naming the fix.
        if fault.name == "AccessDenied":
            assert all("ssm:StartSession" in f.detail + " ".join(f.evidence) for f in unreachable), unreachable[0]
        nodes = sum(1 for f in unreachable for r in f.resources if r.kind == "node")
        return f"{nodes} node(s) reported unreachable: {unreachable[0].detail[:90]}"
    if not degraded:
        return "no effect (retried or not needed)"
    if fault.name == "AccessDenied":
        assert any(d.missing_action for d in degraded), f"{operation}: AccessDenied must name the IAM action"
    parts = []
    for source in degraded:
        detail = f"grant {source.missing_action}" if source.missing_action else source.fix
        parts.append(f"degraded `{source.source}`{' (partial)' if source.partial else ''}: {detail}")
    return "; ".join([*sorted(set(parts)), *_skipped(result.findings)])


def _skipped(findings: list[Finding]) -> list[str]:
    """`SKIP a, b` for the checks that could not tell, and each source not collected at all (how many
    checks it has is the report's business: a new check must not change every cell)."""
    skips = [f for f in findings if f.status is Status.SKIP]
    checks = sorted({f.check_id for f in skips if f.check_id in REGISTRY})
    sources = sorted(f"{f.check_id} not collected" for f in skips if f.check_id not in REGISTRY)
    return [f"SKIP {', '.join([*checks, *sources])}"] if skips else []


def test_cli_operations_are_the_recorded_ones(simulate) -> None:  # type: ignore[no-untyped-def]
    recorded: dict[str, str] = {}
    for scenario in CLI_SCENARIOS:
        for operation in _recorded_operations(simulate, scenario):
            recorded.setdefault(operation, scenario)
    assert recorded == CLI_OPERATIONS, "a diagnosis calls other operations now: update CLI_OPERATIONS"


@pytest.mark.parametrize(
    ("operation", "fault"),
    [(operation, fault) for operation in CLI_OPERATIONS for fault in FAULTS],
    ids=lambda value: value.name if isinstance(value, Fault) else value,
)
def test_cli_path_under_fault(simulate, monkeypatch, operation: str, fault: Fault) -> None:  # type: ignore[no-untyped-def]
    if operation == "ssm:StartSession":
        # A throttled start is retried until the node's budget (180 s deployed), a transient failure
        # 5 times with a backoff doubling from 1 s (15 s): both scaled by CLI_SSM_TIME_SCALE give the
        # same cells (the budget still outlasts the transient retries).
        ssm_budget(
            monkeypatch,
            CLI_SSM_BUDGET_S * CLI_SSM_TIME_SCALE,
            backoff_seconds=SessionRunner.backoff_seconds * CLI_SSM_TIME_SCALE,
        )
    outcome = _observe(simulate, CLI_OPERATIONS[operation], operation, fault)
    check_cell(CLI_HEADING, operation, fault, outcome)


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
def test_credentials_failure_always_aborts_cleanly(simulate, fault: Fault) -> None:  # type: ignore[no-untyped-def]
    outcome = _observe(simulate, "healthy-eks", "sts:GetCallerIdentity", fault)
    assert outcome.startswith("exit 1")
    # Only a refusal is a credentials problem; throttling, 5xx and timeouts say what they are.
    if fault.name == "AccessDenied":
        assert "fix AWS credentials" in outcome
    else:
        assert "sts:GetCallerIdentity" in outcome and "fix AWS credentials" not in outcome


# --- state machine path -----------------------------------------------------------------------


@contextmanager
def _counting_harness_calls(deployed: LocalMonitor) -> Iterator[Counter[str]]:
    """Count the calls the local monitor's own clients make (running and reading back a sweep)."""
    counted: Counter[str] = Counter()

    def note(model: Any, **_: Any) -> None:
        counted[f"{model.service_model.signing_name}:{model.name}"] += 1

    clients = [deployed.client(service) for service in HARNESS_SERVICES]
    for client in clients:
        client.meta.events.register("before-call", note)
    try:
        yield counted
    finally:
        for client in clients:
            client.meta.events.unregister("before-call", note)


def _recorded_sweep_operations(simulate, monitor, scenario: str) -> set[str]:  # type: ignore[no-untyped-def]  # noqa: F811
    deployed = monitor(simulate(scenario))
    deployed.emulation.faults.calls.clear()
    with _counting_harness_calls(deployed) as harness:
        run = deployed.sweep()
        calls = Counter(deployed.emulation.faults.calls)
    assert run.status == "SUCCEEDED"
    return {operation for operation, count in calls.items() if count > harness[operation]}


def test_state_machine_operations_are_the_recorded_ones(simulate, monitor) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    recorded: dict[str, str] = {}
    needed = {SM_SCENARIOS.index(s) for s in STATE_MACHINE_OPERATIONS.values()}
    for scenario in SM_SCENARIOS[: max(needed) + 1]:
        for operation in sorted(_recorded_sweep_operations(simulate, monitor, scenario)):
            recorded.setdefault(operation, scenario)
    assert recorded == STATE_MACHINE_OPERATIONS, "a sweep calls other operations now: update STATE_MACHINE_OPERATIONS"


_TICK_TIME = "2026-01-05T10:15:00+00:00"


def _sweep(deployed: LocalMonitor, tick: dict[str, str]) -> SweepRun:
    """Deliver one scheduler tick to the trigger function and run the sweep it starts."""
    outcome = deployed.trigger(dict(tick))
    [started] = [o for o in outcome["outcomes"] if o["status"] == "started"]
    return deployed.wait(deployed.execution_arn(started["sweep_id"]))


def _record_summary(record: dict[str, Any]) -> str:
    if record["status"] == "failed":
        return f"stored `failed`: {_short(str(record['failure']))}"
    degraded = json.loads(record["degraded_sources"])
    if not degraded:
        return f"stored `{record['status']}`"
    parts = []
    for source in degraded:
        what = f"grant {source['missing_action']}" if source.get("missing_action") else _short(source["reason"])
        parts.append(f"`{source['source']}`: {what}")
    return f"stored `{record['status']}`, DEGRADED " + ", ".join(dict.fromkeys(parts))


def _alert_summary(run: SweepRun, cluster: str) -> str:
    messages = _sweep_messages(run)
    assert len(messages) <= 1, "one sweep, one alert: a duplicate was sent"
    if not messages:
        return "no alert" if run.status == "SUCCEEDED" else "no alert sent"
    return "alert: " + str(messages[0]["content"]["title"]).split(f"HyperPod {cluster}: ", 1)[-1]


def _unreachable(deployed: LocalMonitor) -> list[dict[str, Any]]:
    cluster = deployed.simulation.scenario.cluster.name
    found = [json.loads(item["finding"]) for item in _store(deployed).open_findings(deployed.region, cluster)]
    return [f for f in found if f["check_id"] == "node.reachability"]


def _lock_held(deployed: LocalMonitor) -> bool:
    cluster = deployed.simulation.scenario.cluster.name
    return _store(deployed).get(cluster_key(deployed.region, cluster), "LOCK") is not None


def _names(operation: str, text: str) -> bool:
    """`text` names the IAM action, or the AWS CLI command of it (`aws sts get-caller-identity`)."""
    service, name = operation.split(":", 1)
    command = f"{service} " + re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()
    return operation in text or command in text


def _failure_cause(run: SweepRun) -> str:
    details = run.events[-1].get("executionFailedEventDetails", {})
    try:
        cause = json.loads(details.get("cause", ""))
    except ValueError:
        return f"{details.get('error')}: {details.get('cause')}"
    return f"{cause.get('errorType')}: {cause.get('errorMessage')}"


def _next_sweep_sends(deployed: LocalMonitor, failed: SweepRun) -> str:
    """After an execution that failed before its alert went out: the next sweep sends it, once."""
    sweep_id = failed.execution_arn.rsplit(":", 1)[-1]
    following = deployed.sweep()
    assert following.status == "SUCCEEDED"
    late = [m for m in _sweep_messages(following) if m["id"] == sweep_id]
    assert len(late) == 1, f"the failed sweep's alert must be sent once by the next sweep ({len(late)})"
    assert "(delayed: sweep of " in late[0]["content"]["title"], "a late alert says it is late"
    assert deployed.sweep().notifications == [], "a pending alert is sent once"
    return "the next sweep sent the alert, once"


def _observe_state_machine(simulate, monitor, operation: str, fault: Fault) -> str:  # type: ignore[no-untyped-def]  # noqa: F811
    scenario = STATE_MACHINE_OPERATIONS[operation]
    timeout = SM_READ_TIMEOUT_S if fault.delay else None
    deployed = monitor(simulate(scenario), sdk_read_timeout=timeout)
    cluster = deployed.simulation.scenario.cluster.name
    # One scheduler tick, delivered again as is when the trigger fails (same id and time).
    tick = {"source": SCHEDULE_SOURCE, "id": f"fault-matrix-{operation}-{fault.name}", "time": _TICK_TIME}
    injector = deployed.emulation.faults
    injector.injected.clear()
    injector.add_fault(_spec(operation, fault, delay=SM_TIMEOUT_DELAY_S))
    try:
        run = _sweep(deployed, tick)
    except FunctionError as failed:
        assert failed.error_type == AwsCallFailed.__name__, failed
        injector.set_faults([])
        assert operation in injector.injected
        # The trigger function raised: nothing started, and Lambda retries the asynchronous invocation.
        assert deployed.executions() == [], "a failed trigger must start no execution"
        assert operation in str(failed), f"the trigger's error must name {operation}: {failed}"
        if fault.name == "AccessDenied":
            assert f"grant {operation}" in str(failed)
        lock = "lock kept for the re-delivery" if _lock_held(deployed) else "no lock left"
        retried = _sweep(deployed, tick)
        assert retried.status == "SUCCEEDED" and len(deployed.executions()) == 1
        assert len(_sweep_records(deployed)) == 1 and len(_sweep_messages(retried)) <= 1
        return "; ".join([f"trigger failed: {_short(str(failed))}", lock, "the re-delivered event swept once"])
    injector.set_faults([])
    assert operation in injector.injected, f"{operation} was never called: the cell observes nothing"
    records = _sweep_records(deployed)
    assert len(records) == 1, f"{operation}/{fault.name}: one sweep, one stored record (found {len(records)})"
    [record] = records
    parts = []
    named = record["failure"] + record["degraded_sources"]
    late = None
    if run.status != "SUCCEEDED":
        # Only Notify has no Catch: the sweep is stored, then the execution fails naming the cause.
        cause = _failure_cause(run)
        assert _names(operation, cause), f"the failed execution must name {operation}: {cause}"
        named += cause
        parts.append(f"execution {run.status}: {_short(cause)}")
        # A failed Notify left the alert to the next sweep; a failed Aggregate's was sent.
        late = None if _sweep_messages(run) else _next_sweep_sends(deployed, run)
    else:
        parts.append("execution SUCCEEDED")
    parts.append(_record_summary(record))
    unreachable = _unreachable(deployed) if operation.startswith("ssm:") else []
    if unreachable:
        named += " ".join(f["detail"] for f in unreachable)
        nodes = sum(1 for f in unreachable for r in f["resources"] if r["kind"] == "node")
        parts.append(f"{nodes} node(s) unreachable: {unreachable[0]['detail'][:80]}")
    if fault.name == "AccessDenied":
        assert _names(operation, named), f"{operation}: AccessDenied must name the IAM action ({parts})"
    else:
        assert _names(operation, named), f"{operation}/{fault.name}: nothing names the failure ({parts})"
    parts.append(_alert_summary(run, cluster))
    if late:
        parts.append(late)
    if _lock_held(deployed):
        parts.append("lock not released: the next trigger takes it over (its execution has ended)")
    return "; ".join(parts)


@pytest.mark.parametrize(
    ("operation", "fault"),
    [(operation, FAULT[name]) for operation in STATE_MACHINE_OPERATIONS for name in sm_faults(operation)],
    ids=lambda value: value.name if isinstance(value, Fault) else value,
)
def test_state_machine_path_under_fault(simulate, monitor, operation: str, fault: Fault) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    outcome = _observe_state_machine(simulate, monitor, operation, fault)
    check_cell(SM_HEADING, operation, fault, outcome)


# --- size limits: the rows ---------------------------------------------------------------------

# Flight Recorder entries per simulated rank for the item row (PyTorch keeps 2000 by default): eight
# ranks of 400 are about 0.9 MB of base64 per node, past the item limit and within what ProbeNode
# reads of a node (settings.PROBE_NODE_OUTPUT_MAX_BYTES, 16 MiB).
SIZE_DUMP_ENTRIES = 400
# Nodes the oversized alert names (each id, with its host name, in every body when listed in full).
SIZE_ALERT_NODES = 10_000


def test_size_row_item_over_400_kb(simulate, monitor, monkeypatch) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    monkeypatch.setattr(hang_job, "ENTRIES_PER_RANK", SIZE_DUMP_ENTRIES)
    deployed = monitor(simulate(SIZE_ROWS["item > 400 KB"]))
    run = deployed.sweep()
    sweep_id = run.execution_arn.rsplit(":", 1)[-1]
    results = load_probe_results(_store(deployed), sweep_id)
    big = [r for r in results.values() if len(r.model_dump_json().encode()) > DYNAMODB_ITEM_MAX_BYTES]
    assert big, "the row must store a probe result past the item limit"
    for result in big:  # read back whole: every dump with its data
        assert result.probe is not None and result.reachable
        assert result.probe.flight_recorder_dumps and all(d.data_base64 for d in result.probe.flight_recorder_dumps)
    [record] = _sweep_records(deployed)
    unreachable = sum(1 for f in _unreachable(deployed) for r in f["resources"] if r["kind"] == "node")
    outcome = "; ".join(
        [
            f"execution {run.status}",
            _record_summary(record),
            f"{len(big)} node(s) returned over 400 KB (Flight Recorder dumps of {SIZE_DUMP_ENTRIES} entries a "
            "rank): stored whole as compressed chunks under the item limit and read back whole",
            f"{unreachable} node(s) reported unreachable",
        ]
    )
    check_size_row("item > 400 KB", outcome)


def test_size_row_message_over_256_kb(simulate, monitor) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    deployed = monitor(simulate(SIZE_ROWS["message > 256 KB"]))
    store = _store(deployed)
    cluster = deployed.simulation.scenario.cluster.name
    # An earlier sweep whose alert, naming every node of a large cluster, stayed unpublished.
    earlier = SweepRef(
        sweep_id="fault-matrix-size-earlier", execution="fault-matrix-size-earlier", cluster=cluster,
        region=deployed.region, started_at=STARTED,
    )  # fmt: skip
    finding = _finding(SIZE_ALERT_NODES)
    listed = len(", ".join(resource_ids(finding)).encode())
    assert 3 * listed > SNS_MESSAGE_MAX_BYTES, "listed in full in its three bodies, it would not fit"
    diff = SweepDiff(
        sweep_id=earlier.sweep_id, cluster=cluster, region=deployed.region, started_at=STARTED,
        changes=[_new(finding)], coverage=Coverage(nodes_total=SIZE_ALERT_NODES, nodes_unreachable=SIZE_ALERT_NODES),
    )  # fmt: skip
    store.put_blob(sweep_key(earlier.sweep_id), DIFF, diff.model_dump_json(), expires_at=2_000_000_000)
    _keep_pending(store, earlier, None)
    run = deployed.sweep()
    messages = _sweep_messages(run)
    assert [m["id"] for m in messages][:1] == [earlier.sweep_id], "the earlier alert goes first"
    more = f"… and {SIZE_ALERT_NODES - MAX_LISTED_RESOURCES} more nodes"
    assert more in messages[0]["content"]["description"]
    own = [m for m in messages if m["id"] != earlier.sweep_id]
    left = list(store.query(cluster_key(deployed.region, cluster), ALERT_PENDING))
    outcome = "; ".join(
        [
            f"execution {run.status}",
            f"an earlier unpublished alert naming {SIZE_ALERT_NODES:,} nodes ({3 * listed // 1024} KB listed in "
            f"full in its three bodies) was sent fitted under {SNS_MESSAGE_MAX_BYTES:,} bytes: "
            f'{MAX_LISTED_RESOURCES} ids, then "{more}"',
            f"this sweep's own alert after it: {_alert_summary(run, cluster) if own else 'none (nothing changed)'}",
            f"{len(left)} alert(s) left pending",
        ]
    )
    check_size_row("message > 256 KB", outcome)


@pytest.mark.skipif(UPDATE, reason="the page is being rewritten by the other tests")
def test_page_lists_exactly_the_declared_cells() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert text == render(*parse(text), parse_sizes(text), parse_timeouts(text)), (
        "docs/fault-matrix.md has cells nobody observes: UPDATE_FAULT_MATRIX=1"
    )
    assert "| ? |" not in text and " ? |" not in text, "docs/fault-matrix.md has unobserved cells"


# --- Lambda killed at its timeout: the rows ------------------------------------------------------


def test_timeout_row_aggregate(simulate, monitor, monkeypatch) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    # Threads: the stall is planted in the product's own code (Store), which a sandbox process would not see.
    deployed = monitor(simulate(TIMEOUT_ROWS["Aggregate"]), function_timeouts={"aggregate": 4.0}, sandboxes="threads")
    cluster = deployed.simulation.scenario.cluster.name
    deployed_timeout = lambda_timeouts()["aggregate"]
    # Two findings written, then stopped; only that invocation runs under the 4 s timeout (read at its
    # start): the failure recorder's and the next sweep's take the deployed one, as an unstalled
    # Aggregate on a loaded 2-core machine can need more than 4 s.
    stall_aggregate_at(
        monkeypatch, call=3, on_stall=lambda: deployed.lambda_timeouts.__setitem__("aggregate", deployed_timeout)
    )
    run = deployed.sweep()
    assert run.status == "FAILED"
    [killed] = [c for c in deployed.calls_of(run, "aggregate") if c.timed_out]
    assert killed.seconds == pytest.approx(4.0, abs=1.0)
    [record] = _sweep_records(deployed)
    assert record["failure"].startswith("Aggregate timed out after 4 s (Sandbox.Timedout)")
    [alert] = _sweep_messages(run)
    assert "Aggregate timed out after 4 s" in alert["content"]["description"]
    # What the alert announces is what is stored: the recorder completed the stopped writes.
    announced = int(record["changes"])
    stored = {i["sk"]: int(i["occurrences"]) for i in _store(deployed).open_findings(deployed.region, cluster)}
    assert announced > 2 and len(stored) == announced and set(stored.values()) == {1}
    lock = "lock held" if _lock_held(deployed) else "lock released"
    monkeypatch.undo()
    second = deployed.sweep()
    assert second.status == "SUCCEEDED" and second.output is not None
    again = second.output["aggregate"]["changes"]
    stored = {i["sk"]: int(i["occurrences"]) for i in _store(deployed).open_findings(deployed.region, cluster)}
    assert again == 0 and set(stored.values()) == {2}
    error = run.events[-1].get("executionFailedEventDetails", {}).get("error")
    outcome = "; ".join(
        [
            f"execution {run.status} ({error})",
            _record_summary(record),
            f"{_alert_summary(run, cluster)} (its {announced} new findings stored once: the writes it had started "
            "completed from its stored diff)",
            lock,
            f"next sweep: {again} changes, {_alert_summary(second, cluster)}",
        ]
    )
    check_timeout_row("Aggregate", outcome)


def test_timeout_row_probe_node(simulate, monitor, monkeypatch) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    ssm_budget(monkeypatch, 3.0)
    sim = simulate(TIMEOUT_ROWS["ProbeNode"], edit=hanging_gpu_tools)
    deployed = monitor(sim, function_timeouts={"probe_node": 2.0})
    run = deployed.sweep()
    probes = deployed.calls_of(run, "probe_node")
    assert probes and all(p.timed_out for p in probes)
    [record] = _sweep_records(deployed)
    unreachable = _unreachable(deployed)
    nodes = sum(1 for f in unreachable for r in f["resources"] if r["kind"] == "node")
    assert nodes == len(probes)
    outcome = "; ".join(
        [
            f"execution {run.status}",
            _record_summary(record),
            f"{nodes} node(s) unreachable: {unreachable[0]['evidence'][0]}",
            _alert_summary(run, deployed.simulation.scenario.cluster.name),
        ]
    )
    check_timeout_row("ProbeNode", outcome)


def test_timeout_row_collect_logs(simulate, monitor) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    held = FaultSpec(operation="logs:FilterLogEvents", error_code="InternalFailure", http_status=500, delay_seconds=3)
    deployed = monitor(simulate(TIMEOUT_ROWS["CollectLogs"], faults=[held]), function_timeouts={"collect_logs": 1.5})
    run = deployed.sweep()
    assert [c.timed_out for c in deployed.calls_of(run, "collect_logs")] == [True]
    [record] = _sweep_records(deployed)
    outcome = "; ".join(
        [
            f"execution {run.status}",
            _record_summary(record),
            _alert_summary(run, deployed.simulation.scenario.cluster.name),
        ]
    )
    check_timeout_row("CollectLogs", outcome)
