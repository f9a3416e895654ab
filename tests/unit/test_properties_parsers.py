"""Hostile input to every parser that reads something we do not control: probe output, log
lines, EventBridge events and Kubernetes objects. Never an unhandled exception; values that
reach an SSM target are validated."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hyperpod_nccl.classifier import scan_lines
from hyperpod_nccl.collectors.kubernetes import MALFORMED_OBJECT_ERRORS
from hyperpod_nccl.collectors.logs import parse_hma
from hyperpod_nccl.kube import convert
from hyperpod_nccl.models.node_probe import ProbeTarget
from hyperpod_nccl.monitor.events import Rejection, parse_trigger
from hyperpod_nccl.monitor.settings import WatchedCluster
from hyperpod_nccl.probe.parsers import parse_node_probe, parse_slurm_controller

EVENTS = Path(__file__).resolve().parents[1] / "data" / "events"
PROBE_DATA = Path(__file__).resolve().parents[1] / "data" / "probe"
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=15), inner, max_size=5),
    max_leaves=25,
)
hostile_lines = st.lists(
    st.text(max_size=400)
    | st.sampled_from(
        [
            # The probe's real section markers, so that sections open, close and nest wrongly.
            "@@BEGIN gpu_xml",
            "@@END gpu_xml rc=0",
            '<nvidia_smi_log><gpu id="00000000:53:00.0"><remapped_rows>',
            "@@BEGIN xid_dmesg",
            "@@END xid_dmesg rc=1",
            "@@BEGIN nvlink",
            "@@BEGIN sinfo",
            "@@END sinfo rc=",
            "@@END gpu_xml rc=notanumber",
            "<remapped_row_pending>Yes</remapped_row_pending></remapped_rows></gpu></nvidia_smi_log>",
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)",
            "\t Link 0: <inactive>",
            '{"msg":"NPD caught event","details: ":{"reason":"x"},"HealthMonitoringAgentDetectionEvent":"HealthEvent"}',
            "NVRM: Xid (PCI:0000:53:00): 79, pid=1, name=x",
            "\x00\x01\x02",
            "NCCL WARN " + "A" * 5000,
            "[rank0]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=x",
        ]
    ),
    max_size=40,
)


@given(lines=hostile_lines)
@settings(max_examples=150, deadline=None)
def test_probe_parsers_never_raise(lines: list[str]) -> None:
    text = "\n".join(lines)
    parse_node_probe(text)
    parse_slurm_controller(text)


def test_real_probe_fixtures_survive_truncation_at_any_line() -> None:
    for path in sorted(PROBE_DATA.glob("*.txt")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for cut in range(0, len(lines), max(1, len(lines) // 15)):
            parse_node_probe("\n".join(lines[:cut]))


@given(lines=hostile_lines)
@settings(max_examples=150, deadline=None)
def test_hma_records_never_raise(lines: list[str]) -> None:
    detection = parse_hma("SagemakerHealthMonitoringAgent/worker/i-0123456789abcdef0", 0, "\n".join(lines))
    assert detection.instance_id == "i-0123456789abcdef0" and len(detection.message) <= 500


@given(lines=hostile_lines)
@settings(max_examples=150, deadline=None)
def test_classifier_never_raises_on_any_text(lines: list[str]) -> None:
    result = scan_lines(lines)
    for hit in result.hits:
        assert hit.count >= 1 and hit.reference.file.endswith(".md")


def _corpus_events() -> list[dict[str, Any]]:
    events = []
    for path in sorted(EVENTS.glob("*.json")):
        event = json.loads(path.read_text())
        event.pop("_expect", None)
        events.append(event)
    return events


WATCHED = [WatchedCluster(name="ml-training-eks", region="us-west-2")]


def _mutations(event: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    def mutate(path: list[str], value: Any) -> dict[str, Any]:
        copy = json.loads(json.dumps(event))
        node = copy
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node[path[-1]] = value
        return copy

    keys = [["detail-type"], ["source"], ["region"], ["detail"], ["detail", "ClusterName"], ["detail", "InstanceId"]]
    keys += [["detail", "EventDetails"], ["detail", "HealthSummary"], ["detail", "ClusterStatus"], ["id"]]
    return st.builds(mutate, st.sampled_from(keys), json_values)


@pytest.mark.parametrize("event", _corpus_events(), ids=lambda e: str(e.get("id", "event"))[:20])
@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_mutated_events_are_accepted_validly_or_rejected_with_a_reason(event: dict[str, Any], data: Any) -> None:
    mutated = data.draw(_mutations(event))
    outcome = parse_trigger(mutated, WATCHED, now=datetime(2026, 11, 30, tzinfo=UTC))
    if isinstance(outcome, Rejection):
        assert outcome.reason
        return
    for request in outcome:
        assert request.node is None or ProbeTarget.model_fields["instance_id"].metadata  # validated below
        if request.node is not None:
            ProbeTarget(instance_id=request.node, instance_group="worker", instance_type="x", cluster_id="a" * 12)


@given(obj=st.dictionaries(st.sampled_from(["metadata", "spec", "status", "data"]), json_values, max_size=4))
@settings(max_examples=150, deadline=None)
def test_kubernetes_converters_fail_only_in_ways_the_collector_reports(obj: dict[str, Any]) -> None:
    # A schema-violating object may fail to convert, but only with an error the collector turns
    # into a degraded source naming the resource (never an unhandled exception).
    for converter in (convert.node, convert.pod, convert.service, convert.daemonset, convert.network_policy):
        with contextlib.suppress(MALFORMED_OBJECT_ERRORS):
            converter(obj)


@pytest.mark.parametrize(
    "field, value",
    [
        ("instance_id", "i-0123456789abcdef0;reboot"),
        ("instance_id", "i-0123456789abcdef0\n"),
        ("instance_group", "worker-i-0aaaaaaaaaaaaaaaa_evil"),
        ("instance_group", "a b"),
        ("cluster_id", "abc/../def12"),
        ("cluster_id", "ABCDEF123456"),
    ],
)
def test_ssm_target_parts_are_validated(field: str, value: str) -> None:
    parts = {"instance_id": "i-0123456789abcdef0", "instance_group": "worker", "cluster_id": "abcdef123456"}
    parts[field] = value
    with pytest.raises(ValidationError):
        ProbeTarget(instance_type="ml.p5.48xlarge", **parts)


def test_well_formed_target() -> None:
    target = ProbeTarget(
        instance_id="i-0123456789abcdef0", instance_group="worker", instance_type="x", cluster_id="abcdef123456"
    )
    assert target.ssm_target == "sagemaker-cluster:abcdef123456_worker-i-0123456789abcdef0"
