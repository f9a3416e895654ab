"""Alert rendering: e-mail text and the AWS Chatbot custom-notification JSON, the sweep summary and
the per-root-cause messages."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from hyperpod_nccl.incidents.models import Affected, Incident, RootCause
from hyperpod_nccl.models.findings import Finding, Priority, Resource, Status
from hyperpod_nccl.monitor.alert_messages import (
    CHATBOT_THREAD_ID_MAX_CHARS,
    SWEEP_EVENT_TYPES,
    ChatbotNotification,
    build_alert,
    build_incident_alert,
    opens_its_thread,
    root_cause_thread_id,
    sns_message,
    summary_due,
    thread_id,
    told_in_its_thread,
)
from hyperpod_nccl.monitor.diff import Change, SweepDiff
from hyperpod_nccl.monitor.incident_tracking import IncidentChange, IncidentSweep
from hyperpod_nccl.references import DBG_SECURITY_GROUPS, NODE_HARDWARE
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


# --- root causes: one thread each, the summary in verdict order, the baseline, P2 -------------------


def _cause(
    cause_id: str,
    title: str,
    *,
    rank: int,
    priority: Priority = Priority.P0,
    scope: str = "node",
    first_step: str | None = "kubectl cordon ip-10-1-0-7",
    folded: int = 3,
    fingerprints: list[str] | None = None,
) -> Incident:
    """A root cause as the monitor stores it, with the verdict's fields set."""
    return Incident(
        id=cause_id,
        cluster="hp1",
        title=title,
        priority=priority,
        root_cause=RootCause(summary=title, source="finding", reference=NODE_HARDWARE),
        scope=scope,  # type: ignore[arg-type]
        verdict_rank=rank,
        first_step=first_step,
        findings_folded=folded,
        finding_fingerprints=fingerprints or [],
    )


def _incident_sweep(
    sweep_id: str, incidents: list[Incident], changes: list[IncidentChange], *, baseline: bool = False
) -> IncidentSweep:
    return IncidentSweep(
        sweep_id=sweep_id, cluster="hp1", region="us-west-2", started_at=datetime(2026, 1, 1, tzinfo=UTC),
        incidents=incidents, changes=changes, baseline=baseline,
    )  # fmt: skip


SG_CAUSE = _cause(
    "rc-00000000000a", "Security group blocks traffic between the cluster's nodes", rank=0, scope="cluster",
    first_step="aws ec2 authorize-security-group-egress --group-id sg-0abc", folded=12,
)  # fmt: skip
XID_CAUSE = _cause("rc-00000000000b", "GPU fell off the bus (Xid 79) on i-0abc", rank=1, folded=8)
LATENCY_CAUSE = _cause(
    "rc-00000000000c", "EFA latency above the fleet's on i-0def", rank=2, priority=Priority.P2, first_step=None
)


def test_each_root_cause_keeps_one_thread_across_sweeps_and_two_causes_never_share_one() -> None:
    first = _incident_sweep(
        "schedule-hp1-0001",
        [SG_CAUSE, XID_CAUSE],
        [IncidentChange(kind="new", incident=SG_CAUSE), IncidentChange(kind="new", incident=XID_CAUSE)],
    )
    worse = XID_CAUSE.model_copy(update={"affected": Affected(instance_ids=["i-0abc", "i-0fed"])})
    second = _incident_sweep(
        "schedule-hp1-0002",
        [worse],
        [
            IncidentChange(kind="changed", incident=worse, previous_priority=Priority.P0, worse=True),
            IncidentChange(kind="resolved", incident=SG_CAUSE),
        ],
    )
    threads: dict[str, set[str]] = {}
    for sweep in (first, second):
        for change in sweep.changes:
            alert = build_incident_alert(sweep, change, BASE)
            threads.setdefault(change.incident.id, set()).add(alert.chatbot.metadata.threadId)
    assert threads == {
        SG_CAUSE.id: {"hyperpod-nccl-us-west-2-hp1-rc-00000000000a"},
        XID_CAUSE.id: {"hyperpod-nccl-us-west-2-hp1-rc-00000000000b"},
    }
    summary = build_alert(_diff(), BASE, second)
    assert summary.chatbot.metadata.threadId == "hyperpod-nccl-us-west-2-hp1"  # the cluster's own
    # The same cause id on another cluster is another thread.
    elsewhere = first.model_copy(update={"cluster": "hp2"})
    other = build_incident_alert(elsewhere, first.changes[0], BASE).chatbot.metadata.threadId
    assert other == "hyperpod-nccl-us-west-2-hp2-rc-00000000000a"


def test_thread_ids_stay_within_the_chatbot_bounds_whatever_the_cluster_is_called() -> None:
    longest = "c" + "-x" * 31  # HyperPod's longest cluster name: 63 characters
    hostile = "hp1 <!channel>\x1b]0;x\x07"
    for cluster in (longest, hostile):
        ids = {root_cause_thread_id("ap-southeast-2", cluster, "rc-0123456789ab") for _ in range(2)}
        [one] = ids  # the same inputs always give the same thread
        assert re.fullmatch(r"[A-Za-z0-9-]+", one) and len(one) <= CHATBOT_THREAD_ID_MAX_CHARS, one
        assert one != thread_id("ap-southeast-2", cluster)
    assert root_cause_thread_id("us-west-2", hostile, "rc-1") != root_cause_thread_id("us-west-2", hostile, "rc-2")


def test_the_summary_lists_root_causes_in_verdict_order_with_marks_steps_and_pointers() -> None:
    finding = _sg_finding()
    sg = SG_CAUSE.model_copy(update={"finding_fingerprints": [finding.fingerprint]})
    # The verdict's order is the summary's: given out of order, listed by rank (and rank, not
    # priority, decides: the P2 advisory the verdict put second is listed second).
    latency = LATENCY_CAUSE.model_copy(update={"verdict_rank": 1})
    xid = XID_CAUSE.model_copy(update={"verdict_rank": 2})
    sweep = _incident_sweep(
        "schedule-hp1-0002",
        [xid, latency, sg],
        [
            IncidentChange(kind="new", incident=sg),
            IncidentChange(kind="changed", incident=xid, previous_priority=Priority.P1, worse=True),
        ],
    )
    alert = build_alert(_diff(Change(kind="new", fingerprint=finding.fingerprint, finding=finding)), BASE, sweep)
    for text in (alert.email, alert.chatbot.content.description):
        heads = [line.strip("* ") for line in text.split("\n") if re.match(r"\*?\s*\d+\. ", line)]
        assert heads == [
            "1. [NEW] [P0] [cluster] Security group blocks traffic between the cluster's nodes (12 findings)",
            "2. [P2] [node] EFA latency above the fleet's on i-0def (3 findings)",
            "3. [WORSE] [P0] [node] GPU fell off the bus (Xid 79) on i-0abc (was P1) (8 findings)",
        ]
        assert "First step: aws ec2 authorize-security-group-egress --group-id sg-0abc" in text
        assert NODE_HARDWARE.pointer in text
        assert "Open: 3 root causes (folding 23 findings); P0 2, P2 1" in text
        assert "sg-0abc has no outbound self-referencing rule" in text  # the finding change, under its cause
    assert "Finding changes no root cause above accounts for" not in alert.email
    assert alert.subject == "HyperPod hp1: 1 new root cause (1 P0/P1), 1 worse"
    assert alert.chatbot.content.nextSteps[:2] == [
        "aws ec2 authorize-security-group-egress --group-id sg-0abc",
        "kubectl cordon ip-10-1-0-7",
    ]
    # A resolved cause is listed after the open ones, unnumbered.
    resolved = build_alert(_diff(), BASE, _incident_sweep("s3", [xid], [IncidentChange(kind="resolved", incident=sg)]))
    assert "\n- [RESOLVED] [P0] [cluster] Security group blocks" in resolved.email
    assert "1 resolved" in resolved.subject


def test_a_baseline_is_one_summary_of_every_open_cause_in_verdict_order() -> None:
    finding = _sg_finding()
    sg = SG_CAUSE.model_copy(update={"finding_fingerprints": [finding.fingerprint]})
    causes = [XID_CAUSE, sg, LATENCY_CAUSE]
    sweep = _incident_sweep("schedule-hp1-0001", causes, [IncidentChange(kind="new", incident=c) for c in causes],
                            baseline=True)  # fmt: skip
    alert = build_alert(_diff(Change(kind="new", fingerprint=finding.fingerprint, finding=finding)), BASE, sweep)
    assert alert.subject == "HyperPod hp1: baseline, 3 root causes (folding 23 findings) open"
    assert alert.chatbot.metadata.eventType == SWEEP_EVENT_TYPES["baseline"]
    text = alert.email
    positions = [text.index(c.title) for c in (SG_CAUSE, XID_CAUSE, LATENCY_CAUSE)]
    assert positions == sorted(positions)
    # Every cause is new to the channel: the baseline says so once, and lists no finding it folds.
    assert "[NEW]" not in text and finding.title not in text
    assert text.count("First step: ") == 2 and text.count("Runbook: ") == 3
    assert summary_due(_diff(), sweep)


def test_p2_causes_get_no_thread_of_their_own_unless_they_become_urgent() -> None:
    p2 = LATENCY_CAUSE
    assert not told_in_its_thread(IncidentChange(kind="new", incident=p2))
    assert not told_in_its_thread(IncidentChange(kind="resolved", incident=p2))
    assert not told_in_its_thread(IncidentChange(kind="changed", incident=p2, previous_priority=Priority.P2))
    assert told_in_its_thread(
        IncidentChange(kind="new", incident=XID_CAUSE.model_copy(update={"priority": Priority.P1}))
    )
    # An urgent cause that drops to P2 closes its thread; a P2 raised to P1 opens one, whole story told.
    assert told_in_its_thread(IncidentChange(kind="changed", incident=p2, previous_priority=Priority.P0))
    raised = IncidentChange(
        kind="changed", incident=p2.model_copy(update={"priority": Priority.P1}), previous_priority=Priority.P2
    )
    assert told_in_its_thread(raised) and opens_its_thread(raised)
    # A new P2 cause is still told: in the summary, even when no finding changed.
    quiet = _incident_sweep("s2", [p2], [IncidentChange(kind="new", incident=p2)])
    assert summary_due(_diff(), quiet) and not summary_due(_diff(), _incident_sweep("s3", [p2], []))
    assert "1. [NEW] [P2] [node] EFA latency" in build_alert(_diff(), BASE, quiet).email


def test_a_long_summary_leaves_out_unchanged_causes_never_the_news() -> None:
    steady = [
        _cause(f"rc-steady{n:06x}", f"Pod not scheduled in job-{n}", rank=n, priority=Priority.P1) for n in range(25)
    ]
    gone = SG_CAUSE.model_copy(update={"verdict_rank": 0})
    sweep = _incident_sweep("s2", steady, [IncidentChange(kind="resolved", incident=gone)])
    text = build_alert(_diff(), BASE, sweep).email
    assert "\n- [RESOLVED] [P0] [cluster] Security group blocks" in text
    assert "19. [P1] [node] Pod not scheduled in job-18" in text and "job-19 " not in text
    assert "… and 6 more root causes, unchanged: hyperpod-nccl incidents --cluster hp1 --region us-west-2" in text
