"""Entry point of `hyperpod-nccl`. Subcommands are the modules of `cli.commands`, discovered
by convention: each defines NAME, HELP, EXAMPLES (shown by its `--help` with the exit codes),
`configure(parser)` and `run(args) -> int` (an exit code of `cli.exit_codes`)."""

from __future__ import annotations

import argparse
import codecs
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from hyperpod_nccl import __version__
from hyperpod_nccl.cli import commands, errors
from hyperpod_nccl.cli.exit_codes import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE, help_epilog
from hyperpod_nccl.redaction import install_log_scrubber

# What the report's few non-ASCII characters become on a terminal or file that cannot encode them
# (LANG=C, a Windows code page); any other character becomes "?".
ASCII_FALLBACKS = {
    chr(code): text
    for code, text in (
        (0x2192, "->"),  # rightwards arrow, before each runbook pointer
        (0x00A7, "S"),  # section sign (by code point: the pointer contract reads string literals)
        (0x2014, "--"),  # em dash
        (0x2013, "-"),  # en dash
        (0x2026, "..."),  # ellipsis
        (0x00B7, "-"),  # middle dot
        (0x00B5, "u"),  # micro sign
        (0x00D7, "x"),  # multiplication sign
        (0x2265, ">="),
        (0x2264, "<="),
    )
}
_ENCODING_ERRORS = "hyperpod-nccl-ascii"


def _ascii_fallback(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    return "".join(ASCII_FALLBACKS.get(char, "?") for char in text), error.end


codecs.register_error(_ENCODING_ERRORS, _ascii_fallback)


def tolerate_any_encoding() -> None:
    """Let stdout and stderr write what their encoding cannot hold as ASCII stand-ins instead of
    raising UnicodeEncodeError halfway through a report."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors=_ENCODING_ERRORS)


def _quiet_broken_pipe() -> int:
    """The reader went away (`| head`): stop quietly. stdout points at /dev/null from here so that
    the interpreter's final flush does not complain either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no file descriptor (captured by a test): nothing to silence
        pass
    finally:
        os.close(devnull)
    return EXIT_BROKEN_PIPE


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2, and takes no abbreviated
    flags (`--clus` is an error, never silently `--cluster`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        raise SystemExit(EXIT_USAGE)


TOP_LEVEL_EXAMPLES = (
    "hyperpod-nccl diagnose --cluster my-cluster --region us-west-2",
    "hyperpod-nccl triage train.log",
    "hyperpod-nccl demo",
    "hyperpod-nccl COMMAND --help",
)


def build_parser() -> argparse.ArgumentParser:
    """The parser with every discovered subcommand."""
    parser = OneLineParser(
        prog="hyperpod-nccl",
        description="Read-only NCCL diagnosis for Amazon SageMaker HyperPod (EKS and Slurm).",
        epilog=help_epilog(TOP_LEVEL_EXAMPLES),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        sub = subparsers.add_parser(
            module.NAME,
            help=module.HELP,
            description=module.HELP,
            epilog=help_epilog(module.EXAMPLES),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.configure(sub)
        sub.set_defaults(handler=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    install_log_scrubber()
    tolerate_any_encoding()
    with errors.cli_run() as outermost:
        return _run(argv, outermost)


def _run(argv: Sequence[str] | None, outermost: bool) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if getattr(args, "handler", None) is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        code = int(args.handler(args))
        if outermost and getattr(args, "format", None) == "json":  # stopped on an error line: one document all the same
            errors.write_owed_document(code)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below, not at exit
        return code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _quiet_broken_pipe()


if __name__ == "__main__":
    sys.exit(main())
