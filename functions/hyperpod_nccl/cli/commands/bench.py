"""`hyperpod-nccl bench`: measure the tool against a synthetic simulated cluster (no AWS account).

`bench sweep` times one sweep of N healthy nodes whose probes each take a fixed time, through the
CLI engine or the serverless state machine, next to the original design's serial time and the
lower bound set by the account's StartSession rate.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from hyperpod_nccl.cli.errors import say
from hyperpod_nccl.cli.exit_codes import EXIT_OK, EXIT_PREREQUISITE, EXIT_USAGE, help_epilog
from hyperpod_nccl.cli.extras import require_simulation
from hyperpod_nccl.monitor.settings import DEFAULT_MAP_MAX_CONCURRENCY

NAME = "bench"
HELP = "Benchmark a sweep of a synthetic simulated cluster (no AWS account needed)."
EXAMPLES = (
    "hyperpod-nccl bench sweep --nodes 256 --probe-latency 2",
    "hyperpod-nccl bench sweep --nodes 64 --path state-machine --format json",
)
# Keys of `bench sweep --format json`, in order (the documented interface).
SWEEP_KEYS = ("nodes", "path", "wall_s", "bound_s", "serial_s", "api_calls", "nodes_probed", "nodes_unreachable")
MAX_NODES = 4096


def _nodes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a node count, got {text!r}") from None
    if not 1 <= value <= MAX_NODES:
        raise argparse.ArgumentTypeError(f"node count must be between 1 and {MAX_NODES}")
    return value


def _latency(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 <= value <= 180:
        raise argparse.ArgumentTypeError("probe latency must be between 0 and 180 seconds (the SSM budget)")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    """Declare `bench sweep` and its flags."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION", parser_class=type(parser))
    sweep = actions.add_parser(
        "sweep",
        help="time one sweep of N synthetic nodes",
        description=sweep_help(),
        epilog=help_epilog(EXAMPLES),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sweep.add_argument("--nodes", type=_nodes, required=True, help=f"accelerator nodes (1 - {MAX_NODES})")
    sweep.add_argument("--probe-latency", type=_latency, default=2.0, metavar="S", help="seconds each probe takes")
    sweep.add_argument("--path", choices=["cli", "state-machine"], default="cli", help="what sweeps (default cli)")
    sweep.add_argument("--orchestrator", choices=["eks", "slurm"], default="eks")
    sweep.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_MAP_MAX_CONCURRENCY,
        help=f"state machine: probes at once (mapMaxConcurrency, default {DEFAULT_MAP_MAX_CONCURRENCY})",
    )
    sweep.add_argument("--format", choices=["text", "json"], default="text")


def sweep_help() -> str:
    """What `bench sweep` measures."""
    return (
        "Time one sweep of a synthetic healthy cluster of N ml.p5.48xlarge nodes whose probes each take "
        "S seconds. Prints the wall time, the lower bound (N / StartSession rate + S), the original "
        "serial time (N x min(S, 180 s)), the AWS calls the emulation received and the node counts."
    )


def run(args: argparse.Namespace) -> int:
    """Run the chosen benchmark."""
    if getattr(args, "action", None) != "sweep":
        say(NAME, "choose an action: sweep (see --help)")
        return EXIT_USAGE
    missing = require_simulation(NAME)
    if missing is not None:
        return missing
    from hyperpod_nccl_sim.synthetic import measure_sweep

    # The handlers log JSON lines for CloudWatch and moto warns about ASL fields it ignores: the
    # benchmark prints its own result only.
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    logging.getLogger("moto").setLevel(logging.ERROR)
    measured = measure_sweep(
        args.nodes, args.probe_latency, path=args.path, orchestrator=args.orchestrator, concurrency=args.concurrency
    )
    document = measured.model_dump(mode="json")
    if args.format == "json":
        ordered = {key: document[key] for key in SWEEP_KEYS}
        ordered.update({k: v for k, v in document.items() if k not in ordered})
        sys.stdout.write(json.dumps(ordered) + "\n")
    else:
        sys.stdout.write(
            f"{measured.nodes} nodes, {measured.path}: {measured.wall_s:.1f} s "
            f"(bound {measured.bound_s:.1f} s, {measured.ratio_to_bound:.2f}x; "
            f"original serial {measured.serial_s:.0f} s); "
            f"{measured.nodes_probed} probed, {measured.nodes_unreachable} unreachable; "
            f"{measured.api_calls} AWS calls\n"
        )
    return EXIT_OK if measured.status == "SUCCEEDED" and measured.nodes_unreachable == 0 else EXIT_PREREQUISITE
