"""Which cluster, in which account and region, and how AWS is reached: the flags of every command
that diagnoses a cluster (diagnose, incidents, support-bundle), resolved as the AWS CLI resolves
them.

- Credentials and settings come from `--profile`, else the environment and `~/.aws/config`, as
  botocore resolves them (nothing of ours in between).
- The region is `--region`, else the cluster ARN's, else the profile's or environment's. An ARN of
  one region with `--region` naming another is an error: the call would go to a region where the
  cluster is not.
- `--connect-timeout` / `--read-timeout` bound each call; the first call of a run fails fast in any
  case (collectors.aws.FIRST_CONTACT_*), so a dead endpoint is told in seconds.
- `--debug` writes botocore's wire log to stderr, with every secret-shaped value scrubbed (the
  record factory of `redaction.install_log_scrubber`, installed by `main` before any call).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from hyperpod_nccl.cli import validate
from hyperpod_nccl.cli.errors import say
from hyperpod_nccl.collectors.aws import DEFAULT_CONNECT_TIMEOUT_SECONDS, DEFAULT_READ_TIMEOUT_SECONDS, AwsClients

# Environment variables the AWS CLI reads for the region, in its order.
REGION_ENV = ("AWS_REGION", "AWS_DEFAULT_REGION")


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """`--cluster`, `--region`, `--profile`, the timeouts and `--debug`."""
    parser.add_argument("--cluster", required=True, type=validate.cluster, help="HyperPod cluster name or ARN")
    region_help = "AWS region (default: the cluster ARN's, else the profile's or $AWS_REGION / $AWS_DEFAULT_REGION)"
    add_account_arguments(parser, region_help=region_help)


def add_account_arguments(
    parser: argparse.ArgumentParser,
    *,
    region_help: str = "AWS region (default: the profile's or $AWS_REGION / $AWS_DEFAULT_REGION)",
) -> None:
    """`--region`, `--profile`, the timeouts and `--debug`: how to reach AWS."""
    parser.add_argument("--region", type=validate.region, help=region_help)
    parser.add_argument(
        "--profile", type=validate.profile, help="named profile of ~/.aws/config (default: $AWS_PROFILE)"
    )
    parser.add_argument(
        "--connect-timeout",
        type=validate.timeout,
        default=DEFAULT_CONNECT_TIMEOUT_SECONDS,
        metavar="S",
        help=f"seconds to wait for a connection to AWS (default {DEFAULT_CONNECT_TIMEOUT_SECONDS:g})",
    )
    parser.add_argument(
        "--read-timeout",
        type=validate.timeout,
        default=DEFAULT_READ_TIMEOUT_SECONDS,
        metavar="S",
        help=f"seconds to wait for an AWS answer (default {DEFAULT_READ_TIMEOUT_SECONDS:g})",
    )
    parser.add_argument(
        "--debug", action="store_true", help="write the AWS SDK's wire log to stderr (secrets scrubbed)"
    )


def _configured_region(profile: str | None) -> str | None:
    """The region botocore would use: the environment's, else the profile's (a missing profile
    raises botocore's ProfileNotFound)."""
    import botocore.session

    for name in REGION_ENV:
        if os.environ.get(name):
            return os.environ[name]
    region = botocore.session.Session(profile=profile).get_config_variable("region")
    return str(region) if region else None


def resolve_region(args: argparse.Namespace, command: str) -> str | None:
    """The region to call, or None after printing why there is none (a usage error)."""
    from botocore.exceptions import BotoCoreError

    cluster = getattr(args, "cluster", None)
    arn_region = validate.cluster_arn_region(cluster) if isinstance(cluster, str) else None
    if args.region and arn_region and args.region != arn_region:
        say(command, f"--region {args.region} conflicts with the cluster ARN's region {arn_region}")
        return None
    region = args.region or arn_region
    if region is None:
        try:
            region = _configured_region(getattr(args, "profile", None))
        except BotoCoreError as error:  # ProfileNotFound, an unreadable config file
            say(command, str(error))
            return None
    if not region:
        say(command, "no region: pass --region, a cluster ARN, or set a region in the profile or AWS_REGION")
        return None
    try:
        return validate.region(region)
    except argparse.ArgumentTypeError as error:
        say(command, str(error))
        return None


class _StderrHandler(logging.Handler):
    """Writes each record to whatever `sys.stderr` is when it is logged."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - logging must never break the run it describes
            self.handleError(record)


_DEBUG_HANDLER = _StderrHandler()
_DEBUG_HANDLER.setFormatter(logging.Formatter("%(asctime)s %(name)s [%(levelname)s] %(message)s"))
DEBUG_LOGGERS = ("botocore", "boto3", "urllib3")


def enable_debug_log() -> None:
    """botocore's DEBUG log (the wire log) to stderr; every record passes the secret scrubber
    (installed by `main`). Idempotent."""
    for name in DEBUG_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        if _DEBUG_HANDLER not in logger.handlers:
            logger.addHandler(_DEBUG_HANDLER)


def resolve_clients(args: argparse.Namespace, command: str) -> AwsClients | None:
    """The clients of one run (region, profile, timeouts), or None after a usage error was printed."""
    from botocore.exceptions import BotoCoreError

    region = resolve_region(args, command)
    if region is None:
        return None
    profile = getattr(args, "profile", None)
    if profile:
        import botocore.session

        try:  # a profile that does not exist is a usage error, told before any call
            botocore.session.Session(profile=profile).get_scoped_config()
        except BotoCoreError as error:
            say(command, str(error))
            return None
    if getattr(args, "debug", False):
        enable_debug_log()
    return AwsClients(
        region=region,
        profile=profile,
        connect_timeout=args.connect_timeout,
        read_timeout=args.read_timeout,
    )


def reach_aws(aws: AwsClients, command: str) -> bool:
    """One fast first call (sts:GetCallerIdentity, which needs no permission) before a command's
    real reads: a dead or silent endpoint, a proxy or a bad credential is told in one line within
    the first-contact timeouts, instead of after the full retries of the command's first read.
    False after saying what failed."""
    from hyperpod_nccl.aws_errors import AWS_CALL_ERRORS, error_message, transport_failure

    try:
        aws.client("sts", first_contact=True).get_caller_identity()
    except AWS_CALL_ERRORS as error:
        told = transport_failure(error)
        if told is not None:
            say(command, f"sts:GetCallerIdentity {told[0]} ({error_message(error)}); fix: {told[1]}")
        else:
            fix = "fix the AWS credentials (aws sts get-caller-identity must succeed) or --profile"
            say(command, f"AWS credentials check failed: {error_message(error)}; fix: {fix}")
        return False
    return True
