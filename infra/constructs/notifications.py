"""Where alerts go: one SNS topic encrypted with a customer managed key, optional e-mail subscriptions,
and an optional Slack channel through AWS Chatbot (Amazon Q Developer in chat applications). The key
is the stack's one customer managed key: the failed-triggers queue (`infra.constructs.triggers`) uses
it too."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_chatbot as chatbot
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.config import SlackChannel


class AlertNotifications(Construct):
    """The alerts topic and its subscribers."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        alert_emails: Sequence[str],
        slack: SlackChannel | None,
        configuration_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "TopicKey",
            description="hyperpod-nccl-monitor alerts topic and failed-triggers queue",
            enable_key_rotation=True,
        )
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="HyperPod NCCL monitor",
            master_key=self.key,
            enforce_ssl=True,
        )
        self._alarm_principal = iam.ServicePrincipal("cloudwatch.amazonaws.com")
        for address in alert_emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(address))
        self.slack_channel: chatbot.SlackChannelConfiguration | None = None
        if slack is not None:
            self.slack_channel = chatbot.SlackChannelConfiguration(
                self,
                "SlackChannel",
                slack_channel_configuration_name=configuration_name,
                slack_workspace_id=slack.workspace_id,
                slack_channel_id=slack.channel_id,
                notification_topics=[self.topic],
                # The channel only receives notifications; nobody may run AWS commands through it.
                guardrail_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("AWSDenyAll")],
                user_role_required=False,
            )

    def admit_alarms(self, alarm_names: Sequence[str]) -> list[str]:
        """Let CloudWatch publish the alarms `alarm_names` (this account and region) to the encrypted
        topic: a topic policy Allow for sns:Publish, and the key's use (kms:Decrypt,
        kms:GenerateDataKey*), both only on behalf of those alarms (aws:SourceAccount, aws:SourceArn:
        no other account's or other alarm's notification rides on this grant). Returns their ARNs."""
        stack = Stack.of(self)
        alarms = [
            stack.format_arn(
                service="cloudwatch", resource="alarm", resource_name=name, arn_format=ArnFormat.COLON_RESOURCE_NAME
            )
            for name in alarm_names
        ]
        conditions = {"StringEquals": {"aws:SourceAccount": stack.account}, "ArnLike": {"aws:SourceArn": alarms}}
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowMonitorAlarmsToPublish",
                principals=[self._alarm_principal],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions=conditions,
            )
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowMonitorAlarmsToUseTheTopicKey",
                principals=[self._alarm_principal],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions=conditions,
            )
        )
        return alarms
