"""`hyperpod-nccl diagnose`: the read-only diagnosis of one cluster."""

from __future__ import annotations

import argparse
import os
import sys

from hyperpod_nccl import thresholds
from hyperpod_nccl.cli import validate
from hyperpod_nccl.cli.progress import ProgressLine
from hyperpod_nccl.cli.render import TextReport, render_json, use_colour
from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.engine import diagnose
from hyperpod_nccl.errors import DiagnosisAborted
from hyperpod_nccl.models.findings import Priority, Scope, SweepResult
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.sanitize import one_line

NAME = "diagnose"
HELP = "Diagnose NCCL problems on a HyperPod cluster (read-only)."


def add_scope_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags shared by every command that runs a diagnosis (diagnose, demo)."""
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
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument("--no-color", action="store_true", help="never colour the output")
    parser.add_argument(
        "--fail-on",
        choices=[p.value for p in Priority],
        help="exit 3 when a finding at or above this priority exists",
    )


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """`--cluster` and `--region`: which cluster, shared by every command that diagnoses one."""
    parser.add_argument("--cluster", required=True, type=validate.cluster, help="HyperPod cluster name or ARN")
    parser.add_argument("--region", type=validate.region, help="AWS region (default: $AWS_DEFAULT_REGION)")


def configure(parser: argparse.ArgumentParser) -> None:
    """Declare diagnose's flags."""
    add_target_arguments(parser)
    add_scope_arguments(parser)


def resolve_region(args: argparse.Namespace, command: str) -> str | None:
    """--region, else the environment; prints the usage error and returns None when missing."""
    region = args.region or os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION")
    if not region:
        sys.stderr.write(f"hyperpod-nccl {command}: error: --region is required (or set AWS_DEFAULT_REGION)\n")
        return None
    try:
        return validate.region(region)
    except argparse.ArgumentTypeError as error:
        sys.stderr.write(f"hyperpod-nccl {command}: error: {error}\n")
        return None


def report_aborted(aborted: DiagnosisAborted, progress: ProgressLine) -> None:
    """Print why a diagnosis stopped (exit 1): the message, its details and the fix."""
    progress.clear()
    # The message may quote an AWS error or a cluster value: shown escaped, one line each.
    sys.stderr.write(f"[FAIL] {one_line(aborted.message)}\n")
    for line in aborted.details:
        sys.stderr.write(f"       {one_line(line)}\n")
    sys.stderr.write(f"       fix: {one_line(aborted.fix)}\n")


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
    )


def emit(result: SweepResult, args: argparse.Namespace) -> int:
    """Print the result in the chosen format and compute the exit code."""
    if args.format == "json":
        sys.stdout.write(render_json(result) + "\n")
    else:
        TextReport(sys.stdout, use_colour(sys.stdout, args.no_color)).render(result)
    if args.fail_on and result.at_or_above(Priority(args.fail_on)):
        return 3
    return 0


def run_diagnosis(request: DiagnoseRequest, aws: AwsClients, args: argparse.Namespace) -> int:
    """Run the engine with progress on stderr; abort cleanly with exit 1 when it must."""
    progress = ProgressLine()
    try:
        result = diagnose(request, aws, progress=progress)
    except DiagnosisAborted as aborted:
        report_aborted(aborted, progress)
        return 1
    progress.clear()
    return emit(result, args)


def run(args: argparse.Namespace) -> int:
    """Diagnose the cluster named on the command line against AWS."""
    region = resolve_region(args, NAME)
    if region is None:
        return 2
    request = build_request(args, args.cluster, region)
    return run_diagnosis(request, AwsClients(region=region), args)
