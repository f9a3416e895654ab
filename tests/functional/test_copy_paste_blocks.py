"""Every command block of every shipped scenario's report pastes as what it says it is (issue 14,
point 6): the shell lines of each step pass `bash -n`, each YAML snippet parses to a mapping, and a
step that depends on the one before it is commented out, so pasting a whole block cannot run it."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from hyperpod_nccl_sim.scenario import available_scenarios, load_scenario
from tests.functional.scenario_runs import diagnose_every_node

HEADING = "Suggested commands (run yourself):"


def _steps(report: str) -> list[list[str]]:
    """The plan section split into steps: each starts at a `  # [stage]` line."""
    section = report.split(HEADING, 1)[1].split("\n", 1)[1] if HEADING in report else ""
    steps: list[list[str]] = []
    for line in section.splitlines():
        if line.startswith("  # ["):
            steps.append([line])
        elif steps and line.strip():
            steps[-1].append(line)
    return steps


@pytest.mark.parametrize("name", available_scenarios())
def test_every_block_of_the_report_parses(name: str, simulate, cli) -> None:  # type: ignore[no-untyped-def]
    scenario = load_scenario(name)
    run = diagnose_every_node(simulate, cli, scenario, "--no-color")
    steps = _steps(run.stdout)
    if scenario.planted_root_causes:
        assert steps, "a scenario with planted faults prints a plan"
    for step in steps:
        yaml_lines = [line[6:] for line in step if line.startswith("      ")]
        shell_lines = [line[2:] for line in step if line.startswith("  ") and not line.startswith(("  #", "      "))]
        if yaml_lines:
            assert any("# YAML for spec." in line for line in step), step
            assert isinstance(yaml.safe_load("\n".join(yaml_lines)), dict), step
        if shell_lines:
            checked = subprocess.run(["bash", "-n"], input="\n".join(shell_lines), text=True, capture_output=True)
            assert checked.returncode == 0, (step, checked.stderr)
        if "only if the step before says so" in "\n".join(step):
            assert not shell_lines, f"a conditional step must not be pasteable: {step}"
        destructive = [line for line in shell_lines if "batch-replace-cluster-nodes" in line]
        assert not destructive or "own action is replace" in step[0], step
