"""Deployment configuration (cdk.json / `-c`) and the Lambda packaging, without synthesizing."""

from __future__ import annotations

import _imp
import ast
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from hyperpod_nccl.monitor.settings import FUNCTION_ENVIRONMENT, MonitorSettings
from infra.app import NO_ALERT_DESTINATION, _check_context_keys, _check_deployable
from infra.code_asset import shipped_modules
from infra.config import MAX_MAP_CONCURRENCY, StageConfig
from infra.constants import (
    CDK_JSON,
    FUNCTIONS_DIR,
    LAMBDA_PIP_PLATFORM,
    LAMBDA_PYTHON_VERSION,
    PLACEHOLDER_CLUSTER,
    REFERENCES_DIR,
)
from infra.constructs.functions import PackageBundling, lay_out_code_asset, package_digest
from layers.build_layer import STAMP_NAME, build, inputs_digest
from layers.bytecode import cache_tag, compile_tree

pytestmark = pytest.mark.infra

# CPython's magic number of each Lambda Python (`MAGIC_NUMBER` in the release's
# Lib/importlib/_bootstrap_external.py): what the runtime loads, whatever Python runs these tests.
RUNTIME_MAGIC = {"3.14": 3627}
# PEP 552 flags word: bit 0 hash-based, bit 1 check the source. Unchecked: loaded without the source.
UNCHECKED_HASH_FLAGS = 0b01


def _config(**context: Any) -> StageConfig:
    return StageConfig.from_context(context.get)


def test_the_shipped_cdk_json_is_a_valid_configuration() -> None:
    document = json.loads(CDK_JSON.read_text())
    assert document["app"] == "python -m infra.app"
    context = document["context"]
    _check_context_keys(context)
    config = _config(**context)
    # Every configuration value is spelled out in cdk.json (account and region normally come from
    # the CDK CLI's credentials), so each has a working example.
    assert set(context) == set(StageConfig.context_keys()) - {"account", "region"}
    assert config.clusters and config.node_coverage == "all"


def test_the_shipped_placeholder_cluster_is_refused_and_a_silent_monitor_is_warned_about(capsys) -> None:  # type: ignore[no-untyped-def]
    context = json.loads(CDK_JSON.read_text())["context"]
    assert [c["name"] for c in context["clusters"]] == [PLACEHOLDER_CLUSTER]
    with pytest.raises(ValueError, match="placeholder cluster 'my-hyperpod-cluster'"):
        _check_deployable(_config(**context))
    real = {**context, "clusters": [{"name": "ml-cluster", "region": "us-west-2"}]}
    _check_deployable(_config(**real))
    assert capsys.readouterr().err == f"warning: {NO_ALERT_DESTINATION}\n"
    _check_deployable(_config(**{**real, "alertEmails": ["oncall@example.com"]}))
    assert capsys.readouterr().err == ""


def test_synth_of_the_shipped_cdk_json_is_one_line_not_a_traceback(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from infra import app

    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    with pytest.raises(SystemExit) as exited:
        app.main()
    assert exited.value.code == 2
    told = capsys.readouterr().err
    assert told.startswith("hyperpod-nccl-monitor: error: cdk.json still watches the placeholder cluster")
    assert told.count("\n") == 1 and "Traceback" not in told


def test_defaults_synthesize_with_no_context_at_all() -> None:
    config = _config()
    assert config.clusters == []
    assert config.sweep_rate_minutes == 30
    assert config.reference_base_url == MonitorSettings().reference_base_url


def test_command_line_context_strings_are_decoded() -> None:
    # `cdk deploy -c clusters='[...]' -c nodeCoverage=5 -c tableDeletionProtection=false` passes strings.
    config = _config(
        clusters='[{"name": "c1", "region": "eu-west-1"}]',
        nodeCoverage="5",
        sweepRateMinutes="60",
        tableDeletionProtection="false",
        slack='{"workspaceId": "T0ABC", "channelId": "C0ABC"}',
    )
    assert [(c.name, c.region) for c in config.clusters] == [("c1", "eu-west-1")]
    assert config.node_coverage == 5
    assert config.sweep_rate_minutes == 60
    assert config.table_deletion_protection is False
    assert config.slack is not None and config.slack.channel_id == "C0ABC"
    assert config.cluster_regions == ["eu-west-1"]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("alertEmails", ["not-an-address"], "not e-mail addresses"),
        ("sweepRateMinutes", 1, "greater than or equal to 5"),
        ("nodeCoverage", 0, "nodeCoverage"),
        ("mapMaxConcurrency", MAX_MAP_CONCURRENCY + 1, f"less than or equal to {MAX_MAP_CONCURRENCY}"),
        ("logRetentionDays", 31, "logRetentionDays must be one of"),
        ("clusters", [{"name": "a", "region": "us-west-2"}, {"name": "a", "region": "us-west-2"}], "listed twice"),
        ("clusters", [{"name": "a", "region": "uswest"}], "not an AWS region"),
        ("slack", {"workspaceId": "lower", "channelId": "C1"}, "slack.workspaceId"),
        ("referenceBaseUrl", "ftp://example.com", "referenceBaseUrl"),
    ],
)
def test_bad_values_are_rejected_with_the_key_named(key: str, value: Any, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        _config(**{key: value})
    assert message in str(raised.value)


def test_misspelt_context_keys_fail_instead_of_deploying_defaults() -> None:
    with pytest.raises(ValueError, match="unknown context keys \\['sweepRate'\\]"):
        _check_context_keys(
            {
                "sweepRate": 5,
                # the CDK's own keys pass through
                "@aws-cdk/core:newStyleStackSynthesis": True,
                "aws:cdk:bundling-stacks": [],
                "availability-zones:account=123456789012:region=us-west-2": ["us-west-2a"],
                "acknowledged-issue-numbers": [],
            }
        )


@pytest.fixture(scope="module")
def code_asset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Lambda code asset as `make synth` lays it out."""
    out = tmp_path_factory.mktemp("code-asset")
    PackageBundling().try_bundle(str(out), None)
    return out


def _run_in_asset(asset: Path, code: str) -> str:
    """Run Python with the asset first on sys.path, as /var/task is in Lambda (the venv stands in
    for the layer), without the references override of the test environment."""
    environment = {k: v for k, v in os.environ.items() if k != "HYPERPOD_NCCL_REFERENCES_DIR"}
    environment["POWERTOOLS_TRACE_DISABLED"] = "1"
    result = subprocess.run(
        # -B: /var/task is read-only, so nothing is written beside the shipped byte code.
        [sys.executable, "-I", "-B", "-c", f"import sys; sys.path.insert(0, {str(asset)!r}); {code}"],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
        cwd=asset,
        timeout=120,
    )
    return result.stdout


def test_code_asset_ships_the_package_with_references_beside_it(code_asset: Path) -> None:
    shipped = {p.relative_to(code_asset).as_posix() for p in code_asset.rglob("*") if p.is_file()}
    assert "hyperpod_nccl/monitor/sweep.asl.json" in shipped
    assert {f"references/{p.name}" for p in REFERENCES_DIR.glob("*.md")} <= shipped
    # The loopback emulations need moto/werkzeug, which the layer does not ship.
    assert not any(p.startswith("hyperpod_nccl_sim/") for p in shipped)
    # Byte code only for the runtime's Python (the tests' Python writes none: `-B`).
    assert {p.rsplit(".", 2)[-2] for p in shipped if p.endswith(".pyc")} == {cache_tag(LAMBDA_PYTHON_VERSION)}
    # In the Lambda layout, the runbook pointers resolve from the package (no env override).
    probe = (
        "import hyperpod_nccl, hyperpod_nccl.references as r;"
        "print(hyperpod_nccl.__file__); print(r.references_dir()); print(len(r.heading_index()))"
    )
    package_file, references, headings = _run_in_asset(code_asset, probe).split()
    assert package_file.startswith(str(code_asset))
    assert references == str(code_asset / "references")
    assert int(headings) > 10


def test_every_handler_imports_from_the_code_asset_without_test_only_packages(code_asset: Path) -> None:
    handlers = sorted(FUNCTION_ENVIRONMENT)
    code = (
        "import importlib, json;"
        f"modules = [importlib.import_module('hyperpod_nccl.handlers.' + h) for h in {handlers!r}];"
        "assert all(callable(m.handler) for m in modules);"
        "print(json.dumps([m.__file__ for m in modules]));"
        "print(json.dumps(sorted({k.split('.')[0] for k in sys.modules})))"
    )
    files_line, modules_line = _run_in_asset(code_asset, code).splitlines()[-2:]
    assert all(f.startswith(str(code_asset)) for f in json.loads(files_line))
    loaded = set(json.loads(modules_line))
    # Installed in the test venv but not in the layer: a handler importing them would fail in Lambda.
    assert not loaded & {"moto", "werkzeug", "pytest", "hypothesis", "aws_cdk", "kubernetes"}


def _source_modules(root: Path) -> set[str]:
    return {".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__") for p in root.rglob("*.py")}


def test_code_asset_holds_every_module_a_shipped_module_imports(code_asset: Path) -> None:
    # Read apart from infra.code_asset (which follows byte code): every import statement of every
    # shipped file, at module level or in a function, that names a module of the source tree.
    source, shipped = _source_modules(FUNCTIONS_DIR), _source_modules(code_asset)
    assert {f"hyperpod_nccl.handlers.{h}" for h in FUNCTION_ENVIRONMENT} <= shipped
    missing = set()
    for path in code_asset.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            missing |= {f"{path.relative_to(code_asset)}: {name}" for name in names if name in source - shipped}
    assert not missing, sorted(missing)


def test_code_asset_holds_what_the_handlers_load_at_run_time(code_asset: Path) -> None:
    # What no import statement names: the checks registered by discovery, the catalog, the probe
    # scripts. Each is loaded from the asset and compared with the source tree.
    code = (
        "import json; from hyperpod_nccl import checks, probe;"
        "from hyperpod_nccl.classifier.catalog import load_catalog;"
        "print(json.dumps([sorted(checks.discover()), len(load_catalog().signatures),"
        " {r: len(probe.script(r)) for r in probe.SCRIPTS}]))"
    )
    in_asset = json.loads(_run_in_asset(code_asset, code).splitlines()[-1])
    in_source = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    )
    assert in_asset == in_source
    assert len(in_asset[0]) > 50


def test_code_asset_ships_neither_the_cli_nor_the_simulation(code_asset: Path) -> None:
    # Only the CLI and the tests import them; they are in the source tree, not in the asset.
    shipped = {p.relative_to(code_asset).as_posix() for p in code_asset.rglob("*") if p.is_file()}
    for left_out in ("hyperpod_nccl/cli/main.py", "hyperpod_nccl_sim/scenario.py"):
        assert (FUNCTIONS_DIR / left_out).is_file()
        assert left_out not in shipped
    assert not any(p.startswith(("hyperpod_nccl/cli/", "hyperpod_nccl_sim/")) for p in shipped)


def _byte_code_problem(source: Path, build_dir: Path) -> str | None:
    """What keeps the runtime's Python from loading `source` from its byte code, or None."""
    pyc = source.parent / "__pycache__" / f"{source.stem}.{cache_tag(LAMBDA_PYTHON_VERSION)}.pyc"
    if not pyc.is_file():
        return "no byte code for the runtime's Python"
    data = pyc.read_bytes()
    magic = RUNTIME_MAGIC[LAMBDA_PYTHON_VERSION].to_bytes(2, "little") + b"\r\n"
    if data[:4] != magic:
        return f"magic {data[:4].hex()}, not Python {LAMBDA_PYTHON_VERSION}'s {magic.hex()}"
    if int.from_bytes(data[4:8], "little") != UNCHECKED_HASH_FLAGS:
        return f"flags {int.from_bytes(data[4:8], 'little'):#04b}: not unchecked-hash"
    # The runtime keys the hash with its own magic number; a stale pyc would hold another source's.
    if data[8:16] != _imp.source_hash(int.from_bytes(magic, "little"), source.read_bytes()):
        return "compiled from another source"
    if str(build_dir).encode() in data:
        return "names the build directory (the bytes would change with it)"
    return None


def _byte_code_problems(root: Path) -> dict[str, str]:
    sources = [p for p in root.rglob("*.py") if "__pycache__" not in p.parts]
    problems = {str(p.relative_to(root)): _byte_code_problem(p, root) for p in sources}
    return {path: problem for path, problem in problems.items() if problem}


def test_code_asset_ships_the_runtimes_unchecked_byte_code_of_every_module(code_asset: Path) -> None:
    # /var/task is read-only: a module without byte code would be compiled at every cold start.
    modules = [code_asset / p.relative_to(FUNCTIONS_DIR) for p in shipped_modules()]
    assert len(modules) > 50
    assert all(m.is_file() for m in modules)
    assert {m for m in modules if m.is_relative_to(code_asset / "hyperpod_nccl")} == set(modules)
    assert _byte_code_problems(code_asset) == {}
    # Named as Lambda runs it, so tracebacks point at /var/task.
    discover = code_asset / "hyperpod_nccl" / "handlers" / "__pycache__"
    assert (
        b"/var/task/hyperpod_nccl/handlers/discover.py"
        in (discover / f"discover.{cache_tag(LAMBDA_PYTHON_VERSION)}.pyc").read_bytes()
    )


def test_the_same_sources_lay_out_the_same_code_asset(code_asset: Path, tmp_path: Path) -> None:
    # The asset hash is the sources' (package_digest); the byte code laid out from them is
    # byte-identical too, so nothing but a source change redeploys the functions.
    lay_out_code_asset(tmp_path)

    def files(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    again, first = files(tmp_path), files(code_asset)
    assert sorted(again) == sorted(first)
    assert [path for path in again if again[path] != first[path]] == []


def _wheel(directory: Path) -> Path:
    """A two-module pure-Python wheel, so the layer builds offline."""
    wheel = directory / "tinydep-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("tinydep/__init__.py", "from tinydep.sub import VALUE\n")
        archive.writestr("tinydep/sub.py", "VALUE = 1\n")
        archive.writestr("tinydep-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinydep\nVersion: 1.0\n")
        archive.writestr(
            "tinydep-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        archive.writestr("tinydep-1.0.dist-info/RECORD", "")
    return wheel


def test_layer_ships_the_runtimes_unchecked_byte_code(tmp_path: Path) -> None:
    requirements = tmp_path / "runtime.txt"
    requirements.write_text(f"{_wheel(tmp_path)}\n")
    target = build(
        python_version=LAMBDA_PYTHON_VERSION,
        platform=LAMBDA_PIP_PLATFORM,
        requirements=requirements,
        target=tmp_path / "build",
    )
    site = target / "python"
    assert sorted(p.name for p in (site / "tinydep").glob("*.py")) == ["__init__.py", "sub.py"]
    assert _byte_code_problems(site) == {}
    # Only the runtime's byte code: pip's (this machine's Python) would be dead weight.
    assert {p.name.split(".")[1] for p in site.rglob("*.pyc")} == {cache_tag(LAMBDA_PYTHON_VERSION)}


def test_a_file_that_does_not_compile_fails_the_packaging(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text("VALUE = 1\n")
    (tmp_path / "bad.py").write_text("def broken(:\n")
    this_python = f"{sys.version_info.major}.{sys.version_info.minor}"
    with pytest.raises(RuntimeError, match=r"1 file\(s\) .* do not compile: \['bad.py: SyntaxError'\]"):
        compile_tree(tmp_path, python_version=this_python, runtime_root="/var/task")
    with pytest.raises(RuntimeError, match=r"no Pyodide release pinned for Python 3\.99"):
        compile_tree(tmp_path, python_version="3.99", runtime_root="/var/task")


def test_package_digest_changes_with_the_references(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The asset hash must follow the runbooks too: they ship in the same asset.
    before = package_digest()
    copy = tmp_path / "references"
    copy.mkdir()
    for path in REFERENCES_DIR.glob("*.md"):
        (copy / path.name).write_text(path.read_text())
    monkeypatch.setattr("infra.constructs.functions.REFERENCES_DIR", copy)
    assert package_digest() == before
    (copy / "operations.md").write_text((copy / "operations.md").read_text() + "\nchanged\n")
    assert package_digest() != before


def test_layer_build_is_reused_while_its_inputs_are_unchanged(tmp_path: Path) -> None:
    requirements = tmp_path / "runtime.txt"
    requirements.write_text("pydantic==2.14.4\n")
    target = tmp_path / "build"
    (target / "python").mkdir(parents=True)
    marker = target / "python" / "already-built"
    marker.write_text("")
    digest = inputs_digest(requirements, python_version="3.14", platform="manylinux2014_aarch64")
    (target / STAMP_NAME).write_text(digest + "\n")
    # Same inputs: nothing is reinstalled (pip would need the network and wipe the marker).
    build(python_version="3.14", platform="manylinux2014_aarch64", requirements=requirements, target=target)
    assert marker.exists()
    # Any input that changes the content changes the digest (and therefore the asset hash).
    assert inputs_digest(requirements, python_version="3.13", platform="manylinux2014_aarch64") != digest
    assert inputs_digest(requirements, python_version="3.14", platform="manylinux2014_x86_64") != digest


def test_readme_documents_every_configuration_key() -> None:
    readme = (CDK_JSON.parent / "README.md").read_text()
    section = readme[readme.index("## Deploying the monitor") :]
    for key in StageConfig.context_keys():
        assert f"`{key}`" in section, key
