"""`hyperpod-nccl demo`: diagnose the embedded simulated cluster through the real code path."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from hyperpod_nccl.cli.commands.diagnose import (
    Stopped,
    add_report_arguments,
    add_scope_arguments,
    build_request,
    diagnose_or_report,
    exit_code_of,
    run_diagnosis,
    stopped_page,
)
from hyperpod_nccl.cli.errors import say
from hyperpod_nccl.cli.exit_codes import EXIT_USAGE, most_severe
from hyperpod_nccl.cli.extras import require_simulation
from hyperpod_nccl.cli.render import report_document
from hyperpod_nccl.cli.render_html import render_html
from hyperpod_nccl.models.findings import SweepResult
from hyperpod_nccl.sanitize import one_line

NAME = "demo"
HELP = "Run diagnose against the embedded simulated HyperPod cluster (no AWS account needed)."
EXAMPLES = (
    "hyperpod-nccl demo",
    "hyperpod-nccl demo --scenario slurm-p5en --format json",
    "hyperpod-nccl demo --format html > demo.html",
    "hyperpod-nccl demo --serverless",
    "hyperpod-nccl demo status",
    "hyperpod-nccl demo history",
    "hyperpod-nccl demo incidents --scenario hung-job",
)
# `demo VIEW`: the command run on the simulated cluster. status and history read the table the
# serverless monitor filled (two sweeps first); incidents and support-bundle diagnose the cluster.
MONITOR_VIEWS = ("status", "history")
DIAGNOSIS_VIEWS = ("incidents", "support-bundle")
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
    """Declare demo's flags (the scope flags of diagnose, plus the scenario) and its optional view."""
    parser.add_argument(
        "view",
        nargs="?",
        choices=(*MONITOR_VIEWS, *DIAGNOSIS_VIEWS),
        help="run this command on the simulated cluster instead of diagnose: status and history after two "
        "sweeps of the serverless monitor (its table), incidents and support-bundle against the cluster",
    )
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
    add_report_arguments(parser)
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

    view = getattr(args, "view", None)
    serverless = getattr(args, "serverless", False)
    if args.format == "html" and (view or serverless):
        say(NAME, "--format html draws a diagnosis: leave out the view and --serverless")
        return EXIT_USAGE
    if serverless and view is None and args.format != "text":
        say(NAME, "--serverless tells its sweeps as text; for JSON ask the monitor's table: demo status --format json")
        return EXIT_USAGE
    default = ["eks-p5"] if serverless or view else list(DEFAULT_SCENARIOS)
    names = args.scenario or default
    try:  # every path checks its scenarios first: an unknown name is one line, never a traceback
        scenarios = [load_scenario(name) for name in names]
    except ValueError as error:
        say(NAME, str(error))
        return EXIT_USAGE
    if serverless or view in MONITOR_VIEWS:
        from hyperpod_nccl_sim.serverless import run_demo

        then = None if view is None else _monitor_view(view, args.format)
        return run_demo(names[0], sys.stderr if view else sys.stdout, then)
    if view in DIAGNOSIS_VIEWS:
        return _diagnosis_view(view, scenarios[0], args.format)
    codes: list[int] = []
    outcomes: list[SweepResult | Stopped] = []
    for index, scenario in enumerate(scenarios):
        if index and args.format == "text":
            sys.stdout.write("\n" + "=" * 78 + "\n\n")
        if args.format == "text":
            # A scenario may come from any file (--scenario PATH): its text is shown escaped.
            sys.stdout.write(f"Simulated scenario '{one_line(scenario.name)}': {one_line(scenario.description)}\n\n")
        with SimulatedCluster(scenario) as simulation:
            request = build_request(args, scenario.cluster.name, scenario.region)
            if args.format == "text":
                codes.append(run_diagnosis(request, simulation.clients(), args))
                continue
            outcome = diagnose_or_report(request, simulation.clients(), args)
        codes.append(outcome.exit_code if isinstance(outcome, Stopped) else exit_code_of(outcome, args))
        outcomes.append(outcome)
    if args.format == "json":  # one document: the reports in scenario order
        documents = [o.document if isinstance(o, Stopped) else report_document(o) for o in outcomes]
        sys.stdout.write(json.dumps(documents, indent=2) + "\n")
    elif args.format == "html":  # one page: the reports in scenario order
        results = [o for o in outcomes if not isinstance(o, Stopped)]
        stopped = next((o for o in outcomes if isinstance(o, Stopped)), None)
        sys.stdout.write(render_html(results) if results or stopped is None else stopped_page(stopped))
    return most_severe(codes)


def _monitor_view(view: str, output_format: str) -> Callable[[Any], int]:
    """`status` or `history` run on the deployed monitor's table, as an operator would run them."""
    from hyperpod_nccl.cli.main import main
    from hyperpod_nccl_sim.serverless import TABLE_NAME

    def then(monitor: Any) -> int:
        scenario = monitor.simulation.scenario
        where = ["--table", TABLE_NAME, "--region", scenario.region, "--format", output_format]
        if view == "status":
            return main(["status", "--cluster", scenario.cluster.name, *where])
        store = monitor.store()
        # The first node of the scenario the monitor recorded a fault on (its history is the demo).
        nodes = [monitor.simulation.instance_id(key) for key in scenario.node_keys()]
        faulty = next((node for node in nodes if store.fault_history("node", node)), nodes[0])
        return main(["history", "--node", faulty, *where])

    return then


def _diagnosis_view(view: str, scenario: Any, output_format: str) -> int:
    """`incidents` or `support-bundle` run against the simulated cluster (a loaded `Scenario`: the
    simulation's types are not imported at module level), as against AWS."""
    from hyperpod_nccl.cli.main import main
    from hyperpod_nccl_sim.runtime import SimulatedCluster, restore_environment, set_environment

    with SimulatedCluster(scenario) as simulation:
        saved = set_environment(simulation.cli_environment())
        try:
            argv = [view, "--cluster", scenario.cluster.name, "--region", scenario.region, "--sample-nodes", "all"]
            return main([*argv, "--format", output_format] if view == "incidents" else argv)
        finally:
            restore_environment(saved)
