"""Sizes an account's scale and a hostile node control: DynamoDB's 400 KB item, SNS's 256 KiB
message, the chat and e-mail limits. Against the emulation, which refuses what AWS refuses.

The 10,000-node cases build their findings, diffs and alerts directly and store them through the
monitor's own functions (a sweep probing 10,000 simulated nodes over SSM would take minutes).
"""

from __future__ import annotations

import base64
import json
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from hyperpod_nccl.hang.evidence import hang_evidence
from hyperpod_nccl.models.findings import (
    Coverage,
    Finding,
    Priority,
    Resource,
    Status,
    SuggestedCommand,
    SweepResult,
)
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import (
    FlightRecorderFile,
    GpuInfo,
    NodeProbeData,
    NodeProbeInventory,
    NodeProbeResult,
    XidEvent,
)
from hyperpod_nccl.monitor.alert_messages import (
    CHATBOT_DESCRIPTION_MAX_CHARS,
    CHATBOT_TITLE_MAX_CHARS,
    EMAIL_MAX_BYTES,
    MAX_LISTED_RESOURCES,
    READ_ONLY_FOOTER,
    SNS_MESSAGE_MAX_BYTES,
    build_alert,
    sns_message,
    sns_message_bytes,
)
from hyperpod_nccl.monitor.diff import Change, SweepDiff, compute_changes
from hyperpod_nccl.monitor.payloads import NotifyOutput, SweepRef, SweepState
from hyperpod_nccl.monitor.states.aggregate import _persist_findings, _previous_open, _record_sweep, _store_diff
from hyperpod_nccl.monitor.states.notify import _keep_pending, run_notify
from hyperpod_nccl.monitor.states.probe_node import PROBE_RESULT_MAX_BYTES, load_probe_results, store_probe_result
from hyperpod_nccl.monitor.store import (
    ALERT_DROPPED,
    ALERT_PENDING,
    BLOB_CHUNK_BYTES,
    DIFF,
    DYNAMODB_ITEM_MAX_BYTES,
    FINDING_INLINE_MAX_BYTES,
    PROBE,
    Store,
    cluster_key,
    finding_history_key,
    sweep_key,
)
from hyperpod_nccl.references import OPS_SSM_TARGET
from hyperpod_nccl_sim.scenario import FaultSpec
from hyperpod_nccl_sim.serverless import LocalMonitor
from tests.functional.test_monitor_sweep import _store, monitor  # noqa: F401

REGION = "us-west-2"
CLUSTER = "ml-sizes"
STARTED = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
HISTORY_SECONDS = 30 * 24 * 3600
BASE_URL = "https://example.invalid/references"


@pytest.fixture
def deployed(simulate, monitor) -> LocalMonitor:  # type: ignore[no-untyped-def]  # noqa: F811
    """The monitor's table and topic in the emulation (no sweep is run)."""
    return monitor(simulate("healthy-eks"))


def _ref(sweep_id: str, minutes: int = 0) -> SweepRef:
    started = STARTED + timedelta(minutes=minutes)
    return SweepRef(sweep_id=sweep_id, execution=sweep_id, cluster=CLUSTER, region=REGION, started_at=started)


def _node(n: int) -> Resource:
    return Resource(kind="node", id=f"i-{n:017x}", name=f"ip-10-{n // 65536}-{n // 256 % 256}-{n % 256}")


def _finding(nodes: int, *, title: str = "SSM StartSession denied: nodes cannot be probed", first: int = 0) -> Finding:
    return Finding(
        check_id="node.reachability",
        status=Status.FAIL,
        priority=Priority.P1,
        title=title,
        detail="StartSession was refused for every node named.",
        evidence=[
            f"{_node(n).id}: AccessDeniedException: not authorized to perform ssm:StartSession" for n in range(nodes)
        ],
        resources=[_node(first + n) for n in range(nodes)],
        reference=OPS_SSM_TARGET,
        suggested_commands=[SuggestedCommand(description="Check the role", command="aws sts get-caller-identity")],
    )


def _diff(sweep_id: str, changes: list[Change], *, unreachable: int = 0) -> SweepDiff:
    ids = [_node(n).id for n in range(unreachable)]
    coverage = Coverage(nodes_total=unreachable, nodes_unreachable=unreachable, unreachable_node_ids=ids)
    return SweepDiff(
        sweep_id=sweep_id, cluster=CLUSTER, region=REGION, started_at=STARTED, changes=changes, coverage=coverage
    )


def _new(finding: Finding) -> Change:
    return Change(kind="new", fingerprint=finding.fingerprint, finding=finding)


def _item_bytes(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB counts it, near enough: names plus values (strings, binary)."""
    total = 0
    for name, value in item.items():
        data = value.value if hasattr(value, "value") else value
        total += len(name.encode()) + len(data if isinstance(data, bytes) else str(data).encode())
    return total


# --- the emulation is as strict as AWS ----------------------------------------------------------


def test_emulation_refuses_an_item_over_400_kb(deployed: LocalMonitor) -> None:
    store = _store(deployed)
    with pytest.raises(ClientError) as refused:
        store.table.put_item(Item={"pk": "SIZE", "sk": "BIG", "data": b"x" * (DYNAMODB_ITEM_MAX_BYTES + 1)})
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "Item size has exceeded the maximum allowed size" in refused.value.response["Error"]["Message"]
    assert BLOB_CHUNK_BYTES < DYNAMODB_ITEM_MAX_BYTES - 1024  # a chunk leaves room for its key


def test_emulation_refuses_an_sns_message_over_256_kib_counted_in_utf8_bytes(deployed: LocalMonitor) -> None:
    sns = deployed.client("sns")
    text = "é" * (SNS_MESSAGE_MAX_BYTES // 2 + 1)  # under the limit in characters, over it in bytes
    assert len(text) < SNS_MESSAGE_MAX_BYTES < len(text.encode())
    with pytest.raises(ClientError) as refused:
        sns.publish(TopicArn=deployed.topic_arn, Message=text)
    assert refused.value.response["Error"]["Code"] == "InvalidParameter"
    assert "Message too long" in refused.value.response["Error"]["Message"]
    # The subject counts too: a message exactly at the limit with a subject is one byte over.
    with pytest.raises(ClientError):
        sns.publish(TopicArn=deployed.topic_arn, Message="x" * (SNS_MESSAGE_MAX_BYTES - 1), Subject="ab")
    sns.publish(TopicArn=deployed.topic_arn, Message="x" * (SNS_MESSAGE_MAX_BYTES - 2), Subject="ab")


# --- probe results --------------------------------------------------------------------------------


def _dump(rank: int, size: int, modified: float) -> FlightRecorderFile:
    data = base64.b64encode(os.urandom(size)).decode()  # random: compression cannot shrink it
    return FlightRecorderFile(
        path=f"/tmp/nccl_trace_rank_{rank}", rank=rank, modified_epoch=modified, size_bytes=size, data_base64=data
    )


def _probe_result(dump_bytes: list[int]) -> NodeProbeResult:
    probe = NodeProbeData(
        hostname="ip-10-1-0-7",
        gpus=[GpuInfo(index=i, name="NVIDIA H100 80GB HBM3", bus_id=f"00000000:{i:02X}:00.0") for i in range(8)],
        xids=[XidEvent(bus_id="00000000:05:00.0", code=79, line="NVRM: Xid (PCI:0000:05:00): 79, GPU has fallen off")],
        flight_recorder_dumps=[_dump(rank, size, 1_767_225_600.0 + rank) for rank, size in enumerate(dump_bytes)],
    )
    return NodeProbeResult(instance_id="i-0123456789abcdef0", reachable=True, complete=True, probe=probe)


def test_probe_result_of_megabytes_is_stored_in_chunks_and_read_back_whole(deployed: LocalMonitor) -> None:
    store = _store(deployed)
    ref = _ref("sweep-probe-big")
    result = _probe_result([700_000, 700_000, 700_000])  # 2.8 MB of base64: the hang case
    assert len(result.model_dump_json()) > DYNAMODB_ITEM_MAX_BYTES
    store_probe_result(store, ref, result)
    chunks = list(store.query(sweep_key(ref.sweep_id), PROBE))
    assert len(chunks) > 1 and all(_item_bytes(item) < DYNAMODB_ITEM_MAX_BYTES for item in chunks)
    loaded = load_probe_results(store, ref.sweep_id)
    assert loaded == {result.instance_id: result}  # whole: every dump, every parsed section
    assert loaded[result.instance_id].reachable
    assert store.degraded_sources(ref.sweep_id) == []  # nothing had to be left out


def test_probe_result_past_the_bound_keeps_parsed_sections_and_says_which_dumps_were_cut(
    deployed: LocalMonitor,
) -> None:
    store = _store(deployed)
    ref = _ref("sweep-probe-huge")
    per_dump = PROBE_RESULT_MAX_BYTES // 3  # four dumps of 4/3 x this as base64: past the bound
    result = _probe_result([per_dump] * 4)
    store_probe_result(store, ref, result)
    [stored] = load_probe_results(store, ref.sweep_id).values()
    assert stored.probe is not None and result.probe is not None
    assert len(stored.model_dump_json().encode()) <= PROBE_RESULT_MAX_BYTES
    assert stored.probe.gpus == result.probe.gpus and stored.probe.xids == result.probe.xids
    dumps = stored.probe.flight_recorder_dumps
    cut = [d for d in dumps if d.not_stored]
    kept = [d for d in dumps if not d.not_stored]
    assert cut and kept, "the oldest dumps are cut, the newest kept"
    assert max(d.modified_epoch or 0 for d in cut) < min(d.modified_epoch or 0 for d in kept)
    assert all(d.data_base64 == "" and "flight recorder dump truncated" in (d.not_stored or "") for d in cut)
    assert all(
        d.data_base64 == o.data_base64 for d in kept for o in result.probe.flight_recorder_dumps if o.rank == d.rank
    )
    [degraded] = store.degraded_sources(ref.sweep_id)
    assert "flight recorder dump truncated" in degraded.reason and result.instance_id in degraded.source
    # The hang evidence names each dump that was not stored, with the reason (shown by node.hang_attribution).
    window = datetime(2025, 12, 31, tzinfo=UTC)
    inventory = Inventory(
        cluster_name=CLUSTER, region=REGION, collected_at=STARTED, window_start=window, window_end=STARTED,
        node_probes=NodeProbeInventory(results=[stored], probed_instance_ids=[stored.instance_id]),
    )  # fmt: skip
    analysis = hang_evidence(inventory).analysis
    assert analysis is not None
    assert {f"{stored.instance_id}:{d.path}" for d in cut} <= {
        name for name, why in analysis.refused.items() if why.startswith("flight recorder dump truncated")
    }


def test_probe_results_of_a_sweep_started_before_chunking_are_still_read(deployed: LocalMonitor) -> None:
    store = _store(deployed)
    ref = _ref("sweep-probe-legacy")
    old = NodeProbeResult(instance_id="i-0aaaaaaaaaaaaaaa1", reachable=False, error="timed out")
    # As the monitor stored a probe result before chunking: one plain JSON item under the sweep.
    legacy = {
        "pk": sweep_key(ref.sweep_id),
        "sk": f"{PROBE}{old.instance_id}",
        "json": json.dumps(old.model_dump(mode="json")),
    }
    store.table.put_item(Item={**legacy, "expires_at": 2_000_000_000})
    new = _probe_result([1000])
    store_probe_result(store, ref, new)
    assert load_probe_results(store, ref.sweep_id) == {old.instance_id: old, new.instance_id: new}


# --- alerts -----------------------------------------------------------------------------------------


def test_alert_naming_1000_denied_nodes_fits_sns_with_the_exact_count_of_the_rest(deployed: LocalMonitor) -> None:
    every = _finding(1000).model_copy(update={"priority": Priority.P0})  # listed first: the most urgent
    findings = [every] + [_finding(1, title=f"Node {n} unreachable", first=n) for n in range(1000)]
    diff = _diff("sweep-alert-1000", [_new(f) for f in findings], unreachable=1000)
    alert = build_alert(diff, BASE_URL)
    arguments = sns_message(alert)
    assert sns_message_bytes(arguments) <= SNS_MESSAGE_MAX_BYTES
    bodies = json.loads(arguments["Message"])
    chat = json.loads(bodies["default"])
    more = f"… and {1000 - MAX_LISTED_RESOURCES} more nodes"
    assert more in chat["content"]["description"] and more in bodies["email"]
    assert len(chat["content"]["description"]) <= CHATBOT_DESCRIPTION_MAX_CHARS
    assert len(chat["content"]["title"]) <= CHATBOT_TITLE_MAX_CHARS
    assert len(bodies["email"].encode()) <= EMAIL_MAX_BYTES
    deployed.client("sns").publish(TopicArn=deployed.topic_arn, **arguments)  # AWS takes it
    [received] = deployed.drain_notifications()
    assert received["id"] == diff.sweep_id


def test_a_cut_description_ends_at_a_line_with_the_number_of_lines_left_out() -> None:
    findings = [_finding(30, title=f"Group {n} unreachable", first=30 * n) for n in range(20)]
    diff = _diff("sweep-alert-cut", [_new(f) for f in findings])
    alert = build_alert(diff, BASE_URL)
    fitted = json.loads(json.loads(sns_message(alert)["Message"])["default"])["content"]["description"]
    whole = alert.chatbot.content.description.split("\n")
    shown = fitted.split("\n")
    assert len(fitted) <= CHATBOT_DESCRIPTION_MAX_CHARS < len(alert.chatbot.content.description)
    assert shown[:-1] == whole[: len(shown) - 1], "whole lines, in order"
    assert shown[-1].startswith(f"… {len(whole) - (len(shown) - 1)} more lines not shown")


def test_a_cut_email_keeps_whole_lines_and_its_read_only_footer() -> None:
    # Titles are cluster-controlled text (a job name, a drain reason): 40 P2 one-liners of 5,000 characters.
    findings = [
        _finding(1, title=f"Drain reason {n}: " + "y" * 5_000, first=n).model_copy(update={"priority": Priority.P2})
        for n in range(40)
    ]
    alert = build_alert(_diff("sweep-alert-email", [_new(f) for f in findings]), BASE_URL)
    email = json.loads(sns_message(alert)["Message"])["email"]
    assert len(email.encode()) <= EMAIL_MAX_BYTES < len(alert.email.encode())
    lines = email.split("\n")
    assert lines[-1] == READ_ONLY_FOOTER and "more lines not shown" in lines[-2]
    assert set(lines[:-2]) <= set(alert.email.split("\n")), "only whole lines of the e-mail"


def test_an_alert_whose_fixed_parts_cannot_fit_is_reduced_to_its_headline() -> None:
    alert = build_alert(_diff("sweep-alert-huge", [_new(_finding(1))]), BASE_URL)
    content = alert.chatbot.content.model_copy(update={"keywords": ["k" * 1000] * 300})  # 300 KB twice
    huge = alert.model_copy(update={"chatbot": alert.chatbot.model_copy(update={"content": content})})
    arguments = sns_message(huge)
    assert sns_message_bytes(arguments) <= SNS_MESSAGE_MAX_BYTES
    chat = json.loads(json.loads(arguments["Message"])["default"])
    assert chat["content"]["description"].startswith("The full alert could not be delivered (the alert did not fit")
    assert (
        chat["metadata"]["threadId"] == alert.chatbot.metadata.threadId
        and "sweep-alert-huge" in chat["content"]["description"]
    )


def test_multibyte_text_is_measured_as_sns_counts_it() -> None:
    title = "GPU 故障: ノードが応答しません " * 3  # three bytes a character in UTF-8
    findings = [_finding(1, title=f"{title}{n}", first=n) for n in range(2000)]
    arguments = sns_message(build_alert(_diff("sweep-alert-utf8", [_new(f) for f in findings]), BASE_URL))
    assert sns_message_bytes(arguments) <= SNS_MESSAGE_MAX_BYTES


# --- a failed alert never blocks later ones -----------------------------------------------------------


def _pending(store: Store, sweep_id: str, minutes: int, diff: SweepDiff) -> SweepRef:
    """An earlier sweep whose alert stayed unpublished: its diff stored, its pending item kept."""
    ref = _ref(sweep_id, minutes)
    store.put_blob(sweep_key(sweep_id), DIFF, diff.model_dump_json(), expires_at=2_000_000_000)
    _keep_pending(store, ref, None)
    return ref


def _notify(store: Store, deployed: LocalMonitor, ref: SweepRef, sns: Any = None) -> NotifyOutput:
    return run_notify(
        SweepState(sweep=ref),
        store,
        sns or deployed.client("sns"),
        topic_arn=deployed.topic_arn,
        base_url=BASE_URL,
    )


def test_an_earlier_alert_sns_refuses_for_good_is_dropped_with_a_record_and_the_new_one_goes_out(
    deployed: LocalMonitor,
) -> None:
    store = _store(deployed)
    old = _pending(store, "sweep-old", 0, _diff("sweep-old", [_new(_finding(3))]))
    now = _ref("sweep-now", 10)
    store.put_blob(sweep_key(now.sweep_id), DIFF, _diff(now.sweep_id, [_new(_finding(5))]).model_dump_json(),
                   expires_at=2_000_000_000)  # fmt: skip
    # SNS refuses the earlier alert and its stand-in: the earlier sweep's message can never go out.
    deployed.emulation.faults.add_fault(FaultSpec(operation="sns:Publish", error_code="InvalidParameter", times=2))
    output = _notify(store, deployed, now)
    assert output.published and output.dropped_alerts == 1 and output.earlier_alerts == 0
    assert [m["id"] for m in deployed.drain_notifications()] == [now.sweep_id]
    ck = cluster_key(REGION, CLUSTER)
    assert list(store.query(ck, ALERT_PENDING)) == []
    [record] = store.query(ck, ALERT_DROPPED)
    assert record["sk"].endswith(old.sweep_id) and "InvalidParameter" in record["reason"]
    # Nothing is left to block the sweep after.
    later = _ref("sweep-later", 20)
    store.put_blob(sweep_key(later.sweep_id), DIFF, _diff(later.sweep_id, [_new(_finding(7))]).model_dump_json(),
                   expires_at=2_000_000_000)  # fmt: skip
    assert _notify(store, deployed, later).published
    assert [m["id"] for m in deployed.drain_notifications()] == [later.sweep_id]


def test_an_alert_sns_refuses_once_is_sent_as_its_stand_in_then_the_new_one(deployed: LocalMonitor) -> None:
    store = _store(deployed)
    old = _pending(store, "sweep-old", 0, _diff("sweep-old", [_new(_finding(3))]))
    now = _ref("sweep-now", 10)
    store.put_blob(sweep_key(now.sweep_id), DIFF, _diff(now.sweep_id, [_new(_finding(5))]).model_dump_json(),
                   expires_at=2_000_000_000)  # fmt: skip
    deployed.emulation.faults.add_fault(FaultSpec(operation="sns:Publish", error_code="InvalidParameter", times=1))
    output = _notify(store, deployed, now)
    assert output.earlier_alerts == 1 and output.dropped_alerts == 0
    stand_in, new = deployed.drain_notifications()
    assert stand_in["id"] == old.sweep_id and "could not be delivered" in stand_in["content"]["description"]
    assert "InvalidParameter" in stand_in["content"]["description"]
    assert new["id"] == now.sweep_id
    assert list(store.query(cluster_key(REGION, CLUSTER), ALERT_PENDING)) == []


def test_an_earlier_alert_failing_again_for_now_stays_pending_and_the_new_one_still_goes_out(
    deployed: LocalMonitor,
) -> None:
    store = _store(deployed)
    old = _pending(store, "sweep-old", 0, _diff("sweep-old", [_new(_finding(3))]))
    now = _ref("sweep-now", 10)
    store.put_blob(sweep_key(now.sweep_id), DIFF, _diff(now.sweep_id, [_new(_finding(5))]).model_dump_json(),
                   expires_at=2_000_000_000)  # fmt: skip
    # One attempt per call, so that the one injected 5xx hits exactly the earlier alert.
    sns = deployed.emulation.session(REGION).client(
        "sns", endpoint_url=deployed.emulation.endpoint_url, config=Config(retries={"total_max_attempts": 1})
    )
    deployed.emulation.faults.add_fault(
        FaultSpec(operation="sns:Publish", error_code="InternalFailure", http_status=500, times=1)
    )
    output = _notify(store, deployed, now, sns)
    assert output.published and output.earlier_alerts == 0 and output.dropped_alerts == 0
    assert [m["id"] for m in deployed.drain_notifications()] == [now.sweep_id]
    [still] = store.query(cluster_key(REGION, CLUSTER), ALERT_PENDING)
    assert still["sk"].endswith(old.sweep_id)
    # The next sweep (nothing new of its own) delivers it, marked late.
    later = _ref("sweep-later", 20)
    store.put_blob(sweep_key(later.sweep_id), DIFF, _diff(later.sweep_id, []).model_dump_json(),
                   expires_at=2_000_000_000)  # fmt: skip
    assert _notify(store, deployed, later).earlier_alerts == 1
    [late] = deployed.drain_notifications()
    assert late["id"] == old.sweep_id and "(delayed: sweep of " in late["content"]["title"]


# --- 10,000 nodes -------------------------------------------------------------------------------------


def test_a_finding_naming_10000_nodes_is_split_under_the_item_limit_and_read_back_whole(
    deployed: LocalMonitor,
) -> None:
    store = _store(deployed)
    ref = _ref("sweep-10k")
    finding = _finding(10_000)
    assert len(finding.model_dump_json()) > DYNAMODB_ITEM_MAX_BYTES  # one item could not hold it
    result = SweepResult(
        cluster_name=CLUSTER, region=REGION, started_at=STARTED, finished_at=STARTED, window_start=STARTED,
        window_end=STARTED, findings=[finding],
    )  # fmt: skip
    changes, _ = compute_changes([], result.findings, re_evaluated=lambda _: True)
    diff = _store_diff(store, _diff(ref.sweep_id, changes, unreachable=10_000), HISTORY_SECONDS)
    _persist_findings(store, ref, result, diff, HISTORY_SECONDS)
    _record_sweep(store, ref, "complete", diff, STARTED, HISTORY_SECONDS)

    item = store.get(cluster_key(REGION, CLUSTER), f"FINDING#{finding.fingerprint}")
    assert item is not None and _item_bytes(item) < DYNAMODB_ITEM_MAX_BYTES
    assert len(str(item["finding"]).encode()) <= FINDING_INLINE_MAX_BYTES and item["finding_body"]
    [previous] = _previous_open(store, ref)  # through the open-findings index
    assert previous.finding == finding and previous.fingerprint == finding.fingerprint
    # Per-node fault history for every node, in batches.
    assert len(list(store.query(f"NODE#{_node(9_999).id}", "FAULT#"))) == 1

    # The next sweep sees the same 10,000 nodes: no change; then they recover: one resolved change.
    again, _ = compute_changes([previous], [finding], re_evaluated=lambda _: True)
    assert again == []
    resolved, _ = compute_changes([previous], [], re_evaluated=lambda _: True)
    assert [c.kind for c in resolved] == ["resolved"] and resolved[0].finding == finding
    next_ref = _ref("sweep-10k-next", 10)
    empty = result.model_copy(update={"findings": []})
    _persist_findings(store, next_ref, empty, _diff(next_ref.sweep_id, resolved), HISTORY_SECONDS)
    assert store.open_findings(REGION, CLUSTER) == []
    body = store.get_blob(finding_history_key(REGION, CLUSTER, finding.fingerprint), str(item["finding_body"]))
    assert body is not None and Finding.model_validate_json(body) == finding

    # Its alert, new and resolved, fits SNS and names the count of the rest.
    for kind in (changes, resolved):
        arguments = sns_message(build_alert(_diff(ref.sweep_id, kind, unreachable=10_000), BASE_URL))
        assert sns_message_bytes(arguments) <= SNS_MESSAGE_MAX_BYTES
        assert f"… and {10_000 - MAX_LISTED_RESOURCES} more nodes" in arguments["Message"]
        deployed.client("sns").publish(TopicArn=deployed.topic_arn, **arguments)
