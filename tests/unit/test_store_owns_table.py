"""Only the store spells the table (CONTRIBUTING.md rule 5), read from the source: outside
`monitor/store.py`, no module under functions/ or infra/ spells a key attribute (`"pk"`, ...), a
key word of the table (`"LOCK"`, `f"FINDING#{...}"`, ...), a DynamoDB expression argument, or
builds a condition with boto3's `Attr`/`Key`. Callers reach the table through `Store` methods named
by meaning, so an item's shape and the condition that keeps a write idempotent live in one place.

The vocabulary is read from store.py (its key-word constants) and the key attribute names from
`TABLE_SCHEMA`, whose one home is settings.py (store.py imports them from there)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hyperpod_nccl
from hyperpod_nccl.monitor import settings
from tests.unit.source_ast import docstring_ids

ROOT = Path(hyperpod_nccl.__file__).resolve().parents[2]
STORE = ROOT / "functions" / "hyperpod_nccl" / "monitor" / "store.py"
SETTINGS = Path(settings.__file__).resolve()
SOURCES = sorted(
    path
    for top in ("functions", "infra")
    for path in (ROOT / top).rglob("*.py")
    if "__pycache__" not in path.parts and path.resolve() != STORE
)
# The keyword arguments (and request keys) of DynamoDB that carry an expression.
EXPRESSION_ARGUMENTS = frozenset(
    {"UpdateExpression", "ConditionExpression", "KeyConditionExpression", "FilterExpression"}
)
# boto3's condition builders: a condition made with them needs no expression string.
CONDITIONS_MODULE = "boto3.dynamodb.conditions"
# A key word of the table as store.py spells it: `LOCK`, `PERMISSION_GAPS`, a prefix `FINDING#`.
_KEY_WORD = re.compile(r"[A-Z][A-Z0-9_]*#?")


def _key_names() -> frozenset[str]:
    """The table's key attribute names, from its schema (primary and every index)."""
    schema: Any = settings.TABLE_SCHEMA
    tables = [schema, *schema["global_secondary_indexes"]]
    return frozenset(str(table[key]["name"]) for table in tables for key in ("partition_key", "sort_key"))


def _constants(tree: ast.Module) -> Iterator[tuple[str, ast.Constant]]:
    """Module-level `NAME = "text"` assignments."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            yield node.targets[0].id, node.value


def _vocabulary() -> frozenset[str]:
    """The key words of the table: store.py's upper-case constants whose value is one."""
    tree = ast.parse(STORE.read_text(encoding="utf-8"))
    return frozenset(
        value.value for name, value in _constants(tree) if name.isupper() and _KEY_WORD.fullmatch(value.value)
    )


VOCABULARY = _vocabulary()
KEY_NAMES = _key_names()


def _spells_key_word(text: str) -> bool:
    """`text` is a key word of the table or starts with one (`"LOCK"`, `"TRIGGER#e-1"`)."""
    return any(
        text.startswith(word) if word.endswith("#") else text == word or text.startswith(f"{word}#")
        for word in VOCABULARY
    )


# The names settings.py gives the key attributes (PARTITION_KEY, ...): only the store imports them.
KEY_CONSTANTS = frozenset(
    name for name, value in vars(settings).items() if name.isupper() and isinstance(value, str) and value in KEY_NAMES
)


def _imports_conditions(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name.startswith(CONDITIONS_MODULE) for alias in node.names)
    module = node.module or ""
    return module.startswith(CONDITIONS_MODULE) or any(f"{module}.{a.name}" == CONDITIONS_MODULE for a in node.names)


def violations(source: str, *, schema_home: bool = False) -> list[str]:
    """What `source` spells of the table: `line: what` for each string literal (f-string parts
    included, docstrings left out) naming a key attribute or a key word, each expression argument
    or request key, and each import of boto3's condition builders or of the key-name constants.
    `schema_home`: the module that defines the key names (settings.py), once each."""
    tree = ast.parse(source)
    allowed = {id(value) for name, value in _constants(tree) if schema_home and name in KEY_CONSTANTS}
    skipped = docstring_ids(tree) | allowed
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            if node.value in KEY_NAMES:
                found.append(f"{node.lineno}: key attribute {node.value!r}")
            elif _spells_key_word(node.value):
                found.append(f"{node.lineno}: key word {node.value!r}")
            elif node.value in EXPRESSION_ARGUMENTS:
                found.append(f"{node.lineno}: request key {node.value!r}")
        elif isinstance(node, ast.keyword) and node.arg in EXPRESSION_ARGUMENTS:
            found.append(f"{node.lineno}: {node.arg}=")
        elif isinstance(node, ast.Import | ast.ImportFrom) and _imports_conditions(node):
            found.append(f"{node.lineno}: import of {CONDITIONS_MODULE}")
        elif isinstance(node, ast.ImportFrom) and not schema_home:
            found.extend(f"{node.lineno}: import {a.name}" for a in node.names if a.name in KEY_CONSTANTS)
    return sorted(found, key=lambda line: int(line.split(":", 1)[0]))


def test_the_vocabulary_is_read_from_the_store() -> None:
    # What the store spells its keys with; empty, the walk below would pass on anything.
    assert {"LOCK", "FINDING#", "SWEEP#", "NOTIFIED"} <= VOCABULARY
    assert {"pk", "sk"} <= KEY_NAMES


def test_the_store_spells_each_key_word_as_a_named_constant() -> None:
    # A key word spelled inline in store.py would be missing from the vocabulary the walk uses.
    tree = ast.parse(STORE.read_text(encoding="utf-8"))
    named = {id(value) for _, value in _constants(tree)}
    inline = [
        f"store.py:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in named | docstring_ids(tree)
        and re.match(r"[A-Z][A-Z0-9_]*#", node.value)
    ]
    assert not inline, f"name these key words as constants of store.py: {inline}"


def test_no_module_but_the_store_spells_the_table() -> None:
    assert len(SOURCES) > 100  # functions/ and infra/ were found
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in SOURCES
        for line in violations(path.read_text(encoding="utf-8"), schema_home=path.resolve() == SETTINGS)
    ]
    assert not found, f"only monitor/store.py spells the table; add a Store method instead: {found}"


@pytest.mark.parametrize(
    "source",
    [
        'store.get(ck, "LOCK")',
        'store.get(ck, f"TRIGGER#{trigger_id}")',
        'sk = "NOTIFIED#INCIDENT#i-1"',
        'item = {"pk": pk, "sk": sk}',
        'store.update_if(pk, sk, UpdateExpression="SET a = :a")',
        'store.put_if(item, ConditionExpression="attribute_not_exists(pk)")',
        'kwargs["KeyConditionExpression"] = condition',
        "from boto3.dynamodb.conditions import Attr",
        "from boto3.dynamodb import conditions",
        "from hyperpod_nccl.monitor.settings import PARTITION_KEY",
        'PARTITION_KEY = "pk"',  # the key names' home is settings.py
    ],
)
def test_each_way_of_spelling_the_table_is_caught(source: str) -> None:
    assert violations(source)


@pytest.mark.parametrize(
    "source",
    [
        '"""Keys: `CLUSTER#C` / `LOCK`."""',  # a docstring may describe them
        'status = "GPU has fallen off the bus"',  # a word of the vocabulary inside other text
        'cells = ("PIX", "NODE", "SYS")',  # `NODE#` is a prefix, NODE alone is not a key
        "store.take_lock(ref, now=now, lease_expires_at=lease)",
    ],
)
def test_what_only_looks_like_the_table_is_not(source: str) -> None:
    assert violations(source) == []
