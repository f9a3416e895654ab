"""The monitor's stack: it composes one construct per capability and does the wiring between them
(environment values, grants, outputs). Nothing here builds a resource by itself."""

from __future__ import annotations

import json

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from hyperpod_nccl.monitor.settings import (
    ALERTS_TOPIC_ENV,
    CLUSTERS_ENV,
    FINDINGS_TABLE_ENV,
    FUNCTION_ENVIRONMENT,
    HISTORY_DAYS_ENV,
    NODE_COVERAGE_ENV,
    REFERENCE_BASE_URL_ENV,
    STATE_MACHINE_ENV,
    TABLE_WRITERS,
)
from infra import nag
from infra.config import StageConfig
from infra.constants import (
    OUTPUT_DASHBOARD,
    OUTPUT_KUBERNETES_ROLE_ARN,
    OUTPUT_STATE_MACHINE_ARN,
    OUTPUT_TABLE_NAME,
    OUTPUT_TOPIC_ARN,
    OUTPUT_TRIGGER_FUNCTION,
    TRIGGER_FUNCTION,
)
from infra.constructs.functions import MonitorFunctions
from infra.constructs.monitoring import MonitorObservability
from infra.constructs.notifications import AlertNotifications
from infra.constructs.storage import FindingsStorage
from infra.constructs.triggers import SweepTriggers
from infra.constructs.workflow import SweepWorkflow, executions_arn, state_machine_arn


class MonitorStack(Stack):
    """Storage, alerts, functions, the sweep state machine, its triggers and its own monitoring."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StageConfig, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.config = config
        self.storage = FindingsStorage(self, "Storage", deletion_protection=config.table_deletion_protection)
        self.notifications = AlertNotifications(
            self,
            "Notifications",
            alert_emails=config.alert_emails,
            slack=config.slack,
            configuration_name=f"{config.stack_name}-alerts",
        )
        state_machine_name = f"{config.stack_name}-sweep"
        environment = {
            FINDINGS_TABLE_ENV: self.storage.table.table_name,
            ALERTS_TOPIC_ENV: self.notifications.topic.topic_arn,
            STATE_MACHINE_ENV: state_machine_arn(self, state_machine_name),
            REFERENCE_BASE_URL_ENV: config.reference_base_url,
            NODE_COVERAGE_ENV: str(config.node_coverage),
            CLUSTERS_ENV: json.dumps([cluster.model_dump() for cluster in config.clusters], separators=(",", ":")),
            HISTORY_DAYS_ENV: str(config.history_retention_days),
        }
        self.functions = MonitorFunctions(
            self,
            "Functions",
            environment_values=environment,
            log_retention_days=config.log_retention_days,
            cluster_regions=config.cluster_regions,
        )
        self.workflow = SweepWorkflow(
            self,
            "Workflow",
            state_machine_name=state_machine_name,
            functions=self.functions.functions,
            map_max_concurrency=config.map_max_concurrency,
            log_retention_days=config.log_retention_days,
        )
        self._grant()
        self.triggers = SweepTriggers(
            self,
            "Triggers",
            trigger=self.functions.functions[TRIGGER_FUNCTION],
            clusters=config.clusters,
            sweep_rate_minutes=config.sweep_rate_minutes,
        )
        self.observability = MonitorObservability(
            self,
            "Monitoring",
            state_machine=self.workflow.state_machine,
            functions=self.functions.functions,
            topic=self.notifications.topic,
            clusters=config.clusters,
            sweep_rate_minutes=config.sweep_rate_minutes,
            missed_sweeps=config.missed_sweeps_before_alarm,
            dashboard_name=f"{config.stack_name}-{self.region}",
        )
        self._outputs()
        nag.apply(self)

    def _grant(self) -> None:
        """Writes go only to the monitor's own resources, and only to the functions that use them."""
        functions, roles = self.functions.functions, self.functions.roles
        table = self.storage.table
        for handler in TABLE_WRITERS:
            table.grant_read_write_data(functions[handler])
            nag.acknowledge_wildcard_resources(
                roles[handler],
                [f"{table.table_arn}/index/*"],
                "Read/write on the monitor's own table includes its secondary indexes (queried by cluster).",
            )
        for handler, names in FUNCTION_ENVIRONMENT.items():
            if ALERTS_TOPIC_ENV in names:
                self.notifications.topic.grant_publish(functions[handler])
                nag.acknowledge(
                    roles[handler],
                    f"{nag.IAM5}[Action::kms:GenerateDataKey*]",
                    "Publishing to the KMS-encrypted alerts topic needs kms:GenerateDataKey* on that topic's key only.",
                )
            if STATE_MACHINE_ENV in names:
                self.workflow.state_machine.grant_start_execution(functions[handler])
                # A replayed trigger finds its execution by name and checks whether it still runs.
                executions = [executions_arn(self, self.workflow.state_machine_name)]
                roles[handler].add_to_policy(
                    iam.PolicyStatement(actions=["states:DescribeExecution"], resources=executions)
                )
                nag.acknowledge_wildcard_resources(
                    roles[handler],
                    executions,
                    "Execution names are derived from trigger ids at run time; only this state machine's executions.",
                )

    def _outputs(self) -> None:
        """Outputs with fixed logical ids: scripts and tests read them by these names."""
        values = {
            OUTPUT_TABLE_NAME: self.storage.table.table_name,
            OUTPUT_TOPIC_ARN: self.notifications.topic.topic_arn,
            OUTPUT_STATE_MACHINE_ARN: self.workflow.state_machine.state_machine_arn,
            OUTPUT_TRIGGER_FUNCTION: self.functions.functions[TRIGGER_FUNCTION].function_name,
            # EKS clusters must grant this role read access (an access entry) before Kubernetes
            # collection works; see README "Deploying the monitor".
            OUTPUT_KUBERNETES_ROLE_ARN: self.functions.functions["collect_kubernetes"].role.role_arn,  # type: ignore[union-attr]
            OUTPUT_DASHBOARD: self.observability.dashboard.dashboard_name,
        }
        for logical_id, value in values.items():
            output = CfnOutput(self, logical_id, value=value)
            output.override_logical_id(logical_id)
