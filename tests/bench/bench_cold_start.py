"""Lambda cold start: each handler module's import from the packaged asset, with and without byte code.

Lambda's /var/task and /opt are read-only, so a module shipped without byte code is compiled from
source at every cold start. The packaging now compiles the code asset and the layer
(`layers/bytecode.py`); this measures what that buys. Both trees are laid out by the packaging's
own functions (`lay_out_code_asset`, `layers.build_layer.build`), compiled for this machine's
Python: the deployed asset holds the Lambda runtime's byte code (Python 3.14, compiled by Pyodide),
which this machine cannot run (no CPython 3.14 here, and the layer's pydantic-core is an arm64
build). The "without" trees are the same files less their `__pycache__` folders.

Each figure is the time `import <handler module>` takes in a fresh interpreter (`-I -S -B`: no
site-packages, nothing written), with the asset and the layer first on `sys.path` as in Lambda
and a Lambda-like environment (function name set, so Powertools' Tracer patches the SDK as it does
there). Median of REPEATS runs, the two variants interleaved; target (issue 15): under 1 s. The
import is CPU-bound, so the table compares CPU time (the process's user + system time), which the
other work of a shared machine barely changes; the wall time is shown beside it with the load.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from infra.code_asset import handler_modules
from infra.constants import LAMBDA_PYTHON_VERSION, OFFLINE_REGION, POWERTOOLS_ENVIRONMENT
from infra.constructs.functions import lay_out_code_asset
from layers.build_layer import build as build_layer

TITLE = "Lambda cold start (handler import, with and without byte code)"
REPEATS = 5
TARGET_SECONDS = 1.0
_IMPORT = (
    "import json, sys, time; sys.path[:0] = {paths!r}; wall, cpu = time.perf_counter(), time.process_time(); "
    "import {module}; print(json.dumps([time.perf_counter() - wall, time.process_time() - cpu]))"
)


def _this_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _lay_out(root: Path) -> dict[str, list[str]]:
    """The code asset and the layer compiled for this machine's Python, and the same without byte
    code: the `sys.path` head of each variant."""
    task = root / "with" / "task"
    lay_out_code_asset(task, python_version=_this_python())
    built = build_layer(
        python_version=_this_python(), platform=f"manylinux2014_{platform.machine()}", target=root / "layer-build"
    )
    layer = root / "with" / "layer"
    shutil.copytree(built / "python", layer)
    without = root / "without"
    for tree in (task, layer):
        shutil.copytree(tree, without / tree.name, ignore=shutil.ignore_patterns("__pycache__"))
    return {"with": [str(task), str(layer)], "without": [str(without / "task"), str(without / "layer")]}


def _environment(module: str) -> dict[str, str]:
    """What Lambda sets that the import reads (Powertools enables its Tracer only inside Lambda)."""
    name = module.rsplit(".", 1)[-1]
    keep = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    return {
        **keep,
        **POWERTOOLS_ENVIRONMENT,
        "AWS_LAMBDA_FUNCTION_NAME": f"bench-{name}",
        "AWS_REGION": OFFLINE_REGION,
        "AWS_DEFAULT_REGION": OFFLINE_REGION,
    }


def _import_seconds(module: str, paths: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one cold import."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", _IMPORT.format(paths=paths, module=module)],
        capture_output=True,
        text=True,
        check=True,
        env=_environment(module),
        timeout=120,
    )
    wall, cpu = json.loads(done.stdout.strip().splitlines()[-1])
    return float(wall), float(cpu)


def _megabytes(paths: list[str], *, byte_code: bool) -> float:
    files = (p for root in paths for p in Path(root).rglob("*") if p.is_file())
    return sum(p.stat().st_size for p in files if (p.suffix == ".pyc") == byte_code) / 1e6


def run() -> str:
    """Measure every handler's cold import both ways and report the medians side by side."""
    modules = handler_modules()
    with tempfile.TemporaryDirectory(prefix="cold-start-") as scratch:
        variants = _lay_out(Path(scratch))
        times: dict[tuple[str, str], list[tuple[float, float]]] = {(m, v): [] for m in modules for v in variants}
        for _ in range(REPEATS):
            for module in modules:
                for variant, paths in variants.items():
                    times[module, variant].append(_import_seconds(module, paths))
        load = os.getloadavg()[0]
        sources_mb = _megabytes(variants["with"], byte_code=False)
        byte_code_mb = _megabytes(variants["with"], byte_code=True)

    def median(module: str, variant: str, which: int) -> float:
        return statistics.median(sample[which] for sample in times[module, variant])

    rows = []
    for module in modules:
        without, with_ = median(module, "without", 1), median(module, "with", 1)
        rows.append(
            f"| `{module.rsplit('.', 1)[-1]}` | {without:.2f} | **{with_:.2f}** | {without / with_:.1f}x "
            f"| {'yes' if with_ < TARGET_SECONDS else 'NO'} | {median(module, 'without', 0):.2f} "
            f"| {median(module, 'with', 0):.2f} |"
        )
    return (
        f"Import of each handler module in a fresh `python -I -S -B` (Python {platform.python_version()}, this "
        f"machine), asset and layer first on `sys.path`; median of {REPEATS} runs, seconds. Target: under "
        f"{TARGET_SECONDS:.0f} s with byte code.\n\n"
        f"| handler | CPU without byte code | CPU with byte code | speed-up | < {TARGET_SECONDS:.0f} s "
        "| wall without | wall with |\n"
        "|---|---:|---:|---:|---|---:|---:|\n" + "\n".join(rows) + "\n\n"
        f"Wall time includes waiting for a CPU: the load average was {load:.1f} on {os.cpu_count()} cores. "
        "In Lambda a function's CPU share grows with its memory (one vCPU at 1,769 MB), so a 256 MB function's "
        "cold import takes longer than the CPU time here, with and without byte code alike.\n\n"
        f"Byte code adds {byte_code_mb:.1f} MB to {sources_mb:.1f} MB of code and layer (unzipped; Lambda's "
        "limit is 250 MB). The deployed asset carries the runtime's byte code instead: Python "
        f"{LAMBDA_PYTHON_VERSION}, unchecked-hash pycs compiled by Pyodide at synth (`layers/bytecode.py`); "
        "this machine has no CPython of that version to time it with, and the layer's pydantic-core there "
        "is an arm64 build."
    )
