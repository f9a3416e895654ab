"""`hyperpod-nccl diagnose`: the read-only diagnosis of one cluster."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from hyperpod_nccl import thresholds
from hyperpod_nccl.checks import CheckMeta
from hyperpod_nccl.cli import validate
from hyperpod_nccl.cli.exit_codes import EXIT_FAIL_ON, EXIT_OK, EXIT_PARTIAL, EXIT_PREREQUISITE, EXIT_USAGE
from hyperpod_nccl.cli.progress import ProgressLine
from hyperpod_nccl.cli.render import TextReport, render_json, use_colour
from hyperpod_nccl.cli.render_html import error_page, render_html
from hyperpod_nccl.cli.target import add_target_arguments, resolve_clients
from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.engine import CheckObserver, diagnose
from hyperpod_nccl.errors import DiagnosisAborted, ScopeMatchesNothing
from hyperpod_nccl.models.findings import Finding, Priority, Scope, SweepResult
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.sanitize import one_line

NAME = "diagnose"
HELP = "Diagnose NCCL problems on a HyperPod cluster (read-only)."
EXAMPLES = (
    "hyperpod-nccl diagnose --cluster my-cluster --region us-west-2",
    "hyperpod-nccl diagnose --cluster arn:aws:sagemaker:us-west-2:111122223333:cluster/abcdef123456 --profile oncall",
    "hyperpod-nccl diagnose --cluster my-cluster --namespace training --job llama-70b --sample-nodes all",
    "hyperpod-nccl diagnose --cluster my-cluster --format json --fail-on P0 --fail-on partial > report.json",
    "hyperpod-nccl diagnose --cluster my-cluster --sample-nodes all --format html > report.html",
)
# `--fail-on partial`: fail the pipeline when a source was not fully read.
FAIL_ON_PARTIAL = "partial"


def add_scope_arguments(parser: argparse.ArgumentParser) -> None:
    """What a diagnosis looks at, and its progress: the flags of every command that runs one
    (diagnose, demo, incidents, support-bundle)."""
    parser.add_argument("--namespace", type=validate.dns_label, help="EKS: scope to one namespace")
    parser.add_argument("--job", type=validate.dns_label, help="EKS: scope to one job (with --namespace)")
    parser.add_argument("--orchestrator", choices=["eks", "slurm"], help="override orchestrator detection")
    parser.add_argument(
        "--sample-nodes",
        type=validate.sample_nodes,
        default=thresholds.DEFAULT_SAMPLE_NODES,
        metavar="N|all",
        help=f"nodes to probe over SSM (default {thresholds.DEFAULT_SAMPLE_NODES}; 'all' probes every node)",
    )
    parser.add_argument("--node", type=validate.instance_id, help="probe only this node (i-...)")
    parser.add_argument(
        "--since",
        type=validate.duration,
        default=thresholds.DEFAULT_WINDOW_SECONDS,
        metavar="DURATION",
        help="look-back window for events and logs, e.g. 30m, 2h (default 2h)",
    )
    parser.add_argument(
        "--start-session-rate",
        type=validate.rate,
        default=thresholds.SSM_START_SESSION_PER_SECOND,
        metavar="PER_SECOND",
        help=f"SSM StartSession calls per second for the node probes (default "
        f"{thresholds.SSM_START_SESSION_PER_SECOND:g}, the account's rate; lower it beside a monitor of the "
        "same account: docs/pacing.md)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="progress as a line per step on stderr, and each check's inputs, time and findings",
    )


# What `--format` offers, by command: the report in every form (diagnose, demo), or a list.
REPORT_FORMATS = ("text", "json", "html")
_FORMAT_HELP = {
    "text": "text (default)",
    "json": "json: one document with every field",
    "html": "html: one self-contained page (verdict, timelines, node x check grid), e.g. > report.html",
}


def add_report_arguments(
    parser: argparse.ArgumentParser, formats: tuple[str, ...] = REPORT_FORMATS, *, fail_on: bool = True
) -> None:
    """`--format` (of `formats`), `--no-color` and, with `fail_on`, `--fail-on`: the flags of a
    command that prints a report (a command that writes files, such as support-bundle, has none)."""
    parser.add_argument("--format", choices=formats, default="text", help="; ".join(_FORMAT_HELP[f] for f in formats))
    if "text" in formats:
        parser.add_argument("--no-color", action="store_true", help="never colour the output")
    if fail_on:
        parser.add_argument(
            "--fail-on",
            action="append",
            choices=[*(p.value for p in Priority), FAIL_ON_PARTIAL],
            help=f"exit {EXIT_FAIL_ON} when a finding at or above this priority exists; '{FAIL_ON_PARTIAL}': exit "
            f"{EXIT_PARTIAL} when a source was not fully read (repeatable: --fail-on P1 --fail-on {FAIL_ON_PARTIAL})",
        )


def configure(parser: argparse.ArgumentParser) -> None:
    """Declare diagnose's flags."""
    add_target_arguments(parser)
    add_scope_arguments(parser)
    add_report_arguments(parser)


def report_aborted(aborted: DiagnosisAborted, progress: ProgressLine, command: str) -> int:
    """Print why a diagnosis stopped and return the exit code: a scope that names nothing is a
    usage error, one line (exit 2); anything else the message, its details and the fix (exit 1)."""
    progress.clear()
    # The message may quote an AWS error or a cluster value: shown escaped, one line each.
    if isinstance(aborted, ScopeMatchesNothing):
        sys.stderr.write(f"hyperpod-nccl {command}: error: {one_line(aborted.message)}\n")
        return EXIT_USAGE
    sys.stderr.write(f"[FAIL] {one_line(aborted.message)}\n")
    for line in aborted.details:
        sys.stderr.write(f"       {one_line(line)}\n")
    sys.stderr.write(f"       fix: {one_line(aborted.fix)}\n")
    return EXIT_PREREQUISITE


def aborted_document(aborted: DiagnosisAborted, exit_code: int) -> dict[str, object]:
    """What `--format json` prints on stdout for a diagnosis that stopped (the exit code is the
    same as without it): {"error": {"message", "details", "fix", "exit_code"}}."""
    return {
        "error": {
            "message": aborted.message,
            "details": list(aborted.details),
            "fix": aborted.fix,
            "exit_code": exit_code,
        }
    }


def fail_on_exit(args: argparse.Namespace, issue_at: Callable[[Priority], bool], partial: bool) -> int:
    """The exit code `--fail-on` asks for: 3 when `issue_at` the loosest priority asked for, else 4
    when `partial` was asked for and the diagnosis is partial, else 0."""
    wanted: list[str] = args.fail_on or []
    priorities = [Priority(value) for value in wanted if value != FAIL_ON_PARTIAL]
    if priorities and issue_at(max(priorities, key=lambda p: p.rank)):
        return EXIT_FAIL_ON
    if FAIL_ON_PARTIAL in wanted and partial:
        return EXIT_PARTIAL
    return EXIT_OK


def build_request(args: argparse.Namespace, cluster: str, region: str) -> DiagnoseRequest:
    """Turn parsed flags into the engine's request (warnings go to stderr)."""
    sample, warning = validate.clamp_sample(args.sample_nodes)
    if warning:
        sys.stderr.write(f"warning: {warning}\n")
    if args.job and not args.namespace:
        sys.stderr.write("warning: --job without --namespace searches every non-system namespace\n")
    return DiagnoseRequest(
        cluster=cluster,
        region=region,
        orchestrator=args.orchestrator,
        scope=Scope(
            namespace=args.namespace,
            job=args.job,
            node=args.node,
            sample_nodes=sample,
            since_seconds=args.since,
        ),
        start_session_rate=args.start_session_rate,
    )


def exit_code_of(result: SweepResult, args: argparse.Namespace) -> int:
    """The exit code of a finished diagnosis (`--fail-on`)."""
    return fail_on_exit(args, lambda p: bool(result.at_or_above(p)), partial=bool(result.degraded_sources))


def emit(result: SweepResult, args: argparse.Namespace) -> int:
    """Print the result in the chosen format and compute the exit code."""
    if args.format == "json":
        sys.stdout.write(render_json(result) + "\n")
    elif args.format == "html":
        sys.stdout.write(render_html([result]))
    else:
        TextReport(sys.stdout, use_colour(sys.stdout, args.no_color)).render(result)
    return exit_code_of(result, args)


def check_timing(progress: ProgressLine) -> CheckObserver | None:
    """With --verbose: one line per check, naming what it reads, how long it took and what it found."""
    if not progress.verbose:
        return None

    def observe(meta: CheckMeta, seconds: float, produced: list[Finding]) -> None:
        statuses = Counter(finding.status.value for finding in produced)
        found = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items())) or "nothing"
        reads = ", ".join(sorted(meta.reads)) or meta.source
        progress.detail(f"check {meta.id} ({reads}): {seconds * 1000:.1f} ms, {found}")

    return observe


@dataclass(frozen=True)
class Stopped:
    """A diagnosis that stopped: its exit code (why was printed on stderr) and what `--format
    json` prints for it (`aborted_document`)."""

    exit_code: int
    document: dict[str, object]


def stopped_page(stopped: Stopped) -> str:
    """What `--format html` writes for a diagnosis that stopped: a page saying why."""
    error = stopped.document["error"]
    assert isinstance(error, dict)
    return error_page(str(error["message"]), [str(d) for d in error["details"]], str(error["fix"]))


def diagnose_or_report(request: DiagnoseRequest, aws: AwsClients, args: argparse.Namespace) -> SweepResult | Stopped:
    """Run the engine with progress on stderr: the result, or how it stopped (1, or 2 for a scope
    that names nothing) after saying why on stderr."""
    progress = ProgressLine(verbose=getattr(args, "verbose", False))
    try:
        result = diagnose(request, aws, progress=progress, observe=check_timing(progress))
    except DiagnosisAborted as aborted:
        code = report_aborted(aborted, progress, getattr(args, "command", None) or NAME)
        return Stopped(code, aborted_document(aborted, code))
    progress.clear()
    return result


def run_diagnosis(request: DiagnoseRequest, aws: AwsClients, args: argparse.Namespace) -> int:
    """Diagnose and print the report (with `--format json`, an error document when it stopped);
    the exit code."""
    outcome = diagnose_or_report(request, aws, args)
    if isinstance(outcome, Stopped):
        if args.format == "json":
            sys.stdout.write(json.dumps(outcome.document, indent=2) + "\n")
        elif args.format == "html":
            sys.stdout.write(stopped_page(outcome))
        return outcome.exit_code
    return emit(outcome, args)


def run(args: argparse.Namespace) -> int:
    """Diagnose the cluster named on the command line against AWS."""
    aws = resolve_clients(args, NAME)
    if aws is None:
        return EXIT_USAGE
    return run_diagnosis(build_request(args, args.cluster, aws.region), aws, args)
