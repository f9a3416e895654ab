"""Alert rendering: e-mail text and the AWS Chatbot custom-notification JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hyperpod_nccl.models.findings import Finding, Priority, Resource, Status
from hyperpod_nccl.monitor.alert_messages import ChatbotNotification, build_alert, sns_message
from hyperpod_nccl.monitor.diff import Change, SweepDiff
from hyperpod_nccl.references import DBG_SECURITY_GROUPS
from hyperpod_nccl.suggested import sg_self_reference

BASE = "https://example.com/refs"


def _sg_finding(priority: Priority = Priority.P0) -> Finding:
    return Finding(
        check_id="network.sg_self_reference",
        status=Status.FAIL,
        priority=priority,
        title="sg-0abc has no outbound self-referencing rule",
        resources=[Resource(kind="security_group", id="sg-0abc"), Resource(kind="node", id="i-0123456789abcdef0")],
        reference=DBG_SECURITY_GROUPS,
        suggested_commands=[sg_self_reference("sg-0abc", "us-west-2", "egress")],
    )


def _diff(*changes: Change, failure: str | None = None) -> SweepDiff:
    return SweepDiff(
        sweep_id="schedule-hp1-0001",
        cluster="hp1",
        region="us-west-2",
        cluster_arn="arn:aws:sagemaker:us-west-2:123456789012:cluster/abcd1234efgh",
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        changes=list(changes),
        open_by_priority={"P0": 1, "P1": 0, "P2": 0},
        failure=failure,
    )


def test_new_p0_names_ids_link_and_commands_in_both_renderings() -> None:
    finding = _sg_finding()
    alert = build_alert(_diff(Change(kind="new", fingerprint=finding.fingerprint, finding=finding)), BASE)
    link = DBG_SECURITY_GROUPS.url(BASE)
    command = finding.suggested_commands[0].command
    for text in (alert.email, alert.chatbot.content.description):
        assert "sg-0abc" in text
        assert "i-0123456789abcdef0" in text
        assert link in text
        assert command in text
    assert "hp1" in alert.subject and "1 new" in alert.subject
    assert alert.chatbot.metadata.threadId == "hyperpod-nccl-us-west-2-hp1"
    assert any(command in step for step in alert.chatbot.content.nextSteps)


def test_sns_message_carries_chatbot_json_by_default_and_text_for_email() -> None:
    finding = _sg_finding()
    alert = build_alert(_diff(Change(kind="new", fingerprint=finding.fingerprint, finding=finding)), BASE)
    message = sns_message(alert)
    assert message["MessageStructure"] == "json"
    bodies = json.loads(message["Message"])
    chat = ChatbotNotification.model_validate_json(bodies["default"])
    assert chat.version == "1.0" and chat.source == "custom"
    assert chat.content.textType == "client-markdown"
    assert bodies["email"] == alert.email
    assert len(message["Subject"]) <= 100


def test_resolved_only_alert_has_no_commands() -> None:
    finding = _sg_finding()
    alert = build_alert(_diff(Change(kind="resolved", fingerprint=finding.fingerprint, finding=finding)), BASE)
    assert "1 resolved" in alert.subject
    assert "[RESOLVED]" in alert.email
    assert finding.suggested_commands[0].command not in alert.email
    assert alert.chatbot.content.title.startswith(":white_check_mark:")


def test_failed_sweep_is_announced_with_its_reason() -> None:
    alert = build_alert(_diff(failure="cluster 'hp1' not found in us-west-2"), BASE)
    assert "could not run" in alert.subject
    assert "not found" in alert.email
    assert alert.chatbot.metadata.eventType == "HyperPodNcclSweepFailed"


def test_p2_changes_are_one_liners_without_commands() -> None:
    finding = _sg_finding(Priority.P2)
    alert = build_alert(_diff(Change(kind="new", fingerprint=finding.fingerprint, finding=finding)), BASE)
    assert "sg-0abc" in alert.email
    assert finding.suggested_commands[0].command not in alert.email
