"""What the Lambda code asset holds: what the deployed handlers import, found from the source, so
that no exclusion list has to be kept right by hand.

- Modules: the import closure of the handler module of every function of `LAMBDAS`, as the standard
  `modulefinder` reads it from the byte code: every import statement, at module level or inside a
  function (imports under TYPE_CHECKING count too), and the packages above each module. A package
  whose `__init__` imports its own modules by walking `__path__` (`checks` registers every check
  that way) brings all of them.
- Data: the files that are not Python in the directory of every shipped package, and in its
  folders that are not packages (the classifier's catalog, the probe scripts, the state machine
  definition).

So a module only the CLI, the benchmarks or the simulation import (`cli/`, `hyperpod_nccl_sim`) is not
shipped. tests/infra/test_config_and_packaging.py proves the closure from the asset itself.
"""

from __future__ import annotations

import ast
import modulefinder
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from hyperpod_nccl.monitor.settings import LAMBDAS
from infra.constants import FUNCTIONS_DIR

_DISCOVERY_CALLS = {"walk_packages", "iter_modules"}
_BYTE_CODE = "__pycache__"


def handler_modules() -> list[str]:
    """The module of every deployed handler, e.g. "hyperpod_nccl.handlers.discover"."""
    return sorted(function.handler.rsplit(".", 1)[0] for function in LAMBDAS.values())


def _discovers_its_modules(init: Path) -> bool:
    """Whether a package's `__init__` imports its own modules (`pkgutil.walk_packages(__path__)`)."""
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _DISCOVERY_CALLS
        and bool(node.args)
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == "__path__"
        for node in ast.walk(ast.parse(init.read_text(encoding="utf-8")))
    )


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources(directory: Path) -> Iterator[Path]:
    return (p for p in sorted(directory.rglob("*.py")) if _BYTE_CODE not in p.parts)


def _files(finder: modulefinder.ModuleFinder) -> list[Path]:
    """The source file of each module found (built-in modules have none)."""
    files = (getattr(module, "__file__", None) for module in finder.modules.values())
    return [Path(file) for file in files if file]


@cache
def shipped_modules(root: Path = FUNCTIONS_DIR) -> tuple[Path, ...]:
    """The source file of every module under `root` that a deployed handler imports, transitively."""
    finder = modulefinder.ModuleFinder(path=[str(root)])
    pending = handler_modules()
    while pending:
        for name in pending:
            finder.import_hook(name)
        found = _files(finder)
        discovered = {
            _module_name(source, root)
            for init in found
            if init.name == "__init__.py" and init.is_relative_to(root) and _discovers_its_modules(init)
            for source in _sources(init.parent)
        }
        pending = sorted(discovered - finder.modules.keys())
    # Only what lies under `root`: the standard library and the layer's packages are not searched.
    return tuple(sorted(_files(finder)))


def _data_files(package: Path) -> Iterator[Path]:
    for path in sorted(package.iterdir()):
        if path.is_dir() and path.name != _BYTE_CODE and not (path / "__init__.py").is_file():
            yield from (p for p in sorted(path.rglob("*")) if p.is_file() and _BYTE_CODE not in p.parts)
        elif path.is_file() and path.suffix not in {".py", ".pyc"}:
            yield path


def shipped_files(root: Path = FUNCTIONS_DIR) -> list[Path]:
    """Every file of `root` the code asset holds: the shipped modules and their packages' data."""
    modules = shipped_modules(root)
    data = {path for module in modules if module.name == "__init__.py" for path in _data_files(module.parent)}
    return sorted({*modules, *data})
