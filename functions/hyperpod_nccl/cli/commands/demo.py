"""`hyperpod-nccl demo`: diagnose the embedded simulated cluster through the real code path."""

from __future__ import annotations

import argparse
import sys

from hyperpod_nccl.cli.commands.diagnose import add_scope_arguments, build_request, run_diagnosis
from hyperpod_nccl.sanitize import one_line
from hyperpod_nccl.simulation.scenario import available_scenarios, load_scenario

NAME = "demo"
HELP = "Run diagnose against the embedded simulated HyperPod cluster (no AWS account needed)."
DEFAULT_SCENARIOS = ("eks-p5", "slurm-p5en")


def configure(parser: argparse.ArgumentParser) -> None:
    """Declare demo's flags (the scope flags of diagnose, plus the scenario)."""
    parser.add_argument(
        "--scenario",
        action="append",
        help=f"scenario name or file (repeatable; default: {', '.join(DEFAULT_SCENARIOS)}); "
        f"shipped: {', '.join(available_scenarios())}",
    )
    parser.add_argument(
        "--serverless",
        action="store_true",
        help="run the serverless monitor instead: two sweeps of the Step Functions definition, executed "
        "locally with the Lambda handlers in-process (default scenario: eks-p5)",
    )
    add_scope_arguments(parser)
    # The simulated cluster is small and its faulty nodes are spread out: probe every node.
    parser.set_defaults(sample_nodes="all")


def run(args: argparse.Namespace) -> int:
    """Start the simulation for each scenario and run the very same diagnosis against it."""
    from hyperpod_nccl.simulation.runtime import SimulatedCluster

    if getattr(args, "serverless", False):
        from hyperpod_nccl.simulation.serverless import run_demo

        return run_demo((args.scenario or ["eks-p5"])[0], sys.stdout)
    names = args.scenario or list(DEFAULT_SCENARIOS)
    try:
        scenarios = [load_scenario(name) for name in names]
    except ValueError as error:
        sys.stderr.write(f"hyperpod-nccl demo: error: {one_line(str(error))}\n")
        return 2
    worst = 0
    for index, scenario in enumerate(scenarios):
        if index and args.format == "text":
            sys.stdout.write("\n" + "=" * 78 + "\n\n")
        if args.format == "text":
            # A scenario may come from any file (--scenario PATH): its text is shown escaped.
            sys.stdout.write(f"Simulated scenario '{one_line(scenario.name)}': {one_line(scenario.description)}\n\n")
        with SimulatedCluster(scenario) as simulation:
            request = build_request(args, scenario.cluster.name, scenario.region)
            code = run_diagnosis(request, simulation.clients(), args)
        worst = max(worst, code)
    return worst
