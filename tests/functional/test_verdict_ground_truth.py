"""The verdict against each shipped scenario's ground truth: the root causes its author planted
(`planted_root_causes` in the scenario file), never what the verdict happened to say.

Every node is probed (`--sample-nodes all`), so every planted fault is in reach. For each planted
cause the verdict must have a top-level root cause of that kind at that anchor, whose resources name
the anchor and whose reference is its kind's section; at most one other top-level root cause may
stand beside them (a consequence the rules do not fold yet, not a second copy of a planted one).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from hyperpod_nccl.verdict.kinds import CAUSE_KINDS
from hyperpod_nccl_sim.scenario import PlantedRootCause, Scenario, available_scenarios, load_scenario
from tests.functional.scenario_runs import diagnose_every_node

# Top-level root causes the verdict may add to a scenario's planted ones.
EXTRA_ROOT_CAUSES_ALLOWED = 1

Cause = dict[str, Any]


def _verdict(simulate, cli, scenario: Scenario) -> list[Cause]:  # type: ignore[no-untyped-def]
    run = diagnose_every_node(simulate, cli, scenario, "--format", "json")
    causes: list[Cause] = json.loads(run.stdout)["verdict"]["root_causes"]
    return causes


def _names_anchor(scenario: Scenario, planted: PlantedRootCause, cause: Cause) -> bool:
    """Whether the cause's resources name where it was planted: the node's instance, or the job
    (the job itself or one of its pods: where to act on a job cause)."""
    resources = {(r["kind"], r["id"]) for r in cause["resources"]}
    where = scenario.anchor_kind(planted.anchor)
    if where == "node":
        return ("node", scenario.verdict_anchor(planted.anchor)) in resources
    if where == "job":
        job = scenario.job(planted.anchor)
        pods = {f"{job.namespace}/{job.pod_name(rank)}" for rank in range(len(job.nodes))} if job else set()
        return ("job", planted.anchor) in resources or any(("pod", pod) in resources for pod in pods)
    return True


def _where_it_went(kind: str, causes: list[Cause], shown: dict[str, str]) -> str:
    """What the verdict made of a kind it has no root cause of at the planted anchor."""
    places = [f"root cause at {shown.get(c['anchor'], c['anchor'])}" for c in causes if c["kind"] == kind]
    places += [
        f"folded under {c['kind']} at {shown.get(c['anchor'], c['anchor'])} ({s['title']})"
        for c in causes
        for s in c["explains"]
        if s["kind"] == kind
    ]
    return "; ".join(places) or "nowhere in the verdict"


def _table(scenario: Scenario, causes: list[Cause], shown: dict[str, str]) -> str:
    planted = scenario.planted_root_causes or []
    lines = ["verdict (kind @ anchor):"]
    lines += [f"  {c['priority']} {c['kind']} @ {shown.get(c['anchor'], c['anchor'])}" for c in causes]
    lines += ["planted (kind @ anchor):"]
    lines += [f"  {p.kind} @ {p.anchor}: {p.what}" for p in planted]
    return "\n".join(lines)


@pytest.mark.parametrize("name", available_scenarios())
def test_the_verdict_finds_every_planted_root_cause(name: str, simulate, cli) -> None:  # type: ignore[no-untyped-def]
    scenario = load_scenario(name)
    assert scenario.planted_root_causes is not None, (
        f"scenario {name} states no planted_root_causes: list what its author planted ([] when nothing)"
    )
    unknown = [p.kind for p in scenario.planted_root_causes if p.kind not in CAUSE_KINDS]
    assert not unknown, f"scenario {name} plants kinds the verdict does not know: {unknown}"

    causes = _verdict(simulate, cli, scenario)
    # Instance ids shown as the scenario's node keys, so that the message reads like the file.
    shown = {scenario.instance_id(key): key for key in scenario.node_keys()}
    problems: list[str] = []
    matched: set[int] = set()
    for planted in scenario.planted_root_causes:
        anchor = scenario.verdict_anchor(planted.anchor)
        found = [i for i, c in enumerate(causes) if c["kind"] == planted.kind and c["anchor"] == anchor]
        if not found:
            problems.append(
                f"missing {planted.kind} @ {planted.anchor} ({planted.what}): "
                f"{_where_it_went(planted.kind, causes, shown)}"
            )
            continue
        matched.update(found)
        cause = causes[found[0]]
        if not _names_anchor(scenario, planted, cause):
            listed = [f"{r['kind']}:{shown.get(r['id'], r['id'])}" for r in cause["resources"]]
            problems.append(f"{planted.kind} @ {planted.anchor}: its resources do not name it: {listed}")
        expected = CAUSE_KINDS[planted.kind].reference.pointer
        if cause["reference"]["pointer"] != expected:
            problems.append(
                f"{planted.kind} @ {planted.anchor}: reference {cause['reference']['pointer']}, expected {expected}"
            )
    extra = [c for i, c in enumerate(causes) if i not in matched]
    if len(extra) > EXTRA_ROOT_CAUSES_ALLOWED:
        listed = ", ".join(f"{c['kind']} @ {shown.get(c['anchor'], c['anchor'])}" for c in extra)
        problems.append(f"{len(extra)} root causes nobody planted (at most {EXTRA_ROOT_CAUSES_ALLOWED}): {listed}")
    assert not problems, f"scenario {name}:\n- " + "\n- ".join(problems) + "\n" + _table(scenario, causes, shown)


def test_a_planted_cause_must_name_a_place_of_its_scenario() -> None:
    # The ground truth is checked as it is loaded: an anchor naming no node, job or the cluster
    # would make the test above look for a cause nobody could find.
    document = load_scenario("hung-job").model_dump(mode="json")
    for anchor in ("worker:99", "training/no-such-job", "i-0123456789abcdef0"):
        bad = {**document, "planted_root_causes": [{"kind": "gpu_hardware", "anchor": anchor, "what": "x"}]}
        with pytest.raises(ValueError, match="the anchor is neither"):
            Scenario.model_validate(bad)
    twice = [{"kind": "gpu_hardware", "anchor": "worker:4", "what": "x"}] * 2
    with pytest.raises(ValueError, match="stated twice"):
        Scenario.model_validate({**document, "planted_root_causes": twice})
    with pytest.raises(ValueError):
        Scenario.model_validate(
            {**document, "planted_root_causes": [{"kind": "gpu_hardware", "anchor": "worker:4", "what": "a\nb"}]}
        )
