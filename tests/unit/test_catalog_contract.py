"""Contract tests of the check catalog: every check has complete metadata, a reference that
resolves to a heading in references/, and a test that names it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperpod_nccl import references
from hyperpod_nccl.checks import discover

TESTS_DIR = Path(__file__).resolve().parents[1]
CHECKS = discover()


def test_catalog_is_not_empty() -> None:
    assert len(CHECKS) >= 8


@pytest.mark.parametrize("name, pointer", sorted(references.all_pointers().items()))
def test_every_named_pointer_resolves_to_a_heading(name: str, pointer: references.Reference) -> None:
    assert references.section_heading(pointer), f"{name} -> {pointer.pointer} has no heading in references/"


@pytest.mark.parametrize("check_id", sorted(CHECKS))
def test_check_metadata_is_complete(check_id: str) -> None:
    meta = CHECKS[check_id].meta
    assert meta.id == check_id and "." in check_id
    assert meta.title and len(meta.title) <= 100
    assert meta.orchestrators and meta.orchestrators <= {"eks", "slurm"}
    assert references.section_heading(meta.reference), f"{check_id}: {meta.reference.pointer} does not resolve"


@pytest.mark.parametrize("check_id", sorted(CHECKS))
def test_every_check_is_named_by_a_test(check_id: str) -> None:
    sources = [p.read_text(encoding="utf-8") for p in TESTS_DIR.rglob("test_*.py") if p.name != Path(__file__).name]
    assert any(f'"{check_id}"' in text for text in sources), f"no test mentions {check_id!r}"


def test_reference_urls_use_github_anchors() -> None:
    url = references.OPS_REMEDIATIONS.url("https://example.com/references")
    assert url.startswith("https://example.com/references/operations.md#8-")
