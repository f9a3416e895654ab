"""Byte code for the Lambda runtime's Python, compiled into the layer and into the code asset.

Lambda unpacks a function's code into /var/task and its layers under /opt, both read-only: a module
shipped without byte code is compiled from source at every cold start (Python cannot write its
`__pycache__` there), which made each handler's cold import several times slower than it needs to be.
So the packaging compiles every `.py` file it ships:

- for the runtime's Python (`python_version`, e.g. "3.14"): `__pycache__/<module>.cpython-314.pyc`,
  with that release's magic number; any other Python ignores the file (its cache tag differs);
- as unchecked-hash pycs (PEP 552): the header holds a hash of the source instead of its mtime, and
  the import system loads the file without reading the source again. Neither the zip's file times
  (the CDK normalises them) nor the read-only directory matter; the asset is laid out afresh from the
  source at every synth (the layer whenever its inputs change), so its byte code is never stale;
- with the path Lambda runs the file from (`TASK_ROOT`, `LAYER_ROOT`) as its name in tracebacks, so
  the bytes do not depend on the directory the build used: the same sources give the same files.

The compiler must be the runtime's minor version of CPython (the byte code format changes with each).
When this machine's Python is that version, it compiles; otherwise the compiler is that CPython
release built for WebAssembly: Pyodide, from the npm registry, run by Node.js (which the CDK needs
anyway), one pinned release per runtime Python (`PYODIDE_RELEASES`), installed on first use into
`layers/compiler/`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Where Lambda puts the function's code, and a layer's `python/` directory (on sys.path).
TASK_ROOT = "/var/task"
LAYER_ROOT = "/opt/python"
# PEP 552's name for byte code that is trusted without comparing it to its source.
INVALIDATION_MODE = "unchecked-hash"
# The Pyodide release whose CPython compiles for each Lambda Python (Pyodide's major version spells
# the CPython release: 314 is 3.14). Bump it with infra.constants.LAMBDA_PYTHON_VERSION.
PYODIDE_RELEASES = {"3.14": "314.0.7"}
COMPILER_DIR = Path(__file__).resolve().parent / "compiler"
_PYODIDE_MOUNT = "/compile"

# Runs inside the compiling interpreter (this machine's or Pyodide's) after `JOB = "<json>"`:
# compiles every .py file under JOB["root"] in place and leaves a JSON summary in RESULT.
_COMPILE = """
import json, os, py_compile, sys
job = json.loads(JOB)
compiled, failed = 0, []
for directory, folders, files in os.walk(job["root"]):
    folders[:] = sorted(f for f in folders if f != "__pycache__")
    for name in sorted(f for f in files if f.endswith(".py")):
        source = os.path.join(directory, name)
        relative = os.path.relpath(source, job["root"]).replace(os.sep, "/")
        try:
            py_compile.compile(
                source,
                dfile=job["runtime_root"] + "/" + relative,
                doraise=True,
                invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
            )
            compiled += 1
        except py_compile.PyCompileError as error:
            failed.append(relative + ": " + error.exc_type_name)
RESULT = json.dumps({"python": "%d.%d" % sys.version_info[:2], "compiled": compiled, "failed": failed})
"""

# Node.js side of the Pyodide compiler: mount the host directory, run the script, print RESULT.
_PYODIDE_DRIVER = """
import { pathToFileURL } from "node:url";
const [pyodideModule, hostRoot, mount, script] = process.argv.slice(1);
const { loadPyodide } = await import(pathToFileURL(pyodideModule).href);
const pyodide = await loadPyodide({ stdout: (line) => process.stderr.write(line + "\\n") });
pyodide.FS.mkdirTree(mount);
pyodide.FS.mount(pyodide.FS.filesystems.NODEFS, { root: hostRoot }, mount);
pyodide.runPython(script);
process.stdout.write(pyodide.globals.get("RESULT") + "\\n");
"""


def cache_tag(python_version: str) -> str:
    """The `__pycache__` tag of CPython `python_version` ("3.14" -> "cpython-314")."""
    return "cpython-" + python_version.replace(".", "")


def bytecode_identity(python_version: str) -> str:
    """What the compiled byte code depends on besides the sources, for the asset hashes."""
    return f"{cache_tag(python_version)} {INVALIDATION_MODE}"


def compile_tree(root: Path, *, python_version: str, runtime_root: str) -> int:
    """Compile every `.py` file under `root` in place for CPython `python_version`, named as if
    `root` were `runtime_root`; return how many files were compiled.

    Raises RuntimeError when a file does not compile, when the compiler fails or is not
    `python_version`, and subprocess.CalledProcessError when npm cannot install it (first use)."""
    host = f"{sys.version_info.major}.{sys.version_info.minor}"
    if python_version == host:
        job = {"root": str(root), "runtime_root": runtime_root}
        command = [sys.executable, "-I", "-c", _script(job) + "\nprint(RESULT)"]
    else:
        job = {"root": _PYODIDE_MOUNT, "runtime_root": runtime_root}
        module = _pyodide(python_version)
        driver = [_tool("node"), "--input-type=module", "-e", _PYODIDE_DRIVER]
        command = [*driver, str(module), str(root), _PYODIDE_MOUNT, _script(job)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"the byte code compiler failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["python"] != python_version:
        raise RuntimeError(f"the byte code compiler is Python {result['python']}, not the runtime's {python_version}")
    if result["failed"]:
        raise RuntimeError(f"{len(result['failed'])} file(s) under {root} do not compile: {result['failed']}")
    return int(result["compiled"])


def _script(job: dict[str, str]) -> str:
    return f"JOB = {json.dumps(job)!r}\n{_COMPILE}"


def _tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} is not on PATH: the Lambda byte code is compiled by Pyodide, run by Node.js")
    return found


def _pyodide(python_version: str) -> Path:
    """`pyodide.mjs` of the pinned release for `python_version`, installed with npm on first use."""
    release = PYODIDE_RELEASES.get(python_version)
    if release is None:
        raise RuntimeError(f"no Pyodide release pinned for Python {python_version}: add one to PYODIDE_RELEASES")
    home = COMPILER_DIR / f"pyodide-{release}"
    module = home / "node_modules" / "pyodide" / "pyodide.mjs"
    if module.is_file():
        return module
    COMPILER_DIR.mkdir(parents=True, exist_ok=True)
    # Installed beside its final place and renamed into it, so that two builds at once never see
    # (or leave) a half-installed compiler.
    staging = Path(tempfile.mkdtemp(prefix=".install-", dir=COMPILER_DIR))
    try:
        subprocess.run(
            [
                _tool("npm"),
                "install",
                "--prefix",
                str(staging),
                "--no-save",
                "--no-package-lock",
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                "--loglevel=error",
                f"pyodide@{release}",
            ],
            check=True,
            stdout=subprocess.DEVNULL,  # its errors (stderr) stay visible
            timeout=600,
        )
        try:
            staging.rename(home)
        except OSError:
            if not module.is_file():  # not another build's install: a real failure
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return module
