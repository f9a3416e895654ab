"""Where the deployed monitor keeps its findings, for the commands that read them (`status`,
`history`): the table named by `--table`, else the `FindingsTableName` output of the monitor's stack
(`--stack`, default $HYPERPOD_NCCL_MONITOR_STACK or the stack name `cdk deploy` uses), and the
watched clusters from `--cluster` or the stack's `WatchedClusters` output. Read-only: one
cloudformation:DescribeStacks, then DynamoDB queries.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import ValidationError

from hyperpod_nccl.aws_errors import AWS_CALL_ERRORS, error_code, error_message, is_access_denied, transport_failure
from hyperpod_nccl.cli import validate
from hyperpod_nccl.cli.errors import say
from hyperpod_nccl.cli.exit_codes import EXIT_PREREQUISITE, EXIT_USAGE
from hyperpod_nccl.cli.target import add_account_arguments, reach_aws, resolve_clients
from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.monitor.settings import (
    STACK_OUTPUT_TABLE,
    STACK_OUTPUT_TRIGGER_FUNCTION,
    STACK_OUTPUT_WATCHED_CLUSTERS,
    WatchedCluster,
)
from hyperpod_nccl.monitor.store import Store
from hyperpod_nccl.probe.documents import DEFAULT_STACK_NAME, MONITOR_STACK_ENV, monitor_stack_name

DESCRIBE_STACKS = "cloudformation:DescribeStacks"
Read = TypeVar("Read")


@dataclass
class MonitorTable:
    """The monitor's table, opened, and the clusters to read from it (name, region)."""

    name: str
    store: Store
    clusters: list[tuple[str, str]] = field(default_factory=list)


class NotLocated(Exception):
    """The table or its clusters could not be found: the message says why and what to do."""


def add_table_arguments(parser: argparse.ArgumentParser, *, clusters: bool) -> None:
    """`--stack`, `--table` (and with `clusters`, a repeatable `--cluster`), then how to reach AWS."""
    add_stack_argument(parser)
    parser.add_argument("--table", type=validate.table_name, help="the monitor's findings table (instead of --stack)")
    if clusters:
        parser.add_argument(
            "--cluster",
            action="append",
            type=validate.cluster_name,
            metavar="NAME",
            help="a watched cluster to show (repeatable; default: every cluster the stack watches)",
        )
    add_account_arguments(parser, region_help="the monitor's AWS region (default: the profile's or $AWS_REGION)")


def _stack_outputs(aws: AwsClients, stack: str) -> dict[str, str]:
    try:
        stacks = aws.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except AWS_CALL_ERRORS as error:
        missing = (
            f"no stack {stack} in {aws.region}; fix: pass --stack (the name you deployed) or --table, and --region"
        )
        told = call_failure(
            DESCRIBE_STACKS, error, denied_fix="grant it, or pass --table", absent=("ValidationError", missing)
        )
        raise NotLocated(told) from error
    outputs = stacks[0].get("Outputs", []) if stacks else []
    return {str(o.get("OutputKey")): str(o.get("OutputValue", "")) for o in outputs}


def _watched(value: str, stack: str) -> list[tuple[str, str]]:
    try:
        listed = [WatchedCluster.model_validate(c) for c in json.loads(value)]
    except (ValueError, TypeError, ValidationError) as error:
        problem = f"stack {stack}: its {STACK_OUTPUT_WATCHED_CLUSTERS} output does not parse: {error}"
        raise NotLocated(problem) from error
    return [(c.name, c.region) for c in listed]


def locate(args: argparse.Namespace, aws: AwsClients, *, clusters: bool) -> MonitorTable:
    """The table (and with `clusters`, the clusters) the arguments name; NotLocated says why not."""
    named = [(name, aws.region) for name in (getattr(args, "cluster", None) or [])]
    outputs: dict[str, str] = {}
    stack = _stack_name(args)
    if args.table is None or (clusters and not named):
        outputs = _stack_outputs(aws, stack)
    name = args.table or outputs.get(STACK_OUTPUT_TABLE, "")
    if not name:
        raise NotLocated(f"stack {stack} has no {STACK_OUTPUT_TABLE} output: is it the monitor's stack? fix: --table")
    table = MonitorTable(name=name, store=Store(aws.table(name)))
    if clusters:
        table.clusters = named or _watched(outputs.get(STACK_OUTPUT_WATCHED_CLUSTERS, "[]"), stack)
        if not table.clusters:
            raise NotLocated(f"stack {stack} watches no cluster; fix: name one with --cluster")
    return table


def add_stack_argument(parser: argparse.ArgumentParser) -> None:
    """`--stack`: the monitor's CloudFormation stack."""
    parser.add_argument(
        "--stack",
        type=validate.stack_name,
        help=f"the monitor's CloudFormation stack (default ${MONITOR_STACK_ENV} or {DEFAULT_STACK_NAME})",
    )


def _stack_name(args: argparse.Namespace) -> str:
    return monitor_stack_name(args.stack)


def locate_trigger(args: argparse.Namespace, aws: AwsClients) -> str:
    """The trigger function of the monitor's stack (its `TriggerFunctionName` output)."""
    stack = _stack_name(args)
    name = _stack_outputs(aws, stack).get(STACK_OUTPUT_TRIGGER_FUNCTION, "")
    if not name:
        raise NotLocated(f"stack {stack} has no {STACK_OUTPUT_TRIGGER_FUNCTION} output: is it the monitor's stack?")
    return name


def call_failure(what: str, error: BaseException, *, denied_fix: str, absent: tuple[str, str] | None = None) -> str:
    """One line for a failed call of `what` (an action and its target): the network path when the
    answer never came (proxy, TLS, DNS, a non-AWS answer), `denied_fix` when access was denied,
    `absent`'s message when its error code (the target does not exist), else AWS's message."""
    told = transport_failure(error)
    if told is not None:
        return f"{what} failed: {told[0]}; fix: {told[1]}"
    if is_access_denied(error):
        return f"{what} was denied; fix: {denied_fix}"
    if absent is not None and error_code(error) == absent[0]:
        return absent[1]
    return f"{what} failed: {error_message(error) or error}"


def read_failure(error: BaseException, table: str) -> str:
    """One line for a failed read of the table: what failed and the fix."""
    return call_failure(
        f"reading table {table}",
        error,
        denied_fix="grant dynamodb:Query and dynamodb:GetItem on it",
        absent=(
            "ResourceNotFoundException",
            f"no table {table} in this region; fix: check --table/--stack and --region",
        ),
    )


def read_monitor(
    args: argparse.Namespace, command: str, *, clusters: bool, read: Callable[[MonitorTable], Read]
) -> tuple[MonitorTable, Read] | int:
    """Reach AWS, locate the table (and with `clusters`, the clusters), and `read` it: the table and
    what was read, or the exit code after one line saying what failed and the fix."""
    aws = resolve_clients(args, command)
    if aws is None:
        return EXIT_USAGE
    if not reach_aws(aws, command):
        return EXIT_PREREQUISITE
    try:
        table = locate(args, aws, clusters=clusters)
    except NotLocated as missing:
        say(command, str(missing))
        return EXIT_PREREQUISITE
    try:
        return table, read(table)
    except AWS_CALL_ERRORS as error:
        say(command, read_failure(error, table.name))
        return EXIT_PREREQUISITE
