"""The AWS error vocabulary is the package's ground floor (issue 13): `hyperpod_nccl.aws_errors`
imports nothing from the package, and the product has no import cycle at module level, so no
module needs an import-order workaround (as `collectors.node_probes` and `probe.documents` did
while `ssm.client` took the vocabulary from `collectors.aws`)."""

from __future__ import annotations

import sys

from tests.unit.test_simulation_layering import PRODUCT, _cycle, _imports, _modules

GROUND_FLOOR = "hyperpod_nccl.aws_errors"


def _packages_of(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _product_graph() -> dict[str, set[str]]:
    """Module -> the product modules its module-level imports run: each one named and the packages
    it is in (importing `a.b.c` runs `a` and `a.b` first), less its own packages (a package's
    modules import their siblings while the package is being built)."""
    modules = _modules(PRODUCT)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        named = {imported for imported, module_level in _imports(path) if module_level and imported in modules}
        run = named | {package for imported in named for package in _packages_of(imported) if package in modules}
        graph[name] = run - _packages_of(name) - {name}
    return graph


def test_the_aws_error_vocabulary_imports_nothing_from_the_package() -> None:
    imported = [name for name, _ in _imports(_modules(PRODUCT)[GROUND_FLOOR])]
    assert imported, "the vocabulary reads botocore's exceptions"
    for name in imported:
        top = name.split(".", 1)[0]
        assert top in sys.stdlib_module_names or top == "botocore", f"{GROUND_FLOOR} imports {name}"


def test_the_graph_sees_the_package_an_import_runs() -> None:
    # The cycle ssm.client once closed went through such an edge: the handlers import only
    # `collectors.aws`, yet that runs collectors/__init__.py (which imports every collector).
    graph = _product_graph()
    assert "hyperpod_nccl.collectors" in graph["hyperpod_nccl.handlers"]
    assert "hyperpod_nccl.collectors" not in graph["hyperpod_nccl.collectors.logs"]  # its own package


def test_the_product_has_no_import_cycle_at_module_level() -> None:
    assert _cycle(_product_graph()) is None
