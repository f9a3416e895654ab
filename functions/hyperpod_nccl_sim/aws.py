"""AWS emulation on loopback: moto's server, extended with what HyperPod needs and moto lacks
(ListClusterEvents, the Orchestrator and NodeRecovery fields, real instance ids and statuses,
StartSession), behind a fault-injecting WSGI layer that answers with AWS-shaped errors.

The account-wide API rates AWS enforces are enforced too (`EmulatedLimits`, on by default, each
rule switchable): a token bucket per account and Region for ssm:StartSession (default 3/s, burst 3:
`thresholds.SSM_START_SESSION_PER_SECOND`, AWS's HyperPod SSM guidance) and for
logs:FilterLogEvents (5/s, `aws_limits.FILTER_LOG_EVENTS_PER_SECOND`). A call past its rate is
answered as the service answers it, HTTP 400 `ThrottlingException` "Rate exceeded", and reaches
nothing behind (no session opens); `EmulatedAws.rate_usage` counts accepted and throttled calls.

Everything here is reached over real HTTP by unmodified boto3 clients: product code cannot
tell it from AWS except by the endpoint URL.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

import boto3
import botocore.session
from werkzeug.serving import BaseWSGIServer, make_server

from hyperpod_nccl import reads
from hyperpod_nccl.aws_limits import FILTER_LOG_EVENTS_PER_SECOND
from hyperpod_nccl.models.cluster import CONTINUOUS_PROVISIONING
from hyperpod_nccl.thresholds import SSM_START_SESSION_PER_SECOND
from hyperpod_nccl_sim.parsed_models import share_with_every_session, shared_loader
from hyperpod_nccl_sim.scenario import FaultSpec
from hyperpod_nccl_sim.stepfunctions_limits import install_stepfunctions_limits

SIM_DEBUG_ENV = "HYPERPOD_SIM_DEBUG"
FAKE_ACCESS_KEY = "AKIDSIMULATEDCLUSTER"
FAKE_SECRET_KEY = "simulated-secret-key-not-real"

WsgiEnviron = dict[str, Any]
StartResponse = Callable[..., Any]
WsgiApp = Callable[[WsgiEnviron, StartResponse], Iterable[bytes]]

# Hook the SSM simulation installs: (target, document name, the command the agent runs, resolved
# from the document as the agent would) -> StartSession response.
StartSessionHandler = Callable[[str, str, str], dict[str, Any]]
# AWS managed Session documents the emulation knows, reduced to what StartSession and the agent
# read: the declared parameters and the command template.
MANAGED_SESSION_DOCUMENTS: dict[str, dict[str, Any]] = {
    "AWS-StartNonInteractiveCommand": {
        "schemaVersion": "1.0",
        "sessionType": "NonInteractiveCommands",
        "parameters": {"command": {"type": "String"}},
        "properties": {"linux": {"commands": "{{command}}"}},
    }
}
_COMMAND_SESSION_TYPES = frozenset({"InteractiveCommands", "NonInteractiveCommands"})
_DOCUMENT_PARAMETER = re.compile(r"\{\{\s*([A-Za-z0-9_]+)\s*\}\}")
_start_session_handlers: dict[str, StartSessionHandler] = {}
_terminated_sessions: list[str] = []
# (target, document name) of every StartSession the emulation accepted.
_started_sessions: list[tuple[str, str]] = []


@dataclass
class HyperPodExtras:
    """What moto's SageMaker model lacks, kept per cluster name."""

    cluster_id: str = ""
    orchestrator: dict[str, Any] | None = None
    node_recovery: str | None = None
    node_provisioning_mode: str | None = None
    group_extras: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)


_extras: dict[str, HyperPodExtras] = {}
_install_lock = threading.Lock()
_installed = False


def cluster_extras(cluster_name: str) -> HyperPodExtras:
    """The extension record of a simulated cluster (created on first use)."""
    return _extras.setdefault(cluster_name, HyperPodExtras())


def register_start_session_handler(account_region: str, handler: StartSessionHandler) -> None:
    """Route ssm:StartSession for `account_region` ("123456789012/us-west-2") to `handler`."""
    _start_session_handlers[account_region] = handler


def started_sessions() -> list[tuple[str, str]]:
    """(target, document name) of each session StartSession opened (the emulation's own record)."""
    return list(_started_sessions)


def terminated_sessions() -> list[str]:
    """Session ids TerminateSession was called for (the emulation's own record)."""
    return list(_terminated_sessions)


def _cluster_name_from(value: str) -> str:
    """Real cluster ARNs end in a 12-character id, not the name: map it back."""
    if not value.startswith("arn:"):
        return value
    cluster_id = value.rsplit("/", 1)[-1]
    return next((name for name, extras in _extras.items() if extras.cluster_id == cluster_id), cluster_id)


def install_moto_extensions() -> None:
    """Teach moto the HyperPod surface it lacks. Idempotent; patches classes, not instances."""
    global _installed
    with _install_lock:
        if _installed:
            return
        _patch_sagemaker()
        _patch_ssm()
        _patch_logs()
        _patch_sns()
        install_stepfunctions_limits()
        _installed = True


_ANY_TERM = re.compile(r'\?("(?:[^"\\]|\\.)*"|\S+)')


def _patch_logs() -> None:
    """FilterLogEvents' "match any term" patterns (`?"NCCL WARN" ?Xid`), which moto treats as
    "match everything". Each term is a case-sensitive substring, as moto does for one quoted term."""
    from moto.logs import models as logs_models

    base = logs_models.EventMessageFilter

    class AnyTermFilter(base):  # type: ignore[misc, valid-type]
        def __init__(self, pattern: str) -> None:
            stripped = (pattern or "").strip()
            self.any_terms: list[str] | None = None
            if stripped.startswith("?"):
                terms = _ANY_TERM.findall(stripped)
                self.any_terms = [json.loads(t) if t.startswith('"') else t for t in terms]
            else:
                super().__init__(pattern)

        def matches(self, message: str) -> bool:
            if self.any_terms is None:
                return bool(super().matches(message))
            return any(term in message for term in self.any_terms)

    logs_models.EventMessageFilter = AnyTermFilter  # type: ignore[misc]
    # Pages, tokens and stream selection as strict as the service (filter_log_events.py).
    from hyperpod_nccl_sim.filter_log_events import install_filter_log_events

    install_filter_log_events()


def _patch_sns() -> None:
    """SNS's 256 KiB limit as AWS applies it: UTF-8 bytes of the whole message (with
    MessageStructure=json, every protocol's body) plus the subject and the message attributes.
    moto counts the message's characters only, so a message of multi-byte text passes it."""
    from moto.sns import models as sns_models
    from moto.sns.exceptions import InvalidParameterValue

    from hyperpod_nccl.monitor.alert_messages import SNS_MESSAGE_MAX_BYTES, sns_message_bytes
    from hyperpod_nccl.sanitize import is_valid_sns_subject

    original = sns_models.SNSBackend.publish

    def publish(self: Any, message: str, *args: Any, **kwargs: Any) -> str:
        attributes = {
            name: {"DataType": value.get("Type", ""), "StringValue": value.get("Value", "")}
            for name, value in (kwargs.get("message_attributes") or {}).items()
        }
        arguments = {"Message": message, "Subject": kwargs.get("subject"), "MessageAttributes": attributes}
        if kwargs.get("phone_number") is None and sns_message_bytes(arguments) > SNS_MESSAGE_MAX_BYTES:
            raise InvalidParameterValue("Invalid parameter: Message too long")
        # moto checks only the Subject's length; AWS also refuses control and non-ASCII characters.
        subject = kwargs.get("subject")
        if subject is not None and not is_valid_sns_subject(subject):
            raise InvalidParameterValue("Invalid parameter: Subject")
        return str(original(self, message, *args, **kwargs))

    setattr(sns_models.SNSBackend, "publish", publish)  # noqa: B010 - patching a class


def _patch_sagemaker() -> None:
    from moto.core.responses import ActionResult
    from moto.sagemaker import models as sm_models
    from moto.sagemaker.responses import SageMakerResponse

    original_describe = sm_models.Cluster.describe

    def describe(self: Any) -> dict[str, Any]:
        described: dict[str, Any] = original_describe(self)
        extras = _extras.get(self.cluster_name)
        if extras is None:
            return described
        if extras.orchestrator:
            described["Orchestrator"] = extras.orchestrator
        if extras.node_recovery:
            described["NodeRecovery"] = extras.node_recovery
        if extras.node_provisioning_mode:
            described["NodeProvisioningMode"] = extras.node_provisioning_mode
        groups = []
        for group in described.get("InstanceGroups", []):
            merged = dict(group)
            merged.update(extras.group_extras.get(group["InstanceGroupName"], {}))
            groups.append(merged)
        described["InstanceGroups"] = groups
        return described

    # HyperPod accepts far more instance types than moto's list (p5e, p5en, p6, trn2 ...).
    def accept_ml_types(self: Any, instance_type: str) -> None:
        if not instance_type.startswith("ml."):
            raise sm_models.ValidationError(message=f"invalid instance type {instance_type}")

    setattr(sm_models.Cluster, "describe", describe)  # noqa: B010 - patching a class
    for method in ("describe_cluster", "list_cluster_nodes", "describe_cluster_node", "delete_cluster"):
        _accept_id_arns(sm_models.SageMakerModelBackend, method)
    setattr(sm_models.Cluster, "valid_cluster_node_instance_types", accept_ml_types)  # noqa: B010

    def list_cluster_events(self: Any) -> Any:
        name = _cluster_name_from(self._get_param("ClusterName"))
        if name not in self.sagemaker_backend.clusters:
            from moto.sagemaker.exceptions import ValidationError

            raise ValidationError(message=f"Could not find cluster '{name}'.")
        extras = cluster_extras(name)
        if extras.node_provisioning_mode != CONTINUOUS_PROVISIONING:
            # The API reference says only that ListClusterEvents "is only supported when the
            # NodeProvisioningMode is set to Continuous"; what AWS answers otherwise (an error, and
            # which, or an empty list) is not documented, and the model lists only ResourceNotFound.
            # A ValidationException stands in for it. The product never relies on it: it does not
            # call ListClusterEvents when DescribeCluster says the mode is not Continuous.
            from moto.sagemaker.exceptions import ValidationError

            raise ValidationError(message="cluster events are not available for this cluster's NodeProvisioningMode")
        after = self._get_param("EventTimeAfter")
        before = self._get_param("EventTimeBefore")
        events = [e for e in extras.events if _in_window(e["EventTime"], after, before)]
        events.sort(key=lambda e: e["EventTime"], reverse=self._get_param("SortOrder") != "Ascending")
        start = int(self._get_param("NextToken") or 0)
        size = int(self._get_param("MaxResults") or 100)
        page = events[start : start + size]
        result: dict[str, Any] = {"Events": page}
        if start + size < len(events):
            result["NextToken"] = str(start + size)
        return ActionResult(result)

    setattr(SageMakerResponse, "list_cluster_events", list_cluster_events)  # noqa: B010


def _accept_id_arns(backend_class: type, method: str) -> None:
    original = getattr(backend_class, method)

    def translated(self: Any, cluster_name: str, *args: Any, **kwargs: Any) -> Any:
        return original(self, _cluster_name_from(cluster_name), *args, **kwargs)

    setattr(backend_class, method, translated)


def _as_datetime(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, int | float) or (isinstance(value, str) and value.replace(".", "", 1).isdigit()):
        return datetime.fromtimestamp(float(value), UTC)
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _in_window(when: datetime, after: Any, before: Any) -> bool:
    start, end = _as_datetime(after), _as_datetime(before)
    return (start is None or when >= start) and (end is None or when <= end)


def _patch_ssm() -> None:
    from moto.ssm.responses import SimpleSystemManagerResponse

    from hyperpod_nccl.probe.documents import MAX_DOCUMENT_BYTES

    base_create_document = SimpleSystemManagerResponse.create_document

    def create_document(self: Any) -> Any:
        content = self._get_param("Content") or ""
        if len(content.encode("utf-8")) > MAX_DOCUMENT_BYTES:
            return _json_error(self, "MaxDocumentSizeExceeded", "The size limit of a document is 64 KB.")
        return base_create_document(self)

    def start_session(self: Any) -> str:
        target = self._get_param("Target")
        handler = _start_session_handlers.get(f"{self.current_account}/{self.region}")
        if handler is None:
            return _json_error(self, "TargetNotConnected", f"{target} is not connected.")
        name = self._get_param("DocumentName")
        try:
            command = session_command(self.current_account, self.region, name, self._get_param("Parameters") or {})
            response = handler(target, name, command)
        except SessionRefused as refused:
            return _json_error(self, refused.code, refused.message)
        _started_sessions.append((target, name))
        return json.dumps(response)

    def terminate_session(self: Any) -> str:
        session_id = self._get_param("SessionId")
        _terminated_sessions.append(session_id)
        return json.dumps({"SessionId": session_id})

    setattr(SimpleSystemManagerResponse, "create_document", create_document)  # noqa: B010
    setattr(SimpleSystemManagerResponse, "start_session", start_session)  # noqa: B010
    setattr(SimpleSystemManagerResponse, "terminate_session", terminate_session)  # noqa: B010


def _session_document(account: str, region: str, name: str | None) -> dict[str, Any]:
    """The content of the Session document StartSession names: an AWS managed one, or one of the
    account's own (it must exist there and be of type Session), else InvalidDocument."""
    from moto.ssm.exceptions import InvalidDocument
    from moto.ssm.models import ssm_backends

    if not name:
        # The default SSM-SessionManagerRunShell opens an interactive shell: nothing to emulate.
        raise SessionRefused("InvalidDocument", "the emulation runs command sessions only: name a document")
    if name in MANAGED_SESSION_DOCUMENTS:
        return MANAGED_SESSION_DOCUMENTS[name]
    try:
        document = ssm_backends[account][region]._get_documents(name).get_default_version()
    except InvalidDocument as missing:
        raise SessionRefused("InvalidDocument", f"Document {name} does not exist in this account.") from missing
    if document.document_type != "Session":
        raise SessionRefused("InvalidDocument", f"Document {name} is not of type Session.")
    content = document.content if isinstance(document.content, dict) else json.loads(document.content)
    return dict(content)


def session_command(account: str, region: str, name: str | None, parameters: dict[str, Any]) -> str:
    """The command the agent runs for a StartSession request: the document's
    `properties.linux.commands` with its `{{parameter}}` placeholders filled from `parameters`. A
    parameter the document does not declare, or a declared one without a value or default, is
    refused: a document without parameters runs its embedded command and nothing else."""
    content = _session_document(account, region, name)
    if content.get("schemaVersion") != "1.0" or content.get("sessionType") not in _COMMAND_SESSION_TYPES:
        raise SessionRefused("InvalidDocument", f"Document {name} is not a command Session document (schema 1.0).")
    declared: dict[str, Any] = content.get("parameters") or {}
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        # [unverified] the exact code AWS answers with; the product treats it like InvalidDocument.
        raise SessionRefused("ValidationException", f"Parameters {unknown} are not defined in document {name}.")
    values: dict[str, str] = {}
    for key, spec in declared.items():
        given = parameters.get(key)
        if given is None and "default" not in spec:
            raise SessionRefused("ValidationException", f"Parameter {key} of document {name} needs a value.")
        chosen = given if given is not None else spec["default"]
        values[key] = " ".join(chosen) if isinstance(chosen, list) else str(chosen)
    template = ((content.get("properties") or {}).get("linux") or {}).get("commands")
    if not isinstance(template, str) or not template:
        raise SessionRefused("InvalidDocument", f"Document {name} has no linux commands.")
    return _DOCUMENT_PARAMETER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


class SessionRefused(Exception):
    """Raised by a StartSession handler to answer with an AWS error (e.g. TargetNotConnected)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _json_error(response: Any, code: str, message: str) -> Any:
    response.response_headers = getattr(response, "response_headers", {})
    return (
        400,
        # moto takes the HTTP status from the "status" header, not from the tuple.
        {"x-amzn-ErrorType": code, "content-type": "application/x-amz-json-1.1", "status": "400"},
        json.dumps({"__type": code, "message": message}),
    )


# --- fault injection -------------------------------------------------------------------------


def _credential_scope(environ: WsgiEnviron) -> list[str]:
    """The SigV4 credential scope of a request: [key, date, region, service, "aws4_request"]."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    # "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-west-2/sagemaker/aws4_request, ..."
    marker = "Credential="
    if marker not in auth:
        return []
    return auth.split(marker, 1)[1].split(",", 1)[0].split("/")


def _service_from_auth(environ: WsgiEnviron) -> str:
    scope = _credential_scope(environ)
    return scope[3] if len(scope) > 3 else ""


def _operation(environ: WsgiEnviron, body: bytes) -> str:
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if target:
        return target.rsplit(".", 1)[-1]
    if body and environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded"):
        action = parse_qs(body.decode("utf-8", "replace")).get("Action")
        if action:
            return action[0]
    path = environ.get("PATH_INFO", "")
    method = environ.get("REQUEST_METHOD", "GET")
    # rest-json services we call (EKS): GET /clusters/<name>
    if path.startswith("/clusters/") and method == "GET" and path.count("/") == 2:
        return "DescribeCluster"
    return ""


_QUERY_SERVICES = {"ec2", "sts", "sns", "iam"}


@dataclass
class _ActiveFault:
    spec: FaultSpec
    remaining: int | None


class FaultInjector:
    """WSGI middleware: answers matching calls with an AWS-shaped error instead of moto."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app
        self._faults: list[_ActiveFault] = []
        self._lock = threading.Lock()
        self.calls: list[str] = []
        # The calls answered with an injected fault ("service:Operation"), in order.
        self.injected: list[str] = []

    def set_faults(self, faults: Iterable[FaultSpec]) -> None:
        """Replace the active faults."""
        with self._lock:
            self._faults = [_ActiveFault(spec=f, remaining=f.times) for f in faults]

    def add_fault(self, fault: FaultSpec) -> None:
        """Add one fault to the active ones."""
        with self._lock:
            self._faults.append(_ActiveFault(spec=fault, remaining=fault.times))

    def _match(self, key: str, body: bytes) -> FaultSpec | None:
        with self._lock:
            for active in self._faults:
                if active.spec.operation.lower() != key.lower():
                    continue
                wanted = active.spec.request_contains
                if wanted is not None and wanted.encode() not in body:
                    continue
                if active.remaining is not None:
                    if active.remaining <= 0:
                        continue
                    active.remaining -= 1
                return active.spec
        return None

    def __call__(self, environ: WsgiEnviron, start_response: StartResponse) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        service = _service_from_auth(environ)
        operation = _operation(environ, body)
        key = f"{service}:{operation}"
        if service and operation:
            with self._lock:
                self.calls.append(key)
        fault = self._match(key, body) if service and operation else None
        if fault is not None:
            with self._lock:
                self.injected.append(key)
            if fault.delay_seconds:
                time.sleep(fault.delay_seconds)
            return self._error(service, fault, start_response)
        import io

        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        return self.app(environ, start_response)

    @staticmethod
    def _error(service: str, fault: FaultSpec, start_response: StartResponse) -> Iterable[bytes]:
        request_id = str(uuid.uuid4())
        status = f"{fault.http_status} Error"
        if service in _QUERY_SERVICES:
            if service == "ec2":
                payload = (
                    f"<Response><Errors><Error><Code>{fault.error_code}</Code><Message>{fault.message}</Message>"
                    f"</Error></Errors><RequestID>{request_id}</RequestID></Response>"
                )
            else:
                payload = (
                    f"<ErrorResponse><Error><Type>Sender</Type><Code>{fault.error_code}</Code>"
                    f"<Message>{fault.message}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>"
                )
            start_response(status, [("Content-Type", "text/xml"), ("x-amzn-RequestId", request_id)])
            return [payload.encode()]
        start_response(
            status,
            [
                ("Content-Type", "application/x-amz-json-1.1"),
                ("x-amzn-ErrorType", fault.error_code),
                ("x-amzn-RequestId", request_id),
            ],
        )
        return [json.dumps({"__type": fault.error_code, "message": fault.message, "Message": fault.message}).encode()]


# --- account-wide API rates --------------------------------------------------------------------


@dataclass(frozen=True)
class EmulatedLimits:
    """The account-wide API rates the emulation enforces, each per account and Region as AWS
    counts them. A rate of None turns its rule off; `enforce=False` turns every rule off.

    - ssm:StartSession: AWS publishes no StartSession quota; the 3/s figure is AWS's HyperPod SSM
      guidance (`thresholds.SSM_START_SESSION_PER_SECOND`, which the product paces at), with a
      burst of as many calls. What AWS allows in a burst is not published.
    - logs:FilterLogEvents: 5/s, not adjustable (`aws_limits.FILTER_LOG_EVENTS_PER_SECOND`); the
      burst, unpublished too, is one second's worth.
    """

    start_session_per_second: float | None = SSM_START_SESSION_PER_SECOND
    start_session_burst: int = int(SSM_START_SESSION_PER_SECOND)
    filter_log_events_per_second: float | None = FILTER_LOG_EVENTS_PER_SECOND
    filter_log_events_burst: int = int(FILTER_LOG_EVENTS_PER_SECOND)
    enforce: bool = True

    def rate_of(self, operation: str) -> tuple[float, int] | None:
        """(rate per second, burst) of `operation` ("ssm:StartSession"), or None when unlimited."""
        if not self.enforce:
            return None
        rule = {
            reads.START_SESSION: (self.start_session_per_second, self.start_session_burst),
            reads.FILTER_LOG_EVENTS: (self.filter_log_events_per_second, self.filter_log_events_burst),
        }.get(operation)
        if rule is None or rule[0] is None:
            return None
        return rule[0], max(1, rule[1])


@dataclass
class RateUsage:
    """Calls of one rate-limited operation from one account and Region: those the rate let
    through (whatever the service then answered) and those it throttled."""

    accepted: int = 0
    throttled: int = 0


class _TokenBucket:
    """`burst` tokens, refilled at `rate` per second; each call takes one or is refused."""

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._stamp = now

    def take(self, now: float) -> bool:
        # A clock swapped for one behind (a test's, restored) refills nothing until it catches up.
        self._tokens = min(float(self.burst), self._tokens + max(0.0, now - self._stamp) * self.rate)
        self._stamp = max(self._stamp, now)
        # The epsilon absorbs float rounding: a client pacing at exactly the rate (1/3 s steps)
        # must not be refused for a token short by 1e-15.
        if self._tokens < 1.0 - 1e-9:
            return False
        self._tokens = max(0.0, self._tokens - 1.0)
        return True


# The member that carries the message in each service's ThrottlingException, from its botocore
# model (ssm/2014-11-06 and logs/2014-03-28 service-2.json): SSM's shape has Message (required),
# QuotaCode and ServiceCode; CloudWatch Logs' has no members, its JSON errors carry "message".
# QuotaCode and ServiceCode are left out: AWS documents no Service Quotas code for a StartSession
# rate (the 3/s figure is guidance, not a quota), and inventing one would mislead.
_THROTTLING_MESSAGE_MEMBER = {reads.START_SESSION: "Message", reads.FILTER_LOG_EVENTS: "message"}
# What AWS says when it throttles these calls (CloudWatch Logs' and SSM's "Rate exceeded").
THROTTLED_MESSAGE = "Rate exceeded"


class AccountRateLimits:
    """WSGI middleware: a token bucket per (operation, account, Region) for the operations of
    `EmulatedLimits`; a call past its rate is answered HTTP 400 ThrottlingException and never
    reaches the service behind. Thread-safe (the server answers each request on its own thread).

    `clock` is where the buckets read time: `time.monotonic` (no wall-clock step can refill or
    drain them), or, for a test that paces the product on a virtual clock, one that adds the time
    that test's pacer skipped. `reset` leaves it as it is."""

    def __init__(self, app: WsgiApp, limits: EmulatedLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self._limits = limits
        self.clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str], _TokenBucket] = {}
        self._usage: dict[tuple[str, str], RateUsage] = {}

    @property
    def limits(self) -> EmulatedLimits:
        """The rules in force."""
        return self._limits

    def set_limits(self, limits: EmulatedLimits) -> None:
        """Enforce `limits` from now on, every bucket full again (the counts are kept)."""
        with self._lock:
            self._limits = limits
            self._buckets.clear()

    def reset(self) -> None:
        """Forget every bucket and count."""
        with self._lock:
            self._buckets.clear()
            self._usage.clear()

    def usage(self, operation: str) -> dict[str, RateUsage]:
        """Accepted and throttled calls of `operation` ("ssm:StartSession"), by "account/region"."""
        with self._lock:
            return {
                where: RateUsage(used.accepted, used.throttled)
                for (name, where), used in self._usage.items()
                if name == operation
            }

    def _admit(self, operation: str, where: str) -> bool:
        with self._lock:
            used = self._usage.setdefault((operation, where), RateUsage())
            rule = self._limits.rate_of(operation)
            if rule is None:
                used.accepted += 1
                return True
            now = self.clock()
            bucket = self._buckets.get((operation, where))
            if bucket is None:
                bucket = self._buckets[(operation, where)] = _TokenBucket(*rule, now=now)
            if bucket.take(now):
                used.accepted += 1
                return True
            used.throttled += 1
            return False

    def __call__(self, environ: WsgiEnviron, start_response: StartResponse) -> Iterable[bytes]:
        # Both operations are JSON 1.1 (X-Amz-Target), so the body need not be read.
        scope = _credential_scope(environ)
        operation = f"{scope[3]}:{_operation(environ, b'')}" if len(scope) > 3 else ""
        if operation not in _THROTTLING_MESSAGE_MEMBER:
            return self.app(environ, start_response)
        where = f"{environ.get('HTTP_X_MOTO_ACCOUNT_ID', '')}/{scope[2]}"
        if self._admit(operation, where):
            return self.app(environ, start_response)
        request_id = str(uuid.uuid4())
        start_response(
            "400 Bad Request",
            [
                ("Content-Type", "application/x-amz-json-1.1"),
                ("x-amzn-ErrorType", "ThrottlingException"),
                ("x-amzn-RequestId", request_id),
            ],
        )
        body = {"__type": "ThrottlingException", _THROTTLING_MESSAGE_MEMBER[operation]: THROTTLED_MESSAGE}
        return [json.dumps(body).encode()]


def _memoized_dispatcher(base: type) -> type:
    """moto's dispatcher with its host -> backend lookup memoized.

    moto matches every request's host against hundreds of URL patterns while holding one global
    lock, which serializes the emulation's request threads (a sweep of 16 nodes spent seconds
    there). The answer depends only on the host, so it is computed once per host.
    """

    class MemoizedDispatcher(base):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._backend_by_host: dict[str | None, Any] = {}

        def get_backend_for_host(self, host: str | None) -> Any:
            if host not in self._backend_by_host:
                self._backend_by_host[host] = super().get_backend_for_host(host)
            return self._backend_by_host[host]

    return MemoizedDispatcher


class EmulatedAws:
    """moto's server plus our extensions, fault injection and AWS's account-wide API rates
    (`limits`, default `EmulatedLimits()`: every rule on), on 127.0.0.1 (random port).

    Requests pass the fault injector first (an injected fault spends no token), then the rates.
    """

    def __init__(self, region: str = "us-west-2", *, limits: EmulatedLimits | None = None) -> None:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app

        install_moto_extensions()
        # The emulation's own request log would drown the report; HYPERPOD_SIM_DEBUG=1 shows it.
        if not os.environ.get(SIM_DEBUG_ENV):
            logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
        self.region = region
        self._default_account = str(DEFAULT_ACCOUNT_ID)
        self.account_id = self._default_account
        self._default_limits = limits or EmulatedLimits()
        self.rates = AccountRateLimits(
            _memoized_dispatcher(DomainDispatcherApplication)(create_backend_app), self._default_limits
        )
        self.faults = FaultInjector(self.rates)
        self._server: BaseWSGIServer = make_server(
            "127.0.0.1", 0, self._as_account, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="emulated-aws", daemon=True)
        share_with_every_session()
        self._loader = shared_loader()
        self._clients: dict[tuple[str, str], Any] = {}
        self._clients_lock = threading.Lock()

    def _as_account(self, environ: WsgiEnviron, start_response: StartResponse) -> Iterable[bytes]:
        # moto answers for the account a request's access key maps to, its default one for our
        # fake key: every caller is made the served account's, as a real account's keys would be.
        environ["HTTP_X_MOTO_ACCOUNT_ID"] = self.account_id
        return self.faults(environ, start_response)

    def serve_account(self, account_id: str) -> None:
        """Answer every request as account `account_id` (a scenario's), until the next `reset`."""
        if not re.fullmatch(r"\d{12}", account_id):
            raise ValueError(f"an AWS account id is 12 digits, not {account_id!r}")
        self.account_id = account_id

    @property
    def limits(self) -> EmulatedLimits:
        """The account-wide API rates in force."""
        return self.rates.limits

    def set_limits(self, limits: EmulatedLimits) -> None:
        """Enforce `limits` until the next `reset` (which restores the ones given at construction),
        every bucket full again."""
        self.rates.set_limits(limits)

    def rate_usage(self, operation: str) -> dict[str, RateUsage]:
        """Accepted and throttled calls of a rate-limited `operation` (`reads.START_SESSION`,
        `reads.FILTER_LOG_EVENTS`) since the last `reset`, by "account/region"."""
        return self.rates.usage(operation)

    @property
    def endpoint_url(self) -> str:
        """Where boto3 clients must point."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def port(self) -> int:
        """The TCP port the emulation listens on."""
        return int(self._server.server_address[1])

    def start(self) -> EmulatedAws:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and forget all emulated state."""
        self.reset()
        self._server.shutdown()
        self._server.server_close()

    def reset(self) -> None:
        """Drop every resource moto holds and our extension state; the rate buckets start full
        again, their counts at zero, under the limits given at construction."""
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST"))
        _extras.clear()
        _start_session_handlers.clear()
        _terminated_sessions.clear()
        _started_sessions.clear()
        self.faults.set_faults([])
        self.rates.reset()
        self.rates.set_limits(self._default_limits)
        self.account_id = self._default_account

    def session(self, region: str | None = None) -> boto3.Session:
        """A boto3 session with the emulation's fake credentials (never real ones).

        Sessions share one botocore loader: parsing the service models (EC2's alone is
        megabytes of JSON) once instead of per session keeps scenario start-up fast.
        """
        core = botocore.session.Session()
        core.register_component("data_loader", self._loader)
        core.set_credentials(FAKE_ACCESS_KEY, FAKE_SECRET_KEY)
        return boto3.Session(botocore_session=core, region_name=region or self.region)

    def client(self, service: str, region: str | None = None) -> Any:
        """A cached boto3 client for `service` pointed at the emulation (used for seeding)."""
        key = (service, region or self.region)
        with self._clients_lock:
            if key not in self._clients:
                session: Any = self.session(key[1])
                self._clients[key] = session.client(service, endpoint_url=self.endpoint_url, region_name=key[1])
            return self._clients[key]

    def __enter__(self) -> EmulatedAws:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
