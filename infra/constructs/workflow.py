"""The sweep state machine: the runtime's ASL definition (`hyperpod_nccl.monitor.ASL_PATH`) deployed
as is, with its `${...}` placeholders substituted by the functions' ARNs and the sweep's budgets."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from hyperpod_nccl.monitor import ASL_PATH, asl_placeholders, load_definition
from hyperpod_nccl.monitor.settings import (
    ASL_FUNCTION_PLACEHOLDERS,
    ASL_MAP_CONCURRENCY_PLACEHOLDER,
    ASL_PROBE_TIMEOUT_PLACEHOLDER,
    PROBE_TIMEOUT_SECONDS,
    SWEEP_TIMEOUT_SECONDS,
    batches_at_once,
    execution_arn,
)
from infra import nag
from infra.constants import STATE_MACHINE_LOG_PREFIX


def state_machine_arn(scope: Construct, name: str) -> str:
    """The ARN a state machine named `name` gets in the scope's stack.

    Built from the name rather than read from the resource, so functions can receive it in their
    environment without a dependency cycle (the state machine depends on the functions).
    """
    return Stack.of(scope).format_arn(
        service="states", resource="stateMachine", resource_name=name, arn_format=ArnFormat.COLON_RESOURCE_NAME
    )


def executions_arn(scope: Construct, name: str) -> str:
    """The ARN pattern of every execution of the state machine named `name`."""
    return execution_arn(state_machine_arn(scope, name), "*")


def uses_distributed_map(definition: object) -> bool:
    """Whether any Map state of a parsed ASL definition runs its items as child executions."""
    if isinstance(definition, dict):
        processor = definition.get("ItemProcessor")
        if isinstance(processor, dict) and processor.get("ProcessorConfig", {}).get("Mode") == "DISTRIBUTED":
            return True
        return any(uses_distributed_map(value) for value in definition.values())
    if isinstance(definition, list):
        return any(uses_distributed_map(value) for value in definition)
    return False


def definition_with_timeout() -> str:
    """The runtime's ASL text, with a top-level `TimeoutSeconds` of SWEEP_TIMEOUT_SECONDS when it sets none.

    CDK applies a state machine's `timeout` only to definitions it builds from states; for a
    definition read from a file or string it drops it silently, so the bound goes into the text.
    The placeholders stay for CloudFormation's DefinitionSubstitutions.
    """
    text = ASL_PATH.read_text()
    dummies: dict[str, str | int] = dict.fromkeys(asl_placeholders(), 1)
    if "TimeoutSeconds" in load_definition(dummies):
        return text
    opening = text.index("{") + 1
    return f'{text[:opening]}\n  "TimeoutSeconds": {SWEEP_TIMEOUT_SECONDS},{text[opening:]}'


class SweepWorkflow(Construct):
    """A standard state machine with full logging to its own log group, X-Ray tracing and a timeout."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        state_machine_name: str,
        functions: Mapping[str, lambda_.IFunction],
        map_max_concurrency: int,
        log_retention_days: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.state_machine_name = state_machine_name
        self.substitutions: dict[str, str] = {
            placeholder: functions[handler].function_arn for handler, placeholder in ASL_FUNCTION_PLACEHOLDERS.items()
        }
        # The config counts probes at once; the Distributed Map counts child executions (batches).
        self.substitutions[ASL_MAP_CONCURRENCY_PLACEHOLDER] = str(batches_at_once(map_max_concurrency))
        self.substitutions[ASL_PROBE_TIMEOUT_PLACEHOLDER] = str(PROBE_TIMEOUT_SECONDS)
        unsubstituted = sorted(asl_placeholders() - set(self.substitutions))
        if unsubstituted:
            raise ValueError(f"the sweep definition has placeholders infra does not fill: {', '.join(unsubstituted)}")
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=f"{STATE_MACHINE_LOG_PREFIX}{state_machine_name}",
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.log_group.node.default_child.retention_in_days = log_retention_days  # type: ignore[union-attr]
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("states.amazonaws.com"),
            description="hyperpod-nccl-monitor sweep state machine",
        )
        # The definition invokes unqualified function ARNs, so the role needs exactly those.
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["lambda:InvokeFunction"],
                resources=[functions[handler].function_arn for handler in ASL_FUNCTION_PLACEHOLDERS],
            )
        )
        if uses_distributed_map(load_definition(dict.fromkeys(asl_placeholders(), 1))):
            # A Distributed Map starts child executions of this same state machine and follows them.
            own = state_machine_arn(self, state_machine_name)
            executions = executions_arn(self, state_machine_name)
            self.role.add_to_policy(iam.PolicyStatement(actions=["states:StartExecution"], resources=[own]))
            self.role.add_to_policy(
                iam.PolicyStatement(
                    actions=["states:DescribeExecution", "states:StopExecution"], resources=[executions]
                )
            )
            nag.acknowledge_wildcard_resources(
                self.role, [executions], "A Distributed Map manages the child executions of this state machine only."
            )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=state_machine_name,
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_string(definition_with_timeout()),
            definition_substitutions=self.substitutions,
            role=self.role,
            tracing_enabled=True,
            # Every event (cdk-nag SF1), without the state data: each parent event would otherwise log
            # the node list again, the largest line of a sweep's bill (BENCHMARKS.md, cost). The data
            # lives in the table; the events keep names, timings and errors.
            logs=sfn.LogOptions(destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=False),
        )
        nag.acknowledge(
            self.role,
            f"{nag.IAM5}[Resource::*]",
            "Step Functions log delivery (logs:CreateLogDelivery and related) and X-Ray tracing"
            " (xray:PutTraceSegments and related) support no resource-level permissions.",
        )
