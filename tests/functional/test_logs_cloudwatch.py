"""The CloudWatch scan against the AWS emulation: the seeded log group of each scenario, the
missing group, denied and throttled FilterLogEvents, pagination over many events, a crafted flood
that must not hide a P0, the call budget and pacing, and the emulation's FilterLogEvents limits."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from botocore.exceptions import ClientError, ParamValidationError

from hyperpod_nccl.aws_limits import FILTER_LOG_EVENTS_PER_SECOND, FILTER_PAGE_MAX_BYTES
from hyperpod_nccl.checks import discover
from hyperpod_nccl.classifier import load_catalog, scan_lines
from hyperpod_nccl.collectors import logs as logs_collector
from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.collectors.control_plane import collect_control_plane
from hyperpod_nccl.collectors.logs import any_term_patterns, collect_logs, parse_hma
from hyperpod_nccl.models.findings import Finding, Priority, Status
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.logs import LogInventory, stream_identity
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.pacing import RateLimiter
from hyperpod_nccl.thresholds import (
    LOG_EVENTS_PER_STREAM,
    LOG_EVENTS_PER_TERM,
    LOG_FILTER_CALLS_PER_SECOND,
    LOG_FILTER_MAX_CALLS,
    LOG_FILTER_PAGE_LIMIT,
)
from hyperpod_nccl_sim.aws import EmulatedAws
from hyperpod_nccl_sim.scenario import FaultSpec, LogLineSpec, LogsSpec, LogStreamSpec, Scenario

CORPUS = Path(__file__).resolve().parents[1] / "data" / "log_corpus" / "corpus.json"
LOG_CHECKS = ("logs.cloudwatch", "logs.signatures", "logs.hma_detections", "logs.nccl_versions")


class _VirtualClock:
    """Time for the scan's pacer: sleeping advances it at once, and the total is what a real scan
    would have waited."""

    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


# The FilterLogEvents pacer the running test's scans share (the `pacing` fixture's; a diagnose run
# builds one per CollectionContext).
_FILTER_PACER: RateLimiter | None = None


@pytest.fixture(autouse=True)
def pacing(monkeypatch: pytest.MonkeyPatch, emulation: EmulatedAws) -> Iterator[_VirtualClock]:
    """The FilterLogEvents pacer on a virtual clock, so the tests do not wait out the quota. The
    emulation enforces the quota (5/s per account) on real time plus the time the pacer skipped, as
    AWS would have seen it pass: a scan paced under the quota is never throttled, one that is not
    would be."""
    clock = _VirtualClock()
    limiter = RateLimiter(
        LOG_FILTER_CALLS_PER_SECOND, burst=int(LOG_FILTER_CALLS_PER_SECOND), clock=clock.time, sleep=clock.sleep
    )
    monkeypatch.setattr(f"{__name__}._FILTER_PACER", limiter)
    monkeypatch.setattr(emulation.rates, "clock", lambda: time.monotonic() + clock.time())
    yield clock


def _scan(sim) -> tuple[LogInventory | None, CollectionContext]:  # type: ignore[no-untyped-def]
    request = DiagnoseRequest(cluster=sim.scenario.cluster.name, region=sim.scenario.region)
    ctx = CollectionContext(request=request, aws=sim.clients(), now=sim.now)
    if _FILTER_PACER is not None:
        ctx.filter_pacer = _FILTER_PACER
    control_plane = collect_control_plane(ctx)
    return collect_logs(ctx, control_plane), ctx


def _findings(sim, logs: LogInventory | None) -> dict[str, list[Finding]]:  # type: ignore[no-untyped-def]
    registry = discover()
    inventory = Inventory(
        cluster_name=sim.scenario.cluster.name,
        region=sim.scenario.region,
        orchestrator=sim.scenario.cluster.orchestrator,
        collected_at=sim.now,
        window_start=sim.now,
        window_end=sim.now,
        logs=logs,
    )
    return {check_id: registry[check_id].run(inventory) for check_id in LOG_CHECKS}


def _signatures(findings: list[Finding]) -> dict[str, Finding]:
    return {f"{f.fields['signature']}@{f.resources[-1].id}": f for f in findings if f.is_issue}


def test_eks_scenario_log_findings_per_stream_and_node(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    logs, ctx = _scan(sim)
    assert logs is not None and logs.group_exists and not logs.truncated
    assert ctx.degraded == []
    found = _findings(sim, logs)
    signatures = _signatures(found["logs.signatures"])

    worker3 = sim.instance_id("worker:3")
    timeout = signatures[f"watchdog_timeout@{worker3}/training"]
    assert timeout.status is Status.FAIL and timeout.reference.pointer == "references/debugging-guide.md § 22"
    assert timeout.fields["count"] == 9  # 8 repeated watchdog lines + the "detected by watchdog" line
    assert timeout.fields["op"] == "ALLREDUCE" and timeout.fields["timeout_ms"] == 600000
    assert timeout.fields["first_seen"] and timeout.fields["first_seen"] != timeout.fields["last_seen"]
    assert any(r.kind == "node" and r.id == worker3 for r in timeout.resources)

    worker9 = sim.instance_id("worker:9")
    fallback = signatures[f"tcp_fallback@{worker9}/nccl"]
    assert fallback.reference.pointer == "references/debugging-guide.md § 13" and fallback.fields["count"] == 8
    assert f"ofi_plugin_missing@{worker9}/nccl" in signatures

    worker2 = sim.instance_id("worker:2")
    lifecycle = signatures[f"lifecycle_failure@LifecycleConfig/worker/{worker2}"]
    assert lifecycle.reference.pointer == "references/node-debugger.md § D"

    worker5 = sim.instance_id("worker:5")
    xid = signatures[f"xid@SagemakerHealthMonitoringAgent/worker/{worker5}"]
    assert xid.fields["xid"] == 79 and xid.fields["action"] == "replace"
    assert xid.reference.pointer == "references/node-debugger.md § G"

    hma = found["logs.hma_detections"]
    assert [f.resources[0].id for f in hma] == [worker5]
    assert hma[0].fields["reasons"] == "XidHardwareFailure" and hma[0].status is Status.FAIL
    assert (hma[0].fields["conditions"], hma[0].fields["actions"]) == ("NvidiaErrorTerminate", "Replace")

    drift = found["logs.nccl_versions"]
    assert len(drift) == 1 and drift[0].status is Status.FAIL
    assert drift[0].fields["nccl_versions"] == "2.21.5,2.23.4"
    assert [r.id for r in drift[0].resources] == [f"{sim.instance_id('worker:7')}/nccl"]

    # Healthy INFO chatter on the other workers produced nothing.
    worker1 = sim.instance_id("worker:1")
    assert not any(worker1 in key for key in signatures)


def test_healthy_scenario_scans_chatter_without_findings(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("healthy-eks")
    logs, ctx = _scan(sim)
    assert logs is not None and logs.events_matched > 0 and ctx.degraded == []
    found = _findings(sim, logs)
    assert [f.status for f in found["logs.signatures"]] == [Status.PASS]
    assert [f.status for f in found["logs.cloudwatch"]] == [Status.PASS]
    assert found["logs.hma_detections"] == []
    assert [f.status for f in found["logs.nccl_versions"]] == [Status.PASS]


def test_missing_log_group_is_an_info_not_a_crash(simulate) -> None:  # type: ignore[no-untyped-def]
    def disable(scenario: Scenario) -> None:
        assert scenario.logs is not None
        scenario.logs.enabled = False

    sim = simulate("healthy-eks", edit=disable)
    logs, ctx = _scan(sim)
    assert logs is not None and not logs.group_exists and ctx.degraded == []
    found = _findings(sim, logs)
    [info] = found["logs.cloudwatch"]
    assert info.status is Status.INFO and "CloudWatch not enabled" in info.title
    assert info.reference.pointer == "references/operations.md § 4"
    assert found["logs.signatures"] == [] and found["logs.nccl_versions"] == []


def test_denied_filter_degrades_naming_the_action(simulate) -> None:  # type: ignore[no-untyped-def]
    denied = FaultSpec(operation="logs:FilterLogEvents", error_code="AccessDeniedException", message="not allowed")
    sim = simulate("eks-p5", faults=[denied])
    logs, ctx = _scan(sim)
    [degraded] = ctx.degraded
    assert degraded.missing_action == "logs:FilterLogEvents" and "grant logs:FilterLogEvents" in degraded.fix
    assert logs is not None and logs.truncated and logs.scans == []


def test_denied_describe_log_groups_degrades(simulate) -> None:  # type: ignore[no-untyped-def]
    denied = FaultSpec(operation="logs:DescribeLogGroups", error_code="AccessDeniedException")
    sim = simulate("healthy-eks", faults=[denied])
    logs, ctx = _scan(sim)
    assert logs is None
    assert [d.missing_action for d in ctx.degraded] == ["logs:DescribeLogGroups"]


def test_throttling_after_some_terms_keeps_partial_results(simulate) -> None:  # type: ignore[no-untyped-def]
    # The first FilterLogEvents calls succeed, then every call is throttled: what arrived is
    # still classified and the scan is marked partial.
    sim = simulate("eks-p5")
    sim.emulation.faults.add_fault(
        FaultSpec(operation="logs:FilterLogEvents", error_code="ThrottlingException", http_status=400)
    )
    logs, ctx = _scan(sim)
    [degraded] = ctx.degraded
    assert "throttled" in degraded.reason and degraded.missing_action is None
    assert logs is not None and logs.truncated
    found = _findings(sim, logs)
    [incomplete] = found["logs.cloudwatch"]
    assert incomplete.status is Status.WARN and "incomplete" in incomplete.title
    # An API failure, not the cluster's output: its degraded source carries it, the finding stays P2.
    assert incomplete.priority is Priority.P2 and logs.flooded_streams == []


def _noisy_worker1(*later: LogLineSpec):  # type: ignore[no-untyped-def]
    """A scenario edit: 2500 'Using network Socket' lines on worker:1's nccl stream, then `later`."""
    socket = LogLineSpec(
        minutes_ago=60, repeat=2500, every_seconds=0.01, message="{host}:{pid}:{pid} [3] NCCL INFO Using network Socket"
    )

    def edit(scenario: Scenario) -> None:
        assert scenario.logs is not None
        scenario.logs.streams.append(LogStreamSpec(node="worker:1", kind="nccl", lines=[socket, *later]))

    return edit


def test_every_page_of_a_noisy_stream_is_read(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("healthy-eks", edit=_noisy_worker1())
    logs, _ = _scan(sim)
    assert logs is not None
    [scan] = [s for s in logs.scans if s.instance_id == sim.instance_id("worker:1") and s.kind == "nccl"]
    [hit] = scan.hits
    assert hit.id == "tcp_fallback" and hit.count == 2500


def test_stream_names_map_to_nodes() -> None:
    assert stream_identity("SagemakerHealthMonitoringAgent/worker/i-0123456789abcdef0") == (
        "health_agent",
        "worker",
        "i-0123456789abcdef0",
    )
    assert stream_identity("LifecycleConfig/compute/i-0123456789abcdef0")[0:2] == ("lifecycle", "compute")
    assert stream_identity("i-0123456789abcdef0/nccl") == ("nccl", None, "i-0123456789abcdef0")
    assert stream_identity("DeepHealthCheckResults/i-0123456789abcdef0")[0] == "deep_health_check"
    assert stream_identity("something-else") == ("other", None, None)


def _real_hma_records() -> dict[str, str]:
    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))["excerpts"]
    return {e["url"]: e["text"] for e in corpus if '"HealthMonitoringAgentDetectionEvent"' in e["text"]}


def test_real_hma_records_give_reason_condition_and_action() -> None:
    records = list(_real_hma_records().values())
    assert len(records) >= 2, "the corpus lost its documented HMA records"
    stream = "SagemakerHealthMonitoringAgent/worker/i-0123456789abcdef0"
    parsed = [parse_hma(stream, 0, text) for text in records]
    # The node-problem record (behind a console timestamp): reason in "details: ", condition in prose.
    npd = next(d for d in parsed if d.reason == "XidHardwareFailure")
    assert (npd.condition, npd.action, npd.instance_id) == ("NvidiaErrorReboot", "Reboot", "i-0123456789abcdef0")
    # The DCGM policy record keys its condition as "condition: ".
    assert any(d.condition == "XID Error" for d in parsed)


def test_logs_spec_rejects_unknown_keys() -> None:
    import pydantic
    import pytest

    with pytest.raises(pydantic.ValidationError):
        LogsSpec.model_validate({"streams": [], "bogus": 1})
    assert isinstance(datetime.now(), datetime)


def test_terms_travel_in_a_few_any_term_patterns(simulate) -> None:  # type: ignore[no-untyped-def]
    terms = load_catalog().cloudwatch_terms
    patterns = any_term_patterns(terms)
    assert [t for _, members in patterns for t in members] == terms
    assert all(len(pattern) <= 1024 for pattern, _ in patterns) and len(patterns) < len(terms) / 10
    sim = simulate("eks-p5")
    sim.emulation.faults.calls.clear()
    logs, _ = _scan(sim)
    assert logs is not None and not logs.truncated
    assert sim.emulation.faults.calls.count("logs:FilterLogEvents") == len(patterns)


def test_any_term_pattern_is_filtered_server_side(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    group = f"/aws/sagemaker/Clusters/{sim.scenario.cluster.name}/{sim.cluster_arn.rsplit('/', 1)[-1]}"
    client = sim.clients().client("logs")
    everything = client.filter_log_events(logGroupName=group, limit=10000)["events"]
    wanted = client.filter_log_events(logGroupName=group, filterPattern='?"NCCL WARN" ?"Xid"', limit=10000)["events"]
    assert wanted and len(wanted) < len(everything)
    assert all("NCCL WARN" in e["message"] or "Xid" in e["message"] for e in wanted)
    missed = [e for e in everything if ("NCCL WARN" in e["message"] or "Xid" in e["message"]) and e not in wanted]
    assert missed == []


def test_an_overflowing_pattern_is_read_again_term_by_term(simulate, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    # 2500 "Using network Socket" lines overflow a pattern's cap (lowered to 1200 here) before the
    # later Xid line of the same pattern is read: the flooding stream is read from its newest end
    # and for the terms its flood lines lack.
    monkeypatch.setattr(logs_collector, "LOG_EVENTS_PER_TERM", 1200)
    xid = LogLineSpec(minutes_ago=30, message="NVRM: Xid (PCI:0000:53:00): 79, GPU has fallen off the bus.")
    sim = simulate("healthy-eks", edit=_noisy_worker1(xid))
    sim.emulation.faults.calls.clear()
    logs, _ = _scan(sim)
    assert logs is not None
    [scan] = [s for s in logs.scans if s.instance_id == sim.instance_id("worker:1") and s.kind == "nccl"]
    assert {h.cls for h in scan.hits} >= {"tcp_fallback", "xid"}, scan.hits
    assert logs.truncated and "Using network Socket" in (logs.truncation_reason or "")
    assert sim.emulation.faults.calls.count("logs:FilterLogEvents") > len(any_term_patterns(logs.filter_terms))


def _ecc_example() -> str:
    """The corpus's own real uncorrectable-ECC line (a P0 of the catalog's `ecc` class)."""
    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))["excerpts"]
    return next(e["text"] for e in corpus if e["cls"] == "ecc" and e["text"].startswith("RuntimeError: CUDA error"))


# A read stops at its cap only at a page boundary with more pages to come, and a page holds as many
# crafted lines as fit 1 MB (fewer as the catalog's filter terms grow: 758 at 1,356 bytes a line):
# a page more than the cap overflows it whatever the line's length.
FLOOD_LINES = LOG_EVENTS_PER_TERM + LOG_FILTER_PAGE_LIMIT + 1


def _flood(*, ecc_elsewhere: bool = True):  # type: ignore[no-untyped-def]
    """A scenario edit: worker:1's training stream prints one crafted line carrying every filter
    term FLOOD_LINES times, then a real ECC line; worker:2's stream prints the ECC line after the
    flood began (so a read of the whole group reaches its cap first)."""
    crafted = " ".join(load_catalog().cloudwatch_terms)
    ecc = _ecc_example()

    def edit(scenario: Scenario) -> None:
        assert scenario.logs is not None
        flood = LogLineSpec(minutes_ago=90, repeat=FLOOD_LINES, every_seconds=0.01, message=crafted)
        after = LogLineSpec(minutes_ago=30, message=ecc)
        scenario.logs.streams.append(LogStreamSpec(node="worker:1", kind="training", lines=[flood, after]))
        if ecc_elsewhere:
            other = LogLineSpec(minutes_ago=60, message=ecc)
            scenario.logs.streams.append(LogStreamSpec(node="worker:2", kind="training", lines=[other]))

    return edit


def test_a_crafted_flood_does_not_hide_a_p0(simulate, pacing: _VirtualClock) -> None:  # type: ignore[no-untyped-def]
    crafted = " ".join(load_catalog().cloudwatch_terms)
    # The crafted line is no ECC line itself: an ECC finding can only come from the real lines.
    assert "ecc_uncorrectable" not in {h.id for h in scan_lines([crafted]).hits}
    sim = simulate("healthy-eks", edit=_flood())
    sim.emulation.faults.calls.clear()
    logs, ctx = _scan(sim)
    assert logs is not None and ctx.degraded == []
    flooder = f"{sim.instance_id('worker:1')}/training"
    other = f"{sim.instance_id('worker:2')}/training"

    found = _findings(sim, logs)
    signatures = _signatures(found["logs.signatures"])
    for stream in (flooder, other):
        ecc = signatures[f"ecc_uncorrectable@{stream}"]
        assert ecc.status is Status.FAIL and ecc.priority is Priority.P0
    [incomplete] = found["logs.cloudwatch"]
    assert incomplete.status is Status.WARN and incomplete.priority is Priority.P1
    assert flooder in incomplete.title and "the evidence may be incomplete" in (incomplete.detail or "")
    assert f"stream {flooder} printed at least" in (incomplete.detail or "")
    assert {r.id for r in incomplete.resources} >= {flooder, sim.instance_id("worker:1")}
    [flood] = logs.flooded_streams
    assert flood.stream == flooder and 1000 <= flood.matched_at_least <= FLOOD_LINES and not flood.complete

    # Bounded: a handful of reads per pattern, far from one per flood line, and paced under the
    # quota (every call past the burst waited its turn on the pacer). A read of a stream stops at
    # LOG_EVENTS_PER_STREAM events, which FilterLogEvents pages by its 1 MB answer: the crafted line
    # carries every term, so its length (and the pages a read takes) grows with the catalog.
    pages_per_read = math.ceil(LOG_EVENTS_PER_STREAM * len(crafted.encode()) / FILTER_PAGE_MAX_BYTES)
    calls = sim.emulation.faults.calls.count("logs:FilterLogEvents")
    assert calls == logs.filter_calls <= 20 * pages_per_read
    assert pacing.now >= (calls - int(LOG_FILTER_CALLS_PER_SECOND)) / LOG_FILTER_CALLS_PER_SECOND - 1e-6


def test_the_call_budget_stops_the_scan_and_says_so(simulate, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(logs_collector, "LOG_FILTER_MAX_CALLS", 3)
    sim = simulate("healthy-eks", edit=_flood(ecc_elsewhere=False))
    sim.emulation.faults.calls.clear()
    logs, _ = _scan(sim)
    assert logs is not None and logs.truncated and logs.filter_calls == 3
    assert sim.emulation.faults.calls.count("logs:FilterLogEvents") == 3
    assert "stopped after 3 FilterLogEvents calls" in (logs.truncation_reason or "")
    [incomplete] = _findings(sim, logs)["logs.cloudwatch"]
    assert incomplete.priority is Priority.P1 and "incomplete" in incomplete.title
    assert LOG_FILTER_MAX_CALLS >= 40  # the real budget leaves room for the flood case above


def _group(sim) -> str:  # type: ignore[no-untyped-def]
    return f"/aws/sagemaker/Clusters/{sim.scenario.cluster.name}/{sim.cluster_arn.rsplit('/', 1)[-1]}"


def test_emulated_filter_log_events_pages_like_the_service(simulate, pacing: _VirtualClock) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("healthy-eks", edit=_flood(ecc_elsewhere=False))
    client = sim.clients().client("logs")

    def filter_log_events(**kwargs):  # type: ignore[no-untyped-def]
        # Paced at the quota, on the clock the emulation enforces it on (5/s per account).
        pacing.sleep(1 / FILTER_LOG_EVENTS_PER_SECOND)
        return client.filter_log_events(**kwargs)

    group, stream = _group(sim), f"{sim.instance_id('worker:1')}/training"
    # FLOOD_LINES + 1 events of over 1 KB (and the chatter): the 1 MB page limit binds before the
    # 10,000-event one.
    pages, token, seen = [], None, []
    while True:
        kwargs = {"logGroupName": group, "logStreamNames": [stream], **({"nextToken": token} if token else {})}
        page = filter_log_events(**kwargs)
        pages.append(page)
        seen += page["events"]
        token = page.get("nextToken")
        if not token:
            break
    assert len(seen) >= FLOOD_LINES + 1 and len({e["eventId"] for e in seen}) == len(seen)
    assert all(sum(len(e["message"].encode()) + 26 for e in p["events"]) <= 1_048_576 for p in pages)
    assert len(pages) >= 5 and all(p["searchedLogStreams"] == [] for p in pages)
    assert [e["timestamp"] for e in seen] == sorted(e["timestamp"] for e in seen)
    # Newest first: the real ECC line after the flood comes first; the token keeps the direction.
    newest = filter_log_events(logGroupName=group, logStreamNames=[stream], startFromHead=False, limit=2)
    assert "uncorrectable ECC" in newest["events"][0]["message"]
    more = filter_log_events(logGroupName=group, logStreamNames=[stream], nextToken=newest["nextToken"], limit=2)
    assert more["events"][0]["timestamp"] <= newest["events"][-1]["timestamp"]
    # The service's parameter rules.
    for bad in (
        {"logStreamNames": [stream], "logStreamNamePrefix": "i-"},
        {"logStreamNames": [f"s{i}" for i in range(101)]},
        {"limit": 10001},
        {"nextToken": "not-a-token"},
    ):
        with pytest.raises((ClientError, ParamValidationError)) as raised:
            filter_log_events(logGroupName=group, **bad)
        if isinstance(raised.value, ClientError):
            assert raised.value.response["Error"]["Code"] == "InvalidParameterException"
