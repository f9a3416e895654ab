"""The one-line errors of a CLI run, and the JSON document `--format json` owes when a command
stops on one.

Every command says why it stopped through `say` (one line on stderr, cluster text escaped). The
lines are kept for the run, so that `main` can print `{"error": {...}}` on stdout when the command
was asked for JSON and stopped without writing a document of its own: a pipeline reading stdout
then always parses one document, whatever went wrong (the exit code is unchanged).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from hyperpod_nccl.sanitize import one_line


@dataclass
class _Run:
    said: list[str] = field(default_factory=list)
    document_written: bool = False
    # `main` is re-entered by `demo VIEW` (it runs the real command): only the outermost call
    # starts a run and owes its document.
    depth: int = 0


_RUN = _Run()


@contextmanager
def cli_run() -> Iterator[bool]:
    """One CLI invocation: yields True for the outermost one, which starts with no errors (tests
    run the CLI many times in one process) and is the one to write the owed document."""
    global _RUN
    if _RUN.depth == 0:
        _RUN = _Run()
    _RUN.depth += 1
    try:
        yield _RUN.depth == 1
    finally:
        _RUN.depth -= 1


def say(command: str, message: str) -> None:
    """Print `message` as the command's one error line."""
    _RUN.said.append(message)
    sys.stderr.write(f"hyperpod-nccl {command}: error: {one_line(message)}\n")


def document_written() -> None:
    """Note that the command printed its own JSON document (a report, an error document)."""
    _RUN.document_written = True


def owed_document(exit_code: int) -> dict[str, object] | None:
    """The error document a `--format json` run that stopped on `say` owes, else None."""
    if exit_code == 0 or _RUN.document_written or not _RUN.said:
        return None
    first, *rest = _RUN.said
    message, _, fix = first.partition("; fix: ")
    return {"error": {"message": message, "details": rest, "fix": fix, "exit_code": exit_code}}


def write_owed_document(exit_code: int) -> None:
    """Print `owed_document` on stdout, if one is owed."""
    document = owed_document(exit_code)
    if document is not None:
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
