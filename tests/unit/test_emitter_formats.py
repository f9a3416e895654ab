"""Signatures written from the emitters' own sources cover what those programs print.

`tests/data/emitter_formats/` holds, per emitter (NCCL, PyTorch, aws-ofi-nccl/libfabric, CUDA and
the NVIDIA driver, the kernel/Kubernetes/Slurm/HyperPod), lines built from the format strings of its
source, each naming the signature written from it, and the benign lines the same program prints.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hyperpod_nccl.classifier import ONLY_BESIDE, Catalog, load_catalog, scan_text
from hyperpod_nccl.classifier.catalog import HealthyRule, Route
from tests.classifier_support import CONSEQUENCE_LINES, ids_with_folded

FORMATS_DIR = Path(__file__).resolve().parents[1] / "data" / "emitter_formats"
EMITTERS = {path.stem: json.loads(path.read_text(encoding="utf-8")) for path in sorted(FORMATS_DIR.glob("*.json"))}
EXAMPLES = [(name, example) for name, emitter in EMITTERS.items() for example in emitter["examples"]]
HEALTHY = [(name, line) for name, emitter in EMITTERS.items() for line in emitter["healthy"]]
# A file of a public repository, pinned to the commit that was read.
PINNED_FILE = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+$")
# An issue or pull-request thread whose real line (or maintainer's diagnosis) a pattern was written
# from: cited so that the cross-validation never scores that thread with it.
THREAD = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull|discussions)/\d+$")


def _example_id(case: tuple[str, dict[str, Any]]) -> str:
    name, example = case
    return f"{name}-{example['signature']}"


def _only_beside(signature_id: str) -> list[str]:
    return load_catalog().by_id(signature_id).only_beside


@pytest.mark.parametrize("case", EXAMPLES, ids=[_example_id(c) for c in EXAMPLES])
def test_every_format_example_is_detected_with_its_signatures_class_and_section(
    case: tuple[str, dict[str, Any]],
) -> None:
    _, example = case
    signature = load_catalog().by_id(example["signature"])
    # A notice that is a failure only beside its consequence is read with it (`only_beside`).
    consequence = "".join(f"{CONSEQUENCE_LINES[other]}\n" for other in signature.only_beside)
    hits = [h for h in scan_text(example["line"] + "\n" + consequence).hits if h.cls == signature.cls]
    assert hits, f"{signature.id} misses its own format {example['format']!r}: {example['line']}"
    # A line of a narrower cause the signature routes takes that route's section (`Route`).
    route = signature.route_of(example["line"])
    assert (route.ref if route else signature.ref) in {h.reference for h in hits}, example["line"]
    if signature.only_beside:
        alone = scan_text(example["line"] + "\n")
        assert signature.id not in {h.id for h in alone.hits}, example["line"]
        assert [(r.id, r.rule) for r in alone.resolved] == [(signature.id, ONLY_BESIDE)], example["line"]


ROUTE_PATTERNS = [
    (signature.id, route, pattern)
    for signature in load_catalog().signatures
    for route in signature.routes
    for pattern in route.patterns
]


@pytest.mark.parametrize(
    "case", ROUTE_PATTERNS, ids=[f"{sid}-{route.reference}-{i}" for i, (sid, route, _) in enumerate(ROUTE_PATTERNS)]
)
def test_every_route_pattern_is_reached_by_a_format_example_its_signature_matches(
    case: tuple[str, Route, str],
) -> None:
    # A route is only tried on lines the signature's own patterns already match (`route_of` runs
    # after detection): a route pattern no such line reaches is dead and its section never given.
    signature_id, route, pattern = case
    signature = load_catalog().by_id(signature_id)
    # the pattern alone, compiled as the route compiles its patterns
    compiled = Route(reference=route.reference, why=route.why, patterns=[pattern]).compiled
    reached = [
        e["line"]
        for _, e in EXAMPLES
        if e["signature"] == signature_id and compiled.search(e["line"]) and signature.compiled.search(e["line"])
    ]
    assert reached, f"{signature_id}: no format example reaches the route pattern {pattern!r}"
    # routes are tried in order: an earlier, narrower route may take some of them (an expired
    # credential is the clock's before it is munge's), but one at least must take this route
    assert any(signature.route_of(line) is route for line in reached), f"{signature_id}: {pattern!r} is dead"


@pytest.mark.parametrize("case", HEALTHY, ids=[f"{name}-{i}" for i, (name, _) in enumerate(HEALTHY)])
def test_what_the_emitters_print_on_a_healthy_run_gives_no_finding(case: tuple[str, str]) -> None:
    _, line = case
    assert [h.id for h in scan_text(line + "\n").hits] == []


def test_a_signature_written_from_an_emitter_cites_the_pinned_source_files() -> None:
    catalog = load_catalog()
    for name, example in EXAMPLES:
        signature = catalog.by_id(example["signature"])
        assert signature.written_from, f"{signature.id} ({name}) cites no source"
        assert example["format"].strip(), f"{signature.id}: an example without its format string"
    for signature in catalog.signatures:
        for url in signature.written_from:
            if url.startswith("https://github.com/"):
                assert PINNED_FILE.match(url) or THREAD.match(url), f"{signature.id}: {url} is not pinned to a commit"


def test_every_emitter_file_has_examples_and_healthy_lines() -> None:
    assert set(EMITTERS) == {"nccl", "pytorch", "efa", "cuda", "cluster"}
    for name, emitter in EMITTERS.items():
        assert emitter["emitter"] and emitter["examples"] and emitter["healthy"], name


# --- healthy rules (issue 16, point 3): each shown by what its emitter prints ------------------
LINE_RULES = [rule for rule in load_catalog().healthy if not rule.resolves]
CONTEXT_RULES = [rule for rule in load_catalog().healthy if rule.resolves]


def _without(rule_id: str) -> Catalog:
    catalog = load_catalog()
    return catalog.model_copy(update={"healthy": [r for r in catalog.healthy if r.id != rule_id]})


def test_there_are_both_kinds_of_healthy_rule() -> None:
    assert LINE_RULES and CONTEXT_RULES


@pytest.mark.parametrize("rule", LINE_RULES, ids=lambda rule: rule.id)
def test_a_healthy_line_rule_quiets_a_line_its_emitter_prints_that_would_otherwise_be_a_finding(
    rule: HealthyRule,
) -> None:
    lines = [line for _, line in HEALTHY if rule.compiled.search(line)]
    assert lines, f"{rule.id}: no healthy emitter line shows it"
    for line in lines:
        assert scan_text(line + "\n").hits == [], line
    # the rule is what quiets them: without it they are findings (read beside the consequences a
    # notice that is a failure only beside them waits for, `only_beside`)
    consequences = "".join(f"{line}\n" for line in CONSEQUENCE_LINES.values())
    for line in lines:
        found = ids_with_folded(scan_text(line + "\n" + consequences, _without(rule.id)).hits)
        assert set(found) - set(CONSEQUENCE_LINES), line


@pytest.mark.parametrize("rule", CONTEXT_RULES, ids=lambda rule: rule.id)
def test_a_success_line_settles_the_failures_printed_before_it_and_never_those_after(rule: HealthyRule) -> None:
    successes = [line for _, line in HEALTHY if rule.compiled.search(line)]
    failures = [e["line"] for _, e in EXAMPLES if e["signature"] in rule.resolves]
    assert successes and failures, f"{rule.id}: needs a success line and a failure it settles"
    for failure in failures:
        for success in successes:
            settled = scan_text(f"{failure}\n{success}\n")
            assert not {hit.id for hit in settled.hits} & set(rule.resolves), failure
            assert {(r.id, r.rule) for r in settled.resolved} & {(s, rule.id) for s in rule.resolves}
            consequences = "".join(f"{CONSEQUENCE_LINES[o]}\n" for s in rule.resolves for o in _only_beside(s))
            later = scan_text(f"{success}\n{failure}\n{consequences}")
            assert {hit.id for hit in later.hits} & set(rule.resolves), f"a failure after {success!r} must stand"
            assert later.resolved == []


def test_a_success_line_settles_across_block_boundaries() -> None:
    # The failure in one block, the success line a megabyte of INFO chatter later.
    (rule,) = [r for r in CONTEXT_RULES if r.id == "c10d_client_connected"]
    failure = next(e["line"] for _, e in EXAMPLES if e["signature"] == "c10d_connect_failed")
    success = next(line for _, line in HEALTHY if rule.compiled.search(line))
    chatter = "ip-10-1-2-3:1234:1234 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n" * 20_000
    result = scan_text(f"{failure}\n{chatter}{success}\n")
    assert [r.id for r in result.resolved] == ["c10d_connect_failed"] and result.hits == []
