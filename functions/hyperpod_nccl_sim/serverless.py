"""The serverless monitor, run locally: the REAL state machine definition (monitor/sweep.asl.json)
executed by the emulation's Step Functions, its Lambda tasks dispatched in-process to our real
handlers, against a simulated cluster, with the table and topic in the same emulation.

Plumbing, not product: moto executes state machines only when told so (POST /moto-api/config),
its engine calls Lambda at localhost:$MOTO_PORT, and its Docker-less Lambda merely echoes; we
route each invocation to the handler the function is named after, exactly as Lambda would run
`hyperpod_nccl.handlers.<module>.handler`. A handler's exception becomes a Lambda function error,
so the definition's Retry and Catch see what they would see in AWS.

Each invocation runs in a Lambda sandbox of its function (`sandboxes.SandboxPool`): a separate
process per concurrent invocation, reused warm as Lambda reuses execution environments, so no two
concurrent invocations share module state (a process-global limiter paces one sandbox only, as
deployed). Lambda timeouts are enforced as Lambda enforces them: each function's timeout is its
task's (`monitor.lambda_timeouts`, as infra deploys it; `function_timeouts` shortens chosen ones for
tests). A handler still running at its timeout gets the answer Lambda gives, a function error
`Sandbox.Timedout` "Task timed out after N seconds"; what it wrote until then stays, and its sandbox
is killed and never reused. `sandboxes="threads"` keeps the earlier in-process emulation, for tests
that plant faults in the product's code with monkeypatch (see `sandboxes`).

The definition is loaded as deployed, its Distributed Map's children EXPRESS: the emulation's Step
Functions (`stepfunctions_limits`) stops an Express child at 5 minutes (`express_max_seconds`
shortens it for tests), fails an execution whose state input or output passes 256 KiB with
States.DataLimitExceeded, and fails a Map past its tolerated failures. moto runs each child
in-process and keeps no history for it: child states are counted from the Lambda invocations this
module records (`LocalMonitor.calls`), not from the execution history.

EventBridge rules and Scheduler invoke the trigger asynchronously, and so does `LocalMonitor.deliver`:
an Invoke with InvocationType Event, which the emulated Lambda accepts (202) and runs on its own
thread as Lambda's asynchronous queue does. A function error is retried up to the function's
MaximumRetryAttempts, read from its event invoke configuration (created from
`settings.TRIGGER_RETRY_ATTEMPTS`, as infra deploys it); after the last failure, or once the event
is older than MaximumEventAgeInSeconds, its invocation record goes to the on-failure destination (an
SQS queue of the emulation), in Lambda's record format. Emulation gaps: Lambda waits about one, then
two minutes before its retries (here `async_retry_delay_seconds`), and retries an invocation it
throttled (reserved concurrency) until the event's maximum age without counting it as an attempt;
no throttling of that kind is emulated.
"""

from __future__ import annotations

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
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, TextIO

from hyperpod_nccl.monitor import lambda_timeouts, render_definition
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
    TRIGGER_MAX_EVENT_AGE_SECONDS,
    TRIGGER_RETRY_ATTEMPTS,
    TRIGGER_TIMEOUT_SECONDS,
    batches_at_once,
    execution_arn,
    handler_path,
)
from hyperpod_nccl.monitor.store import Store
from hyperpod_nccl.probe import documents
from hyperpod_nccl.references import REFERENCES_URL
from hyperpod_nccl.sanitize import one_line
from hyperpod_nccl_sim.aws import FAKE_ACCESS_KEY, FAKE_SECRET_KEY
from hyperpod_nccl_sim.runtime import SimulatedCluster, restore_environment, set_environment
from hyperpod_nccl_sim.sandboxes import LambdaContext, SandboxMode, SandboxPool, freezing, run_until
from hyperpod_nccl_sim.stepfunctions_limits import StepFunctionsLimits, set_stepfunctions_limits, stepfunctions_limits

__all__ = ["FunctionError", "LambdaContext", "LocalMonitor", "SweepRun", "freezing", "run_until"]

FUNCTION_PREFIX = "hyperpod-nccl-"
TABLE_NAME = "hyperpod-nccl-monitor"
TOPIC_NAME = "hyperpod-nccl-alerts"
STATE_MACHINE_NAME = "hyperpod-nccl-sweep"
# The trigger's on-failure destination (infra's failed-triggers queue).
FAILED_TRIGGERS_QUEUE_NAME = "hyperpod-nccl-failed-triggers"
# Lambda's asynchronous invocation defaults, for a function without an event invoke configuration.
_ASYNC_DEFAULT_RETRY_ATTEMPTS = 2
_ASYNC_DEFAULT_MAX_EVENT_AGE_SECONDS = 6 * 3600
# Attempts of each AWS call the handlers make (the SDK's AWS_MAX_ATTEMPTS here): a fault injected
# `times=SDK_MAX_ATTEMPTS` fails one call of a handler, its SDK retry included.
SDK_MAX_ATTEMPTS = 2
# Lambda's default timeout, for a function no task of the definition invokes.
DEFAULT_LAMBDA_TIMEOUT_SECONDS = 3.0
# The emulated stack's name: its probe documents are `hyperpod-nccl-local-NodeProbe`, ...
STACK_NAME = "hyperpod-nccl-local"
_dispatch_lock = threading.Lock()


class FunctionError(RuntimeError):
    """A synchronous invocation answered with a function error: the handler's exception class name
    (`error_type`, Lambda's errorType) and message, as Lambda returns them."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message

    @classmethod
    def from_answer(cls, answer: dict[str, Any], default_type: str = "") -> FunctionError:
        """The error of a function error's answer (Lambda's `errorType` and `errorMessage`)."""
        return cls(str(answer.get("errorType", default_type)), str(answer.get("errorMessage", "")))


@dataclass
class Invocation:
    """One Lambda invocation the emulation routed to a handler, timed (what Lambda bills)."""

    module: str
    started: float
    seconds: float
    event: dict[str, Any]
    timed_out: bool = False
    # The invocation started a new sandbox (Lambda bills its init phase).
    cold: bool = False
    # The sweep it served: its input's, or for the trigger the sweep it started.
    sweep_id: str | None = None


@dataclass
class AsyncInvocation:
    """One event Lambda accepted for asynchronous invocation: the function error of each attempt
    (None for the attempt that succeeded) and, once `done`, the outcome: "succeeded", or "failed"
    with the invocation `record` Lambda sent to the on-failure destination (None without one)."""

    module: str
    event: Any
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    accepted: float = field(default_factory=time.monotonic)
    errors: list[dict[str, Any] | None] = field(default_factory=list)
    outcome: str = "pending"
    record: dict[str, Any] | None = None
    # The answer of the attempt that succeeded: Lambda returns it to nobody (the trigger has no
    # on-success destination); the emulation keeps it as the function's own log line would show it.
    answer: Any = None
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def attempts(self) -> int:
        """How many times Lambda ran the function for this event so far."""
        return len(self.errors)

    def wait(self, timeout: float = 60.0) -> AsyncInvocation:
        """Block until Lambda is done with the event (succeeded, or its retries are exhausted)."""
        if not self.done.wait(timeout):
            raise TimeoutError(f"the asynchronous invocation of {self.module} is still running after {timeout} s")
        return self


def invocation_record(
    invocation: AsyncInvocation, *, function_arn: str, condition: str, response_payload: Any
) -> dict[str, Any]:
    """The record Lambda sends to an asynchronous invocation's on-failure destination (AWS Lambda
    Developer Guide, "Capturing records of Lambda asynchronous invocations"): the event as
    `requestPayload`, the last error as `responsePayload`; `condition` is "RetriesExhausted" or
    "EventAgeExceeded"."""
    return {
        "version": "1.0",
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "requestContext": {
            "requestId": invocation.request_id,
            "functionArn": f"{function_arn}:$LATEST",
            "condition": condition,
            "approximateInvokeCount": invocation.attempts,
        },
        "requestPayload": invocation.event,
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "responsePayload": response_payload,
    }


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
    `async_retry_delay_seconds` is the wait before each retry of an asynchronous invocation.
    `express_max_seconds` shortens the 5-minute limit of an Express child (the probe batches), so
    that a test can run a child past it.
    `sandboxes` is how invocations run (`sandboxes.SandboxMode`): each in a Lambda sandbox process
    of its own function (the default, as deployed), or on threads of this process (for tests
    that monkeypatch the product's code, which a sandbox process would not see).
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
        reference_base_url: str = REFERENCES_URL,
        sdk_read_timeout: float | None = None,
        async_retry_delay_seconds: float = 0.0,
        sandboxes: SandboxMode = "processes",
        express_max_seconds: float | None = None,
    ) -> None:
        self.simulation = simulation
        self.express_max_seconds = express_max_seconds
        self._saved_stepfunctions_limits: StepFunctionsLimits | None = None
        self.emulation = simulation.emulation
        self.region = simulation.scenario.region
        self.map_concurrency = map_concurrency
        self.probe_timeout_seconds = probe_timeout_seconds
        self.failing_functions = dict(failing_functions or {})
        self.node_coverage = str(node_coverage)
        self.reference_base_url = reference_base_url
        self.sdk_read_timeout = sdk_read_timeout
        self.async_retry_delay_seconds = async_retry_delay_seconds
        self.async_invocations: list[AsyncInvocation] = []
        # One delivery at a time, so each `deliver` returns the invocation its own Invoke queued;
        # `_queued_seconds` is how long that event already waited in Lambda's queue.
        self._delivery_lock = threading.Lock()
        self._queued_seconds = 0.0
        self.failed_triggers_url = ""
        # The URL of each queue a destination names by ARN: Lambda sends to the ARN, the SDK needs
        # the URL, and a GetQueueUrl would be a call of the function's role that Lambda never makes.
        self._queue_urls: dict[str, str] = {}
        # Each function's Lambda timeout: its task's, as deployed, or the test's shorter one.
        self.lambda_timeouts: dict[str, float] = {
            **lambda_timeouts(probe_timeout_seconds),
            "trigger": TRIGGER_TIMEOUT_SECONDS,
            **(function_timeouts or {}),
        }
        self._original_send: Any = None
        self.function_arns: dict[str, str] = {}
        self.probe_documents: dict[str, str] = {}
        self.state_machine_arn = ""
        self.key_arn = ""
        self.topic_arn = ""
        self.queue_url = ""
        self.invocations: list[str] = []
        self.calls: list[Invocation] = []
        self._saved_env: dict[str, str | None] = {}
        self._original_invoke: Any = None
        self.sandboxes = SandboxPool(mode=sandboxes)

    # --- set-up ---------------------------------------------------------------------------------
    def start(self) -> LocalMonitor:
        """Configure the emulation, create every resource and route Lambda to our handlers."""
        self._post_config()
        if self.express_max_seconds is not None:
            self._saved_stepfunctions_limits = stepfunctions_limits()
            set_stepfunctions_limits(
                replace(self._saved_stepfunctions_limits, express_max_seconds=self.express_max_seconds)
            )
        # moto warns that it ignores ToleratedFailurePercentage (stepfunctions_limits enforces it).
        logging.getLogger("moto.stepfunctions.parser.asl.parse.preprocessor").setLevel(logging.ERROR)
        self._set_env({"MOTO_PORT": str(self.emulation.port)})
        self._create_resources()
        self._set_env(
            {
                "AWS_ENDPOINT_URL": self.emulation.endpoint_url,
                "AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_KEY,
                "AWS_DEFAULT_REGION": self.region,
                "AWS_REGION": self.region,
                "AWS_MAX_ATTEMPTS": str(SDK_MAX_ATTEMPTS),
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
        """Undo the Lambda routing and the environment changes; discard every sandbox."""
        self.sandboxes.close()
        if self._saved_stepfunctions_limits is not None:
            set_stepfunctions_limits(self._saved_stepfunctions_limits)
            self._saved_stepfunctions_limits = None
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

    def store(self) -> Store:
        """The deployed monitor's table, read through the product's own data-access layer."""
        resource = self.emulation.session(self.region).resource(
            "dynamodb", endpoint_url=self.emulation.endpoint_url, region_name=self.region
        )
        return Store(resource.Table(TABLE_NAME))

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
        # The stack's customer managed key, which encrypts the alerts topic and the failed-triggers
        # queue as infra deploys them (the emulation does not enforce its use: the IAM replay checks
        # that whoever publishes or sends may use it).
        self.key_arn = self.client("kms").create_key(Description=f"{STACK_NAME} alerts and failed triggers")[
            "KeyMetadata"
        ]["Arn"]
        self._configure_trigger_async_invoke()
        self._create_table()
        self._create_probe_documents()
        sns = self.client("sns")
        self.topic_arn = sns.create_topic(Name=TOPIC_NAME, Attributes={"KmsMasterKeyId": self.key_arn})["TopicArn"]
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
            definition=render_definition(substitutions),
            roleArn=role_arn,
        )["stateMachineArn"]

    def _configure_trigger_async_invoke(self) -> None:
        """The trigger's asynchronous invocation, as infra configures it: the retries of
        `settings`, and the failed-triggers queue (encrypted with the stack's key) as its
        on-failure destination."""
        sqs = self.client("sqs")
        self.failed_triggers_url = sqs.create_queue(
            QueueName=FAILED_TRIGGERS_QUEUE_NAME, Attributes={"KmsMasterKeyId": self.key_arn}
        )["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=self.failed_triggers_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self._queue_urls[queue_arn] = self.failed_triggers_url
        self.client("lambda").put_function_event_invoke_config(
            FunctionName=self.function_arns["trigger"],
            MaximumRetryAttempts=TRIGGER_RETRY_ATTEMPTS,
            MaximumEventAgeInSeconds=TRIGGER_MAX_EVENT_AGE_SECONDS,
            DestinationConfig={"OnFailure": {"Destination": queue_arn}},
        )

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
            if headers.get("X-Amz-Invocation-Type") == "Event":
                return monitor._accept_async(backend, function_name, body)
            return monitor._dispatch(function_name, body, response_headers)

        LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign,assignment]
        if self.sandboxes.mode == "threads":
            # Handlers share this process's botocore: a timed-out one's calls must stop here.
            endpoint: Any = Endpoint  # `_send` is botocore's private hook (not in its stubs)
            self._original_send = endpoint._send
            endpoint._send = freezing(endpoint._send)

    def _dispatch(self, function_name: str, body: Any, response_headers: Any) -> bytes:
        payload, function_error = self._run_function(function_name, body)
        if function_error is not None:
            response_headers["x-amz-function-error"] = function_error
        return payload

    def _run_function(self, function_name: str, body: Any) -> tuple[bytes, str | None]:
        """Run one invocation of the function named `function_name` on `body`, as Lambda does: its
        answer and its function error ("Unhandled"), or None when it succeeded."""
        name = _function_name(function_name)
        module = name.removeprefix(FUNCTION_PREFIX)
        with _dispatch_lock:
            self.invocations.append(module)
        if module in self.failing_functions:
            error = {"errorType": self.failing_functions[module], "errorMessage": "emulated outage"}
            return json.dumps(error).encode(), "Unhandled"
        if module not in HANDLER_MODULES:
            error = {"errorType": "ResourceNotFound", "errorMessage": f"no handler {name}"}
            return json.dumps(error).encode(), "Unhandled"
        timeout = self.lambda_timeouts.get(module, DEFAULT_LAMBDA_TIMEOUT_SECONDS)
        started = time.monotonic()
        context = LambdaContext(
            function_name=name,
            invoked_function_arn=self.function_arns.get(module, name),
            aws_request_id=str(uuid.uuid4()),
        )
        answer = self.sandboxes.invoke(handler_path(module), body or b"{}", context, timeout)
        event = _json_object(body or b"{}")
        call = Invocation(
            module,
            started,
            time.monotonic() - started,
            event,
            timed_out=answer.timed_out,
            cold=answer.cold,
            sweep_id=_sweep_of(event) or _started_sweep(_json_object(answer.payload)),
        )
        with _dispatch_lock:
            self.calls.append(call)
        return answer.payload, answer.function_error

    def _accept_async(self, backend: Any, function_name: str, body: Any) -> bytes:
        """Lambda's answer to an Invoke of InvocationType Event: the event is queued (202, no
        payload) and run on its own thread with the function's retries and destination."""
        from moto.awslambda.exceptions import UnknownEventConfig

        try:
            config = backend.get_function_event_invoke_config(function_name)
        except UnknownEventConfig:
            config = {}
        name = _function_name(function_name)
        try:
            event: Any = json.loads(body or "{}")
        except ValueError:
            event = body.decode() if isinstance(body, bytes) else str(body)
        invocation = AsyncInvocation(
            module=name.removeprefix(FUNCTION_PREFIX), event=event, accepted=time.monotonic() - self._queued_seconds
        )
        with _dispatch_lock:
            self.async_invocations.append(invocation)
        worker = threading.Thread(
            target=self._run_async,
            args=(invocation, backend.get_function(function_name).function_arn, body, config),
            name=f"lambda-async-{name}",
            daemon=True,
        )
        worker.start()
        return b""

    def _run_async(self, invocation: AsyncInvocation, function_arn: str, body: Any, config: dict[str, Any]) -> None:
        """Lambda's asynchronous queue for one event: run, retry a function error, and send the
        invocation record of an event that failed for good to the on-failure destination."""
        retries = int(config.get("MaximumRetryAttempts", _ASYNC_DEFAULT_RETRY_ATTEMPTS))
        max_age = float(config.get("MaximumEventAgeInSeconds", _ASYNC_DEFAULT_MAX_EVENT_AGE_SECONDS))
        condition, last_error = "RetriesExhausted", None
        try:
            for attempt in range(1 + retries):
                if attempt:
                    time.sleep(self.async_retry_delay_seconds)
                if time.monotonic() - invocation.accepted > max_age:
                    condition = "EventAgeExceeded"
                    break
                answer, function_error = self._run_function(function_arn, body)
                if function_error is None:
                    invocation.errors.append(None)
                    invocation.answer = json.loads(answer) if answer else None
                    invocation.outcome = "succeeded"
                    return
                last_error = json.loads(answer)
                invocation.errors.append(last_error)
            invocation.outcome = "failed"
            destination = config.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
            if destination:
                invocation.record = invocation_record(
                    invocation, function_arn=function_arn, condition=condition, response_payload=last_error
                )
                self._send_to_queue(destination, json.dumps(invocation.record))
        finally:
            invocation.done.set()

    def _send_to_queue(self, queue_arn: str, body: str) -> None:
        """What Lambda does with an invocation record for an SQS destination: one message."""
        self.client("sqs").send_message(QueueUrl=self._queue_urls[queue_arn], MessageBody=body)

    # --- running ----------------------------------------------------------------------------------
    def deliver(self, event: dict[str, Any], *, queued_seconds: float = 0.0) -> AsyncInvocation:
        """Deliver an event to the trigger function as EventBridge (a rule or Scheduler) does: an
        asynchronous Invoke, which Lambda accepts and then runs, retries and, failing for good,
        records in the failed-triggers queue. Returns Lambda's handling of it (`.wait()` for the end).
        `queued_seconds` ages the event as if it had already waited that long in Lambda's queue (as
        events do behind a throttled function): past MaximumEventAgeInSeconds, Lambda drops it to
        the on-failure destination without running it."""
        with self._delivery_lock:
            with _dispatch_lock:
                queued = len(self.async_invocations)
            self._queued_seconds = queued_seconds
            try:
                answer = self.client("lambda").invoke(
                    FunctionName=self.function_arns["trigger"],
                    InvocationType="Event",
                    Payload=json.dumps(event).encode(),
                )
            finally:
                self._queued_seconds = 0.0
            if answer["StatusCode"] != 202:
                raise RuntimeError(f"Lambda did not accept the event: {answer['StatusCode']}")
            with _dispatch_lock:
                return self.async_invocations[queued]

    def drain_failed_triggers(self) -> list[dict[str, Any]]:
        """Every record the failed-triggers queue received since the last drain, as JSON."""
        return self._drain(self.failed_triggers_url)

    def trigger(self, event: dict[str, Any]) -> dict[str, Any]:
        """Invoke the trigger function synchronously on an event and return its answer
        (EventBridge and Scheduler invoke it asynchronously: `deliver`). A function error raises
        FunctionError."""
        payload, function_error = self._run_function(self.function_arns["trigger"], json.dumps(event).encode())
        answer: dict[str, Any] = json.loads(payload)
        if function_error is not None:
            raise FunctionError.from_answer(answer)
        return answer

    def schedule_tick(self, tick_id: str | None = None, timeout: float = 60.0) -> dict[str, Any]:
        """One EventBridge Scheduler tick, delivered as Scheduler delivers it (`deliver`: an
        asynchronous Invoke, with Lambda's retries), and the trigger's answer to the attempt that
        succeeded. Fails with FunctionError when every attempt failed (the record is then in the
        failed-triggers queue)."""
        handled = self.deliver(schedule_event(tick_id)).wait(timeout)
        if handled.outcome != "succeeded":
            last = handled.errors[-1] if handled.errors else None
            raise FunctionError.from_answer(last if isinstance(last, dict) else {}, "EventAgeExceeded")
        answer: dict[str, Any] = handled.answer
        return answer

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
        return [c for c in calls if c.module == module and c.sweep_id == sweep_id]

    def execution_arn(self, sweep_id: str) -> str:
        """The execution ARN of a sweep started by the trigger (named after its sweep id)."""
        return execution_arn(self.state_machine_arn, sweep_id)

    def drain_notifications(self) -> list[dict[str, Any]]:
        """Every message the topic delivered since the last drain (Chatbot JSON bodies)."""
        return self._drain(self.queue_url)

    def _drain(self, queue_url: str) -> list[dict[str, Any]]:
        """Receive and delete every message of a queue of the emulation, each body as JSON."""
        sqs = self.client("sqs")
        received: list[dict[str, Any]] = []
        while True:
            batch = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
            messages = batch.get("Messages", [])
            if not messages:
                return received
            for message in messages:
                received.append(json.loads(message["Body"]))
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


def schedule_event(tick_id: str | None = None) -> dict[str, Any]:
    """The event an EventBridge Scheduler tick delivers to the trigger (a random id unless given)."""
    return {"source": SCHEDULE_SOURCE, "id": tick_id or uuid.uuid4().hex, "time": datetime.now(UTC).isoformat()}


def _function_name(function_name: str) -> str:
    """The function's name from what an Invoke names it by (its name or ARN)."""
    return function_name.split(":")[6] if function_name.startswith("arn:") else function_name


def _json_object(text: bytes | str) -> dict[str, Any]:
    """`text` as a JSON object, or {} when it is not one."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _started_sweep(answer: dict[str, Any]) -> str | None:
    """The sweep a trigger's answer says it started."""
    outcomes = answer.get("outcomes")
    if isinstance(outcomes, list) and outcomes and isinstance(outcomes[0], dict):
        sweep_id = outcomes[0].get("sweep_id")
        return str(sweep_id) if sweep_id else None
    return None


def _sweep_of(event: dict[str, Any]) -> str | None:
    """The sweep id in a handler's input (a Map item carries it flat, the others under "sweep")."""
    sweep = event.get("sweep")
    if isinstance(sweep, dict):
        return str(sweep.get("sweep_id"))
    return str(event["sweep_id"]) if "sweep_id" in event else None


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
    store = monitor.store()
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


def run_demo(scenario: str, out: TextIO, then: Callable[[LocalMonitor], int] | None = None) -> int:
    """Two scheduled sweeps of `scenario` through the state machine; prints what each did. `then`
    runs after them with the monitor still deployed (its table readable, the CLI's AWS endpoint
    the emulation): `demo status|history`. The exit code: 1 if a sweep failed, else `then`'s."""
    saved = set_environment(_quiet_handlers())
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
            if not ok:
                return 1
            if then is None:
                return 0
            out.write("\n")
            out.flush()
            return then(monitor)
    finally:
        restore_environment(saved)
