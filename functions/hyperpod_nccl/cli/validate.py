"""Argument validation: every value that reaches an AWS call, a URL or a command line is
checked here first, so bad input gets one clear line (exit 2) and never a traceback."""

from __future__ import annotations

import argparse
import re

from hyperpod_nccl import thresholds
from hyperpod_nccl.models.node_probe import GPU_SERIAL_PATTERN

CLUSTER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
CLUSTER_ARN = re.compile(r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:cluster/[a-z0-9]{12}$")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")
DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DURATION = re.compile(r"^(\d+)([smhd])$")
# A named profile of ~/.aws/config as people name them (the AWS CLI itself accepts more: a name
# outside this set is refused here rather than passed on to a file lookup).
PROFILE = re.compile(r"^[A-Za-z0-9_.@+-]{1,128}$")
# DynamoDB table names (CreateTable: 3-255 of a-z A-Z 0-9 _ - .) and CloudFormation stack names.
TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,127}$")
GPU_SERIAL = re.compile(GPU_SERIAL_PATTERN)
# A Lambda function name (CreateFunction: 1-64 of letters, digits, hyphens, underscores) or its ARN.
FUNCTION = re.compile(r"^(arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:)?[A-Za-z0-9_-]{1,64}$")
MAX_TIMEOUT_SECONDS = 600.0
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_WINDOW_SECONDS = 14 * 86400


def _matched(pattern: re.Pattern[str], value: str, complaint: str) -> str:
    """`value` when `pattern` matches all of it; else the usage error `complaint`."""
    if pattern.fullmatch(value):
        return value
    raise argparse.ArgumentTypeError(complaint)


def _number(value: str) -> float:
    """`value` as a float; 0.0 when it is none (every caller refuses 0)."""
    try:
        return float(value)
    except ValueError:
        return 0.0


def cluster(value: str) -> str:
    """A HyperPod cluster name or ARN."""
    if CLUSTER_NAME.fullmatch(value) or CLUSTER_ARN.fullmatch(value):
        return value
    raise argparse.ArgumentTypeError(
        f"invalid cluster {value!r}: expected a name (letters, digits, hyphens, max 63) or a cluster ARN"
    )


def cluster_name(value: str) -> str:
    """A HyperPod cluster name (not an ARN: the monitor's configuration names its clusters)."""
    return _matched(
        CLUSTER_NAME, value, f"invalid cluster {value!r}: expected a name (letters, digits, hyphens, max 63)"
    )


def function_name(value: str) -> str:
    """A Lambda function name or ARN."""
    return _matched(FUNCTION, value, f"invalid function {value!r}: expected a Lambda function name or ARN")


def cluster_slug(value: str) -> str | None:
    """The part of a cluster name or ARN that may name a file or directory: a valid name itself,
    or a cluster ARN's last component (the cluster id); None for anything else."""
    if CLUSTER_NAME.fullmatch(value):
        return value
    if CLUSTER_ARN.fullmatch(value):
        return value.rsplit("/", 1)[1]
    return None


def cluster_arn_region(value: str) -> str | None:
    """The region of a cluster ARN (arn:aws:sagemaker:<region>:...); None for a cluster name."""
    if CLUSTER_ARN.fullmatch(value):
        return value.split(":")[3]
    return None


def profile(value: str) -> str:
    """A named profile of the AWS config files."""
    return _matched(PROFILE, value, f"invalid profile {value!r}: expected letters, digits and _.@+-")


def timeout(value: str) -> float:
    """Seconds to wait, more than 0 and at most MAX_TIMEOUT_SECONDS."""
    number = _number(value)
    if not 0 < number <= MAX_TIMEOUT_SECONDS:
        raise argparse.ArgumentTypeError(
            f"invalid timeout {value!r}: expected seconds, more than 0 and at most {MAX_TIMEOUT_SECONDS:g}"
        )
    return number


def region(value: str) -> str:
    """An AWS region code such as us-west-2."""
    return _matched(REGION, value, f"invalid region {value!r}: expected a code like us-west-2")


def instance_id(value: str) -> str:
    """An EC2 instance id (i- followed by 8 to 17 hex digits)."""
    return _matched(INSTANCE_ID, value, f"invalid instance id {value!r}: expected i- followed by 8-17 hex digits")


def table_name(value: str) -> str:
    """A DynamoDB table name."""
    return _matched(TABLE_NAME, value, f"invalid table {value!r}: expected 3-255 letters, digits, '_', '-', '.'")


def stack_name(value: str) -> str:
    """A CloudFormation stack name."""
    complaint = f"invalid stack {value!r}: expected a letter, then letters, digits and hyphens (max 128)"
    return _matched(STACK_NAME, value, complaint)


def gpu_serial(value: str) -> str:
    """A GPU serial number (nvidia-smi's `serial`)."""
    return _matched(GPU_SERIAL, value, f"invalid GPU serial {value!r}: expected letters, digits and hyphens")


def dns_label(value: str) -> str:
    """A Kubernetes namespace or job name (DNS-1123 label)."""
    complaint = f"invalid name {value!r}: expected a DNS-1123 label (a-z, 0-9, '-', max 63)"
    return _matched(DNS_1123_LABEL, value, complaint)


def sample_nodes(value: str) -> int | str:
    """A positive node count or "all"."""
    if value == "all":
        return "all"
    if value.isascii() and value.isdigit() and int(value) > 0:
        return int(value)
    raise argparse.ArgumentTypeError(f"invalid sample size {value!r}: expected a positive integer or 'all'")


def clamp_sample(value: int | str) -> tuple[int | str, str | None]:
    """Cap numeric samples at the original tool's maximum; return a warning when capped."""
    if isinstance(value, int) and value > thresholds.MAX_SAMPLE_NODES:
        return thresholds.MAX_SAMPLE_NODES, (
            f"--sample-nodes {value} capped at {thresholds.MAX_SAMPLE_NODES}; "
            "use --sample-nodes all to probe every node"
        )
    return value, None


def rate(value: str) -> float:
    """A positive rate per second, e.g. 3 or 1.5."""
    number = _number(value)
    if not 0 < number < float("inf"):
        raise argparse.ArgumentTypeError(f"invalid rate {value!r}: expected a positive number per second, e.g. 2")
    return number


def duration(value: str) -> int:
    """A look-back window such as 30m, 2h or 1d, in seconds."""
    match = DURATION.fullmatch(value)
    if not match or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"invalid duration {value!r}: expected e.g. 30m, 2h, 1d")
    seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds > MAX_WINDOW_SECONDS:
        raise argparse.ArgumentTypeError(f"duration {value!r} exceeds 14d")
    return seconds
