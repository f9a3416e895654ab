"""`hyperpod-nccl incidents`: the verdict's root causes told as incidents, in its order, each with its timeline."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hyperpod_nccl.cli.commands.diagnose import (
    aborted_document,
    add_report_arguments,
    add_scope_arguments,
    build_request,
    fail_on_exit,
    report_aborted,
)
from hyperpod_nccl.cli.errors import say
from hyperpod_nccl.cli.exit_codes import EXIT_USAGE
from hyperpod_nccl.cli.progress import ProgressLine
from hyperpod_nccl.cli.target import add_target_arguments, resolve_clients
from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.errors import DiagnosisAborted
from hyperpod_nccl.incidents.models import Incident
from hyperpod_nccl.incidents.report import (
    IncidentRun,
    incidents_json,
    load_history,
    render_incidents_text,
    run_incidents,
)
from hyperpod_nccl.models.request import DiagnoseRequest

NAME = "incidents"
HELP = "Show the verdict's root causes as incidents, each with its timeline (read-only)."
EXAMPLES = (
    "hyperpod-nccl incidents --cluster my-cluster --region us-west-2",
    "hyperpod-nccl incidents --cluster my-cluster --history incidents.json --format json",
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Declare the flags: those of diagnose, plus earlier incidents to detect recurrence."""
    add_target_arguments(parser)
    add_history_argument(parser)
    add_scope_arguments(parser)
    add_report_arguments(parser, ("text", "json"))


def add_history_argument(parser: argparse.ArgumentParser) -> None:
    """`--history FILE`: incidents JSON of an earlier run, to call out recurrences."""
    parser.add_argument(
        "--history",
        type=Path,
        metavar="FILE",
        help="JSON of an earlier `incidents --format json` run (recurrence across replacements)",
    )


def read_history(path: Path | None, command: str) -> list[Incident] | None:
    """Earlier incidents from `path`; None (after printing why) when the file is unusable."""
    if path is None:
        return []
    try:
        return load_history(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        # A validation error quotes the file's values (cluster text): escaped like any report.
        say(command, f"cannot read --history {path}: {error}")
        return None


def execute(
    request: DiagnoseRequest,
    aws: AwsClients,
    history: list[Incident],
    command: str,
    *,
    verbose: bool = False,
    json_errors: bool = False,
) -> IncidentRun | int:
    """Run the incident diagnosis with progress on stderr; the exit code (after printing why) when aborted."""
    progress = ProgressLine(verbose=verbose)
    try:
        run_ = run_incidents(request, aws, history=history, progress=progress)
    except DiagnosisAborted as aborted:
        code = report_aborted(aborted, progress, command)
        if json_errors:  # --format json: one document on stdout, whatever happened
            sys.stdout.write(json.dumps(aborted_document(aborted, code), indent=2) + "\n")
        return code
    progress.clear()
    return run_


def incident_run(args: argparse.Namespace, command: str) -> IncidentRun | int:
    """Resolve the flags, diagnose and build incidents; an exit code when that cannot happen
    (2: bad region, history file or scope; 1: the diagnosis was aborted). Shared by support-bundle."""
    aws = resolve_clients(args, command)
    if aws is None:
        return EXIT_USAGE
    history = read_history(args.history, command)
    if history is None:
        return EXIT_USAGE
    request = build_request(args, args.cluster, aws.region)
    json_errors = command == NAME and args.format == "json"
    return execute(request, aws, history, command, verbose=args.verbose, json_errors=json_errors)


def run(args: argparse.Namespace) -> int:
    """Diagnose, tell the verdict's root causes as incidents, print."""
    outcome = incident_run(args, NAME)
    if isinstance(outcome, int):
        return outcome
    if args.format == "json":
        sys.stdout.write(json.dumps(incidents_json(outcome), indent=2) + "\n")
    else:
        render_incidents_text(sys.stdout, outcome)
    return fail_on_exit(
        args,
        lambda priority: any(i.priority.at_least(priority) for i in outcome.incidents),
        partial=bool(outcome.result.degraded_sources),
    )
