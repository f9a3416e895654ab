"""Running `hyperpod-nccl diagnose` on a shipped scenario with every node probed, as the tests
that hold the report to a scenario's ground truth do."""

from __future__ import annotations

from typing import Any

from hyperpod_nccl_sim.scenario import Scenario


def diagnose_every_node(simulate: Any, cli: Any, scenario: Scenario, *flags: str) -> Any:
    """Seed `scenario` and run diagnose on it with `--sample-nodes all` and `flags`; the run must exit 0."""
    simulate(scenario)
    region = ["--region", scenario.region]
    run = cli("diagnose", "--cluster", scenario.cluster.name, *region, "--sample-nodes", "all", *flags)
    assert run.code == 0, run.stderr
    return run
