"""The classifier's two corpora of real log lines, and what a *source* of one is.

- `tests/data/log_corpus/corpus.json` (**in-sample**): the excerpts the catalog was written against.
  `tests/unit/test_classifier.py` asserts every one of them (a regression suite); a score on them
  measures memory, not the classifier.
- `tests/data/log_corpus/heldout.json` (**held out**): excerpts from sources the catalog was never
  written from, collected without looking at the catalog. They are measured (`make bench`), never
  asserted excerpt by excerpt: asserting them would make the next session tune the catalog to them.

A source is one GitHub issue or pull-request thread, one repository's file, or one documentation
page (`source_key`). The cross-validation is grouped by it: an excerpt is scored by the catalog
less every signature whose `written_from` cites the excerpt's source and every class cue whose
`vocabulary_from` cites it (`catalog_without`), so a signature written from a held-out line never
scores that line's thread, nor a cue the file its words were read from.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from hyperpod_nccl.classifier import Catalog, load_catalog

CORPUS_DIR = Path(__file__).resolve().parent / "data" / "log_corpus"
IN_SAMPLE_FILE = CORPUS_DIR / "corpus.json"
HELD_OUT_FILE = CORPUS_DIR / "heldout.json"

_GITHUB_THREAD = re.compile(r"^https://github\.com/([^/]+/[^/]+)/(?:issues|pull|discussions)/(\d+)")
_GITHUB_FILE = re.compile(r"^https://github\.com/([^/]+/[^/]+)/blob/[^/]+/([^#?]+)")

Excerpt = dict[str, Any]


def source_key(url: str) -> str:
    """The source an excerpt's (or a signature's `written_from`) URL belongs to: `owner/repo#N` for
    an issue, pull request or discussion thread (they share one number space on GitHub),
    `owner/repo:path` for a file at any commit, else the page's URL without its fragment."""
    thread = _GITHUB_THREAD.match(url)
    if thread:
        return f"{thread.group(1).lower()}#{thread.group(2)}"
    file = _GITHUB_FILE.match(url)
    if file:
        return f"{file.group(1).lower()}:{file.group(2)}"
    return url.split("#", 1)[0].rstrip("/")


@cache
def _load(path: Path) -> tuple[Excerpt, ...]:
    return tuple(json.loads(path.read_text(encoding="utf-8"))["excerpts"])


def in_sample() -> tuple[Excerpt, ...]:
    """The excerpts the catalog was written against."""
    return _load(IN_SAMPLE_FILE)


def held_out() -> tuple[Excerpt, ...]:
    """The excerpts from sources the catalog was not written from when they were collected."""
    return _load(HELD_OUT_FILE)


def catalog_without(source: str, catalog: Catalog | None = None) -> Catalog:
    """`catalog` (default: the shipped one) less the signatures written from `source`, and less the
    class cues whose vocabulary was taken from it.

    A cue cites only runbook sections and pinned emitter source files (`Catalog` rejects a thread or
    a page), but such a file can be a corpus source too (an excerpt quoted from a repository file).
    A cue records its sources per class, not per word, so the whole cue of a class that cites
    `source` is dropped: no word of it may score an excerpt of that source."""
    full = catalog or load_catalog()
    kept = [s for s in full.signatures if source not in {source_key(u) for u in s.written_from}]
    update: dict[str, Any] = {}
    if len(kept) != len(full.signatures):
        update["signatures"] = kept
    if full.cues is not None:
        cues = [c for c in full.cues.classes if source not in {source_key(u) for u in c.vocabulary_from}]
        if len(cues) != len(full.cues.classes):
            update["cues"] = full.cues.model_copy(update={"classes": cues}) if cues else None
    return full.model_copy(update=update) if update else full
