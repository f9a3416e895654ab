"""Contract tests of the check catalog: every check has complete metadata, an id prefixed as its
module is named, a reference that resolves to a heading in references/, and a test that names it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hyperpod_nccl import references
from hyperpod_nccl.checks import discover
from tests.unit.source_ast import string_literals

TESTS_DIR = Path(__file__).resolve().parents[1]
CHECKS = discover()
# Every named pointer of references.py, by constant name.
POINTERS = {name: value for name, value in vars(references).items() if isinstance(value, references.Reference)}


def test_catalog_is_not_empty() -> None:
    assert len(CHECKS) >= 8


@pytest.mark.parametrize("name, pointer", sorted(POINTERS.items()))
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
def test_check_id_prefix_is_its_module_prefix(check_id: str) -> None:
    # The id is stored; the module is where a reader looks for it: `cluster_events.py` holds `cluster.*`.
    module = CHECKS[check_id].function.__module__.rsplit(".", 1)[-1]
    assert check_id.split(".", 1)[0] == module.split("_", 1)[0], f"{check_id} is defined in {module}.py"


@pytest.mark.parametrize("check_id", sorted(CHECKS))
def test_every_check_is_named_by_a_test(check_id: str) -> None:
    sources = [p.read_text(encoding="utf-8") for p in TESTS_DIR.rglob("test_*.py") if p.name != Path(__file__).name]
    assert any(f'"{check_id}"' in text for text in sources), f"no test mentions {check_id!r}"


def test_reference_urls_use_github_anchors() -> None:
    url = references.OPS_REMEDIATIONS.url("https://example.com/references")
    assert url.startswith("https://example.com/references/operations.md#8-")


FUNCTIONS_DIR = TESTS_DIR.parent / "functions"
# A runbook pointer as text: a section sign, a path under references/ or a runbook's file name.
_RUNBOOKS = sorted(p.name for p in references.references_dir().glob("*.md") if p.name != "README.md")
_POINTER_TEXT = re.compile("§|references/|" + "|".join(map(re.escape, _RUNBOOKS)))
# A check id as text: `<prefix>.<name>` with a prefix of the catalog (`<prefix>.` alone, or a
# partial name, when it is the argument of `startswith`).
_CHECK_ID_TEXT = re.compile(rf"(?:{'|'.join(sorted({i.split('.', 1)[0] for i in CHECKS}))})\.[a-z0-9_]*")


def _modules() -> dict[Path, ast.Module]:
    """Every Python module of the product and the simulation, parsed."""
    paths = sorted(
        p for package in ("hyperpod_nccl", "hyperpod_nccl_sim") for p in (FUNCTIONS_DIR / package).rglob("*.py")
    )
    return {path: ast.parse(path.read_text(encoding="utf-8")) for path in paths}


def test_runbook_pointers_reach_output_only_through_references_py() -> None:
    # A pointer typed as text is never checked against references/ and misses a renamed section:
    # what is printed (details, fixes, advice) takes `<constant>.pointer` from references.py.
    home = FUNCTIONS_DIR / "hyperpod_nccl" / "references.py"
    spelled = [
        f"{path.relative_to(FUNCTIONS_DIR)}:{node.lineno}: {node.value!r}"
        for path, tree in _modules().items()
        if path != home
        for node in string_literals(tree)
        if _POINTER_TEXT.search(node.value)
    ]
    data = [
        str(path.relative_to(FUNCTIONS_DIR))
        for path in sorted((FUNCTIONS_DIR / "hyperpod_nccl").rglob("*.json"))
        if _POINTER_TEXT.search(path.read_text(encoding="utf-8"))
    ]
    assert not spelled + data, "runbook pointers spelled outside references.py:\n" + "\n".join(spelled + data)


def _startswith_arguments(tree: ast.Module) -> set[int]:
    """The string literals passed to `str.startswith` (alone or in a tuple)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith":
            for argument in node.args:
                found |= {id(n) for n in [argument, *getattr(argument, "elts", [])] if isinstance(n, ast.Constant)}
    return found


def test_check_ids_named_outside_checks_are_in_the_catalog() -> None:
    # Code that singles out checks by id (the incident join, the verdict layer) must follow a
    # renamed or removed check; an id it spells that the catalog lacks silently matches nothing.
    checks_dir = FUNCTIONS_DIR / "hyperpod_nccl" / "checks"
    unknown = []
    for path, tree in _modules().items():
        if path.is_relative_to(checks_dir):
            continue
        prefixes = _startswith_arguments(tree)
        for node in string_literals(tree):
            if not _CHECK_ID_TEXT.fullmatch(node.value):
                continue
            if id(node) in prefixes:
                known = any(check_id.startswith(node.value) for check_id in CHECKS)
            else:
                known = node.value in CHECKS
            if not known:
                unknown.append(f"{path.relative_to(FUNCTIONS_DIR)}:{node.lineno}: {node.value!r}")
    assert not unknown, "check ids the catalog lacks:\n" + "\n".join(unknown)
