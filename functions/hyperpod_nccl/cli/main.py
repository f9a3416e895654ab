"""Entry point of `hyperpod-nccl`. Subcommands are the modules of `cli.commands`, discovered
by convention: each defines NAME, HELP, `configure(parser)` and `run(args) -> int` (an exit code
of `cli.exit_codes`)."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from typing import NoReturn

from hyperpod_nccl import __version__
from hyperpod_nccl.cli import commands
from hyperpod_nccl.cli.exit_codes import EXIT_INTERRUPTED, EXIT_USAGE
from hyperpod_nccl.redaction import install_log_scrubber


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    """The parser with every discovered subcommand."""
    parser = OneLineParser(
        prog="hyperpod-nccl",
        description="Read-only NCCL diagnosis for Amazon SageMaker HyperPod (EKS and Slurm).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        sub = subparsers.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.configure(sub)
        sub.set_defaults(handler=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    install_log_scrubber()
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
