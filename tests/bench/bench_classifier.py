"""Log classifier: corpus scores per class and throughput against `grep -E -i -f`.

Two corpora (tests/log_corpus.py). The headline is the **held-out** score: excerpts from public
sources the catalog was never written from, each scored by the catalog less any signature whose
`written_from` cites the excerpt's own source (leave-one-source-out). The in-sample corpus, which
the catalog was written against, is scored beside it and labelled so: it measures memory.
Targets (issue 16): detection >= 95 %, correct section >= 90 %, healthy lines flagged <= 2 %.
"""

from __future__ import annotations

import json
import random
import re
import resource
import shutil
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from hyperpod_nccl import references
from hyperpod_nccl.classifier import load_catalog, scan_stream, scan_text
from tests.log_corpus import Excerpt, catalog_without, held_out, in_sample, source_key

TITLE = "Log classifier (corpus scores, throughput vs grep)"
LOG_MEGABYTES = 8
REPEATS = 3
FAILURE_EVERY = 500  # one failure line per this many lines: a realistic, mostly-INFO log
SMALL_FILES = 10_000


def corpus_scores(excerpts: Iterable[Excerpt], *, leave_source_out: bool) -> str:
    """Per-class detection and section accuracy, and the healthy false-positive rate; with
    `leave_source_out`, each excerpt is scored without the signatures written from its source."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    flagged = healthy = 0
    sources: set[str] = set()
    for excerpt in excerpts:
        source = source_key(excerpt["url"])
        sources.add(source)
        catalog = catalog_without(source) if leave_source_out else load_catalog()
        hits = scan_text(excerpt["text"] + "\n", catalog).hits
        if excerpt["cls"] == "healthy":
            healthy += 1
            flagged += bool(hits)
            continue
        row = totals[excerpt["cls"]]
        row[0] += 1
        # A generic line folded under its cause was still recognised: it counts as detected, and
        # its section is the finding's, the cause's (issue 16, point 4).
        mine = [h for h in hits if excerpt["cls"] in {h.cls, *(f.cls for f in h.folded)}]
        row[1] += bool(mine)
        expected = getattr(references, excerpt["expect_ref"])
        row[2] += any(h.reference == expected for h in mine)
    lines = ["| class | excerpts | detected | correct section |", "|---|---|---|---|"]
    all_n = all_d = all_s = 0
    for cls, (n, detected, section) in sorted(totals.items()):
        lines.append(f"| {cls} | {n} | {detected / n:.0%} | {section / n:.0%} |")
        all_n, all_d, all_s = all_n + n, all_d + detected, all_s + section
    lines.append(
        f"| **all** | {all_n} | {all_d / max(all_n, 1):.1%} (target ≥ 95 %) | "
        f"{all_s / max(all_n, 1):.1%} (target ≥ 90 %) |"
    )
    lines.append("")
    lines.append(
        f"Healthy excerpts flagged: {flagged}/{healthy} = {flagged / max(healthy, 1):.1%} (target ≤ 2 %). "
        f"{len(sources)} distinct sources."
    )
    return "\n".join(lines)


def _grep_patterns() -> list[str]:
    """The catalog's patterns in POSIX ERE (named/non-capturing groups and \\d rewritten)."""
    out = []
    for signature in load_catalog().signatures:
        for pattern in signature.patterns:
            # A gap that may not cross its own anchor, `(?:(?!X).){0,N}`, is a bounded gap to grep.
            ere = re.sub(r"\(\?:\(\?!(?:[^()]|\([^()]*\))*\)\.\)", ".", pattern)
            ere = re.sub(r"\(\?<?[!=][^()]*\)", "", ere)  # other lookarounds: ERE has none (broader)
            ere = re.sub(r"\(\?P<\w+>", "(", ere).replace("(?:", "(")
            # Bounded repeats are how the scanner stays linear; grep's DFA explodes on them, so grep
            # gets the unbounded `*` / `+` forms it handles at full speed (slightly broader matching).
            ere = re.sub(r"\{0,\d+\}[?+]?", "*", ere)
            ere = re.sub(r"\{[1-9]\d*,\d+\}[?+]?", "+", ere)
            ere = re.sub(r"([*+])[?+]", r"\1", ere)  # lazy and possessive forms: ERE has neither
            ere = ere.replace(r"\d", "[0-9]").replace(r"\s", "[[:space:]]")
            out.append(ere)
    return out


def _mixed_log(path: Path, megabytes: int) -> int:
    """Write a realistic mixed log: healthy NCCL INFO chatter with sparse real failure lines."""
    excerpts = in_sample()
    chatter = [e["text"] for e in excerpts if e["cls"] == "healthy"]
    failures = [e["text"] for e in excerpts if e["cls"] != "healthy"]
    rng = random.Random(7)
    target = megabytes << 20
    written = 0
    with path.open("w", encoding="utf-8") as handle:
        index = 0
        while written < target:
            index += 1
            line = rng.choice(failures) if index % FAILURE_EVERY == 0 else rng.choice(chatter)
            handle.write(line + "\n")
            written += len(line) + 1
    return written


def _best_cpu_seconds(action: Callable[[], object]) -> float:
    """The least CPU time (user + system, this process and its children) of REPEATS runs.

    CPU time rather than wall time, and the best of a few runs: the bench shares a small machine
    with other work, which inflates wall time unevenly between the two tools.
    """
    best = float("inf")
    for _ in range(REPEATS):
        before = _cpu_now()
        action()
        best = min(best, _cpu_now() - before)
    return best


def _cpu_now() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _job_log(path: Path, megabytes: int) -> int:
    """Write one job's log: NCCL init chatter, then long runs of near-identical step lines from
    every rank (what a training job prints for hours), and its failure at the end."""
    chatter = [e["text"] for e in in_sample() if e["cls"] == "healthy"][:40]
    failures = [e["text"] for e in in_sample() if e["cls"] == "timeout"][:3]
    target = megabytes << 20
    written = 0
    with path.open("w", encoding="utf-8") as handle:
        for line in chatter:
            handle.write(line + "\n")
            written += len(line) + 1
        step = 0
        while written < target:
            step += 1
            for rank in range(8):
                line = (
                    f"[rank{rank}]:[I1206 10:{step // 60 % 60:02d}:{step % 60:02d}.{rank:06d}] step {step} "
                    f"loss {2.5 - step * 1e-6:.4f} grad_norm {0.8 + rank * 0.01:.3f} lr 3.0e-04 tokens/s 41{rank}0"
                )
                handle.write(line + "\n")
                written += len(line) + 1
        for line in failures:
            handle.write(line + "\n")
            written += len(line) + 1
    return written


def _small_files(directory: Path, count: int) -> int:
    """Write `count` small logs (a pod's tail each: a few hundred lines of mixed chatter)."""
    chatter = [e["text"] for e in in_sample() if e["cls"] == "healthy"]
    failures = [e["text"] for e in in_sample() if e["cls"] != "healthy"]
    rng = random.Random(11)
    written = 0
    for index in range(count):
        lines = [rng.choice(chatter) for _ in range(20)] + ([rng.choice(failures)] if index % 10 == 0 else [])
        text = "\n".join(lines) + "\n"
        (directory / f"pod-{index:05d}.log").write_text(text, encoding="utf-8")
        written += len(text.encode("utf-8"))
    return written


def _side_by_side(name: str, files: list[Path], size: int, patterns: Path, grep: str | None) -> str:
    """One table row: the scanner (a fresh Scanner per file, as triage and the log checks build
    them) and grep over the same files, CPU time best of REPEATS, in this run."""

    def scan() -> None:
        for file in files:
            with file.open("rb") as handle:
                scan_stream(handle)

    ours = _best_cpu_seconds(scan)
    row = f"| {name} | {size / 1e6:.0f} MB in {len(files):,} file(s) | {ours:.2f} s ({size / ours / 1e6:.0f} MB/s) |"
    if grep is None:
        return row + " grep not found | |"
    command = [grep, "-E", "-i", "-c", "-f", str(patterns), *map(str, files)]
    probe = subprocess.run([*command[:6], str(files[0])], capture_output=True, check=False)
    if probe.returncode not in (0, 1):
        return row + f" grep rejected the patterns: {probe.stderr.decode(errors='replace')[:120]} | |"
    if len(files) > 1:  # one grep over the directory, not one process per file
        command = [grep, "-E", "-i", "-r", "-c", "-f", str(patterns), str(files[0].parent)]
    theirs = _best_cpu_seconds(lambda: subprocess.run(command, capture_output=True, check=False))
    return row + f" {theirs:.2f} s ({size / theirs / 1e6:.0f} MB/s) | **{theirs / ours:.2f}x** |"


def throughput() -> str:
    """The scanner against `grep -E -i -f` with the same patterns on three inputs, side by side."""
    grep = shutil.which("grep")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        patterns = root / "patterns.txt"
        patterns.write_text("\n".join(_grep_patterns()) + "\n", encoding="utf-8")
        mixed, job, small = root / "mixed.log", root / "job.log", root / "small"
        small.mkdir()
        rows = [
            "| input | size | scanner, CPU (best of 3) | grep -E -i -f, CPU (best of 3) | ratio |",
            "|---|---|---|---|---|",
            _side_by_side("shuffled mixed log", [mixed], _mixed_log(mixed, LOG_MEGABYTES), patterns, grep),
            _side_by_side("one job's log", [job], _job_log(job, LOG_MEGABYTES), patterns, grep),
            _side_by_side("small files", *_small_set(small), patterns, grep),
        ]
    return "\n".join(
        [
            *rows,
            "",
            f"The mixed log has 1 failure line per {FAILURE_EVERY} of shuffled corpus chatter; the job's log is "
            "long runs of near-identical step lines from 8 ranks; the small files are "
            f"{SMALL_FILES:,} pod tails of 20-21 lines. grep gets every bounded repeat as `*` / `+` (its DFA "
            "explodes on bounded repeats). Both sides read the same catalog: with its several hundred patterns "
            "grep's DFA itself slows down on varied lines, so the ratio says as much about grep as about the "
            "scanner. The scanner finds its prefilter triggers (several hundred since the emitter-mined "
            "signatures) with one trie-shaped search per block, then runs the regular expressions only on the "
            "lines a trigger is on; grep runs one DFA over every line. Targets (issue 16): job's log >= 0.5x, "
            "mixed log >= 1x, small files >= 0.5x.",
        ]
    )


def _small_set(directory: Path) -> tuple[list[Path], int]:
    size = _small_files(directory, SMALL_FILES)
    return sorted(directory.iterdir()), size


FRESH_SOURCES = Path(__file__).resolve().parent / "results" / "fresh_sources.json"


def _share(count: int, of: int) -> str:
    return f"{count} ({count / of:.0%})" if of else "-"


def fresh_sources() -> str:
    """The development rounds' before-states (`FRESH_SOURCES`): new sources scored once by the
    catalog as it stood before the round changed it, a second measure on unseen text."""
    data = json.loads(FRESH_SOURCES.read_text(encoding="utf-8"))
    lines = [
        "| round (classes sought) | catalog | sources | failure lines | detected | right section | healthy lines "
        "| flagged |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    failure = detected = section = healthy = flagged = 0
    for r in data["rounds"]:
        lines.append(
            f"| {r['round']} | {r['catalog']} | {r['sources']} | {r['failure']} "
            f"| {_share(r['detected'], r['failure'])} | {_share(r['right_section'], r['failure'])} "
            f"| {r['healthy']} | {r['flagged']} |"
        )
        failure, detected, section = failure + r["failure"], detected + r["detected"], section + r["right_section"]
        healthy, flagged = healthy + r["healthy"], flagged + r["flagged"]
    lines.append(
        f"| **all** | | {sum(r['sources'] for r in data['rounds'])} | {failure} | {detected / failure:.1%} "
        f"| {section / failure:.1%} | {healthy} | {flagged / healthy:.1%} |"
    )
    return "\n".join([data["description"], "", *lines])


def run() -> str:
    """Held-out scores (the headline), the development rounds' fresh sources, in-sample scores
    beside them, then throughput."""
    return "\n\n".join(
        [
            "### Held out: sources the catalog was not written from (leave-one-source-out)",
            corpus_scores(held_out(), leave_source_out=True),
            "### Fresh sources: each development round's new lines before the round changed the catalog",
            fresh_sources(),
            "### In sample: the corpus the catalog was written against (memory, not generalization)",
            corpus_scores(in_sample(), leave_source_out=False),
            "### Throughput",
            throughput(),
        ]
    )
