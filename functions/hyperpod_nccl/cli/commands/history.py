"""`hyperpod-nccl history`: every fault the deployed monitor recorded on one node (`--node`) or one
GPU (`--gpu`, its serial), oldest first, whichever cluster it was in: a GPU's faults follow it
across node replacements. Read-only."""

from __future__ import annotations

import argparse
import json
import sys

from hyperpod_nccl.cli import validate
from hyperpod_nccl.cli.exit_codes import EXIT_OK
from hyperpod_nccl.cli.monitor_table import add_table_arguments, read_monitor
from hyperpod_nccl.monitor.read_side import FaultRecord, FaultSubject, fault_history
from hyperpod_nccl.sanitize import one_line

NAME = "history"
HELP = "Show a node's or a GPU's fault history recorded by the deployed monitor (read-only)."
EXAMPLES = (
    "hyperpod-nccl history --region us-west-2 --node i-0123456789abcdef0",
    "hyperpod-nccl history --region us-west-2 --gpu 1652921001234 --format json",
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Declare the flags: the node or GPU, where the monitor is, the output format."""
    subject = parser.add_mutually_exclusive_group(required=True)
    subject.add_argument("--node", type=validate.instance_id, metavar="INSTANCE_ID", help="a node's instance id")
    subject.add_argument("--gpu", type=validate.gpu_serial, metavar="SERIAL", help="a GPU's serial (nvidia-smi)")
    add_table_arguments(parser, clusters=False)
    parser.add_argument("--format", choices=("text", "json"), default="text")


def render_text(subject: FaultSubject, resource_id: str, faults: list[FaultRecord]) -> str:
    """The history as a person reads it; every stored value escaped for the terminal."""
    what = f"{'Node' if subject == 'node' else 'GPU'} {resource_id}"
    if not faults:
        return f"{what}: no fault recorded (within the monitor's history retention)\n"
    lines = [f"{what}: {len(faults)} fault{'' if len(faults) == 1 else 's'} recorded, oldest first"]
    for fault in faults:
        where = f"{one_line(fault.cluster)} ({one_line(fault.region)})"
        lines.append(f"  {one_line(fault.seen_at)}  [{one_line(fault.priority)}] {one_line(fault.title)}")
        lines.append(f"        {one_line(fault.check_id)} on {where}, sweep {one_line(fault.sweep_id)}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Locate the table, read the node's or GPU's faults, print them."""
    subject: FaultSubject = "node" if args.node else "gpu"
    resource_id = str(args.node or args.gpu)
    outcome = read_monitor(
        args, NAME, clusters=False, read=lambda table: fault_history(table.store, subject, resource_id)
    )
    if isinstance(outcome, int):
        return outcome
    table, faults = outcome
    if args.format == "json":
        document = {"table": table.name, subject: resource_id, "faults": [f.model_dump(mode="json") for f in faults]}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write(render_text(subject, resource_id, faults))
    return EXIT_OK
