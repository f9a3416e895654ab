"""`hyperpod-nccl triage`: step 1 of the workflow as a command — classify an error string or logs.

    hyperpod-nccl triage train.log worker-3.log        # several files
    kubectl logs <POD> | hyperpod-nccl triage -        # stdin (also the default)
    hyperpod-nccl triage "NCCL WARN NET/OFI fi_getinfo failed"   # the error text itself
    hyperpod-nccl triage -e "Watchdog caught collective operation timeout"
    hyperpod-nccl triage --format json --fail-on P1 *.log      # one JSON document for every input
    hyperpod-nccl triage --format jsonl *.log                  # one JSON line per input, as it is read

An argument that names no file is classified as the error text itself, unless it looks like a path
(a `/`, or a log file's extension, and no spaces): a mistyped file name is reported as unreadable,
never classified as text. Nothing is contacted: the input is classified locally with the same
catalog as the CloudWatch scan and the pod-log check.

Exit codes: 0 when every input was read (healthy or not); 1 when an input could not be read or is
not text (the others are still reported); 3 with `--fail-on P0|P1|P2` when a finding at or above
that priority was found.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
from pathlib import Path
from typing import Any, BinaryIO, cast

from hyperpod_nccl.classifier import (
    ONLY_BESIDE,
    Scanner,
    ScanResult,
    SignatureHit,
    by_cue_note,
    cue_free_facts,
    hit_status,
    is_cue_hit,
    load_catalog,
)
from hyperpod_nccl.cli.commands.diagnose import fail_on_exit
from hyperpod_nccl.cli.exit_codes import EXIT_FAIL_ON, EXIT_OK, EXIT_PREREQUISITE, most_severe
from hyperpod_nccl.models.findings import Priority
from hyperpod_nccl.references import runbooks_line
from hyperpod_nccl.sanitize import one_line

NAME = "triage"
HELP = "Classify error strings or log files (NCCL, EFA, CUDA, driver, kernel) and point at the runbook."
EXAMPLES = (
    "hyperpod-nccl triage train.log rank*.log.gz",
    "kubectl logs job/llama-70b | hyperpod-nccl triage",
    "hyperpod-nccl triage -e 'NCCL WARN NET/OFI Unable to register memory'",
)
SNIFF_BYTES = 8192
GZIP_MAGIC = b"\x1f\x8b"


class NotText(Exception):
    """The input is a binary blob, not a log."""


# An argument meant as a file even when none is there: no spaces, and a `/` or a log file's extension.
_LOG_EXTENSIONS = (".log", ".txt", ".out", ".err", ".gz", ".json", ".jsonl")
STDIN_PROMPT = "paste the error, then Ctrl-D (or give a file, '-', or -e TEXT)"
DIAGNOSE_HINT = "→ to check the cluster itself: hyperpod-nccl diagnose --cluster <NAME> --region <REGION>"


def configure(parser: argparse.ArgumentParser) -> None:
    """Declare triage's arguments."""
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE|TEXT",
        help="log files to classify; '-' or nothing reads stdin; an argument that names no file (and does "
        "not look like a path) is classified as the error text itself",
    )
    parser.add_argument(
        "-e", "--error", action="append", default=[], metavar="TEXT", help="classify TEXT itself (repeatable)"
    )
    parser.add_argument(
        "--format",
        choices=("text", "json", "jsonl"),
        default="text",
        help='text (default); json: one document {"inputs": [...]}; jsonl: one JSON line per input as it is read',
    )
    parser.add_argument(
        "--fail-on",
        action="append",
        choices=[p.value for p in Priority],
        help=f"exit {EXIT_FAIL_ON} when a finding at or above this priority was found (as diagnose)",
    )


def _is_binary(head: bytes) -> bool:
    # Text logs never carry NUL bytes; UTF-16 or compiled blobs do.
    return b"\x00" in head


def scan_binary(stream: BinaryIO, name: str) -> ScanResult:
    """Classify a byte stream, transparently gunzipping; raises NotText for binary blobs."""
    buffered: Any = stream if hasattr(stream, "peek") else io.BufferedReader(cast(Any, stream))
    head = buffered.peek(SNIFF_BYTES)[:SNIFF_BYTES]
    source: Any = buffered
    if head.startswith(GZIP_MAGIC):
        source = gzip.GzipFile(fileobj=buffered)
        head = source.peek(SNIFF_BYTES)[:SNIFF_BYTES]
    if _is_binary(head):
        raise NotText(f"{name}: binary data, not a text log")
    scanner = Scanner()
    scanner.feed_binary(source)
    return scanner.finish()


def _finding_json(hit: SignatureHit) -> dict[str, object]:
    return {
        "id": hit.id,
        "class": hit.cls,
        "priority": hit.priority.value,
        "reference": {"file": hit.reference.file, "section": hit.reference.section},
        "title": hit.title,
        "count": hit.count,
        "first_seen": hit.first_seen,
        "last_seen": hit.last_seen,
        "evidence": hit.evidence,
        "fields": hit.fields,
        "folded": [folded.model_dump() for folded in hit.folded],
    }


def input_json(source: str, result: ScanResult) -> dict[str, Any]:
    """One input's result: {"source", "lines", "success_markers", "findings": [...], "resolved"}."""
    return {
        "source": source,
        "lines": result.lines_scanned,
        "success_markers": result.success_markers,
        "findings": [_finding_json(hit) for hit in result.hits],
        "resolved": [settled.model_dump() for settled in result.resolved],
    }


def render_json(source: str, result: ScanResult) -> str:
    """One JSON line (`--format jsonl`): `input_json`."""
    return json.dumps(input_json(source, result), sort_keys=False)


def render_text(source: str, result: ScanResult) -> str:
    """The [FAIL]/→ pointer style of diagnose, with root cause and read-only next commands."""
    catalog = load_catalog()
    out = [f"== {source} ({result.lines_scanned} lines) =="]
    if not result.bytes_scanned:
        out.append("[SKIP] no input: nothing was classified")
        return "\n".join(map(one_line, out))
    if result.success_markers:
        out.append(f"[PASS] the log printed {', '.join(repr(m) for m in result.success_markers)}")
    # Failures a later success line settled, and notices whose consequence the input does not show,
    # are read and said, never silently dropped.
    out.extend(
        f"[INFO] {settled.title}: {settled.count} line(s) "
        f"{'not a failure here' if settled.rule == ONLY_BESIDE else 'settled by a later line'} ({settled.why})"
        for settled in result.resolved
    )
    if not result.hits:
        out.append("[PASS] no NCCL/EFA/CUDA/driver failure signature found")
        return "\n".join(map(one_line, out))
    for hit in result.hits:
        status = hit_status(hit).value
        when = ""
        if hit.first_seen:
            when = f" (first {hit.first_seen}" + (
                f", last {hit.last_seen})" if hit.last_seen != hit.first_seen else ")"
            )
        out.append(f"[{status}] {hit.priority.value} {hit.title} — {hit.count} line(s){when}")
        failure_class = catalog.classes.get(hit.cls)
        by_cue = is_cue_hit(hit)
        if by_cue:  # a class cue: the class's words, no known message
            out.append(f"       {by_cue_note(hit)}")
        if failure_class:
            out.append(f"       {'possible root cause' if by_cue else 'root cause'}: {failure_class.cause}")
        facts = " ".join(f"{k}={v}" for k, v in cue_free_facts(hit))
        if facts:
            out.append(f"       facts: {facts}")
        out.extend(f"       | {line[:200]}" for line in hit.evidence[-3:])
        for folded in hit.folded:  # the generic errors this cause explains
            out.append(f"       explains: {folded.title} — {folded.count} line(s)")
            out.extend(f"       | {line[:200]}" for line in folded.evidence[-1:])
        if failure_class and failure_class.confirm:
            out.append("       next (read-only):")
            out.extend(f"         {command}" for command in failure_class.confirm)
        out.append(f"       → {hit.reference.pointer}")
    # Evidence, fields and the file name are the input's own text: each line is shown escaped,
    # so that a log line cannot drive the terminal or add a line of its own.
    return "\n".join(map(one_line, out))


def _looks_like_a_path(argument: str) -> bool:
    return not any(c.isspace() for c in argument) and ("/" in argument or argument.lower().endswith(_LOG_EXTENSIONS))


def _inputs(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """Each input as (its name, the text to classify) with text None for a file or stdin ('-')."""
    inputs: list[tuple[str, str | None]] = []
    for name in args.files or ([] if args.error else ["-"]):
        if name == "-" or Path(name).exists() or _looks_like_a_path(name):
            inputs.append((name, None))
        else:
            inputs.append(("text argument", name))
    inputs.extend(("-e text", text) for text in args.error)
    return inputs


def _scan(name: str, text: str | None) -> ScanResult:
    if text is not None:
        return scan_binary(io.BytesIO(text.encode("utf-8", errors="replace")), name)
    if name == "-":
        if sys.stdin.isatty():
            sys.stderr.write(f"hyperpod-nccl triage: {STDIN_PROMPT}\n")
        return scan_binary(sys.stdin.buffer, "-")
    with open(name, "rb") as handle:
        return scan_binary(handle, name)


def run(args: argparse.Namespace) -> int:
    """Classify each input and print its report; unreadable inputs get a one-line error."""
    codes = [EXIT_OK]
    found: list[SignatureHit] = []
    documents: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    for index, (name, text) in enumerate(_inputs(args)):
        try:
            result = _scan(name, text)
        except NotText as error:
            sys.stderr.write(f"hyperpod-nccl triage: {one_line(str(error))}\n")
            errors.append({"source": name, "error": str(error)})
            codes.append(EXIT_PREREQUISITE)
            continue
        except (OSError, EOFError) as error:  # missing, unreadable, a directory, a truncated gzip
            reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
            sys.stderr.write(f"hyperpod-nccl triage: {one_line(name)}: cannot read ({one_line(reason)})\n")
            errors.append({"source": name, "error": f"cannot read ({reason})"})
            codes.append(EXIT_PREREQUISITE)
            continue
        found.extend(result.hits)
        if args.format == "jsonl":
            sys.stdout.write(render_json(name, result) + "\n")
        elif args.format == "json":
            documents.append(input_json(name, result))
        else:
            sys.stdout.write(("\n" if index else "") + render_text(name, result) + "\n")
    if args.format == "json":  # one document, whatever could or could not be read
        sys.stdout.write(json.dumps({"inputs": documents, "unreadable": errors}) + "\n")
    if found and args.format == "text":
        sys.stdout.write(f"\n{runbooks_line()}\n{DIAGNOSE_HINT}\n")
    codes.append(fail_on_exit(args, lambda p: any(hit.priority.rank <= p.rank for hit in found), partial=False))
    return most_severe(codes)
