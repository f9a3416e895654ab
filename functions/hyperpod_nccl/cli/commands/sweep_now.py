"""`hyperpod-nccl sweep-now`: ask the deployed monitor for a sweep of one watched cluster now,
through its own trigger function, as a schedule tick would. It writes only the monitor's own
resources (the trigger takes the cluster's sweep lock and starts the monitor's state machine);
the sweep itself is read-only as always."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from datetime import UTC, datetime

from hyperpod_nccl.aws_errors import AWS_CALL_ERRORS
from hyperpod_nccl.cli import validate
from hyperpod_nccl.cli.errors import say
from hyperpod_nccl.cli.exit_codes import EXIT_OK, EXIT_PREREQUISITE, EXIT_USAGE
from hyperpod_nccl.cli.monitor_table import NotLocated, add_stack_argument, call_failure, locate_trigger
from hyperpod_nccl.cli.target import add_account_arguments, reach_aws, resolve_clients
from hyperpod_nccl.monitor.settings import SCHEDULE_SOURCE
from hyperpod_nccl.sanitize import one_line

NAME = "sweep-now"
HELP = "Start a sweep of one watched cluster now, through the deployed monitor's trigger."
EXAMPLES = (
    "hyperpod-nccl sweep-now --cluster my-cluster --region us-west-2",
    "hyperpod-nccl sweep-now --cluster my-cluster --region us-west-2 --function MyMonitor-Trigger1A2B",
)
INVOKE = "lambda:InvokeFunction"
# What the trigger did with the request (payloads.TriggerOutcome.status), in words.
_TOLD = {
    "started": "sweep started",
    "folded": "a sweep of this cluster is running: the request was folded into it (it sweeps once more after)",
    "duplicate": "this request was already handled",
}


def configure(parser: argparse.ArgumentParser) -> None:
    """Declare the flags: the cluster, where the monitor is."""
    parser.add_argument("--cluster", required=True, type=validate.cluster_name, help="a cluster the monitor watches")
    add_stack_argument(parser)
    parser.add_argument("--function", type=validate.function_name, help="the trigger function (instead of --stack)")
    add_account_arguments(parser, region_help="the cluster's and the monitor's region (default: the profile's)")


def run(args: argparse.Namespace) -> int:
    """Invoke the trigger with a manual tick for the cluster and say what it did."""
    aws = resolve_clients(args, NAME)
    if aws is None:
        return EXIT_USAGE
    if not reach_aws(aws, NAME):
        return EXIT_PREREQUISITE
    try:
        function = args.function or locate_trigger(args, aws)
    except NotLocated as missing:
        say(NAME, str(missing))
        return EXIT_PREREQUISITE
    now = datetime.now(UTC).isoformat(timespec="seconds")
    tick = {
        "source": SCHEDULE_SOURCE,
        "id": f"sweep-now-{uuid.uuid4().hex[:12]}",
        "time": now,
        "clusters": [{"name": args.cluster, "region": aws.region}],
        "manual": True,
    }
    try:
        answer = aws.client("lambda").invoke(
            FunctionName=function, InvocationType="RequestResponse", Payload=json.dumps(tick).encode()
        )
        body = json.loads(answer["Payload"].read() or b"{}")
    except AWS_CALL_ERRORS as error:
        say(NAME, call_failure(f"{INVOKE} of {function}", error, denied_fix="grant it (the monitor's trigger only)"))
        return EXIT_PREREQUISITE
    except ValueError as error:
        say(NAME, f"the trigger answered something that is not JSON: {error}")
        return EXIT_PREREQUISITE
    if answer.get("FunctionError"):
        say(NAME, f"the trigger failed: {body.get('errorType', '?')}: {body.get('errorMessage', '')}")
        return EXIT_PREREQUISITE
    rejected = body.get("rejected") if isinstance(body, dict) else None
    if rejected:
        say(NAME, f"the trigger refused the request: {rejected.get('reason', rejected)}")
        return EXIT_USAGE
    for outcome in body.get("outcomes", []) if isinstance(body, dict) else []:
        status = str(outcome.get("status", ""))
        cluster, sweep = (one_line(str(outcome.get(key, "?"))) for key in ("cluster", "sweep_id"))
        sys.stdout.write(f"{cluster}: {_TOLD.get(status, one_line(status))} (sweep {sweep})\n")
    return EXIT_OK
