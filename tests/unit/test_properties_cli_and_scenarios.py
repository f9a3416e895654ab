"""Property-based tests: hostile input to the CLI validators, scenario loading, the report
renderer and the suggested-command builders never produces anything but a clear error."""

from __future__ import annotations

import argparse
import io
import json
import shlex
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_nccl import suggested
from hyperpod_nccl.cli import validate
from hyperpod_nccl.cli.render import TextReport, render_json
from hyperpod_nccl.models.findings import Finding, Priority, Resource, Status, SweepResult
from hyperpod_nccl.references import OPS_REMEDIATIONS
from hyperpod_nccl.verdict import build_verdict
from hyperpod_nccl_sim.scenario import load_scenario

VALIDATORS = (
    validate.cluster,
    validate.region,
    validate.instance_id,
    validate.dns_label,
    validate.sample_nodes,
    validate.duration,
)
hostile_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=300) | st.sampled_from(
    ["", "-", "$(reboot)", "a;rm -rf /", "i-0abc\nreboot", "`id`", "../../etc/passwd", "x" * 5000, "\x00"]
)


@given(value=hostile_text)
def test_validators_accept_or_reject_cleanly(value: str) -> None:
    for validator in VALIDATORS:
        try:
            accepted = validator(value)
        except argparse.ArgumentTypeError as error:
            assert str(error) and "\n" not in str(error)
            continue
        # Whatever is accepted contains nothing a shell or an SSM target could interpret.
        assert not any(ch in str(accepted) for ch in ";|&$`'\"\n\\ /\x00<>(){}")


@given(
    document=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
        max_leaves=30,
    )
)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=150)
def test_any_json_scenario_file_loads_or_fails_with_a_message(document: object, tmp_path: Path) -> None:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    try:
        load_scenario(str(path))
    except ValueError as error:
        assert str(path) in str(error)


def test_truncated_scenario_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"name": "x", "cluster": {', encoding="utf-8")
    try:
        load_scenario(str(path))
    except ValueError as error:
        assert "invalid scenario file" in str(error)
    else:
        raise AssertionError("a truncated file must not load")


@given(
    group_id=st.text(min_size=1, max_size=40),
    region=st.text(min_size=1, max_size=20),
    instance=st.text(min_size=1, max_size=40),
)
def test_suggested_commands_quote_every_id(group_id: str, region: str, instance: str) -> None:
    # Ids come from AWS responses; even a hostile one stays a single shell word.
    for command in (
        suggested.describe_cluster_node("c", instance, region),
        suggested.batch_reboot("c", [instance], region),
    ):
        words = shlex.split(command.command)
        assert instance in words and region in words
    sg = suggested.sg_self_reference(group_id, region, "ingress")
    words = shlex.split(sg.command)
    assert group_id in words


finding_strategy = st.builds(
    Finding,
    check_id=st.from_regex(r"[a-z]{1,8}\.[a-z_]{1,12}", fullmatch=True),
    status=st.sampled_from(list(Status)),
    priority=st.none() | st.sampled_from(list(Priority)),
    title=st.text(max_size=80),
    detail=st.text(max_size=200),
    evidence=st.lists(st.text(max_size=100), max_size=6),
    resources=st.lists(
        st.builds(Resource, kind=st.sampled_from(["node", "pod", "security_group"]), id=st.text(max_size=30)),
        max_size=3,
    ),
    reference=st.just(OPS_REMEDIATIONS),
)


@given(findings=st.lists(finding_strategy, max_size=12))
def test_renderers_handle_any_findings_and_counts_agree(findings: list[Finding]) -> None:
    now = datetime(2026, 11, 30, tzinfo=UTC)
    result = SweepResult(
        cluster_name="c",
        region="us-west-2",
        started_at=now,
        window_start=now,
        window_end=now,
        findings=findings,
        verdict=build_verdict(findings),
    )
    out = io.StringIO()
    TextReport(out, colour=False).render(result)
    text = out.getvalue()
    causes = len(result.verdict.root_causes)
    assert f"Issues Found: {causes} root cause(s), folding {len(result.issues)} finding(s)" in text
    document = json.loads(render_json(result))
    assert document["issues_found"] == causes == sum(document["issues_by_priority"].values())
    assert document["findings_with_issues"] == len(result.issues) == result.verdict.findings_folded
    assert (causes == 0) == (not result.issues)
