"""Security invariants of the synthesized template: the monitor reads clusters and writes only its own
resources; cdk-nag AwsSolutions passes with a reason on every acknowledgement; cfn-lint finds no error."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from infra.nag import IAM5
from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.infra

# Reading a cluster: the brief's read-only vocabulary. StartSession/TerminateSession open and close
# the probes' SSM sessions; StartSession counts as a read only with the document check and only on
# the stack's own probe documents, which run the read-only probe and nothing else (the walk below
# enforces both; test_probe_access.py proves the documents' content).
READ_ONLY = re.compile(r"^[a-z0-9-]+:(Describe|List|Get|Filter|BatchGet)[A-Za-z]*$")
READ_ONLY_EXTRA = {
    "ssm:StartSession",
    "ssm:TerminateSession",
    # Opens the data channel of a session the probe started (AWS's Session Manager policies grant it).
    "ssmmessages:OpenDataChannel",
    "sts:GetCallerIdentity",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
}
# Writes, each allowed only on resources of these CloudFormation types defined in this template.
OWN_RESOURCE_WRITES: dict[str, set[str]] = {
    "dynamodb:": {"AWS::DynamoDB::GlobalTable"},
    "sns:Publish": {"AWS::SNS::Topic"},
    "kms:Decrypt": {"AWS::KMS::Key"},
    "kms:GenerateDataKey": {"AWS::KMS::Key"},
    "sqs:SendMessage": {"AWS::SQS::Queue"},
    "logs:CreateLogStream": {"AWS::Logs::LogGroup"},
    "logs:PutLogEvents": {"AWS::Logs::LogGroup"},
    "states:StartExecution": {"AWS::StepFunctions::StateMachine"},
    "states:StopExecution": {"AWS::StepFunctions::StateMachine"},
    "lambda:InvokeFunction": {"AWS::Lambda::Function"},
}
# cdk-nag findings acknowledged other than IAM5 wildcards (the failed-triggers queue's: it IS a DLQ).
NOT_IAM_ACKNOWLEDGED = {"Annotation::AwsSolutions-SQS3"}
# Step Functions' vended log delivery: account-level APIs without resource-level permissions, granted
# by CDK to the state machine's role only.
LOG_DELIVERY = {
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
}


def _identity_statements(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(policy logical id, Allow statement) of every identity policy, inline or managed."""
    for logical_id, resource in template["Resources"].items():
        documents = []
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            documents.append(resource["Properties"]["PolicyDocument"])
        if resource["Type"] == "AWS::IAM::Role":
            documents += [p["PolicyDocument"] for p in resource["Properties"].get("Policies", [])]
        for document in documents:
            for statement in document["Statement"]:
                if statement["Effect"] == "Allow":
                    yield logical_id, statement


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _referenced_ids(value: Any) -> set[str]:
    """Logical ids a resource expression points at (Ref / GetAtt, at any depth)."""
    if isinstance(value, dict):
        if "Ref" in value:
            return {value["Ref"]}
        if "Fn::GetAtt" in value:
            return {value["Fn::GetAtt"][0]}
        return set().union(*(_referenced_ids(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_referenced_ids(v) for v in value)) if value else set()
    return set()


def _names_own_state_machine(resource: Any, names: set[str]) -> bool:
    """An ARN built from our state machine's name (it cannot reference itself without a cycle)."""
    text = json.dumps(resource)
    return any(f":stateMachine:{n}" in text or f":execution:{n}:" in text for n in names)


def _role_of(template: dict[str, Any], policy_id: str) -> str:
    policy = template["Resources"][policy_id]
    if policy["Type"] == "AWS::IAM::Role":
        return policy_id
    (role,) = policy["Properties"]["Roles"]
    return str(role["Ref"])


def test_every_iam_action_reads_or_writes_only_the_monitors_own_resources(synthesized: Synthesized) -> None:
    template = synthesized.template
    types = {logical_id: r["Type"] for logical_id, r in template["Resources"].items()}
    state_machine_roles = {
        r["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::StepFunctions::StateMachine"
    }
    state_machine_names = {
        r["Properties"]["StateMachineName"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::StepFunctions::StateMachine"
    }
    document_names = {
        r["Properties"]["Name"] for r in template["Resources"].values() if r["Type"] == "AWS::SSM::Document"
    }
    checked = 0
    for policy_id, statement in _identity_statements(template):
        if "NotResource" in statement:
            # StartSession's target (HyperPod targets have no resource type): everything but a
            # document, with the check; documents are allowed only where named (below).
            assert statement["Action"] == "ssm:StartSession", f"{policy_id}: NotResource {statement}"
            assert statement.get("Condition") == {"BoolIfExists": {"ssm:SessionDocumentAccessCheck": "true"}}
            assert json.dumps(statement["NotResource"]).endswith(':ssm:*:*:document/*"]]}'), statement
            continue
        resources = _as_list(statement["Resource"])
        for action in _as_list(statement["Action"]):
            checked += 1
            assert "*" not in action.split(":", 1)[0], f"{policy_id}: service wildcard {action}"
            if action in LOG_DELIVERY:
                assert _role_of(template, policy_id) in state_machine_roles, f"{policy_id}: {action}"
                continue
            if action == "ssm:StartSession":
                # Free-text documents (AWS-StartNonInteractiveCommand, the default shell) are root
                # command execution: only documents of this template, and never without the check.
                assert statement.get("Condition") == {"BoolIfExists": {"ssm:SessionDocumentAccessCheck": "true"}}
                named = [json.dumps(r) for r in resources if ":document/" in json.dumps(r)]
                assert (
                    named
                    and all(f"document/{n}" in " ".join(named) for n in document_names)
                    and len(named) == len(document_names)
                ), f"{policy_id}: StartSession on {named}"
            if READ_ONLY.match(action) or action in READ_ONLY_EXTRA:
                continue
            allowed = next((t for prefix, t in OWN_RESOURCE_WRITES.items() if action.startswith(prefix)), None)
            assert allowed is not None, f"{policy_id}: {action} is neither read-only nor an allowed write"
            for resource in resources:
                if action.startswith("states:") and _names_own_state_machine(resource, state_machine_names):
                    continue
                targets = _referenced_ids(resource)
                assert targets, f"{policy_id}: {action} on {resource!r}, not on a resource of this stack"
                assert {types.get(t) for t in targets} <= allowed, f"{policy_id}: {action} on {resource!r}"
    assert checked > 50  # the walk really saw the policies


def test_function_roles_have_no_managed_policies(synthesized: Synthesized) -> None:
    # The AWS managed AWSLambdaBasicExecutionRole would allow writing to every log group.
    for logical_id, role in synthesized.resources("AWS::IAM::Role").items():
        principals = json.dumps(role["Properties"]["AssumeRolePolicyDocument"])
        if "lambda.amazonaws.com" in principals:
            assert "ManagedPolicyArns" not in role["Properties"], logical_id


def test_each_function_gets_only_the_cluster_reads_its_handler_uses(synthesized: Synthesized) -> None:
    template = synthesized.template
    functions = {
        r["Properties"]["Handler"].split(".")[2]: r["Properties"]["Role"]["Fn::GetAtt"][0]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    }
    actions_by_role: dict[str, set[str]] = {}
    for policy_id, statement in _identity_statements(template):
        actions_by_role.setdefault(_role_of(template, policy_id), set()).update(_as_list(statement["Action"]))

    def cluster_reads(handler: str) -> set[str]:
        return {a for a in actions_by_role[functions[handler]] if a.split(":")[0] in ("sagemaker", "ec2", "eks", "ssm")}

    assert cluster_reads("trigger") == set()
    assert cluster_reads("aggregate") == set()
    assert cluster_reads("notify") == set()
    assert "ssm:StartSession" in cluster_reads("probe_node")
    assert all("ssm:StartSession" not in cluster_reads(h) for h in functions if h != "probe_node")
    assert "eks:DescribeCluster" in cluster_reads("collect_kubernetes")
    assert "sagemaker:ListClusterEvents" in cluster_reads("discover")
    assert "sns:Publish" in actions_by_role[functions["notify"]]
    assert all("sns:Publish" not in actions_by_role[functions[h]] for h in functions if h != "notify")
    assert "states:StartExecution" in actions_by_role[functions["trigger"]]


def test_only_the_trigger_and_its_schedules_may_send_to_the_failed_triggers_queue(synthesized: Synthesized) -> None:
    template = synthesized.template
    (queue_id,) = synthesized.resources("AWS::SQS::Queue")
    trigger_role = next(
        r["Properties"]["Role"]["Fn::GetAtt"][0]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"].split(".")[2] == "trigger"
    )
    schedules = synthesized.resources("AWS::Scheduler::Schedule").values()
    schedule_roles = {s["Properties"]["Target"]["RoleArn"]["Fn::GetAtt"][0] for s in schedules}
    senders: set[str] = set()
    for policy_id, statement in _identity_statements(template):
        if "sqs:SendMessage" in _as_list(statement["Action"]):
            senders.add(_role_of(template, policy_id))
            assert _referenced_ids(statement["Resource"]) == {queue_id}, f"{policy_id}: {statement['Resource']}"
    assert senders == {trigger_role, *schedule_roles}


def test_cdk_nag_passes_and_every_acknowledgement_has_a_reason(synthesized: Synthesized) -> None:
    # The fixture's synth would have raised on an unacknowledged finding; the report agrees.
    report = json.loads((synthesized.outdir / "validation-report.json").read_text())
    violations = [v for plugin in report["pluginReports"] for v in plugin.get("violations", [])]
    assert violations == []
    acknowledged = {
        rule: reason
        for entries in synthesized.metadata.values()
        for entry in entries
        if entry["type"] == "aws:cdk:acknowledged-rules"
        for rule, reason in entry["data"].items()
    }
    assert acknowledged, "expected the IAM5 wildcard acknowledgements"
    for rule, reason in acknowledged.items():
        assert rule.startswith(f"Annotation::{IAM5}[") or rule in NOT_IAM_ACKNOWLEDGED, rule
        assert len(reason) > 40, f"{rule}: reason too thin: {reason!r}"
    # The one acknowledgement that is not a wildcard: on the failed-triggers queue, which is itself
    # a dead-letter queue (of Lambda and EventBridge, which cdk-nag does not look at), and only there.
    (queue_path,) = [p for p in synthesized.metadata if p.endswith("/Triggers/FailedTriggers/Resource")]
    for path, entries in synthesized.metadata.items():
        for entry in entries:
            if entry["type"] == "aws:cdk:acknowledged-rules" and NOT_IAM_ACKNOWLEDGED & set(entry["data"]):
                assert path.startswith(queue_path.removesuffix("/Resource")), path


# cfn-lint's console entry point, run with this interpreter (the package has no __main__).
CFN_LINT = "import sys; from cfnlint.runner import main; sys.exit(main())"


def test_cfn_lint_reports_no_errors(synthesized: Synthesized) -> None:
    result = subprocess.run(
        [sys.executable, "-c", CFN_LINT, "--format", "parseable", str(synthesized.template_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    # cfn-lint's exit code is a bit field: 2 = errors, 4 = warnings, 8 = informational.
    assert result.returncode & 2 == 0, result.stdout + result.stderr
    assert result.returncode & 1 == 0, result.stdout + result.stderr  # 1 = cfn-lint itself failed
