"""Signatures written from the emitters' own sources cover what those programs print.

`tests/data/emitter_formats/` holds, per emitter (NCCL, PyTorch, aws-ofi-nccl/libfabric, CUDA and
the NVIDIA driver, the kernel/Kubernetes/Slurm/HyperPod), lines built from the format strings of its
source, each naming the signature written from it, and the benign lines the same program prints.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hyperpod_nccl.classifier import load_catalog, scan_text

FORMATS_DIR = Path(__file__).resolve().parents[1] / "data" / "emitter_formats"
EMITTERS = {path.stem: json.loads(path.read_text(encoding="utf-8")) for path in sorted(FORMATS_DIR.glob("*.json"))}
EXAMPLES = [(name, example) for name, emitter in EMITTERS.items() for example in emitter["examples"]]
HEALTHY = [(name, line) for name, emitter in EMITTERS.items() for line in emitter["healthy"]]
# A file of a public repository, pinned to the commit that was read.
PINNED_FILE = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+$")


def _example_id(case: tuple[str, dict[str, Any]]) -> str:
    name, example = case
    return f"{name}-{example['signature']}"


@pytest.mark.parametrize("case", EXAMPLES, ids=[_example_id(c) for c in EXAMPLES])
def test_every_format_example_is_detected_with_its_signatures_class_and_section(
    case: tuple[str, dict[str, Any]],
) -> None:
    _, example = case
    signature = load_catalog().by_id(example["signature"])
    hits = [h for h in scan_text(example["line"] + "\n").hits if h.cls == signature.cls]
    assert hits, f"{signature.id} misses its own format {example['format']!r}: {example['line']}"
    assert signature.ref in {h.reference for h in hits}, example["line"]


@pytest.mark.parametrize("case", HEALTHY, ids=[f"{name}-{i}" for i, (name, _) in enumerate(HEALTHY)])
def test_what_the_emitters_print_on_a_healthy_run_gives_no_finding(case: tuple[str, str]) -> None:
    _, line = case
    assert [h.id for h in scan_text(line + "\n").hits] == []


def test_a_signature_written_from_an_emitter_cites_the_pinned_source_files() -> None:
    catalog = load_catalog()
    for name, example in EXAMPLES:
        signature = catalog.by_id(example["signature"])
        assert signature.written_from, f"{signature.id} ({name}) cites no source"
        assert example["format"].strip(), f"{signature.id}: an example without its format string"
    for signature in catalog.signatures:
        for url in signature.written_from:
            if url.startswith("https://github.com/"):
                assert PINNED_FILE.match(url), f"{signature.id}: {url} is not pinned to a commit"


def test_every_emitter_file_has_examples_and_healthy_lines() -> None:
    assert set(EMITTERS) == {"nccl", "pytorch", "efa", "cuda", "cluster"}
    for name, emitter in EMITTERS.items():
        assert emitter["emitter"] and emitter["examples"] and emitter["healthy"], name
