"""One home per fact (issue 13, CONTRIBUTING.md rule 7), read from the source: a published constant
is defined in one module, instance-type facts live in `instance_types.py`, and the NCCL-relevant
environment variables are one answer, `nccl_env.py`'s. (Runbook pointers and check ids:
`test_catalog_contract.py`; probe sections: `test_probe_sections.py`.)"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

import hyperpod_nccl
import hyperpod_nccl_sim
from hyperpod_nccl import instance_types, nccl_env
from tests.unit.source_ast import parsed, string_literals

PRODUCT = Path(hyperpod_nccl.__file__).parent
SIMULATION = Path(hyperpod_nccl_sim.__file__).parent
INFRA = PRODUCT.parents[1] / "infra"
# Names a literal value may call and still be a literal (`frozenset({...})`).
_LITERAL_CALLS = {"frozenset", "set", "tuple"}
# HyperPod instance types or families as text: `ml.p5.48xlarge`, or `ml\.(p4d|...` in a pattern.
_INSTANCE_TYPE_TEXT = re.compile(r"ml\\?\.\(?(?:p|g|trn|inf)\d")


def _is_literal(value: ast.expr) -> bool:
    """A value spelled out in place (numbers, strings, their arithmetic and collections), not one
    taken from another name."""
    for node in ast.walk(value):
        if isinstance(node, ast.Attribute) or (isinstance(node, ast.Name) and node.id not in _LITERAL_CALLS):
            return False
    return True


def _public_constants(tree: ast.Module) -> Iterator[tuple[str, ast.expr]]:
    """Module-level `NAME = <literal>` assignments of public upper-case names."""
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = [t for t in node.targets if isinstance(t, ast.Name)], node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if target.id.isupper() and not target.id.startswith("_") and _is_literal(value):
                yield target.id, value


def test_no_public_constant_is_spelled_in_two_modules() -> None:
    # The same name with the same value in two modules is one fact with two homes (the emulation's
    # FilterLogEvents limits beside the product's, say): one of them must import the other.
    homes: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path, tree in parsed(PRODUCT, SIMULATION, INFRA):
        for name, value in _public_constants(tree):
            homes[(name, ast.unparse(value))].append(str(path.relative_to(PRODUCT.parents[1])))
    twice = {f"{name} = {value}": paths for (name, value), paths in homes.items() if len(paths) > 1}
    assert not twice, f"constants spelled in more than one module: {twice}"


def test_instance_type_facts_are_spelled_only_in_instance_types() -> None:
    # The CLI is left out: its help describes the simulated clusters, whose instance types are the
    # simulation's (which building the parser may not import).
    home = Path(instance_types.__file__)
    spelled = [
        f"{path.relative_to(PRODUCT)}:{node.lineno}: {node.value!r}"
        for path, tree in parsed(PRODUCT)
        if path != home and not path.is_relative_to(PRODUCT / "cli")
        for node in string_literals(tree)
        if _INSTANCE_TYPE_TEXT.search(node.value)
    ]
    assert not spelled, "instance types spelled outside instance_types.py:\n" + "\n".join(spelled)


@pytest.mark.parametrize(
    "instance_type, supported",
    [
        ("ml.p4d.24xlarge", True),
        ("ml.p4de.24xlarge", True),
        ("ml.p5.48xlarge", True),
        ("ml.p5en.48xlarge", True),
        ("ml.p6-b200.48xlarge", True),
        ("ml.p6e-gb200.36xlarge", True),
        ("ml.g5.48xlarge", False),
        ("ml.g6e.48xlarge", False),
        ("ml.trn1.32xlarge", False),
        ("ml.p3dn.24xlarge", False),
    ],
)
def test_gpudirect_rdma_families(instance_type: str, supported: bool) -> None:
    assert instance_types.supports_gpudirect_rdma(instance_type) is supported


def test_the_nccl_relevant_variables_are_one_answer() -> None:
    # A collection naming two or more of the prefixes is a second answer to "which variables bear
    # on NCCL" (the env audit and the support bundle each had one).
    prefixes = set(nccl_env.NCCL_ENV_PREFIXES)
    home = Path(nccl_env.__file__)
    answers = [
        f"{path.relative_to(PRODUCT)}:{node.lineno}: {ast.unparse(node)}"
        for path, tree in parsed(PRODUCT)
        if path != home
        for node in ast.walk(tree)
        if isinstance(node, ast.Tuple | ast.List | ast.Set)
        and len({e.value for e in node.elts if isinstance(e, ast.Constant)} & prefixes) >= 2
    ]
    assert not answers, "NCCL-relevant variables listed outside nccl_env.py:\n" + "\n".join(answers)
