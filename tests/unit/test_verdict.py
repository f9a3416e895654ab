"""The root-cause model (issue 14, point 1 and 3): every FAIL/WARN finding in exactly one root
cause, symptoms folded under their cause by the rules of `verdict/rules.py`, one priority per kind."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_nccl import references
from hyperpod_nccl.checks import discover
from hyperpod_nccl.classifier.catalog import load_catalog
from hyperpod_nccl.models.findings import Finding, Priority, Resource, Status
from hyperpod_nccl.references import DBG_POD_FAILURES
from hyperpod_nccl.verdict import build_verdict
from hyperpod_nccl.verdict.fold import CAUSE_NOT_FOUND, UNATTRIBUTED_JOB
from hyperpod_nccl.verdict.kinds import (
    CAUSE_KINDS,
    CLASSIFICATION,
    LOG_SIGNATURE_CHECKS,
    OWN_CAUSE_SIGNATURES,
    Classify,
    classify,
)
from hyperpod_nccl.verdict.rules import EXPLAINS, Explains

NODE_A, NODE_B = "i-0aaaaaaaaaaaaaaa1", "i-0bbbbbbbbbbbbbbb2"


def _sample(entry: Classify, resources: list[Resource], status: Status = Status.FAIL) -> Finding:
    """A finding the classification entry matches, about `resources`."""
    fields: dict[str, str | int | float | bool | None] = {}
    if entry.signatures:
        fields["signature"] = min(entry.signatures)
    if entry.field_equals:
        fields[entry.field_equals[0]] = entry.field_equals[1]
    if entry.hardware_xid:
        fields["xid"] = 79
    if entry.streams:  # read from a stream of that kind, written by the finding's node
        writer = next((r.id for r in resources if r.kind == "node"), "i-0ccccccccccccccc3")
        resources = [*resources, Resource(kind="log_stream", id=f"{writer}/{min(entry.streams)}")]
    meta = discover()[entry.check].meta
    return Finding(
        check_id=entry.check,
        status=status,
        priority=meta.priority,
        title=f"{entry.kind} seen by {entry.check}",
        resources=resources,
        reference=meta.reference,
        fields=fields,
    )


def _entry_of(kind: str) -> Classify:
    return next(e for e in CLASSIFICATION if e.kind == kind)


# --- the tables ------------------------------------------------------------------------------------
def test_every_classified_check_exists_and_every_kind_is_defined() -> None:
    catalog = discover()
    assert {e.check for e in CLASSIFICATION} <= set(catalog)
    assert {e.kind for e in CLASSIFICATION} <= set(CAUSE_KINDS)
    assert {r.cause for r in EXPLAINS} | {r.symptom for r in EXPLAINS} <= set(CAUSE_KINDS)


def test_every_cause_kind_is_reachable_from_a_finding() -> None:
    assert set(CAUSE_KINDS) == {e.kind for e in CLASSIFICATION}


def test_every_catalog_signature_has_one_answer_in_the_verdict() -> None:
    """A signature is evidence of a kind (the same one for every log check) or names a cause of its
    own; a signature added to the catalog without either answer would stand alone as a root cause
    (the held-out scenario's connect failures did, docs/verdict-held-out.md)."""
    catalog = {s.id for s in load_catalog().signatures}
    classified: dict[str, set[str]] = defaultdict(set)
    for entry in CLASSIFICATION:
        if entry.check in LOG_SIGNATURE_CHECKS:
            for signature in entry.signatures:
                classified[signature].add(entry.check)
    unanswered = catalog - set(classified) - OWN_CAUSE_SIGNATURES
    assert not unanswered, f"signatures with no kind and not in OWN_CAUSE_SIGNATURES: {sorted(unanswered)}"
    both = set(classified) & OWN_CAUSE_SIGNATURES
    assert not both, f"classified and also an own cause: {sorted(both)}"
    assert catalog >= OWN_CAUSE_SIGNATURES, sorted(OWN_CAUSE_SIGNATURES - catalog)
    one_check = {s for s, checks in classified.items() if checks != set(LOG_SIGNATURE_CHECKS)}
    assert not one_check, f"classified for one log check only: {sorted(one_check)}"


def test_every_cause_points_at_a_section_that_exists() -> None:
    for kind in CAUSE_KINDS.values():
        assert references.section_heading(kind.reference) is not None, kind.id


def test_the_graph_of_kinds_is_acyclic() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for rule in EXPLAINS:
        assert rule.cause != rule.symptom, rule
        edges[rule.cause].add(rule.symptom)
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(kind: str, path: tuple[str, ...]) -> None:
        assert kind not in visiting, f"cycle: {' -> '.join((*path, kind))}"
        if kind in done:
            return
        visiting.add(kind)
        for nxt in edges[kind]:
            visit(nxt, (*path, kind))
        visiting.discard(kind)
        done.add(kind)

    for kind in list(edges):
        visit(kind, ())


def test_a_specific_signature_entry_comes_before_its_checks_catch_all() -> None:
    seen_catch_all: set[str] = set()
    for entry in CLASSIFICATION:
        specific = entry.signatures or entry.field_equals or entry.hardware_xid or entry.streams
        assert not (specific and entry.check in seen_catch_all), f"{entry} is shadowed by an earlier catch-all"
        if not specific:
            seen_catch_all.add(entry.check)


# --- every rule, both ways ------------------------------------------------------------------------
def _pair(rule: Explains, *, related: bool) -> tuple[Finding, Finding]:
    """A cause and a symptom finding for `rule`, whose relation holds or does not."""
    cause_entry, symptom_entry = _entry_of(rule.cause), _entry_of(rule.symptom)
    if rule.relation == "same_node":
        cause_res = [Resource(kind="node", id=NODE_A)]
        symptom_res = [Resource(kind="node", id=NODE_A if related else NODE_B)]
    elif rule.relation == "same_pod":
        cause_res = [Resource(kind="pod", id="ml/train-0"), Resource(kind="job", id="ml/train")]
        pod = "ml/train-0" if related else "ml/train-1"
        symptom_res = [Resource(kind="pod", id=pod), Resource(kind="job", id="ml/train")]
    elif rule.relation == "same_job":
        cause_res = [Resource(kind="job", id="ml/train")]
        symptom_res = [Resource(kind="job", id="ml/train" if related else "ml/other")]
    elif rule.relation == "peers":
        cause_res = [Resource(kind="node", id=NODE_A)]
        # Unrelated: seen elsewhere, in a job known not to run on the cause's node.
        symptom_res = (
            [Resource(kind="node", id=NODE_A)]
            if related
            else [Resource(kind="node", id=NODE_B), Resource(kind="job", id="ml/other")]
        )
    else:
        cause_res = [Resource(kind="security_group", id="sg-1")]
        symptom_res = [Resource(kind="node", id=NODE_B), Resource(kind="job", id="ml/other")]
    return _sample(cause_entry, cause_res), _sample(symptom_entry, symptom_res)


@pytest.mark.parametrize("rule", EXPLAINS, ids=lambda r: f"{r.cause}-explains-{r.symptom}")
def test_each_rule_folds_its_symptom_under_its_cause_when_related(rule: Explains) -> None:
    cause, symptom = _pair(rule, related=True)
    verdict = build_verdict([cause, symptom])
    owner = verdict.cause_of(symptom.fingerprint)
    assert owner is not None and owner.kind == rule.cause
    assert any(s.kind == rule.symptom and s.why == rule.why for s in owner.explains)
    assert len(verdict.root_causes) == 1


@pytest.mark.parametrize(
    "rule", [r for r in EXPLAINS if r.relation != "anywhere"], ids=lambda r: f"{r.cause}-not-{r.symptom}"
)
def test_each_rule_leaves_an_unrelated_symptom_alone(rule: Explains) -> None:
    cause, symptom = _pair(rule, related=False)
    verdict = build_verdict([cause, symptom])
    assert {c.kind for c in verdict.root_causes} >= {rule.cause, rule.symptom}


def test_a_rule_with_a_window_ignores_a_symptom_long_before_the_cause() -> None:
    rule = next(r for r in EXPLAINS if r.within_seconds and r.relation == "peers")
    cause, symptom = _pair(rule, related=True)
    cause.fields["first_seen"] = "2026-12-01T12:00:00+00:00"
    symptom.fields["first_seen"] = "2026-12-01T09:00:00+00:00"
    assert (rule.within_seconds or 0) < 3 * 3600
    verdict = build_verdict([cause, symptom])
    assert verdict.cause_of(symptom.fingerprint).kind == rule.symptom  # type: ignore[union-attr]
    symptom.fields["first_seen"] = "2026-12-01T12:01:00+00:00"
    assert build_verdict([cause, symptom]).cause_of(symptom.fingerprint).kind == rule.cause  # type: ignore[union-attr]


# --- whole diagnoses -----------------------------------------------------------------------------
def _node(instance_id: str) -> list[Resource]:
    return [Resource(kind="node", id=instance_id)]


def test_one_xid_seen_by_every_source_and_the_hang_it_caused_are_one_root_cause() -> None:
    hardware = [
        _sample(Classify("logs.signatures", "gpu_hardware", frozenset({"xid"}), True), _node(NODE_A)),
        _sample(Classify("node.gpu_xid", "gpu_hardware", hardware_xid=True), _node(NODE_A)),
        _sample(Classify("logs.hma_detections", "gpu_hardware"), _node(NODE_A)),
        _sample(Classify("cluster.node_status", "node_unhealthy"), _node(NODE_A)),
        _sample(Classify("k8s.node_health_labels", "node_unhealthy"), _node(NODE_A)),
        _sample(Classify("node.reachability", "node_unreachable"), _node(NODE_A), Status.WARN),
        _sample(Classify("hang.attribution", "hang_attributed"), _node(NODE_A)),
    ]
    witnesses = [
        _sample(_entry_of("collective_hang"), _node(f"i-0{n:016x}")) for n in range(8)
    ]  # every waiting rank logs the timeout on its own node
    verdict = build_verdict([*hardware, *witnesses])
    assert [c.kind for c in verdict.root_causes] == ["gpu_hardware"]
    root = verdict.root_causes[0]
    assert root.priority is Priority.P0 and root.anchor == NODE_A
    assert root.reference == CAUSE_KINDS["gpu_hardware"].reference
    assert len(root.fingerprints) == len({f.fingerprint for f in [*hardware, *witnesses]})
    assert verdict.findings_folded == len(hardware) + len(witnesses)


def test_two_causes_on_one_node_stay_two_and_each_keeps_its_own_symptoms() -> None:
    lifecycle = _sample(_entry_of("lifecycle_script"), _node(NODE_A))
    remap = _sample(_entry_of("gpu_memory_health"), _node(NODE_A))
    memlock = _sample(_entry_of("node_memory_limits"), _node(NODE_A))
    verdict = build_verdict([lifecycle, remap, memlock])
    assert sorted(c.kind for c in verdict.root_causes) == [
        "gpu_memory_health",
        "lifecycle_script",
        "node_memory_limits",
    ]
    assert verdict.root_causes[0].kind == "lifecycle_script"  # P0 first


def test_a_cluster_wide_cause_takes_the_symptoms_nothing_closer_explains() -> None:
    sg = _sample(_entry_of("security_group_rules"), [Resource(kind="security_group", id="sg-1")])
    efa = _sample(_entry_of("efa_hardware"), _node(NODE_A))
    hang_on_a = _sample(_entry_of("collective_hang"), [*_node(NODE_A), Resource(kind="job", id="ml/a")])
    hang_on_b = _sample(_entry_of("collective_hang"), [*_node(NODE_B), Resource(kind="job", id="ml/b")])
    verdict = build_verdict([sg, efa, hang_on_a, hang_on_b])
    assert verdict.cause_of(hang_on_a.fingerprint).kind == "efa_hardware"  # type: ignore[union-attr]
    assert verdict.cause_of(hang_on_b.fingerprint).kind == "security_group_rules"  # type: ignore[union-attr]
    assert verdict.root_causes[0].kind == "security_group_rules"  # cluster before node at the same priority


def test_the_same_failure_has_one_priority_whichever_source_saw_it() -> None:
    from_events = _sample(
        Classify("cluster.events", "lifecycle_script", frozenset({"lifecycle_script"})), _node(NODE_A)
    )
    from_logs = _sample(
        Classify("logs.signatures", "lifecycle_script", frozenset({"lifecycle_failure"})), _node(NODE_B)
    )
    # As the shipped eks-p5 scenario shows them: the event says P1, the log line P0 ...
    from_events.priority, from_logs.priority = Priority.P1, Priority.P0
    verdict = build_verdict([from_events, from_logs])
    assert {c.priority for c in verdict.root_causes} == {
        CAUSE_KINDS["lifecycle_script"].priority
    }  # ... the verdict not


def test_a_symptom_nothing_explains_says_so_and_an_unknown_finding_is_its_own_cause() -> None:
    hang = _sample(_entry_of("collective_hang"), _node(NODE_A))
    unknown = Finding(
        check_id="k8s.unknown_future_check",
        status=Status.WARN,
        priority=Priority.P2,
        title="something new",
        resources=[Resource(kind="pod", id="ml/x")],
        reference=DBG_POD_FAILURES,
    )
    passed = _sample(_entry_of("gpu_hardware"), _node(NODE_B), Status.PASS)
    verdict = build_verdict([hang, unknown, passed])
    assert [c.title for c in verdict.root_causes] == [
        f"{CAUSE_KINDS['collective_hang'].title}: {CAUSE_NOT_FOUND}",
        "something new",
    ]
    assert verdict.root_causes[1].priority is Priority.P2 and verdict.root_causes[1].kind == "k8s.unknown_future_check"
    assert verdict.root_causes[0].anchor == UNATTRIBUTED_JOB
    assert verdict.cause_of(passed.fingerprint) is None and verdict.findings_folded == 2


def test_a_gpu_error_in_a_jobs_output_is_the_jobs_report_not_the_nodes_fault() -> None:
    xid_line = Classify("logs.signatures", "gpu_hardware", frozenset({"ecc_uncorrectable"}))
    from_agent = _sample(
        xid_line, [*_node(NODE_A), Resource(kind="log_stream", id=f"SagemakerHealthMonitoringAgent/w/{NODE_A}")]
    )
    in_job_output = _sample(xid_line, [*_node(NODE_B), Resource(kind="log_stream", id=f"{NODE_B}/training")])
    assert classify(from_agent) == "gpu_hardware" and classify(in_job_output) == "gpu_error_in_job_output"
    verdict = build_verdict([from_agent, in_job_output])
    assert [(c.kind, c.anchor) for c in verdict.root_causes] == [("gpu_hardware", NODE_A)]


def test_a_software_xid_is_not_hardware_evidence() -> None:
    finding = _sample(_entry_of("gpu_hardware"), _node(NODE_A))
    finding.fields["xid"] = "31"  # an application's illegal memory access
    assert classify(finding) != "gpu_hardware"
    finding.fields["xid"] = "79"
    assert classify(finding) == "gpu_hardware"


def test_a_symptom_is_as_urgent_as_what_explains_it_and_the_cause_as_urgent_as_what_it_breaks() -> None:
    crash = _sample(_entry_of("pod_crash"), [Resource(kind="job", id="ml/a")])
    hang = _sample(_entry_of("collective_hang"), [Resource(kind="job", id="ml/a")])
    verdict = build_verdict([crash, hang])
    assert [(c.kind, c.priority) for c in verdict.root_causes] == [
        ("pod_crash", CAUSE_KINDS["collective_hang"].priority)
    ]


_ENTRIES = st.sampled_from(CLASSIFICATION)
_PLACES = st.sampled_from(
    [
        _node(NODE_A),
        _node(NODE_B),
        [Resource(kind="job", id="ml/a")],
        [Resource(kind="pod", id="ml/a-0"), Resource(kind="job", id="ml/a")],
        [Resource(kind="security_group", id="sg-1")],
        [],
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_ENTRIES, _PLACES, st.sampled_from([Status.FAIL, Status.WARN, Status.PASS])), max_size=25))
def test_every_issue_belongs_to_exactly_one_root_cause(spec: list[tuple[Classify, list[Resource], Status]]) -> None:
    findings = [_sample(entry, places, status) for entry, places, status in spec]
    verdict = build_verdict(findings)
    owned = [fp for cause in verdict.root_causes for fp in cause.fingerprints]
    issues = [f for f in findings if f.is_issue]
    assert sorted(owned) == sorted(f.fingerprint for f in issues)
    assert verdict.findings_folded == len(issues)
    ranks = [(c.priority.rank) for c in verdict.root_causes]
    assert ranks == sorted(ranks)


def test_the_readme_documents_every_field_of_the_json_verdict() -> None:
    from pathlib import Path

    from hyperpod_nccl.models.findings import SuggestedCommand, SweepResult
    from hyperpod_nccl.models.verdict import ExplainedSymptom, PlanStep, RootCause, Verdict

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    json_section = readme.split("**JSON**", 1)[1].split("Exit codes", 1)[0]
    models = (SweepResult, Verdict, RootCause, ExplainedSymptom, PlanStep, SuggestedCommand)

    def named(field: str) -> bool:  # `field`, `field[]`, `verdict.field` or `verdict.field[]`
        return re.search(rf"`(?:[a-z_]+\.)?{field}(?:\[\])?`", json_section) is not None

    missing = [f"{m.__name__}.{name}" for m in models for name in m.model_fields if not named(name)]
    missing += [k for k in ("schema_version", "issues_found", "findings_with_issues") if not named(k)]
    assert not missing, f"README's JSON table does not name: {missing}"
