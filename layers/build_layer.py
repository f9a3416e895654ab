"""Build the monitor's one Lambda layer: the pinned runtime dependencies, installed for Lambda's
platform (Amazon Linux, arm64) by pip on this machine, without Docker.

    python -m layers.build_layer   # -> layers/build/python, reused while the inputs are unchanged

The CDK app calls `build()` from its local bundling, so `make synth` builds (or reuses) the layer.
Every module is compiled for the Lambda runtime's Python (`layers.bytecode`): /opt is read-only in
Lambda, so byte code not shipped would be compiled again at every cold start.

boto3 and botocore are deliberately INCLUDED although the Lambda runtime ships its own copy: the
monitor calls HyperPod operations (ListClusterEvents, DescribeClusterEvent) that only recent
botocore releases know, the runtime's copy lags behind, and a layer's `python/` directory comes
before the runtime's on `sys.path`. Shipping the pinned pair keeps the Lambda on exactly the
versions the tests ran with.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from layers.bytecode import LAYER_ROOT, bytecode_identity, compile_tree

LAYERS_DIR = Path(__file__).resolve().parent
REPO_ROOT = LAYERS_DIR.parent
DEFAULT_REQUIREMENTS = REPO_ROOT / "requirements" / "runtime.txt"
DEFAULT_TARGET = LAYERS_DIR / "build"
STAMP_NAME = ".inputs.sha256"


def inputs_digest(requirements: Path, *, python_version: str, platform: str) -> str:
    """A digest of everything that determines the layer's content (also the CDK asset hash)."""
    digest = hashlib.sha256()
    digest.update(requirements.read_bytes())
    digest.update(f"\0{python_version}\0{platform}\0{bytecode_identity(python_version)}".encode())
    return digest.hexdigest()


def build(
    *,
    python_version: str,
    platform: str,
    requirements: Path = DEFAULT_REQUIREMENTS,
    target: Path = DEFAULT_TARGET,
) -> Path:
    """Install `requirements` into `target/python` for the given Lambda platform, compile them for
    `python_version` and return `target`.

    A stamp file records the inputs' digest, so a second call with the same inputs returns at once.
    Raises subprocess.CalledProcessError when pip fails (for example, PyPI is unreachable).
    """
    digest = inputs_digest(requirements, python_version=python_version, platform=platform)
    stamp = target / STAMP_NAME
    site = target / "python"
    if site.is_dir() and stamp.is_file() and stamp.read_text().strip() == digest:
        return target
    shutil.rmtree(target, ignore_errors=True)
    site.mkdir(parents=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",  # pip's would be this machine's Python's: compiled below for the runtime's
            "--requirement",
            str(requirements),
            "--target",
            str(site),
            "--platform",
            platform,
            "--implementation",
            "cp",
            "--python-version",
            python_version,
            "--only-binary=:all:",
        ],
        check=True,
    )
    for cache in site.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)
    compile_tree(site, python_version=python_version, runtime_root=LAYER_ROOT)
    stamp.write_text(digest + "\n")
    return target


def main(argv: list[str] | None = None) -> int:
    """Command line: build the layer with the same platform the CDK app uses."""
    from infra.constants import LAMBDA_PIP_PLATFORM, LAMBDA_PYTHON_VERSION

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requirements", type=Path, default=DEFAULT_REQUIREMENTS)
    parser.add_argument("--target", type=Path, default=DEFAULT_TARGET)
    args = parser.parse_args(argv)
    target = build(
        python_version=LAMBDA_PYTHON_VERSION,
        platform=LAMBDA_PIP_PLATFORM,
        requirements=args.requirements,
        target=args.target,
    )
    print(target / "python")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
