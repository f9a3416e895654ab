"""The simulation sits outside the product (issue 13): the layering, read from the source.

- `hyperpod_nccl_sim` has no import cycle, counting every import (module level, in a function,
  under TYPE_CHECKING): the emulators import the scenario models, never the reverse.
- The scenario-file models depend on pydantic, the standard library and the product's models only,
  so a scenario file can be read without moto, werkzeug or websockets.
- The product imports the simulation only inside the CLI commands that run it (`demo`, `bench`),
  and building the CLI's parser loads neither the simulation nor its test-only dependencies.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import hyperpod_nccl
import hyperpod_nccl_sim

PRODUCT = Path(hyperpod_nccl.__file__).parent
SIMULATION = Path(hyperpod_nccl_sim.__file__).parent
SIM = hyperpod_nccl_sim.__name__
# The modules that describe a scenario file: its main part and every sidecar section.
SCENARIO_MODELS = {f"{SIM}.scenario", f"{SIM}.node_behaviours"}
# What the scenario models may import besides each other.
MODEL_DEPENDENCIES = ("pydantic", "hyperpod_nccl.models")
# The product modules allowed to import the simulation, each only inside a function.
SIMULATION_COMMANDS = {"hyperpod_nccl.cli.commands.demo", "hyperpod_nccl.cli.commands.bench"}


def _module_name(path: Path, root: Path) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(root: Path) -> dict[str, Path]:
    return {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(imported name, at module level) of every import statement in the file; `from a import b`
    yields both `a` and `a.b`, since `b` may be a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(node) for node in tree.body} | {
        id(inner) for node in tree.body if isinstance(node, ast.If) for inner in node.body
    }
    found: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, id(node) in top_level) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.module, id(node) in top_level))
            found.extend((f"{node.module}.{alias.name}", id(node) in top_level) for alias in node.names)
    return found


def _sim_graph() -> dict[str, set[str]]:
    modules = _modules(SIMULATION)
    return {
        name: {imported for imported, _ in _imports(path) if imported in modules and imported != name}
        for name, path in modules.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of the graph, as a path that starts and ends at the same module, or None."""
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> list[str] | None:
        if name in trail:
            return [*trail[trail.index(name) :], name]
        if name in done:
            return None
        for imported in sorted(graph[name]):
            found = visit(imported, [*trail, name])
            if found:
                return found
        done.add(name)
        return None

    return next((found for name in sorted(graph) if (found := visit(name, [])) is not None), None)


def test_the_cycle_finder_finds_a_cycle() -> None:
    # The check below passes on any graph this cannot see a cycle in: prove it sees one.
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_simulation_has_no_import_cycle() -> None:
    graph = _sim_graph()
    assert graph.keys() >= SCENARIO_MODELS
    assert _cycle(graph) is None


def test_scenario_models_import_only_pydantic_the_standard_library_and_product_models() -> None:
    modules = _modules(SIMULATION)
    for name in sorted(SCENARIO_MODELS):
        for imported, _ in _imports(modules[name]):
            top = imported.split(".", 1)[0]
            if top == SIM:
                assert imported in SCENARIO_MODELS or imported.rsplit(".", 1)[0] in SCENARIO_MODELS, (
                    f"{name} imports {imported}: the scenario models import no emulator"
                )
            elif top == "hyperpod_nccl":
                assert imported.startswith(tuple(f"{d}." for d in MODEL_DEPENDENCIES) + MODEL_DEPENDENCIES), (
                    f"{name} imports {imported}: only the product's models"
                )
            else:
                assert top in sys.stdlib_module_names or top in MODEL_DEPENDENCIES, f"{name} imports {imported}"


def test_the_product_imports_the_simulation_only_inside_the_demo_and_bench_commands() -> None:
    offenders = []
    for name, path in _modules(PRODUCT).items():
        for imported, module_level in _imports(path):
            if imported.split(".", 1)[0] != SIM:
                continue
            if name not in SIMULATION_COMMANDS or module_level:
                offenders.append(f"{name}: {imported}{' (module level)' if module_level else ''}")
    assert not offenders, offenders


def test_building_the_cli_parser_loads_neither_the_simulation_nor_moto_nor_werkzeug() -> None:
    code = (
        "import json, sys\n"
        "from hyperpod_nccl.cli.main import build_parser\n"
        "parser = build_parser()\n"
        "parser.parse_args(['diagnose', '--cluster', 'c'])\n"
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    loaded = set(json.loads(result.stdout.splitlines()[-1]))
    assert "hyperpod_nccl" in loaded
    assert not loaded & {SIM, "moto", "werkzeug"}
