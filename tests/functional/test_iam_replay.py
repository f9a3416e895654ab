"""IAM as AWS evaluates it: every AWS call each Lambda made in emulated state-machine sweeps is
replayed, as an action and the resource ARNs the Service Authorization Reference (SAR) defines for
it, against that Lambda's role policy in the template synthesized for the emulated account, and
must be allowed; every action a role is granted must have been used by some call, or be listed in
`NOT_CALLED_BY_THE_CODE` with the reason it is needed on a path the scenarios do not take.

The emulation authorises nothing (moto accepts any call from the fake credentials), so without
this test a grant AWS would refuse passes every other test. Calls are recorded in the process the
emulation runs the handlers in: `BaseClient._make_api_call` (one record per API call, before the
SDK's retries) and the data channel's websocket open (`ssmmessages:OpenDataChannel`, which AWS
authorises when the channel opens, not at StartSession). A call belongs to the Lambda whose
invocation thread (`lambda-<function>`, serverless.run_until) started the thread making it, or
to that Lambda's asynchronous invocation (`lambda-async-<function>`: Lambda sends the on-failure
destination record with the function's role). A call to an encrypted topic or queue is also
replayed as the KMS calls AWS makes for it with the caller's credentials
(`ENCRYPTED_TARGET_KEY_ACTIONS`), on the key the emulated topic or queue names.
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from botocore.client import BaseClient

import hyperpod_nccl.ssm.client as ssm_client
from hyperpod_nccl.monitor.settings import HANDLER_MODULES
from hyperpod_nccl_sim.runtime import SimulatedCluster
from hyperpod_nccl_sim.serverless import FUNCTION_PREFIX, STACK_NAME, TABLE_NAME, LocalMonitor, schedule_event

pytestmark = pytest.mark.infra  # synthesizes the CDK app once per emulated account and region

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

# The sweeps replayed: an EKS cluster (Kubernetes reads, node probes) and a Slurm one (its
# controller probe document), so that each Lambda's calls on both orchestrators are seen; after
# the first, an event whose trigger fails every attempt (the on-failure destination's SendMessage).
SCENARIOS = ("eks-p5", "slurm-p5en")

# Actions AWS authorises without any policy: STS GetCallerIdentity ("No permissions are required to
# perform this operation", STS API Reference, GetCallerIdentity); a grant of it is harmless.
ALWAYS_ALLOWED = frozenset({"sts:GetCallerIdentity"})

# Granted actions no call of the replayed sweeps makes, by handler module, with why they are needed.
_RUNTIME_LOGS = "Lambda's runtime writes the function's own log group with the execution role (no SDK call)"
_XRAY = "active tracing: the X-Ray daemon in Lambda sends segments with the execution role (tracing is off here)"
NOT_CALLED_BY_THE_CODE: dict[tuple[str, str], str] = {
    **{(m, "logs:CreateLogStream"): _RUNTIME_LOGS for m in HANDLER_MODULES},
    **{(m, "logs:PutLogEvents"): _RUNTIME_LOGS for m in HANDLER_MODULES},
    **{(m, "xray:PutTraceSegments"): _XRAY for m in HANDLER_MODULES},
    **{(m, "xray:PutTelemetryRecords"): _XRAY for m in HANDLER_MODULES},
    ("trigger", "states:DescribeExecution"): "monitor/lock.py reads an execution's status when the cluster is"
    " locked (an abandoned lease) or StartExecution answers ExecutionAlreadyExists (a retried trigger)",
    ("trigger", "dynamodb:UpdateItem"): "folds a trigger into the lock of the sweep already running"
    " (Store.fold_trigger_into_lock, take_over_lock): only when the cluster is locked",
    ("notify", "dynamodb:DeleteItem"): "releases a notification claim when Publish fails, so that the state's"
    " Retry publishes it (Store.release_notification_claim)",
    ("probe_node", "ssm:TerminateSession"): "ends a session whose data channel failed (SessionRunner.terminate):"
    " the scenarios' healthy channels close themselves",
    ("discover", "sagemaker:ListClusters"): "names the account's clusters when DescribeCluster does not find the"
    " watched one (collectors/control_plane.py); the scenarios' clusters exist",
}


# --- recording ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RawCall:
    """One AWS call a Lambda made: its IAM service prefix, operation, parameters and region."""

    module: str
    service: str
    operation: str
    params: dict[str, Any]
    region: str
    response: dict[str, Any] = field(default_factory=dict)

    @property
    def action(self) -> str:
        return f"{self.service}:{self.operation}"


def _lambda_of(thread: threading.Thread | None) -> str | None:
    """The handler module whose invocation started `thread` (itself or an ancestor), or None."""
    while thread is not None:
        for prefix in ("lambda-async-", "lambda-"):
            if thread.name.startswith(prefix + FUNCTION_PREFIX):
                return thread.name.removeprefix(prefix + FUNCTION_PREFIX)
        thread = getattr(thread, "_iam_replay_parent", None)
    return None


class CallRecorder:
    """Records the AWS calls of every Lambda the emulation runs in this process."""

    def __init__(self) -> None:
        self.calls: list[RawCall] = []
        self._lock = threading.Lock()

    def _add(self, call: RawCall) -> None:
        with self._lock:
            self.calls.append(call)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        recorder = self
        original_init = threading.Thread.__init__
        original_call = BaseClient._make_api_call
        original_connect = ssm_client.connect

        def init(thread: threading.Thread, *args: Any, **kwargs: Any) -> None:
            original_init(thread, *args, **kwargs)
            thread._iam_replay_parent = threading.current_thread()  # type: ignore[attr-defined]

        def make_api_call(client: Any, operation: str, params: dict[str, Any]) -> Any:
            module = _lambda_of(threading.current_thread())
            response: dict[str, Any] = {}
            try:
                response = original_call(client, operation, params)
                return response
            finally:
                # A call that failed was authorised first (or refused): it is replayed too.
                if module is not None:
                    service = client.meta.service_model.signing_name
                    recorder._add(
                        RawCall(module, service, operation, dict(params), client.meta.region_name, dict(response))
                    )

        def connect(url: str, *args: Any, **kwargs: Any) -> Any:
            module = _lambda_of(threading.current_thread())
            if module is not None:
                recorder._add(RawCall(module, "ssmmessages", "OpenDataChannel", {"StreamUrl": url}, ""))
            return original_connect(url, *args, **kwargs)

        monkeypatch.setattr(threading.Thread, "__init__", init)
        monkeypatch.setattr(BaseClient, "_make_api_call", make_api_call)
        monkeypatch.setattr(ssm_client, "connect", connect)


# --- resources as the Service Authorization Reference defines them -------------------------------


@dataclass(frozen=True)
class Call:
    """A call as IAM evaluates it: the action and every resource it is authorised against."""

    module: str
    action: str
    resources: tuple[str, ...]


@dataclass
class Emulated:
    """What the resources of one emulated deployment are called (names the ARNs derive from)."""

    account: str
    region: str
    monitor: LocalMonitor
    sessions: dict[str, tuple[str, str]] = field(default_factory=dict)  # StreamUrl -> (SessionId, region)

    def arn(self, service: str, resource: str, region: str | None = None, account: str | None = None) -> str:
        return f"arn:aws:{service}:{self.region if region is None else region}:{self.account if account is None else account}:{resource}"  # noqa: E501

    @functools.cached_property
    def queue_arns(self) -> dict[str, str]:
        sqs = self.monitor.client("sqs")
        urls = sqs.list_queues().get("QueueUrls", [])
        return {
            url: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            for url in urls
        }

    @functools.cached_property
    def encryption_keys(self) -> dict[str, str]:
        """The KMS key of each encrypted topic and queue (by topic ARN and queue URL)."""
        sns, sqs = self.monitor.client("sns"), self.monitor.client("sqs")
        keys = {
            url: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"] for url in self.queue_arns
        }
        keys[self.monitor.topic_arn] = sns.get_topic_attributes(TopicArn=self.monitor.topic_arn)["Attributes"]
        return {
            target: attributes["KmsMasterKeyId"]
            for target, attributes in keys.items()
            if attributes.get("KmsMasterKeyId")
        }

    def cluster_arn(self, name_or_arn: str, region: str) -> str:
        if name_or_arn.startswith("arn:"):
            return name_or_arn
        described = self.monitor.emulation.client("sagemaker", region).describe_cluster(ClusterName=name_or_arn)
        return str(described["ClusterArn"])


def _log_group(call: RawCall, emulated: Emulated) -> str:
    identifier = call.params.get("logGroupIdentifier") or call.params["logGroupName"]
    if identifier.startswith("arn:"):
        return str(identifier).removesuffix(":*")
    return emulated.arn("logs", f"log-group:{identifier}", call.region)


def _tables(call: RawCall, emulated: Emulated) -> tuple[str, ...]:
    if "RequestItems" in call.params:
        names = sorted(call.params["RequestItems"])
    elif "TransactItems" in call.params:
        names = sorted({next(iter(item.values()))["TableName"] for item in call.params["TransactItems"]})
    else:
        names = [call.params["TableName"]]
    index = call.params.get("IndexName")
    return tuple(
        emulated.arn("dynamodb", f"table/{name}" + (f"/index/{index}" if index else ""), call.region) for name in names
    )


def _document(call: RawCall, emulated: Emulated) -> str:
    name = call.params.get("DocumentName", "SSM-SessionManagerRunShell")
    # AWS-owned documents have no account in their ARN.
    return emulated.arn("ssm", f"document/{name}", call.region, "" if name.startswith("AWS-") else None)


# Per action, the resources the SAR's "Resource types" column names, from the request. An action
# the sweeps call that is missing here fails the test: add it from the SAR, do not guess.
RESOURCES: dict[str, Callable[[RawCall, Emulated], tuple[str, ...]]] = {
    "sts:GetCallerIdentity": lambda c, e: ("*",),
    "ec2:DescribeSecurityGroups": lambda c, e: ("*",),  # no resource-level permissions
    "sagemaker:ListClusters": lambda c, e: ("*",),
    **{
        f"sagemaker:{operation}": lambda c, e: (e.cluster_arn(c.params["ClusterName"], c.region),)
        for operation in ("DescribeCluster", "ListClusterNodes", "DescribeClusterNode", "ListClusterEvents")
    },
    "eks:DescribeCluster": lambda c, e: (e.arn("eks", f"cluster/{c.params['name']}", c.region),),
    # DescribeLogGroups: the account's log-group:* (SAR: log-group; no group is named by the request).
    "logs:DescribeLogGroups": lambda c, e: (e.arn("logs", "log-group:*", c.region),),
    "logs:DescribeLogStreams": lambda c, e: (_log_group(c, e),),
    "logs:FilterLogEvents": lambda c, e: (_log_group(c, e),),
    # StartSession: the document and the target. A HyperPod target (`sagemaker-cluster:<id>_<group>-<instance>`)
    # is none of the SAR's StartSession resource types (document, instance, managed-instance, session):
    # it is authorised as itself, which only a `*` resource matches (AWS's HyperPod guide grants `*`).
    "ssm:StartSession": lambda c, e: (_document(c, e), str(c.params["Target"])),
    "ssm:TerminateSession": lambda c, e: (e.arn("ssm", f"session/{c.params['SessionId']}", c.region),),
    "ssmmessages:OpenDataChannel": lambda c, e: (
        e.arn("ssm", f"session/{e.sessions[c.params['StreamUrl']][0]}", e.sessions[c.params["StreamUrl"]][1]),
    ),
    **{
        f"dynamodb:{operation}": _tables
        for operation in ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchWriteItem")
    },
    "sns:Publish": lambda c, e: (str(c.params["TopicArn"]),),
    "states:StartExecution": lambda c, e: (str(c.params["stateMachineArn"]),),
    "states:DescribeExecution": lambda c, e: (str(c.params["executionArn"]),),
    "sqs:SendMessage": lambda c, e: (e.queue_arns[c.params["QueueUrl"]],),
}


# What a call to an SSE-KMS encrypted target also needs of its key, with the caller's credentials:
# the SQS Developer Guide (key management: a producer needs kms:GenerateDataKey and kms:Decrypt) and
# the SNS Developer Guide (key management: a publisher needs kms:GenerateDataKey* and kms:Decrypt).
# The request parameter that names the target, per action.
ENCRYPTED_TARGET_KEY_ACTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "sqs:SendMessage": ("QueueUrl", ("kms:GenerateDataKey", "kms:Decrypt")),
    "sns:Publish": ("TopicArn", ("kms:GenerateDataKey", "kms:Decrypt")),
}


def _key_calls(call: RawCall, emulated: Emulated) -> list[Call]:
    """The KMS calls AWS makes on the caller's behalf for a call to an encrypted target."""
    parameter, actions = ENCRYPTED_TARGET_KEY_ACTIONS.get(call.action, ("", ()))
    key = emulated.encryption_keys.get(str(call.params.get(parameter, "")))
    return [Call(call.module, action, (key,)) for action in actions] if key else []


def as_evaluated(raw: list[RawCall], emulated: Emulated) -> list[Call]:
    """Each recorded call as IAM sees it, with the key calls of an encrypted target; fails on an
    action the table above does not know."""
    for call in raw:
        if call.action == "ssm:StartSession" and call.response:
            emulated.sessions[call.response["StreamUrl"]] = (call.response["SessionId"], call.region)
    unknown = sorted({c.action for c in raw} - set(RESOURCES))
    assert not unknown, f"add these actions' SAR resource types to RESOURCES: {unknown}"
    return [
        evaluated
        for c in raw
        for evaluated in [Call(c.module, c.action, RESOURCES[c.action](c, emulated)), *_key_calls(c, emulated)]
    ]


# --- the template's policies ---------------------------------------------------------------------


@functools.cache
def synthesize(account: str, region: str, cluster: str) -> str:
    """The monitor's template (JSON text) for the emulated account, region and cluster, with the
    emulation's stack name (its probe documents are named after it)."""
    import tempfile

    from infra.app import build_app

    outdir = tempfile.mkdtemp(prefix="iam-replay-cdk.")
    context = {
        "aws:cdk:bundling-stacks": [],
        "stackName": STACK_NAME,
        "account": account,
        "region": region,
        "clusters": [{"name": cluster, "region": region}],
    }
    build_app(context, outdir=outdir, cdk_json=None).synth()
    return (Path(outdir) / f"{STACK_NAME}.template.json").read_text()


# The emulated resource each template resource type stands for (Ref and GetAtt Arn both give the
# ARN: every Ref these policies use is of a topic or a state machine, whose Ref is the ARN).
def _emulated_arns(template: dict[str, Any], emulated: Emulated) -> dict[str, str]:
    monitor = emulated.monitor
    table = monitor.client("dynamodb").describe_table(TableName=TABLE_NAME)["Table"]["TableArn"]
    failed_queue = next(arn for arn in emulated.queue_arns.values() if arn.endswith(":hyperpod-nccl-failed-triggers"))
    by_type = {
        "AWS::DynamoDB::GlobalTable": table,
        "AWS::SNS::Topic": monitor.topic_arn,
        "AWS::StepFunctions::StateMachine": monitor.state_machine_arn,
        "AWS::SQS::Queue": failed_queue,
        "AWS::KMS::Key": monitor.key_arn,
    }
    return {
        logical: by_type[resource["Type"]]
        for logical, resource in template["Resources"].items()
        if resource["Type"] in by_type
    }


def resolve(value: Any, arns: dict[str, str], emulated: Emulated) -> str:
    """A policy's resource expression as text: pseudo parameters and our resources resolved to
    the emulated ones; any other resource (a key, a log group) to `<LogicalId>`, which no call names."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        pseudo = {"AWS::Partition": "aws", "AWS::Region": emulated.region, "AWS::AccountId": emulated.account}
        return pseudo.get(value["Ref"]) or arns.get(value["Ref"], f"<{value['Ref']}>")
    if "Fn::GetAtt" in value:
        logical, attribute = value["Fn::GetAtt"]
        assert attribute == "Arn", value
        return arns.get(logical, f"<{logical}>")
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(resolve(part, arns, emulated) for part in parts)
    raise AssertionError(f"teach resolve() this intrinsic: {value}")


def _pattern(text: str, *, ignore_case: bool) -> re.Pattern[str]:
    """An IAM wildcard (`*` any run of characters, `?` one) as a regular expression."""
    body = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in text)
    return re.compile(body, re.IGNORECASE if ignore_case else 0)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclass
class Statement:
    """One identity-policy statement with its resources resolved (`excludes`: its NotResource)."""

    effect: str
    actions: list[str]
    resources: list[str]
    condition: dict[str, dict[str, str]]
    excludes: bool = False

    def matches_action(self, action: str) -> str | None:
        """The granted action pattern that matches `action`, or None."""
        return next((a for a in self.actions if _pattern(a, ignore_case=True).fullmatch(action)), None)

    def matches_resource(self, resource: str) -> bool:
        named = any(_pattern(r, ignore_case=False).fullmatch(resource) for r in self.resources)
        return named != self.excludes

    def condition_holds(self) -> bool:
        """The conditions these policies use, evaluated for a request that carries no condition key
        they test (the `...IfExists` operators hold; anything else must be taught here)."""
        for operator in self.condition:
            assert operator.endswith("IfExists"), f"teach condition_holds() the operator {operator}"
        return True


def role_statements(template: dict[str, Any], emulated: Emulated) -> dict[str, list[Statement]]:
    """Each handler module's identity-policy statements (inline policies attached to its role)."""
    arns = _emulated_arns(template, emulated)
    roles = {
        r["Properties"]["Handler"].split(".")[2]: r["Properties"]["Role"]["Fn::GetAtt"][0]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    }
    statements: dict[str, list[Statement]] = {module: [] for module in roles}
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::IAM::Role":
            assert not resource["Properties"].get("ManagedPolicyArns"), "a managed policy's grants cannot be replayed"
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        attached = {role["Ref"] for role in resource["Properties"]["Roles"]}
        for raw in resource["Properties"]["PolicyDocument"]["Statement"]:
            assert not {"NotAction", "NotPrincipal"} & set(raw), f"teach Statement: {raw}"
            excludes = "NotResource" in raw
            statement = Statement(
                effect=raw["Effect"],
                actions=_as_list(raw["Action"]),
                resources=[
                    resolve(r, arns, emulated) for r in _as_list(raw["NotResource" if excludes else "Resource"])
                ],
                condition=raw.get("Condition", {}),
                excludes=excludes,
            )
            for module, role in roles.items():
                if role in attached:
                    statements[module].append(statement)
    return statements


@dataclass
class Decision:
    """Whether a call is allowed, and which (statement, granted action) pairs allowed it."""

    allowed: bool
    why: str
    used: set[tuple[int, str]]


def evaluate(statements: list[Statement], call: Call) -> Decision:
    """IAM's identity-policy logic for one call: an explicit Deny wins; otherwise every resource
    the action is authorised against must be allowed by some statement (AWS checks each)."""
    used: set[tuple[int, str]] = set()
    refused: list[str] = []
    for resource in call.resources:
        allowed_here = False
        for index, statement in enumerate(statements):
            granted = statement.matches_action(call.action)
            if granted is None or not statement.matches_resource(resource) or not statement.condition_holds():
                continue
            if statement.effect == "Deny":
                return Decision(False, f"explicitly denied on {resource}", used)
            allowed_here = True
            used.add((index, granted))
        if not allowed_here:
            refused.append(resource)
    if call.action in ALWAYS_ALLOWED:
        return Decision(True, "always allowed", used)
    if refused:
        return Decision(False, f"no statement allows it on {refused}", used)
    return Decision(True, "allowed", used)


# --- the sweeps ----------------------------------------------------------------------------------


@dataclass
class Replay:
    """The recorded calls of one scenario's sweep and its deployment's policies."""

    scenario: str
    calls: list[Call]
    statements: dict[str, list[Statement]]
    emulated: Emulated


@pytest.fixture(scope="module")
def replays(emulation: Any) -> Iterator[list[Replay]]:
    """Each scenario's sweep, run once for every test of this module, with its calls recorded."""
    from hyperpod_nccl_sim.scenario import load_scenario

    done: list[Replay] = []
    recorder = CallRecorder()
    with pytest.MonkeyPatch.context() as monkeypatch:
        recorder.install(monkeypatch)
        for scenario in SCENARIOS:
            recorder.calls.clear()
            simulation = SimulatedCluster(load_scenario(scenario).model_copy(deep=True), emulation=emulation).start()
            # Threads: the recorder hooks botocore in this process, which a sandbox process would not share.
            deployed = LocalMonitor(simulation, node_coverage=2, sandboxes="threads").start()
            try:
                # Delivered as Scheduler delivers it (an asynchronous invocation), so that the
                # trigger runs on a Lambda invocation thread like every other function.
                assert deployed.deliver(schedule_event()).wait().outcome == "succeeded"
                execution = deployed.executions()[0]  # newest first
                run = deployed.wait(execution["executionArn"])
                assert run.status == "SUCCEEDED", run
                if scenario == SCENARIOS[0]:
                    _deliver_an_event_that_fails_for_good(deployed)
                emulated = Emulated(account=emulation.account_id, region=deployed.region, monitor=deployed)
                template = json.loads(synthesize(emulated.account, emulated.region, simulation.scenario.cluster.name))
                statements = role_statements(template, emulated)
                done.append(Replay(scenario, as_evaluated(recorder.calls, emulated), statements, emulated))
            finally:
                deployed.stop()
                simulation.stop()
    yield done


def _deliver_an_event_that_fails_for_good(deployed: LocalMonitor) -> None:
    """A trigger whose every attempt fails (StartExecution refused): Lambda then sends the event's
    record to the failed-triggers queue with the trigger's role, and the trigger gives back the
    lock it took. Both calls are replayed like the sweep's."""
    from hyperpod_nccl_sim.scenario import FaultSpec

    faults = deployed.emulation.faults
    faults.add_fault(FaultSpec(operation="states:StartExecution", error_code="AccessDeniedException"))
    try:
        tick = schedule_event()
        assert deployed.deliver(tick).wait().outcome == "failed"
    finally:
        faults.set_faults([])
    [record] = deployed.drain_failed_triggers()
    assert record["requestPayload"] == tick


def test_every_call_each_lambda_made_is_allowed_by_its_role(replays: list[Replay]) -> None:
    refused: list[str] = []
    for replay in replays:
        modules = {call.module for call in replay.calls}
        assert {"trigger", "discover", "collect_logs", "probe_node", "aggregate", "notify"} <= modules, modules
        for call in replay.calls:
            decision = evaluate(replay.statements[call.module], call)
            if not decision.allowed:
                refused.append(f"{replay.scenario}: {call.module} {call.action} {call.resources}: {decision.why}")
    assert not refused, "\n".join(sorted(set(refused)))


# A grant: (function, its statement known by its resources with the deployment's region, account
# and key id left out, whether those are a NotResource, the granted action pattern).
Grant = tuple[str, tuple[str, ...], bool, str]


def _deployment_free(resources: list[str]) -> tuple[str, ...]:
    """A statement's resources without what differs between deployments of the same stack."""
    generic = (re.sub(r"^(arn:aws:[\w-]+):[a-z0-9-]*:\d*:", r"\1:REGION:ACCOUNT:", r) for r in resources)
    return tuple(re.sub(r"key/[0-9a-f-]{36}$", "key/ID", r) for r in generic)


def _grants_granted_and_used(replays: list[Replay]) -> tuple[set[Grant], set[Grant]]:
    """Every Allow grant of every replay's roles, and those some recorded call used. Each scenario
    deploys in its own region and not every scenario takes every path, so grants are compared
    across replays without what differs between their deployments."""
    granted: set[Grant] = set()
    used: set[Grant] = set()
    for replay in replays:
        for module, statements in replay.statements.items():
            granted |= {
                (module, _deployment_free(s.resources), s.excludes, action)
                for s in statements
                if s.effect == "Allow"
                for action in s.actions
            }
        for call in replay.calls:
            statements = replay.statements[call.module]
            used |= {
                (call.module, _deployment_free(statements[index].resources), statements[index].excludes, action)
                for index, action in evaluate(statements, call).used
            }
    return granted, used


def test_every_grant_is_used_or_says_why_it_is_needed(replays: list[Replay]) -> None:
    grants, uses = _grants_granted_and_used(replays)
    granted = {(module, action) for module, _, _, action in grants}
    used = {(module, action) for module, _, _, action in uses}
    unused = sorted(granted - used - set(NOT_CALLED_BY_THE_CODE))
    assert not unused, f"granted, never used by the sweeps, and not in NOT_CALLED_BY_THE_CODE: {unused}"
    # The list says why a grant no call uses is needed: an entry for a grant that is gone or now used is stale.
    stale = sorted((set(NOT_CALLED_BY_THE_CODE) & used) | (set(NOT_CALLED_BY_THE_CODE) - granted))
    assert not stale, f"remove from NOT_CALLED_BY_THE_CODE (not granted, or used by a call): {stale}"


def test_every_statement_that_grants_a_used_action_is_used(replays: list[Replay]) -> None:
    # Per statement, not only per action: a second statement granting a used action on resources
    # no call touches (a wider ARN, another table) would pass the test above.
    granted, used = _grants_granted_and_used(replays)
    needed = {grant for grant in granted if (grant[0], grant[3]) not in NOT_CALLED_BY_THE_CODE}
    unused = sorted(needed - used)
    assert not unused, f"statements whose grant no call of the sweeps used: {unused}"


@pytest.mark.parametrize(
    "document", ["AWS-StartInteractiveCommand", "AWS-StartNonInteractiveCommand", "SSM-SessionManagerRunShell"]
)
def test_probe_node_cannot_start_a_session_with_any_other_document(replays: list[Replay], document: str) -> None:
    # The target is granted on everything but documents: a free-text document would be root on the node.
    for replay in replays:
        [start, *_] = [c for c in replay.calls if c.action == "ssm:StartSession"]
        emulated = replay.emulated
        account = "" if document.startswith("AWS-") else None
        other = Call(
            start.module, start.action, (emulated.arn("ssm", f"document/{document}", None, account), start.resources[1])
        )
        decision = evaluate(replay.statements["probe_node"], other)
        assert not decision.allowed, (replay.scenario, other, decision)
        assert evaluate(replay.statements["probe_node"], start).allowed


def test_a_data_channel_refused_by_the_service_is_access_denied_naming_the_action() -> None:
    from websockets.sync.server import serve

    from hyperpod_nccl import reads
    from hyperpod_nccl.ssm.client import SessionError, SessionErrorKind, run_data_channel

    # What the service answers a principal without ssmmessages:OpenDataChannel: the handshake is refused.
    with serve(
        lambda ws: None, "127.0.0.1", 0, process_request=lambda ws, request: ws.respond(403, "denied\n")
    ) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.socket.getsockname()[1]
        with pytest.raises(SessionError) as refused:
            run_data_channel(f"ws://127.0.0.1:{port}/v1/data-channel/s-1", "token", deadline=time.monotonic() + 5)
        server.shutdown()
    assert refused.value.kind is SessionErrorKind.ACCESS_DENIED
    assert refused.value.message.startswith(f"{reads.OPEN_DATA_CHANNEL} denied"), refused.value.message
