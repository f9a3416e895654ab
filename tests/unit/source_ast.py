"""Reading the project's own source as syntax, for the contract tests that guard where a fact may
be spelled (runbook pointers, constants, the table's vocabulary)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path


def parsed(*roots: Path) -> Iterator[tuple[Path, ast.Module]]:
    """Every module under `roots`, in path order, parsed."""
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def docstring_ids(tree: ast.Module) -> set[int]:
    """The ids of the docstring nodes of a module and its classes and functions."""
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def string_literals(tree: ast.Module) -> Iterator[ast.Constant]:
    """The module's string literals, f-string parts included; docstrings are left out (they are for
    developers and never printed)."""
    docstrings = docstring_ids(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node
