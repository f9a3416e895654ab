"""What the monitor's roles may do, proved on the synthesized template: ProbeNode can start sessions
only with the stack's probe-only documents, each role gets only the table operations its handler's
code makes and only AWS actions some code path calls, and the alarms can publish to the encrypted
topic (topic policy and key policy)."""

from __future__ import annotations

import ast
import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperpod_nccl.monitor.settings import PROBE_DOCUMENTS_ENV, TABLE_ACTIONS
from hyperpod_nccl.probe import documents
from infra.code_asset import shipped_files
from infra.constants import FUNCTIONS_DIR, OUTPUT_PROBE_DOCUMENTS, PACKAGE_NAME
from infra.constructs.monitoring import alarm_names
from tests.infra.conftest import STACK_NAME, TEST_CONTEXT, Synthesized
from tests.infra.test_security import _as_list, _identity_statements, _role_of

pytestmark = pytest.mark.infra

PACKAGE = FUNCTIONS_DIR / PACKAGE_NAME
HANDLERS = PACKAGE / "handlers"


def _shipped_sources() -> list[Path]:
    """The Python files of the code asset: the code the deployed functions can run."""
    return [path for path in shipped_files() if path.suffix == ".py"]


def _roles_by_handler(template: dict[str, Any]) -> dict[str, str]:
    return {
        r["Properties"]["Handler"].split(".")[2]: r["Properties"]["Role"]["Fn::GetAtt"][0]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    }


def _statements_of(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [s for policy, s in _identity_statements(template) if _role_of(template, policy) == role]


def _text(value: Any) -> str:
    """An ARN expression as text (`Fn::Join` of literals and pseudo parameters)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_text(p) for p in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    return json.dumps(value)


# --- the probe documents and StartSession ---------------------------------------------------------


def test_probe_documents_embed_the_local_probe_and_take_no_parameters(synthesized: Synthesized) -> None:
    deployed = {d["Properties"]["Name"]: d["Properties"] for d in synthesized.resources("AWS::SSM::Document").values()}
    expected = documents.document_names(STACK_NAME)
    assert set(deployed) == set(expected.values())
    for role, name in expected.items():
        properties = deployed[name]
        assert (properties["DocumentType"], properties["DocumentFormat"]) == ("Session", "JSON")
        content = properties["Content"]
        assert content["schemaVersion"] == "1.0" and content["sessionType"] == "NonInteractiveCommands"
        assert "parameters" not in content
        assert content["properties"]["linux"]["commands"] == documents.embedded_command(role)
        assert documents.matches_local(json.dumps(content), role)
        assert len(json.dumps(content, separators=(",", ":")).encode()) <= documents.MAX_DOCUMENT_BYTES
    outputs = synthesized.template["Outputs"]
    for role, output in OUTPUT_PROBE_DOCUMENTS.items():
        (logical_id,) = [
            k
            for k, d in synthesized.resources("AWS::SSM::Document").items()
            if d["Properties"]["Name"] == expected[role]
        ]
        assert outputs[output]["Value"] == {"Ref": logical_id}
    (probe,) = [
        f["Properties"]
        for f in synthesized.resources("AWS::Lambda::Function").values()
        if f["Properties"]["Handler"].endswith(".probe_node.handler")
    ]
    assert json.loads(probe["Environment"]["Variables"][PROBE_DOCUMENTS_ENV]) == expected


def test_start_session_is_allowed_only_with_the_probe_documents(synthesized: Synthesized) -> None:
    template = synthesized.template
    account, region = TEST_CONTEXT["account"], TEST_CONTEXT["region"]
    allowed = {f":ssm:{region}:{account}:document/{name}" for name in documents.document_names(STACK_NAME).values()}
    starts = [s for _, s in _identity_statements(template) if "ssm:StartSession" in _as_list(s["Action"])]
    assert starts, "ProbeNode must be able to start sessions"
    # HyperPod targets have no resource type StartSession can be scoped to (AWS's HyperPod guide grants
    # `*`): the target statement allows everything but documents, the other one names the documents.
    by_scope = {"NotResource" in s: s for s in starts}
    assert len(by_scope) == len(starts) == 2, starts
    for statement in starts:
        # Every statement allowing StartSession carries the document check (AWS: it must be in all).
        assert statement["Condition"] == {"BoolIfExists": {"ssm:SessionDocumentAccessCheck": "true"}}
        assert _as_list(statement["Action"]) == ["ssm:StartSession"]
    assert [_text(r) for r in _as_list(by_scope[True]["NotResource"])] == ["arn:<AWS::Partition>:ssm:*:*:document/*"]
    resources = [_text(r) for r in _as_list(by_scope[False]["Resource"])]
    assert {r.split("arn:<AWS::Partition>", 1)[-1] for r in resources} == allowed, resources
    roles = {
        _role_of(template, p) for p, s in _identity_statements(template) if "ssm:StartSession" in _as_list(s["Action"])
    }
    assert roles == {_roles_by_handler(template)["probe_node"]}


# --- table operations: the written table, the template and the code agree --------------------------

_TABLE_CALLS = {
    "get_item": "GetItem",
    "put_item": "PutItem",
    "query": "Query",
    "scan": "Scan",
    "update_item": "UpdateItem",
    "delete_item": "DeleteItem",
    "batch_writer": "BatchWriteItem",
    "batch_write_item": "BatchWriteItem",
    "batch_get_item": "BatchGetItem",
    "transact_write_items": "TransactWriteItems",
    "transact_get_items": "TransactGetItems",
}


def _calls(node: ast.AST) -> Iterator[ast.expr]:
    for child in ast.walk(node):
        if isinstance(child, ast.Call):
            yield child.func


def _store_method_actions() -> dict[str, set[str]]:
    """Store method -> the DynamoDB actions it makes (its own `self.table.<op>` and its `self.<m>`)."""
    tree = ast.parse((PACKAGE / "monitor" / "store.py").read_text())
    (store,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Store"]
    direct: dict[str, set[str]] = {}
    inner: dict[str, set[str]] = {}
    for method in (n for n in store.body if isinstance(n, ast.FunctionDef)):
        direct[method.name], inner[method.name] = set(), set()
        for func in _calls(method):
            if not isinstance(func, ast.Attribute):
                continue
            owner = func.value
            if isinstance(owner, ast.Attribute) and owner.attr == "table" and func.attr in _TABLE_CALLS:
                direct[method.name].add(_TABLE_CALLS[func.attr])
            if isinstance(owner, ast.Name) and owner.id == "self":
                inner[method.name].add(func.attr)

    def closure(name: str, seen: set[str]) -> set[str]:
        if name in seen or name not in direct:
            return set()
        seen.add(name)
        return direct[name].union(*(closure(m, seen) for m in inner[name]))

    return {name: closure(name, set()) for name in direct}


def _derived_table_actions(handler: str) -> set[str]:
    """The DynamoDB actions reachable from a handler module: the module-level functions of the
    code asset it calls or passes on (by name, transitively), and the Store methods they call on a
    receiver named like a store. Over-approximates, never misses a call made through a `store`
    variable. The other handler modules are left out: each defines its own `handler`."""
    store_methods = _store_method_actions()
    functions: dict[str, list[tuple[set[str], set[str]]]] = {}
    for path in _shipped_sources():
        if path.parent == HANDLERS and path.name != "__init__.py":
            continue
        # Module-level functions, and classes as a whole (a class that holds a store, such as the
        # table-backed pacer, makes its calls from its methods: `self.store.<method>`).
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef | ast.ClassDef):
                continue
            used: set[str] = set()
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            for func in _calls(node):
                if isinstance(func, ast.Attribute):
                    names.add(func.attr)
                    owner = func.value
                    receiver = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", "")
                    if "store" in receiver.lower() and func.attr in store_methods:
                        used.add(func.attr)
            functions.setdefault(node.name, []).append((used, names))
    module = ast.parse((HANDLERS / f"{handler}.py").read_text())
    pending = [n.id for n in ast.walk(module) if isinstance(n, ast.Name)]
    pending += [f.attr for f in _calls(module) if isinstance(f, ast.Attribute)]
    seen: set[str] = set()
    actions: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for used, names in functions[name]:
            for method in used:
                actions |= store_methods[method]
            pending.extend(names)
    return actions


@pytest.mark.parametrize("handler", sorted(TABLE_ACTIONS))
def test_table_actions_are_exactly_what_the_handlers_code_makes(handler: str) -> None:
    assert _derived_table_actions(handler) == set(TABLE_ACTIONS[handler]), (
        f"{handler}: update settings.TABLE_ACTIONS (infra grants exactly that table)"
    )


def test_each_role_gets_exactly_its_handlers_table_actions(synthesized: Synthesized) -> None:
    template = synthesized.template
    for handler, role in _roles_by_handler(template).items():
        granted = {
            action.removeprefix("dynamodb:")
            for statement in _statements_of(template, role)
            for action in _as_list(statement["Action"])
            if action.startswith("dynamodb:")
        }
        assert granted == set(TABLE_ACTIONS[handler]), handler


# --- no grant without a caller -------------------------------------------------------------------

# Actions the platform, not our code, calls with the role: Lambda's log delivery, X-Ray, SNS's use
# of the topic key on Publish. DynamoDB is proved above.
# Calls Lambda makes with a function's role, not its code: logs, traces, and the record of an
# asynchronous invocation sent to its on-failure destination (the trigger's failed-triggers queue).
_PLATFORM = {
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "sqs:SendMessage",
    # Authorised when the probe opens the session's data channel (a websocket, not an SDK call).
    "ssmmessages:OpenDataChannel",
}
_PLATFORM_PREFIXES = ("kms:", "dynamodb:")


def _snake(action: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", action.split(":", 1)[1]).lower()


def test_every_granted_action_is_called_by_the_code_asset(synthesized: Synthesized) -> None:
    # The deployed code, not the CLI's: a call only the CLI makes grants a function nothing.
    code = "\n".join(path.read_text() for path in _shipped_sources())
    template = synthesized.template
    for handler, role in _roles_by_handler(template).items():
        for statement in _statements_of(template, role):
            for action in _as_list(statement["Action"]):
                if action in _PLATFORM or action.startswith(_PLATFORM_PREFIXES):
                    continue
                method = _snake(action)
                # A client call (`.describe_cluster(`) or a paginator (`"list_cluster_nodes"`).
                assert f".{method}(" in code or f'"{method}"' in code, f"{handler}: {action} has no caller"


# --- the alarms reach the encrypted topic ---------------------------------------------------------


def _admits_alarm(statement: dict[str, Any], alarm_arn: str, account: str) -> bool:
    if statement.get("Effect") != "Allow" or statement.get("Principal") != {"Service": "cloudwatch.amazonaws.com"}:
        return False
    condition = statement.get("Condition", {})
    if condition.get("StringEquals", {}).get("aws:SourceAccount") != account:
        return False
    patterns = [_text(p) for p in _as_list(condition.get("ArnLike", {}).get("aws:SourceArn", []))]
    return any(re.fullmatch(re.escape(p).replace(r"\*", ".*"), alarm_arn) for p in patterns)


def test_every_alarm_can_publish_to_the_encrypted_topic(synthesized: Synthesized) -> None:
    account, region = TEST_CONTEXT["account"], TEST_CONTEXT["region"]
    (topic_id, topic) = next(iter(synthesized.resources("AWS::SNS::Topic").items()))
    key_ref = topic["Properties"]["KmsMasterKeyId"]
    key_id = key_ref["Fn::GetAtt"][0] if "Fn::GetAtt" in key_ref else key_ref["Ref"]
    key_statements = synthesized.template["Resources"][key_id]["Properties"]["KeyPolicy"]["Statement"]
    (policy,) = synthesized.resources("AWS::SNS::TopicPolicy").values()
    assert policy["Properties"]["Topics"] == [{"Ref": topic_id}]
    topic_statements = policy["Properties"]["PolicyDocument"]["Statement"]
    alarms = list(synthesized.resources("AWS::CloudWatch::Alarm").values())
    assert sorted(a["Properties"]["AlarmName"] for a in alarms) == sorted(alarm_names(STACK_NAME))
    for alarm in alarms:
        properties = alarm["Properties"]
        assert properties["AlarmActions"] == [{"Ref": topic_id}]
        arn = f"arn:<AWS::Partition>:cloudwatch:{region}:{account}:alarm:{properties['AlarmName']}"
        publish = [
            s
            for s in topic_statements
            if _admits_alarm(s, arn, account)
            and "sns:Publish" in _as_list(s["Action"])
            and s["Resource"] == {"Ref": topic_id}
        ]
        assert publish, f"topic policy does not admit {arn}"
        use_key = [
            s
            for s in key_statements
            if _admits_alarm(s, arn, account) and {"kms:Decrypt", "kms:GenerateDataKey*"} <= set(_as_list(s["Action"]))
        ]
        assert use_key, f"key policy does not let {arn} use the topic key"
    # The grants are for this stack's alarms only, not every alarm of the account.
    for other in ("someone-elses-alarm", f"{STACK_NAME}-Prod-SweepsFailing"):
        foreign = f"arn:<AWS::Partition>:cloudwatch:{region}:{account}:alarm:{other}"
        assert not any(_admits_alarm(s, foreign, account) for s in [*topic_statements, *key_statements])
    assert not any(_admits_alarm(s, arn.replace(account, "444455556666"), account) for s in topic_statements)


def test_probe_documents_are_read_from_the_shipped_scripts() -> None:
    # The document embeds the script file itself (read at synth time), not a copy in Python.
    for role in documents.ROLES:
        script = (Path(PACKAGE) / "probe" / documents.SCRIPTS[role]).read_text()
        assert documents.script_digest(role) in documents.document_content(role)["description"]
        assert documents.embedded_command(role).count(" | base64 -d | bash") == 1
        encoded = documents.embedded_command(role).split("echo ", 1)[1].split(" ", 1)[0]
        assert base64.b64decode(encoded).decode() == script


def test_synth_warns_that_clusters_outside_the_stack_region_are_not_probed(synthesized: Synthesized) -> None:
    warnings = [
        str(entry["data"])
        for entries in synthesized.metadata.values()
        for entry in entries
        if entry["type"] == "aws:cdk:warning"
    ]
    elsewhere = sorted({c["region"] for c in TEST_CONTEXT["clusters"]} - {TEST_CONTEXT["region"]})
    assert elsewhere == ["us-east-1"]
    assert any("us-east-1" in w and "cannot be probed" in w for w in warnings), warnings


def test_clusters_given_their_ids_are_the_only_ones_read_and_probed(tmp_path: Path) -> None:
    from infra.app import build_app

    ids = {"ml-cluster-a": "a1b2c3d4e5f6", "ml-cluster-b": "0123456789ab"}
    context = {**TEST_CONTEXT, "clusters": [{**c, "id": ids[c["name"]]} for c in TEST_CONTEXT["clusters"]]}
    build_app(context, outdir=str(tmp_path), cdk_json=None).synth()
    template = json.loads((tmp_path / f"{STACK_NAME}.template.json").read_text())
    account = TEST_CONTEXT["account"]
    assert TEST_CONTEXT["region"] == "us-west-2"  # ml-cluster-a's: the only region sessions start in
    arn = {c["name"]: f"arn:<AWS::Partition>:sagemaker:{c['region']}:{account}:cluster/{ids[c['name']]}"
           for c in TEST_CONTEXT["clusters"]}  # fmt: skip
    cluster_resources: dict[str, set[str]] = {}
    for _, statement in _identity_statements(template):
        for action in _as_list(statement["Action"]):
            scope = statement.get("Resource", statement.get("NotResource"))
            resources = {_text(r) for r in _as_list(scope) if ":sagemaker:" in _text(r)}
            if resources:
                cluster_resources.setdefault(action, set()).update(resources)
    assert not any(r.endswith("cluster/*") for rs in cluster_resources.values() for r in rs), cluster_resources
    # StartSession's HyperPod target is granted on `*` (no cluster resource type for it).
    assert "ssm:StartSession" not in cluster_resources
    assert cluster_resources["sagemaker:DescribeCluster"] == set(arn.values())
    assert cluster_resources["sagemaker:ListClusterNodes"] == set(arn.values())
