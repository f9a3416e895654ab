"""A runtime-only installation (issue 18, point 1): the wheel `pip install .` builds, installed into a
fresh virtual environment that holds the runtime dependencies' closure and nothing else (no moto,
Werkzeug, cryptography, pytest): every command's `--help` works, `triage` classifies a log and its
pointers name runbooks that exist in the installation, `diagnose` fails in one line against an
endpoint that refuses, and `demo` names the extra to install.

Offline by construction: the wheel is built with this environment's setuptools (no build
isolation, no index), and the dependencies are this environment's own installed distributions,
linked into the new one (the closure of `hyperpod-nccl-monitor`'s requirements, markers
evaluated, extras left out).
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from hyperpod_nccl.cli.extras import DEMO_EXTRA, DISTRIBUTION, SIMULATION_MODULES
from hyperpod_nccl.references import INSTALLED_REFERENCES

REPO = Path(__file__).resolve().parents[2]
# What the wheel is built from: the package sources, the runbooks and the project metadata.
BUILD_INPUTS = ("pyproject.toml", "README.md", "functions", "references")
COMMANDS = ("demo", "diagnose", "incidents", "support-bundle", "triage", "bench", "status", "history", "sweep-now")
WATCHDOG = (
    "[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, "
    "Timeout(ms)=600000) ran for 600061 milliseconds before timing out.\n"
)


def _runtime_closure() -> list[metadata.Distribution]:
    """The installed distributions `pip install hyperpod-nccl-monitor` would bring, without extras."""
    seen: dict[str, metadata.Distribution] = {}
    pending = [Requirement(text) for text in metadata.requires(DISTRIBUTION) or []]
    while pending:
        requirement = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = requirement.name.lower().replace("_", "-")
        if name in seen:
            continue
        dist = metadata.distribution(requirement.name)
        seen[name] = dist
        pending.extend(Requirement(text) for text in dist.requires or [])
    return list(seen.values())


def _site_packages(root: Path) -> Path:
    return root / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def _link_distribution(dist: metadata.Distribution, site: Path) -> None:
    """Make `dist` importable in `site`: a link per top-level entry of its installed files."""
    tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
    source = Path(str(dist.locate_file("")))
    for top in tops:
        target = site / top
        if not target.exists() and (source / top).exists():
            target.symlink_to(source / top)


@pytest.fixture(scope="module")
def runtime_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with the wheel of this tree and the runtime closure only."""
    work = tmp_path_factory.mktemp("runtime-install")
    sources = work / "src"
    sources.mkdir()
    for name in BUILD_INPUTS:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, sources / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(path, sources / name)
    wheels = work / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q"]
    built = subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(wheels), str(sources)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    root = work / "venv"
    venv.create(root, with_pip=False, symlinks=True)
    site = _site_packages(root)
    for dist in _runtime_closure():
        _link_distribution(dist, site)
    [wheel] = wheels.glob("*.whl")
    installed = subprocess.run(
        [*pip, "--python", str(root / "bin" / "python"), "install", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr[-4000:]
    return root


def _run(root: Path, *args: str, stdin: str = "", **extra_env: str) -> subprocess.CompletedProcess[str]:
    """Run the installed `hyperpod-nccl` with a clean environment (no PYTHONPATH, fake credentials)."""
    env = {
        **extra_env,
        "PATH": f"{root / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(root),
        "LANG": "C.UTF-8",
        "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "not-a-secret",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    return subprocess.run(
        [str(root / "bin" / "hyperpod-nccl"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=120,
    )


def test_the_environment_holds_the_runtime_closure_only(runtime_env: Path) -> None:
    # The test is only worth something if the simulation's and the tests' modules are absent.
    for module in [*SIMULATION_MODULES, "pytest", "hypothesis", "aws_cdk"]:
        probe = subprocess.run(
            [str(runtime_env / "bin" / "python"), "-c", f"import {module}"], capture_output=True, text=True
        )
        assert probe.returncode != 0, f"{module} is importable in the runtime-only environment"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_prints_its_help(runtime_env: Path, command: str) -> None:
    run = _run(runtime_env, command, "--help")
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert f"hyperpod-nccl {command}" in run.stdout


def test_triage_points_at_runbooks_the_installation_has(runtime_env: Path) -> None:
    run = _run(runtime_env, "triage", stdin=WATCHDOG)
    assert run.returncode == 0, run.stderr
    assert "→ references/debugging-guide.md § 22" in run.stdout
    installed = runtime_env / INSTALLED_REFERENCES
    assert (installed / "debugging-guide.md").is_file(), "pip install must put the runbooks under share/"
    assert f"Runbooks (→ references/…): {installed}" in run.stdout


def test_demo_names_the_extra_it_needs(runtime_env: Path) -> None:
    run = _run(runtime_env, "demo")
    assert run.returncode == 1
    assert run.stdout == ""
    [line] = run.stderr.splitlines()
    assert f"pip install '{DISTRIBUTION}[{DEMO_EXTRA}]'" in line


def test_diagnose_against_an_endpoint_that_refuses_fails_in_one_line(runtime_env: Path) -> None:
    # Port 9 (discard) has no listener here: every call is refused at once.
    run = _run(
        runtime_env, "diagnose", "--cluster", "c1", "--region", "us-west-2", AWS_ENDPOINT_URL="http://127.0.0.1:9"
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
