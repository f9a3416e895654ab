"""The serverless monitor, run locally: the REAL state machine definition (monitor/sweep.asl.json)
executed by the emulation's Step Functions, its Lambda tasks dispatched in-process to our real
handlers, against a simulated cluster, with the table and topic in the same emulation.

Plumbing, not product: moto executes state machines only when told so (POST /moto-api/config),
its engine calls Lambda at localhost:$MOTO_PORT, and its Docker-less Lambda merely echoes; we
route each invocation to the handler the function is named after, exactly as Lambda would run
`hyperpod_nccl.handlers.<module>.handler`. A handler's exception becomes a Lambda function error,
so the definition's Retry and Catch see what they would see in AWS.

Lambda timeouts are enforced as Lambda enforces them: each function's timeout is its task's
(`monitor.lambda_timeouts`, as infra deploys it; `function_timeouts` shortens chosen ones for
tests). A handler still running at its timeout gets the answer Lambda gives, a function error
`Sandbox.Timedout` "Task timed out after N seconds"; what it wrote until then stays, and the
invocation is frozen from then on: every AWS call its thread makes (or was waiting on) raises,
so it writes nothing more. Emulation gap: a Python thread cannot be stopped, so the handler's
code runs on until its next AWS call, and calls from threads it started itself are not cut
(only the Kubernetes pod-log reads use such threads, and they write nothing).

Emulation gap: moto's ASL parser rejects `"ExecutionType": "EXPRESS"` in a Distributed Map's
ProcessorConfig (AWS accepts it), so `emulation_definition` rewrites it to STANDARD when the
definition is loaded into moto, never in the deployed definition. moto then runs each child
in-process and keeps no history for it: child states are counted from the Lambda invocations
this module records (`LocalMonitor.calls`), not from the execution history.
"""

from __future__ import annotations

import importlib
import io
import json
import logging
import os
import threading
import time
import urllib.request
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from hyperpod_nccl.monitor import lambda_timeouts, render_definition
from hyperpod_nccl.monitor.payloads import SANDBOX_TIMED_OUT
from hyperpod_nccl.monitor.settings import (
    ALERTS_TOPIC_ENV,
    ASL_FUNCTION_PLACEHOLDERS,
    ASL_MAP_CONCURRENCY_PLACEHOLDER,
    ASL_PROBE_TIMEOUT_PLACEHOLDER,
    CLUSTERS_ENV,
    DEFAULT_MAP_MAX_CONCURRENCY,
    FINDINGS_TABLE_ENV,
    HANDLER_MODULES,
    NODE_COVERAGE_ENV,
    PROBE_BATCH_SIZE,
    PROBE_DOCUMENTS_ENV,
    PROBE_TIMEOUT_SECONDS,
    REFERENCE_BASE_URL_ENV,
    SCHEDULE_SOURCE,
    SDK_READ_TIMEOUT_ENV,
    STATE_MACHINE_ENV,
    TABLE_SCHEMA,
    batches_at_once,
    execution_arn,
    handler_path,
)
from hyperpod_nccl.probe import documents
from hyperpod_nccl.sanitize import one_line
from hyperpod_nccl_sim.aws import FAKE_ACCESS_KEY, FAKE_SECRET_KEY
from hyperpod_nccl_sim.runtime import SimulatedCluster

FUNCTION_PREFIX = "hyperpod-nccl-"
TABLE_NAME = "hyperpod-nccl-monitor"
TOPIC_NAME = "hyperpod-nccl-alerts"
STATE_MACHINE_NAME = "hyperpod-nccl-sweep"
# Lambda's default timeout, for a function no task of the definition invokes.
DEFAULT_LAMBDA_TIMEOUT_SECONDS = 3.0
# The emulated stack's name: its probe documents are `hyperpod-nccl-local-NodeProbe`, ...
STACK_NAME = "hyperpod-nccl-local"
_dispatch_lock = threading.Lock()
# The invocation running on this thread (set on each handler's thread; the botocore patch reads it).
_sandbox = threading.local()


class _SandboxFrozen(BaseException):
    """Raised into a handler that makes an AWS call after Lambda ended its invocation at the
    timeout. A BaseException, so that no `except Exception` in the handler's code can go on
    writing as if nothing happened (in Lambda, nothing of the invocation runs any more)."""


@dataclass
class _LambdaContext:
    """What Lambda passes as `context` (the fields Powertools reads)."""

    function_name: str
    invoked_function_arn: str
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"
    deadline: float | None = None

    def get_remaining_time_in_millis(self) -> int:
        if self.deadline is None:
            return 300_000
        return max(0, int((self.deadline - time.monotonic()) * 1000))


@dataclass
class Invocation:
    """One Lambda invocation the emulation routed to a handler, timed (what Lambda bills)."""

    module: str
    started: float
    seconds: float
    event: dict[str, Any]
    timed_out: bool = False


@dataclass
class StateVisit:
    """One state entered during an execution, with its timing from the history."""

    name: str
    type: str
    entered: datetime
    exited: datetime | None = None

    @property
    def seconds(self) -> float | None:
        """How long the state ran."""
        return None if self.exited is None else (self.exited - self.entered).total_seconds()


@dataclass
class SweepRun:
    """One execution of the sweep state machine and what it sent."""

    execution_arn: str
    status: str
    states: list[StateVisit]
    output: dict[str, Any] | None
    notifications: list[dict[str, Any]]
    events: list[dict[str, Any]]


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("placeholder.py", "# the emulation dispatches to hyperpod_nccl.handlers in-process\n")
    return buffer.getvalue()


class LocalMonitor:
    """Deploys the monitor into the emulation of `simulation`: `with LocalMonitor(sim) as m:`.

    `failing_functions` makes the emulated Lambda service answer invocations of those handler
    modules with a function error (an outage of that function), to exercise Retry/Catch.
    `sdk_read_timeout` sets the functions' SDK read timeout (settings.SDK_READ_TIMEOUT_ENV), so
    that a call the emulation holds (a FaultSpec delay) times out client-side as it would in AWS.
    `function_timeouts` sets the Lambda timeout (seconds) of chosen handler modules below the
    deployed one (their task's TimeoutSeconds), so that a test can run a function past it.
    """

    def __init__(
        self,
        simulation: SimulatedCluster,
        *,
        map_concurrency: int = DEFAULT_MAP_MAX_CONCURRENCY,
        probe_timeout_seconds: int = PROBE_TIMEOUT_SECONDS,
        failing_functions: dict[str, str] | None = None,
        function_timeouts: dict[str, float] | None = None,
        node_coverage: int | str = "all",
        reference_base_url: str = "https://github.com/aws-samples/hyperpod-nccl-monitor/blob/main/references",
        sdk_read_timeout: float | None = None,
    ) -> None:
        self.simulation = simulation
        self.emulation = simulation.emulation
        self.region = simulation.scenario.region
        self.map_concurrency = map_concurrency
        self.probe_timeout_seconds = probe_timeout_seconds
        self.failing_functions = dict(failing_functions or {})
        self.node_coverage = str(node_coverage)
        self.reference_base_url = reference_base_url
        self.sdk_read_timeout = sdk_read_timeout
        # Each function's Lambda timeout: its task's, as deployed, or the test's shorter one.
        self.lambda_timeouts: dict[str, float] = {
            **lambda_timeouts(probe_timeout_seconds),
            **(function_timeouts or {}),
        }
        self._original_send: Any = None
        self.function_arns: dict[str, str] = {}
        self.probe_documents: dict[str, str] = {}
        self.state_machine_arn = ""
        self.topic_arn = ""
        self.queue_url = ""
        self.invocations: list[str] = []
        self.calls: list[Invocation] = []
        self._saved_env: dict[str, str | None] = {}
        self._original_invoke: Any = None
        self._handlers: dict[str, Callable[[Any, Any], Any]] = {}

    # --- set-up ---------------------------------------------------------------------------------
    def start(self) -> LocalMonitor:
        """Configure the emulation, create every resource and route Lambda to our handlers."""
        self._post_config()
        # moto warns that it ignores ToleratedFailurePercentage (its children never fail here).
        logging.getLogger("moto.stepfunctions.parser.asl.parse.preprocessor").setLevel(logging.ERROR)
        self._set_env({"MOTO_PORT": str(self.emulation.port)})
        self._handlers = {
            module: importlib.import_module(handler_path(module).rsplit(".", 1)[0]).handler
            for module in HANDLER_MODULES
        }
        self._create_resources()
        self._set_env(
            {
                "AWS_ENDPOINT_URL": self.emulation.endpoint_url,
                "AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_KEY,
                "AWS_DEFAULT_REGION": self.region,
                "AWS_REGION": self.region,
                "AWS_MAX_ATTEMPTS": "2",
                FINDINGS_TABLE_ENV: TABLE_NAME,
                ALERTS_TOPIC_ENV: self.topic_arn,
                STATE_MACHINE_ENV: self.state_machine_arn,
                REFERENCE_BASE_URL_ENV: self.reference_base_url,
                NODE_COVERAGE_ENV: self.node_coverage,
                CLUSTERS_ENV: json.dumps([{"name": self.simulation.scenario.cluster.name, "region": self.region}]),
                PROBE_DOCUMENTS_ENV: json.dumps(self.probe_documents),
                "POWERTOOLS_TRACE_DISABLED": "1",
                "POWERTOOLS_METRICS_NAMESPACE": "HyperPodNccl/Local",
                SDK_READ_TIMEOUT_ENV: "" if self.sdk_read_timeout is None else str(self.sdk_read_timeout),
            }
        )
        self._patch_lambda()
        return self

    def stop(self) -> None:
        """Undo the Lambda routing and the environment changes."""
        if self._original_invoke is not None:
            from moto.awslambda_simple.models import LambdaSimpleBackend

            LambdaSimpleBackend.invoke = self._original_invoke  # type: ignore[method-assign]
            self._original_invoke = None
        if self._original_send is not None:
            from botocore.endpoint import Endpoint

            endpoint: Any = Endpoint  # `_send` is botocore's private hook (not in its stubs)
            endpoint._send = self._original_send
            self._original_send = None
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()

    def __enter__(self) -> LocalMonitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _set_env(self, values: dict[str, str]) -> None:
        for key, value in values.items():
            self._saved_env.setdefault(key, os.environ.get(key))
            os.environ[key] = value

    def _post_config(self) -> None:
        body = json.dumps({"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}})
        request = urllib.request.Request(
            f"{self.emulation.endpoint_url}/moto-api/config",
            data=body.encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request).read()

    def client(self, service: str) -> Any:
        """A client of the emulation (test set-up and read-back)."""
        return self.emulation.client(service, self.region)

    def _create_resources(self) -> None:
        iam = self.client("iam")
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
            ],
        }
        role_arn = iam.create_role(
            RoleName=f"hyperpod-nccl-local-{uuid.uuid4().hex[:8]}", AssumeRolePolicyDocument=json.dumps(trust)
        )["Role"]["Arn"]
        lam = self.client("lambda")
        code = _zip()
        for module in HANDLER_MODULES:
            created = lam.create_function(
                FunctionName=f"{FUNCTION_PREFIX}{module}",
                Runtime="python3.12",
                Role=role_arn,
                Handler=handler_path(module),
                Code={"ZipFile": code},
            )
            self.function_arns[module] = created["FunctionArn"]
        self._create_table()
        self._create_probe_documents()
        sns = self.client("sns")
        self.topic_arn = sns.create_topic(Name=TOPIC_NAME)["TopicArn"]
        sqs = self.client("sqs")
        self.queue_url = sqs.create_queue(QueueName=f"{TOPIC_NAME}-readback")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sns.subscribe(
            TopicArn=self.topic_arn, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"}
        )
        substitutions: dict[str, str | int] = {
            placeholder: self.function_arns[module] for module, placeholder in ASL_FUNCTION_PLACEHOLDERS.items()
        }
        substitutions[ASL_MAP_CONCURRENCY_PLACEHOLDER] = batches_at_once(self.map_concurrency)
        substitutions[ASL_PROBE_TIMEOUT_PLACEHOLDER] = self.probe_timeout_seconds
        sfn = self.client("stepfunctions")
        self.state_machine_arn = sfn.create_state_machine(
            name=STATE_MACHINE_NAME,
            definition=emulation_definition(render_definition(substitutions)),
            roleArn=role_arn,
        )["stateMachineArn"]

    def _create_probe_documents(self) -> None:
        """The stack's Session documents (infra's ProbeDocuments), created once per emulated account
        and region: ProbeNode starts its sessions with these, as in AWS."""
        ssm = self.client("ssm")
        for role, name in documents.document_names(STACK_NAME).items():
            try:
                ssm.describe_document(Name=name)
            except ssm.exceptions.InvalidDocument:
                ssm.create_document(
                    Name=name, Content=documents.content_text(role), DocumentType="Session", DocumentFormat="JSON"
                )
            self.probe_documents[role] = name

    def _create_table(self) -> None:
        schema: dict[str, Any] = TABLE_SCHEMA
        pk, sk = schema["partition_key"], schema["sort_key"]
        attributes = {pk["name"]: pk["type"], sk["name"]: sk["type"]}
        indexes = []
        for gsi in schema["global_secondary_indexes"]:
            attributes[gsi["partition_key"]["name"]] = gsi["partition_key"]["type"]
            attributes[gsi["sort_key"]["name"]] = gsi["sort_key"]["type"]
            indexes.append(
                {
                    "IndexName": gsi["index_name"],
                    "KeySchema": [
                        {"AttributeName": gsi["partition_key"]["name"], "KeyType": "HASH"},
                        {"AttributeName": gsi["sort_key"]["name"], "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": gsi["projection"]},
                }
            )
        ddb = self.client("dynamodb")
        ddb.create_table(
            TableName=TABLE_NAME,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": k, "AttributeType": v} for k, v in attributes.items()],
            KeySchema=[
                {"AttributeName": pk["name"], "KeyType": "HASH"},
                {"AttributeName": sk["name"], "KeyType": "RANGE"},
            ],
            GlobalSecondaryIndexes=indexes,
        )
        ddb.update_time_to_live(
            TableName=TABLE_NAME,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": str(schema["ttl_attribute"])},
        )

    def _patch_lambda(self) -> None:
        from botocore.endpoint import Endpoint
        from moto.awslambda_simple.models import LambdaSimpleBackend

        monitor = self
        self._original_invoke = LambdaSimpleBackend.invoke

        def invoke(
            backend: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
        ) -> bytes:
            return monitor._dispatch(function_name, body, response_headers)

        LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign,assignment]
        endpoint: Any = Endpoint  # `_send` is botocore's private hook (not in its stubs)
        self._original_send = endpoint._send
        endpoint._send = freezing(endpoint._send)

    def _dispatch(self, function_name: str, body: Any, response_headers: Any) -> bytes:
        name = function_name.split(":")[6] if function_name.startswith("arn:") else function_name
        module = name.removeprefix(FUNCTION_PREFIX)
        with _dispatch_lock:
            self.invocations.append(module)
        if module in self.failing_functions:
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps({"errorType": self.failing_functions[module], "errorMessage": "emulated outage"}).encode()
        handler = self._handlers.get(module)
        if handler is None:
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps({"errorType": "ResourceNotFound", "errorMessage": f"no handler {name}"}).encode()
        timeout = self.lambda_timeouts.get(module, DEFAULT_LAMBDA_TIMEOUT_SECONDS)
        started = time.monotonic()
        context = _LambdaContext(
            function_name=name, invoked_function_arn=self.function_arns.get(module, name), deadline=started + timeout
        )
        payload: Any = {}
        timed_out = False
        try:
            payload = json.loads(body or "{}")
            finished, outcome = run_until(handler, payload, context, timeout)
            if not finished:
                timed_out = True
                response_headers["x-amz-function-error"] = "Unhandled"
                message = f"RequestId: {context.aws_request_id} Error: Task timed out after {timeout:.2f} seconds"
                return json.dumps({"errorType": SANDBOX_TIMED_OUT, "errorMessage": message}).encode()
            if isinstance(outcome, BaseException):
                raise outcome
            return json.dumps(outcome, default=str).encode()
        except Exception as error:  # noqa: BLE001 - becomes a Lambda function error, as in AWS
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps({"errorType": type(error).__name__, "errorMessage": str(error)}).encode()
        finally:
            event = payload if isinstance(payload, dict) else {}
            call = Invocation(module, started, time.monotonic() - started, event, timed_out=timed_out)
            with _dispatch_lock:
                self.calls.append(call)

    # --- running ----------------------------------------------------------------------------------
    def trigger(self, event: dict[str, Any]) -> dict[str, Any]:
        """Deliver an event to the trigger function, as EventBridge (rule or Scheduler) would."""
        started = time.monotonic()
        result: dict[str, Any] = self._handlers["trigger"](event, _LambdaContext("trigger", "trigger"))
        outcomes = result.get("outcomes") or [{}]
        call = Invocation("trigger", started, time.monotonic() - started, {"sweep_id": outcomes[0].get("sweep_id")})
        with _dispatch_lock:
            self.calls.append(call)
        return result

    def schedule_tick(self, tick_id: str | None = None) -> dict[str, Any]:
        """One EventBridge Scheduler tick."""
        return self.trigger(
            {"source": SCHEDULE_SOURCE, "id": tick_id or uuid.uuid4().hex, "time": datetime.now(UTC).isoformat()}
        )

    def executions(self) -> list[dict[str, Any]]:
        """Executions of the sweep state machine, newest first."""
        listed: list[dict[str, Any]] = self.client("stepfunctions").list_executions(
            stateMachineArn=self.state_machine_arn
        )["executions"]
        return listed

    def wait(self, execution_arn: str, timeout: float = 120.0) -> SweepRun:
        """Wait for an execution to end; its states, output and the notifications it sent."""
        sfn = self.client("stepfunctions")
        deadline = time.monotonic() + timeout
        while True:
            described = sfn.describe_execution(executionArn=execution_arn)
            if described["status"] != "RUNNING" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        events = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
        output = json.loads(described["output"]) if described.get("output") else None
        return SweepRun(
            execution_arn=execution_arn,
            status=described["status"],
            states=_visits(events),
            output=output,
            notifications=self.drain_notifications(),
            events=events,
        )

    def sweep(self, tick_id: str | None = None, timeout: float = 120.0) -> SweepRun:
        """A scheduled sweep of the simulated cluster, run to its end (or `timeout` seconds)."""
        outcome = self.schedule_tick(tick_id)
        started = [o for o in outcome["outcomes"] if o["status"] == "started"]
        if not started:
            raise RuntimeError(f"the schedule tick started no sweep: {outcome}")
        return self.wait(self.execution_arn(started[0]["sweep_id"]), timeout=timeout)

    def calls_of(self, run: SweepRun, module: str) -> list[Invocation]:
        """The invocations of handler `module` made for one execution (its sweep id is the name)."""
        sweep_id = run.execution_arn.rsplit(":", 1)[-1]
        with _dispatch_lock:
            calls = list(self.calls)
        return [c for c in calls if c.module == module and _sweep_of(c.event) == sweep_id]

    def execution_arn(self, sweep_id: str) -> str:
        """The execution ARN of a sweep started by the trigger (named after its sweep id)."""
        return execution_arn(self.state_machine_arn, sweep_id)

    def drain_notifications(self) -> list[dict[str, Any]]:
        """Every message the topic delivered since the last drain (Chatbot JSON bodies)."""
        sqs = self.client("sqs")
        received: list[dict[str, Any]] = []
        while True:
            batch = sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
            messages = batch.get("Messages", [])
            if not messages:
                return received
            for message in messages:
                received.append(json.loads(message["Body"]))
                sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])


def _raise_if_frozen() -> None:
    frozen = getattr(_sandbox, "frozen", None)
    if frozen is not None and frozen.is_set():
        raise _SandboxFrozen("the emulated Lambda ended this invocation at its timeout")


def freezing(send: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """botocore's `Endpoint._send`, for an invocation that Lambda ended at its timeout: it makes
    no AWS call any more, and the answer of a call it was waiting on never reaches it."""

    def frozen_aware_send(endpoint: Any, request: Any) -> Any:
        _raise_if_frozen()
        response = send(endpoint, request)
        _raise_if_frozen()
        return response

    return frozen_aware_send


def run_until(
    handler: Callable[[Any, Any], Any], payload: Any, context: _LambdaContext, timeout: float
) -> tuple[bool, Any]:
    """Run `handler` on its own thread for at most `timeout` seconds: (True, its result or the
    exception it raised), or (False, None) when it was still running, its invocation frozen."""
    frozen = threading.Event()
    done = threading.Event()
    box: list[Any] = [None]

    def run() -> None:
        _sandbox.frozen = frozen
        try:
            box[0] = handler(payload, context)
        except _SandboxFrozen:
            pass  # ended by the timeout: nobody waits for this result any more
        except BaseException as error:  # noqa: BLE001 - handed to the caller, as Lambda reports it
            box[0] = error
        finally:
            done.set()

    thread = threading.Thread(target=run, name=f"lambda-{context.function_name}", daemon=True)
    thread.start()
    if done.wait(timeout):
        return True, box[0]
    frozen.set()
    return False, None


def _sweep_of(event: dict[str, Any]) -> str | None:
    """The sweep id in a handler's input (a Map item carries it flat, the others under "sweep")."""
    sweep = event.get("sweep")
    if isinstance(sweep, dict):
        return str(sweep.get("sweep_id"))
    return str(event["sweep_id"]) if "sweep_id" in event else None


def emulation_definition(definition: str) -> str:
    """The definition as moto can load it: Distributed Map children EXPRESS -> STANDARD.

    Only for the local emulation (see the module docstring); the deployed definition keeps
    EXPRESS children.
    """
    parsed = json.loads(definition)

    def rewrite(node: Any) -> None:
        if isinstance(node, dict):
            config = node.get("ProcessorConfig")
            if isinstance(config, dict) and config.get("ExecutionType") == "EXPRESS":
                config["ExecutionType"] = "STANDARD"
            for value in node.values():
                rewrite(value)
        elif isinstance(node, list):
            for value in node:
                rewrite(value)

    rewrite(parsed)
    return json.dumps(parsed)


def _visits(events: list[dict[str, Any]]) -> list[StateVisit]:
    visits: list[StateVisit] = []
    pending: dict[str, list[StateVisit]] = {}
    for event in events:
        kind = event["type"]
        if kind.endswith("StateEntered"):
            details = event.get("stateEnteredEventDetails", {})
            visit = StateVisit(
                name=details.get("name", "?"), type=kind.removesuffix("StateEntered"), entered=event["timestamp"]
            )
            visits.append(visit)
            pending.setdefault(visit.name, []).append(visit)
        elif kind.endswith("StateExited"):
            name = event.get("stateExitedEventDetails", {}).get("name", "?")
            if pending.get(name):
                pending[name].pop(0).exited = event["timestamp"]
    return visits


# --- `hyperpod-nccl demo --serverless` ---------------------------------------------------------------


def _quiet_handlers() -> dict[str, str]:
    """Handler logs and EMF metrics are JSON lines for CloudWatch; the demo prints its own report."""
    return {"POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_DISABLED": "true"}


def _print_execution(out: TextIO, title: str, run: SweepRun, probes: list[Invocation]) -> None:
    out.write(f"{title}: {run.execution_arn.rsplit(':', 1)[-1]} -> {run.status}\n")
    for visit in run.states:
        seconds = f"{visit.seconds:6.2f}s" if visit.seconds is not None else "   -   "
        out.write(f"  {seconds}  {visit.type:<9} {visit.name}\n")
        if visit.name == "ProbeNodes" and probes:
            slowest = max(p.seconds for p in probes)
            out.write(
                f"  {'':7}  {'':<9}   {len(probes)} ProbeNode states (one per node, in child executions of "
                f"{PROBE_BATCH_SIZE}), slowest {slowest:.2f}s\n"
            )


def _print_stored(out: TextIO, monitor: LocalMonitor) -> None:
    from hyperpod_nccl.monitor.store import Store

    table = monitor.emulation.session(monitor.region).resource(
        "dynamodb", endpoint_url=monitor.emulation.endpoint_url, region_name=monitor.region
    )
    store = Store(table.Table(TABLE_NAME))
    cluster = monitor.simulation.scenario.cluster.name
    findings = store.open_findings(monitor.region, cluster)
    by_priority: dict[str, int] = {}
    for item in findings:
        by_priority[str(item.get("priority"))] = by_priority.get(str(item.get("priority")), 0) + 1
    counts = ", ".join(f"{k} {v}" for k, v in sorted(by_priority.items()))
    out.write(f"Findings stored in DynamoDB: {len(findings)} open ({counts})\n")
    urgent = sorted(findings, key=lambda i: (str(i.get("priority")), str(i.get("check_id"))))
    for item in urgent[:8]:
        out.write(
            f"  [{item.get('priority')}] {item.get('check_id')}: {one_line(str(item.get('title')))} "
            f"(first seen {str(item.get('first_seen'))[:19]}, occurrences {item.get('occurrences')})\n"
        )
    if len(urgent) > 8:
        out.write(f"  ... and {len(urgent) - 8} more\n")


def _print_notifications(out: TextIO, notifications: list[dict[str, Any]]) -> None:
    if not notifications:
        out.write("Notification: none sent (nothing new, worse or resolved)\n")
        return
    for message in notifications:
        content = message.get("content", {})
        meta = message.get("metadata", {})
        out.write(f"Notification (SNS -> Chatbot JSON, thread {meta.get('threadId')}):\n")
        # What the monitor sent is already escaped for chat; shown here escaped for the terminal too.
        out.write(f"  {one_line(str(content.get('title')))}\n")
        description = str(content.get("description", "")).split("\n")
        for line in description[:30]:
            out.write(f"  | {one_line(line)}\n")
        if len(description) > 30:
            out.write(f"  | ... ({len(description) - 30} more lines)\n")


def run_demo(scenario: str, out: TextIO) -> int:
    """Two scheduled sweeps of `scenario` through the state machine; prints what each did."""
    saved = {key: os.environ.get(key) for key in _quiet_handlers()}
    os.environ.update(_quiet_handlers())
    try:
        with SimulatedCluster(scenario) as simulation, LocalMonitor(simulation) as monitor:
            out.write(
                f"Serverless monitor on simulated scenario '{simulation.scenario.name}' "
                f"({simulation.scenario.cluster.name}): the state machine definition "
                "hyperpod_nccl/monitor/sweep.asl.json runs in the emulation's Step Functions, its Lambda tasks "
                "in-process.\n\n"
            )
            first = monitor.sweep()
            _print_execution(out, "Sweep 1", first, monitor.calls_of(first, "probe_node"))
            out.write("\n")
            _print_stored(out, monitor)
            out.write("\n")
            _print_notifications(out, first.notifications)
            out.write("\n")
            second = monitor.sweep()
            _print_execution(out, "Sweep 2", second, monitor.calls_of(second, "probe_node"))
            aggregate = (second.output or {}).get("aggregate", {})
            out.write(f"\nSweep 2 changes: {aggregate.get('changes', '?')}. ")
            if second.notifications:
                out.write("It sent a notification:\n")
                _print_notifications(out, second.notifications)
            else:
                out.write("Nothing new, worse or resolved: no notification sent (repeats are not re-sent).\n")
            ok = first.status == "SUCCEEDED" and second.status == "SUCCEEDED"
            return 0 if ok else 1
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
