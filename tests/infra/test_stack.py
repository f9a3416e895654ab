"""The synthesized monitor stack against its sources of truth: the runtime's settings (environment
names, table schema, ASL placeholders, event patterns) and the deployment configuration."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Match, Template

from hyperpod_nccl.monitor import LAMBDA_TIMEOUT_HEADROOM_SECONDS, asl_placeholders, render_definition
from hyperpod_nccl.monitor.settings import (
    ASL_FUNCTION_PLACEHOLDERS,
    ASL_MAP_CONCURRENCY_PLACEHOLDER,
    ASL_PROBE_TIMEOUT_PLACEHOLDER,
    CLUSTERS_ENV,
    HISTORY_DAYS_ENV,
    HYPERPOD_EVENT_PATTERNS,
    LAMBDAS,
    LOG_FILTER_RATE_ENV,
    METRIC_DIMENSION_CLUSTER,
    METRIC_FINDINGS,
    METRIC_NODES_PROBED,
    METRIC_NODES_UNREACHABLE,
    METRIC_SWEEP_DURATION,
    METRICS_NAMESPACE,
    NODE_COVERAGE_ENV,
    PROBE_TIMEOUT_SECONDS,
    REFERENCE_BASE_URL_ENV,
    SCHEDULE_TARGET_INPUT,
    START_SESSION_RATE_ENV,
    SWEEP_TIMEOUT_SECONDS,
    TABLE_SCHEMA,
    TRIGGER_MAX_EVENT_AGE_SECONDS,
    TRIGGER_RETRY_ATTEMPTS,
    TRIGGER_TIMEOUT_SECONDS,
    LambdaFunction,
    batches_at_once,
)
from infra.constants import LAMBDA_PYTHON_VERSION, POWERTOOLS_ENVIRONMENT, TRIGGER_FUNCTION
from infra.constructs import functions as functions_construct
from infra.constructs.functions import MonitorFunctions, lambda_timeouts
from infra.constructs.monitoring import missed_sweep_period_seconds
from infra.constructs.triggers import failed_triggers_queue_name
from infra.constructs.workflow import definition_with_timeout, uses_distributed_map
from tests.infra.conftest import TEST_CONTEXT, Synthesized

pytestmark = pytest.mark.infra


def _substitute(text: str, values: dict[str, str]) -> str:
    """What CloudFormation does with DefinitionSubstitutions."""
    for name, value in values.items():
        text = text.replace("${" + name + "}", value)
    return text


def _functions_by_handler(synthesized: Synthesized) -> dict[str, tuple[str, dict[str, Any]]]:
    """handler module -> (logical id, properties) of its Lambda function."""
    found = {}
    for logical_id, resource in synthesized.resources("AWS::Lambda::Function").items():
        handler = resource["Properties"]["Handler"]
        module = handler.removeprefix("hyperpod_nccl.handlers.").removesuffix(".handler")
        found[module] = (logical_id, resource["Properties"])
    return found


def test_one_resource_per_capability(synthesized: Synthesized) -> None:
    # Given the test configuration (2 clusters, 2 e-mails, Slack on), When synthesized,
    # Then each capability is there exactly as many times as configured.
    template = Template.from_json(synthesized.template)
    expected = {
        "AWS::Lambda::Function": len(LAMBDAS),
        "AWS::Lambda::LayerVersion": 1,
        "AWS::DynamoDB::GlobalTable": 1,
        "AWS::SNS::Topic": 1,
        "AWS::KMS::Key": 1,
        "AWS::SNS::Subscription": len(TEST_CONTEXT["alertEmails"]),
        "AWS::Chatbot::SlackChannelConfiguration": 1,
        "AWS::StepFunctions::StateMachine": 1,
        "AWS::Scheduler::Schedule": len(TEST_CONTEXT["clusters"]),
        "AWS::Events::Rule": len(HYPERPOD_EVENT_PATTERNS),
        "AWS::CloudWatch::Alarm": 3,
        "AWS::SQS::Queue": 1,
        "AWS::Lambda::EventInvokeConfig": 1,
        "AWS::CloudWatch::Dashboard": 1,
        # one explicit log group per function, plus the state machine's
        "AWS::Logs::LogGroup": len(LAMBDAS) + 1,
    }
    for resource_type, count in expected.items():
        template.resource_count_is(resource_type, count)


def test_every_function_is_built_from_its_lambdas_entry(synthesized: Synthesized) -> None:
    functions = _functions_by_handler(synthesized)
    assert set(functions) == set(LAMBDAS)
    for handler, (_, properties) in functions.items():
        environment = properties["Environment"]["Variables"]
        assert set(environment) == set(LAMBDAS[handler].environment) | set(POWERTOOLS_ENVIRONMENT), handler
        assert properties["Handler"] == LAMBDAS[handler].handler
        assert properties["MemorySize"] == LAMBDAS[handler].memory_mb, handler
        # Values come from the configuration, in the form the runtime's settings parse.
        if CLUSTERS_ENV in environment:
            assert json.loads(environment[CLUSTERS_ENV]) == TEST_CONTEXT["clusters"]
        if NODE_COVERAGE_ENV in environment:
            assert environment[NODE_COVERAGE_ENV] == str(TEST_CONTEXT["nodeCoverage"])
        if HISTORY_DAYS_ENV in environment:
            assert environment[HISTORY_DAYS_ENV] == str(TEST_CONTEXT["historyRetentionDays"])
        if REFERENCE_BASE_URL_ENV in environment:
            assert environment[REFERENCE_BASE_URL_ENV] == TEST_CONTEXT["referenceBaseUrl"]
        # The account's paces reach every function that paces a call, as its settings read them.
        if START_SESSION_RATE_ENV in environment:
            assert float(environment[START_SESSION_RATE_ENV]) == TEST_CONTEXT["startSessionRate"], handler
        if LOG_FILTER_RATE_ENV in environment:
            assert float(environment[LOG_FILTER_RATE_ENV]) == TEST_CONTEXT["logFilterRate"], handler


def test_functions_share_the_factory_defaults(synthesized: Synthesized) -> None:
    functions = _functions_by_handler(synthesized)
    layers = synthesized.resources("AWS::Lambda::LayerVersion")
    (layer_id,) = layers
    log_groups = synthesized.resources("AWS::Logs::LogGroup")
    timeouts = lambda_timeouts()
    for handler, (_, properties) in functions.items():
        assert properties["Runtime"] == f"python{LAMBDA_PYTHON_VERSION}"
        assert properties["Architectures"] == ["arm64"]
        assert properties["TracingConfig"] == {"Mode": "Active"}
        assert properties["Layers"] == [{"Ref": layer_id}]
        assert properties["LoggingConfig"]["LogFormat"] == "JSON"
        log_group = properties["LoggingConfig"]["LogGroup"]["Ref"]
        assert log_groups[log_group]["Properties"]["RetentionInDays"] == TEST_CONTEXT["logRetentionDays"]
        expected_timeout = TRIGGER_TIMEOUT_SECONDS if handler == TRIGGER_FUNCTION else timeouts[handler]
        assert properties["Timeout"] == expected_timeout, handler
    # The probe's Lambda stops a headroom before its state (the design card's budget plus the margin).
    assert functions["probe_node"][1]["Timeout"] == PROBE_TIMEOUT_SECONDS - LAMBDA_TIMEOUT_HEADROOM_SECONDS
    assert layers[layer_id]["Properties"]["CompatibleArchitectures"] == ["arm64"]


@pytest.mark.parametrize("change", ["a function added", "a function removed"])
def test_read_grants_name_exactly_the_functions_of_lambdas(monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    # The cluster reads stay in infra (their ARNs need the stack), keyed by the modules of
    # settings.LAMBDAS: a function in one table and not the other fails the synthesis by name.
    lambdas = dict(LAMBDAS)
    if change == "a function added":
        lambdas["inspect"] = LambdaFunction("inspect", environment=(), table_actions=(), memory_mb=256)
        named = "inspect"
    else:
        named = "notify"
        del lambdas[named]
    monkeypatch.setattr(functions_construct, "LAMBDAS", lambdas)
    stack = Stack(App(context={"aws:cdk:bundling-stacks": []}), "Guard")
    values = {name: "value" for function in LAMBDAS.values() for name in function.environment}
    with pytest.raises(ValueError, match=f"read grants and settings.LAMBDAS name different functions: {named}$"):
        MonitorFunctions(
            stack, "Functions", environment_values=values, log_retention_days=14, clusters=[], probe_documents={}
        )


def test_state_machine_substitutes_every_placeholder(synthesized: Synthesized) -> None:
    (state_machine,) = synthesized.resources("AWS::StepFunctions::StateMachine").values()
    properties = state_machine["Properties"]
    substitutions = properties["DefinitionSubstitutions"]
    assert set(substitutions) == asl_placeholders()
    functions = _functions_by_handler(synthesized)
    for handler, placeholder in ASL_FUNCTION_PLACEHOLDERS.items():
        assert substitutions[placeholder] == {"Fn::GetAtt": [functions[handler][0], "Arn"]}, placeholder
    assert substitutions[ASL_MAP_CONCURRENCY_PLACEHOLDER] == str(batches_at_once(TEST_CONTEXT["mapMaxConcurrency"]))
    assert substitutions[ASL_PROBE_TIMEOUT_PLACEHOLDER] == str(PROBE_TIMEOUT_SECONDS)
    # The deployed definition is the runtime's file plus the sweep's time bound, and valid ASL once
    # substituted (arbitrary ARNs stand in for the GetAtts).
    definition = properties["DefinitionString"]
    assert definition == definition_with_timeout()
    values = {
        name: value if isinstance(value, str) else f"arn:aws:lambda:::{name}" for name, value in substitutions.items()
    }
    rendered = json.loads(_substitute(definition, values))
    assert rendered["StartAt"] in rendered["States"]
    assert rendered["TimeoutSeconds"] == SWEEP_TIMEOUT_SECONDS
    without_bound = json.loads(render_definition(dict(values)))
    assert {k: v for k, v in rendered.items() if k != "TimeoutSeconds"} == without_bound
    assert properties["TracingConfiguration"] == {"Enabled": True}
    assert properties["LoggingConfiguration"]["Level"] == "ALL"
    assert properties["StateMachineType"] == "STANDARD"
    # The state machine may only invoke the functions its definition names.
    (policy,) = [
        p
        for p in synthesized.resources("AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [{"Ref": properties["RoleArn"]["Fn::GetAtt"][0]}]
    ]
    (invoke,) = [
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Action"] == "lambda:InvokeFunction"
    ]
    assert sorted(r["Fn::GetAtt"][0] for r in invoke["Resource"]) == sorted(
        functions[h][0] for h in ASL_FUNCTION_PLACEHOLDERS
    )


def test_table_matches_the_runtime_schema(synthesized: Synthesized) -> None:
    (table,) = synthesized.resources("AWS::DynamoDB::GlobalTable").values()
    properties = table["Properties"]
    schema: dict[str, Any] = TABLE_SCHEMA  # type: ignore[assignment]
    assert properties["KeySchema"] == [
        {"AttributeName": schema["partition_key"]["name"], "KeyType": "HASH"},
        {"AttributeName": schema["sort_key"]["name"], "KeyType": "RANGE"},
    ]
    declared = {a["AttributeName"]: a["AttributeType"] for a in properties["AttributeDefinitions"]}
    expected = {schema["partition_key"]["name"]: "S", schema["sort_key"]["name"]: "S"}
    for index in schema["global_secondary_indexes"]:
        expected[index["partition_key"]["name"]] = index["partition_key"]["type"]
        expected[index["sort_key"]["name"]] = index["sort_key"]["type"]
    assert declared == expected
    indexes = {i["IndexName"]: i for i in properties["GlobalSecondaryIndexes"]}
    assert set(indexes) == {i["index_name"] for i in schema["global_secondary_indexes"]}
    for index in schema["global_secondary_indexes"]:
        assert indexes[index["index_name"]]["KeySchema"] == [
            {"AttributeName": index["partition_key"]["name"], "KeyType": "HASH"},
            {"AttributeName": index["sort_key"]["name"], "KeyType": "RANGE"},
        ]
    assert properties["TimeToLiveSpecification"] == {"AttributeName": schema["ttl_attribute"], "Enabled": True}
    assert properties["SSESpecification"]["SSEEnabled"] is True
    replica = properties["Replicas"][0]
    assert replica["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert replica["DeletionProtectionEnabled"] is TEST_CONTEXT["tableDeletionProtection"]
    assert properties["BillingMode"] == "PAY_PER_REQUEST"


def test_rules_use_the_runtime_event_patterns_and_target_the_trigger(synthesized: Synthesized) -> None:
    trigger_id = _functions_by_handler(synthesized)[TRIGGER_FUNCTION][0]
    rules = list(synthesized.resources("AWS::Events::Rule").values())
    patterns = [rule["Properties"]["EventPattern"] for rule in rules]
    canonical = sorted(json.dumps(p, sort_keys=True) for p in patterns)
    assert canonical == sorted(json.dumps(p, sort_keys=True) for p in HYPERPOD_EVENT_PATTERNS)
    for rule in rules:
        (target,) = rule["Properties"]["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [trigger_id, "Arn"]}
        assert rule["Properties"]["State"] == "ENABLED"
    # The filters the issue asks for: Warn/Error cluster events (and those without an EventLevel,
    # optional in the API model), unhealthy nodes.
    by_type = {p["detail-type"][0]: p for p in patterns}
    assert by_type["SageMaker HyperPod Cluster Event"]["detail"]["EventDetails"]["EventLevel"] == [
        "Warn",
        "Error",
        {"exists": False},
    ]
    assert by_type["SageMaker HyperPod Cluster Node Health Event"]["detail"]["HealthSummary"]["HealthStatus"] == [
        "Unhealthy"
    ]
    assert all(p["source"] == ["aws.sagemaker"] for p in patterns)


def test_one_schedule_per_watched_cluster_at_the_configured_rate(synthesized: Synthesized) -> None:
    trigger_id = _functions_by_handler(synthesized)[TRIGGER_FUNCTION][0]
    schedules = [s["Properties"] for s in synthesized.resources("AWS::Scheduler::Schedule").values()]
    inputs = []
    for schedule in schedules:
        assert schedule["ScheduleExpression"] == f"rate({TEST_CONTEXT['sweepRateMinutes']} minutes)"
        assert schedule["State"] == "ENABLED"
        assert schedule["Target"]["Arn"] == {"Fn::GetAtt": [trigger_id, "Arn"]}
        inputs.append(json.loads(schedule["Target"]["Input"]))
    # Each tick carries the runtime's input template, scoped to one cluster.
    assert sorted((i["clusters"][0]["name"], i["clusters"][0]["region"]) for i in inputs) == sorted(
        (c["name"], c["region"]) for c in TEST_CONTEXT["clusters"]
    )
    for tick in inputs:
        assert {k: v for k, v in tick.items() if k != "clusters"} == SCHEDULE_TARGET_INPUT


def test_topic_is_encrypted_ssl_only_and_reaches_email_and_slack(synthesized: Synthesized) -> None:
    (topic_id,) = synthesized.resources("AWS::SNS::Topic")
    (key_id,) = synthesized.resources("AWS::KMS::Key")
    topic = synthesized.template["Resources"][topic_id]["Properties"]
    assert topic["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert synthesized.template["Resources"][key_id]["Properties"]["EnableKeyRotation"] is True
    (topic_policy,) = synthesized.resources("AWS::SNS::TopicPolicy").values()
    statements = topic_policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
    )
    subscriptions = [s["Properties"] for s in synthesized.resources("AWS::SNS::Subscription").values()]
    assert sorted(s["Endpoint"] for s in subscriptions) == sorted(TEST_CONTEXT["alertEmails"])
    assert all(s["Protocol"] == "email" and s["TopicArn"] == {"Ref": topic_id} for s in subscriptions)
    (slack,) = synthesized.resources("AWS::Chatbot::SlackChannelConfiguration").values()
    assert slack["Properties"]["SlackWorkspaceId"] == TEST_CONTEXT["slack"]["workspaceId"]
    assert slack["Properties"]["SlackChannelId"] == TEST_CONTEXT["slack"]["channelId"]
    assert slack["Properties"]["SnsTopicArns"] == [{"Ref": topic_id}]
    # Notifications only: no AWS action can be run from the channel.
    assert slack["Properties"]["GuardrailPolicies"] == [
        {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/AWSDenyAll"]]}
    ]
    # CloudWatch alarms publish to the encrypted topic, so the key lets CloudWatch use it.
    key_statements = synthesized.template["Resources"][key_id]["Properties"]["KeyPolicy"]["Statement"]
    assert any(s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"} for s in key_statements)


def test_alarms_fire_on_failed_or_missing_sweeps_and_notify_the_topic(synthesized: Synthesized) -> None:
    (topic_id,) = synthesized.resources("AWS::SNS::Topic")
    alarms = [a["Properties"] for a in synthesized.resources("AWS::CloudWatch::Alarm").values()]
    for alarm in alarms:
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]
    (stopped,) = [a for a in alarms if a.get("MetricName") == "ExecutionsSucceeded"]
    assert stopped["ComparisonOperator"] == "LessThanThreshold"
    assert stopped["Threshold"] == 1
    assert stopped["TreatMissingData"] == "breaching"
    assert stopped["Period"] == missed_sweep_period_seconds(
        sweep_rate_minutes=TEST_CONTEXT["sweepRateMinutes"], missed_sweeps=TEST_CONTEXT["missedSweepsBeforeAlarm"]
    )
    (failing,) = [a for a in alarms if "Metrics" in a]
    used = {m["MetricStat"]["Metric"]["MetricName"] for m in failing["Metrics"] if "MetricStat" in m}
    assert used == {"ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted"}
    assert failing["TreatMissingData"] == "notBreaching"


def test_every_trigger_that_fails_for_good_lands_in_the_alarmed_failed_triggers_queue(synthesized: Synthesized) -> None:
    resources = synthesized.template["Resources"]
    (queue_id,) = synthesized.resources("AWS::SQS::Queue")
    (key_id,) = synthesized.resources("AWS::KMS::Key")
    (topic_id,) = synthesized.resources("AWS::SNS::Topic")
    queue = resources[queue_id]["Properties"]
    queue_arn = {"Fn::GetAtt": [queue_id, "Arn"]}
    # Encrypted with the stack's key, kept 14 days, a fixed name (the key policy names it).
    assert queue["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert queue["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert queue["QueueName"] == failed_triggers_queue_name(TEST_CONTEXT["stackName"])
    # Lambda's asynchronous invocation of the trigger: the runtime's retries, then this queue.
    trigger_id = _functions_by_handler(synthesized)[TRIGGER_FUNCTION][0]
    (invoke_config,) = synthesized.resources("AWS::Lambda::EventInvokeConfig").values()
    assert invoke_config["Properties"]["FunctionName"] == {"Ref": trigger_id}
    assert invoke_config["Properties"]["MaximumRetryAttempts"] == TRIGGER_RETRY_ATTEMPTS
    assert invoke_config["Properties"]["MaximumEventAgeInSeconds"] == TRIGGER_MAX_EVENT_AGE_SECONDS
    assert invoke_config["Properties"]["DestinationConfig"] == {"OnFailure": {"Destination": queue_arn}}
    # What a rule or a schedule cannot hand to Lambda goes there too, after their own retries.
    rules = synthesized.resources("AWS::Events::Rule")
    for rule in rules.values():
        (target,) = rule["Properties"]["Targets"]
        assert target["DeadLetterConfig"] == {"Arn": queue_arn}
        assert target["RetryPolicy"]["MaximumEventAgeInSeconds"] == TRIGGER_MAX_EVENT_AGE_SECONDS
    for schedule in synthesized.resources("AWS::Scheduler::Schedule").values():
        target = schedule["Properties"]["Target"]
        assert target["DeadLetterConfig"] == {"Arn": queue_arn}
        assert target["RetryPolicy"]["MaximumEventAgeInSeconds"] <= TEST_CONTEXT["sweepRateMinutes"] * 60
    # SSL only; EventBridge may send to it only on behalf of the monitor's rules.
    (queue_policy,) = synthesized.resources("AWS::SQS::QueuePolicy").values()
    assert queue_policy["Properties"]["Queues"] == [{"Ref": queue_id}]
    statements = queue_policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
    )
    allows = [s for s in statements if s["Effect"] == "Allow"]
    assert sorted(json.dumps(s["Condition"], sort_keys=True) for s in allows) == sorted(
        json.dumps({"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]}}}, sort_keys=True)
        for rule_id in rules
    )
    assert all(
        s["Principal"] == {"Service": "events.amazonaws.com"} and s["Action"] == "sqs:SendMessage" for s in allows
    )
    # The key lets EventBridge encrypt with it for this queue's messages only.
    key_statements = resources[key_id]["Properties"]["KeyPolicy"]["Statement"]
    (eventbridge,) = [s for s in key_statements if s.get("Principal") == {"Service": "events.amazonaws.com"}]
    assert sorted(eventbridge["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"]
    (encryption_context,) = eventbridge["Condition"]["StringEquals"].values()
    assert queue["QueueName"] in json.dumps(encryption_context)
    # One message is one lost sweep: the alarm pages on the first, to the alerts topic.
    alarms = [a["Properties"] for a in synthesized.resources("AWS::CloudWatch::Alarm").values()]
    (depth,) = [a for a in alarms if a.get("MetricName") == "ApproximateNumberOfMessagesVisible"]
    assert depth["Namespace"] == "AWS/SQS"
    assert depth["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    assert depth["ComparisonOperator"] == "GreaterThanThreshold" and depth["Threshold"] == 0
    assert depth["AlarmActions"] == [{"Ref": topic_id}]


def test_failed_triggers_queue_name_fits_sqs_for_any_stack_name() -> None:
    assert failed_triggers_queue_name("HpncTest") == "HpncTest-failed-triggers"
    longest, other = "A" * 101, "A" * 100 + "B"
    assert len(failed_triggers_queue_name(longest)) <= 80
    assert failed_triggers_queue_name(longest) != failed_triggers_queue_name(other)


def test_missed_sweep_window_is_capped_at_a_day() -> None:
    assert missed_sweep_period_seconds(sweep_rate_minutes=15, missed_sweeps=3) == 45 * 60
    assert missed_sweep_period_seconds(sweep_rate_minutes=12 * 60, missed_sweeps=3) == 24 * 3600


def test_outputs_have_fixed_logical_ids(synthesized: Synthesized) -> None:
    outputs = synthesized.template["Outputs"]
    assert {
        "FindingsTableName",
        "AlertsTopicArn",
        "SweepStateMachineArn",
        "TriggerFunctionName",
        "KubernetesCollectorRoleArn",
        "DashboardName",
        "WatchedClusters",
    } <= set(outputs)
    # `hyperpod-nccl status` reads the watched clusters from this output: the functions' own list.
    watched = outputs["WatchedClusters"]["Value"]
    environments = [
        f["Properties"]["Environment"]["Variables"]
        for f in synthesized.template["Resources"].values()
        if f["Type"] == "AWS::Lambda::Function" and "Environment" in f.get("Properties", {})
    ]
    assert watched and all(env.get(CLUSTERS_ENV, watched) == watched for env in environments)
    assert any(CLUSTERS_ENV in env for env in environments)
    Template.from_json(synthesized.template).has_output("SweepStateMachineArn", {"Value": {"Ref": Match.any_value()}})


def test_distributed_map_detection_reaches_nested_maps() -> None:
    # The role gains the child-execution permissions only when the definition needs them.
    inline = {
        "States": {
            "P": {
                "Type": "Parallel",
                "Branches": [
                    {"States": {"M": {"Type": "Map", "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}}}}}
                ],
            }
        }
    }
    distributed = json.loads(json.dumps(inline).replace("INLINE", "DISTRIBUTED"))
    assert not uses_distributed_map(inline)
    assert uses_distributed_map(distributed)


def test_dashboard_graphs_what_the_handlers_emit_for_every_watched_cluster(synthesized: Synthesized) -> None:
    (dashboard,) = synthesized.resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    # Metrics are addressed by the runtime's namespace, names and dimensions (Powertools adds `service`).
    assert f'\\"{METRICS_NAMESPACE}\\"' in body
    assert f'\\"service\\",\\"{POWERTOOLS_ENVIRONMENT["POWERTOOLS_SERVICE_NAME"]}\\"' in body
    for cluster in TEST_CONTEXT["clusters"]:
        assert f'\\"{METRIC_DIMENSION_CLUSTER}\\",\\"{cluster["name"]}\\"' in body
    for metric in [*METRIC_FINDINGS.values(), METRIC_NODES_PROBED, METRIC_NODES_UNREACHABLE, METRIC_SWEEP_DURATION]:
        assert f'\\"{metric}\\"' in body, metric
