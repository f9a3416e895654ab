"""The monitor's stack: it composes one construct per capability and does the wiring between them
(environment values, grants, outputs). Nothing here builds a resource by itself."""

from __future__ import annotations

import json

from aws_cdk import Annotations, Aws, CfnOutput, Stack, Token
from aws_cdk import aws_iam as iam
from constructs import Construct

from hyperpod_nccl.monitor.settings import (
    ACCOUNT_ID_ENV,
    ALERTS_TOPIC_ENV,
    CLUSTERS_ENV,
    FINDINGS_TABLE_ENV,
    HISTORY_DAYS_ENV,
    LAMBDAS,
    LOG_FILTER_RATE_ENV,
    NODE_COVERAGE_ENV,
    PROBE_DOCUMENTS_ENV,
    REFERENCE_BASE_URL_ENV,
    START_SESSION_RATE_ENV,
    STATE_MACHINE_ENV,
)
from infra import nag
from infra.config import StageConfig
from infra.constants import (
    OUTPUT_DASHBOARD,
    OUTPUT_KUBERNETES_ROLE_ARN,
    OUTPUT_PROBE_DOCUMENTS,
    OUTPUT_STATE_MACHINE_ARN,
    OUTPUT_TABLE_NAME,
    OUTPUT_TOPIC_ARN,
    OUTPUT_TRIGGER_FUNCTION,
    OUTPUT_WATCHED_CLUSTERS,
    TRIGGER_FUNCTION,
)
from infra.constructs.documents import ProbeDocuments
from infra.constructs.functions import MonitorFunctions
from infra.constructs.monitoring import MonitorObservability, alarm_names
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
        self.probe_documents = ProbeDocuments(self, "ProbeDocuments", stack_name=config.stack_name)
        self._warn_unprobed_regions()
        state_machine_name = f"{config.stack_name}-sweep"
        self._watched_clusters_json = json.dumps(
            [cluster.model_dump(exclude_none=True) for cluster in config.clusters], separators=(",", ":")
        )
        environment = {
            FINDINGS_TABLE_ENV: self.storage.table.table_name,
            ALERTS_TOPIC_ENV: self.notifications.topic.topic_arn,
            STATE_MACHINE_ENV: state_machine_arn(self, state_machine_name),
            REFERENCE_BASE_URL_ENV: config.reference_base_url,
            NODE_COVERAGE_ENV: str(config.node_coverage),
            CLUSTERS_ENV: self._watched_clusters_json,
            HISTORY_DAYS_ENV: str(config.history_retention_days),
            PROBE_DOCUMENTS_ENV: json.dumps(self.probe_documents.names, separators=(",", ":")),
            START_SESSION_RATE_ENV: f"{config.start_session_rate:g}",
            LOG_FILTER_RATE_ENV: f"{config.log_filter_rate:g}",
            # The pace items' account: the stack's, whose functions share the table.
            ACCOUNT_ID_ENV: Aws.ACCOUNT_ID,
        }
        self.functions = MonitorFunctions(
            self,
            "Functions",
            environment_values=environment,
            log_retention_days=config.log_retention_days,
            clusters=config.clusters,
            probe_documents=self.probe_documents.names,
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
            key=self.notifications.key,
            stack_name=config.stack_name,
        )
        self.observability = MonitorObservability(
            self,
            "Monitoring",
            state_machine=self.workflow.state_machine,
            functions=self.functions.functions,
            topic=self.notifications.topic,
            failed_triggers=self.triggers.failed_triggers,
            clusters=config.clusters,
            sweep_rate_minutes=config.sweep_rate_minutes,
            missed_sweeps=config.missed_sweeps_before_alarm,
            dashboard_name=f"{config.stack_name}-{self.region}",
            alarm_name_prefix=config.stack_name,
        )
        self.notifications.admit_alarms(alarm_names(config.stack_name))
        self._outputs()
        nag.apply(self)

    def _warn_unprobed_regions(self) -> None:
        """SSM documents are regional: nodes of a watched cluster outside the stack's region cannot
        be probed by this stack (its role may use only its own documents). Said at synth time."""
        if Token.is_unresolved(self.region):
            return
        elsewhere = sorted({c.region for c in self.config.clusters if c.region != self.region})
        if elsewhere:
            Annotations.of(self).add_warning_v2(
                "hyperpod-nccl:probe-region",
                f"nodes of the watched clusters in {', '.join(elsewhere)} cannot be probed: the probe-only"
                f" session documents exist in {self.region} only; deploy one stack per region",
            )

    def _grant(self) -> None:
        """Writes go only to the monitor's own resources, and only to the functions that use them."""
        functions, roles = self.functions.functions, self.functions.roles
        table = self.storage.table
        for handler, function in LAMBDAS.items():
            # Exactly the item operations the handler's code makes (its `table_actions`); a Query
            # may read the secondary index (open findings by cluster).
            actions = function.table_actions
            resources = [table.table_arn, *([f"{table.table_arn}/index/*"] if "Query" in actions else [])]
            roles[handler].add_to_policy(
                iam.PolicyStatement(actions=[f"dynamodb:{a}" for a in actions], resources=resources)
            )
            nag.acknowledge_wildcard_resources(
                roles[handler],
                resources,
                "Queries on the monitor's own table include its secondary index (open findings by cluster).",
            )
        for handler, function in LAMBDAS.items():
            names = function.environment
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
            # `hyperpod-nccl status` lists these clusters when none is named.
            OUTPUT_WATCHED_CLUSTERS: self._watched_clusters_json,
            **{OUTPUT_PROBE_DOCUMENTS[role]: doc.ref for role, doc in self.probe_documents.documents.items()},
        }
        for logical_id, value in values.items():
            output = CfnOutput(self, logical_id, value=value)
            output.override_logical_id(logical_id)
