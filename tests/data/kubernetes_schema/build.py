"""Rebuild a vendored strict-schema bundle from the `kubernetes-validate` wheel (see README.md).

    python tests/data/kubernetes_schema/build.py WHEEL VERSION   # e.g. ... 1.33.0

Writes `v<VERSION>-strict.json` beside this file: the per-kind roots the emulated API server answers
with and the closure of the definitions they reference, descriptions removed, references local.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

# Every kind the emulated API server answers with, as a list and as a single GET, and its errors.
ROOTS = (
    "nodelist-v1",
    "node-v1",
    "namespacelist-v1",
    "namespace-v1",
    "podlist-v1",
    "pod-v1",
    "servicelist-v1",
    "service-v1",
    "endpointslist-v1",
    "endpoints-v1",
    "configmaplist-v1",
    "configmap-v1",
    "daemonsetlist-apps-v1",
    "daemonset-apps-v1",
    "networkpolicylist-networking-v1",
    "networkpolicy-networking-v1",
    "status-meta-v1",
)
_REMOTE = "/api/_definitions.json#/$defs/"
_LOCAL = "#/$defs/"


def _clean(node: Any) -> Any:
    """Drop descriptions and make every reference local; nothing else changes."""
    if isinstance(node, dict):
        cleaned = {k: _clean(v) for k, v in node.items() if k not in ("description", "$schema", "$id")}
        if isinstance(cleaned.get("$ref"), str):
            cleaned["$ref"] = cleaned["$ref"].replace(_REMOTE, _LOCAL)
        return cleaned
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"].removeprefix(_LOCAL)} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(_refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node))
    return set()


def build(wheel: Path, version: str) -> dict[str, Any]:
    """The bundle for Kubernetes `version` (e.g. "1.33.0") from the wheel's local-strict flavour."""
    folder = f"kubernetes_validate/kubernetes-json-schema/v{version}-local-strict/"
    with zipfile.ZipFile(wheel) as archive:
        definitions = _clean(json.loads(archive.read(folder + "_definitions.json")))["$defs"]
        defs = {root: _clean(json.loads(archive.read(f"{folder}{root}.json"))) for root in ROOTS}
    pending = set().union(*(_refs(d) for d in defs.values()))
    while pending:
        name = pending.pop()
        if name not in defs:
            defs[name] = definitions[name]
            pending |= _refs(defs[name]) - defs.keys()
    return {
        "$comment": (
            f"Kubernetes v{version} strict JSON schemas (additionalProperties: false), the closure of the kinds "
            f"the emulated API server answers with. Source: yannh/kubernetes-json-schema v{version} local-strict, "
            f"as shipped in the {wheel.name} wheel (PyPI) under {folder}; generated from the Kubernetes OpenAPI "
            "spec (Apache-2.0). Descriptions removed, $refs made local; nothing else changed (build.py)."
        ),
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": dict(sorted(defs.items())),
    }


if __name__ == "__main__":
    wheel_path, wanted = Path(sys.argv[1]), sys.argv[2]
    target = Path(__file__).with_name(f"v{wanted}-strict.json")
    target.write_text(json.dumps(build(wheel_path, wanted), indent=1) + "\n")
    print(f"{target}: {len(json.loads(target.read_text())['$defs'])} definitions")
