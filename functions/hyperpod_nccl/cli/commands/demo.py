"""`hyperpod-nccl demo`: diagnose the embedded simulated cluster through the real code path."""

from __future__ import annotations

import argparse
import json
import sys

from hyperpod_nccl.cli.commands.diagnose import (
    Stopped,
    add_scope_arguments,
    build_request,
    diagnose_or_report,
    exit_code_of,
    run_diagnosis,
)
from hyperpod_nccl.cli.exit_codes import EXIT_USAGE, most_severe
from hyperpod_nccl.cli.extras import require_simulation
from hyperpod_nccl.cli.render import report_document
from hyperpod_nccl.sanitize import one_line

NAME = "demo"
HELP = "Run diagnose against the embedded simulated HyperPod cluster (no AWS account needed)."
EXAMPLES = (
    "hyperpod-nccl demo",
    "hyperpod-nccl demo --scenario slurm-p5en --format json",
    "hyperpod-nccl demo --serverless",
)
DEFAULT_SCENARIOS = ("eks-p5", "slurm-p5en")
# Stands for the shipped scenario names in help text, filled in only when help is shown.
_SHIPPED = "{shipped}"


class _ShippedScenariosFormatter(argparse.RawDescriptionHelpFormatter):
    """Lists the shipped scenarios when `demo --help` is printed, not when the parser is built: every
    command builds the whole parser, and none but `demo` may import the simulation package."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        if text is None or _SHIPPED not in text:
            return text
        from hyperpod_nccl_sim.scenario import available_scenarios

        # argparse %-formats help next: a name is text, never a format directive.
        return text.replace(_SHIPPED, ", ".join(available_scenarios()).replace("%", "%%"))


def configure(parser: argparse.ArgumentParser) -> None:
    """Declare demo's flags (the scope flags of diagnose, plus the scenario)."""
    parser.add_argument(
        "--scenario",
        action="append",
        help=f"scenario name or file (repeatable; default: {', '.join(DEFAULT_SCENARIOS)}); shipped: {_SHIPPED}",
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
    parser.formatter_class = _ShippedScenariosFormatter


def run(args: argparse.Namespace) -> int:
    """Start the simulation for each scenario and run the very same diagnosis against it."""
    missing = require_simulation(NAME)
    if missing is not None:
        return missing
    # The simulation is imported here, never at CLI start-up (see _ShippedScenariosFormatter).
    from hyperpod_nccl_sim.runtime import SimulatedCluster
    from hyperpod_nccl_sim.scenario import load_scenario

    if getattr(args, "serverless", False):
        from hyperpod_nccl_sim.serverless import run_demo

        return run_demo((args.scenario or ["eks-p5"])[0], sys.stdout)
    names = args.scenario or list(DEFAULT_SCENARIOS)
    try:
        scenarios = [load_scenario(name) for name in names]
    except ValueError as error:
        sys.stderr.write(f"hyperpod-nccl demo: error: {one_line(str(error))}\n")
        return EXIT_USAGE
    codes: list[int] = []
    documents: list[dict[str, object]] = []
    for index, scenario in enumerate(scenarios):
        if index and args.format == "text":
            sys.stdout.write("\n" + "=" * 78 + "\n\n")
        if args.format == "text":
            # A scenario may come from any file (--scenario PATH): its text is shown escaped.
            sys.stdout.write(f"Simulated scenario '{one_line(scenario.name)}': {one_line(scenario.description)}\n\n")
        with SimulatedCluster(scenario) as simulation:
            request = build_request(args, scenario.cluster.name, scenario.region)
            if args.format != "json":
                codes.append(run_diagnosis(request, simulation.clients(), args))
                continue
            outcome = diagnose_or_report(request, simulation.clients(), args)
        if isinstance(outcome, Stopped):
            codes.append(outcome.exit_code)
            documents.append(outcome.document)
        else:
            codes.append(exit_code_of(outcome, args))
            documents.append(report_document(outcome))
    if args.format == "json":  # one document: the reports in scenario order
        sys.stdout.write(json.dumps(documents, indent=2) + "\n")
    return most_severe(codes)
