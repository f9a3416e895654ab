"""Every answer of the emulated Kubernetes API validates against the published Kubernetes v1.30
and v1.33 schemas in strict mode (no unknown fields, no wrong types, every required field): what the
product is tested against is what an EKS API server could send.

The schemas are vendored in tests/data/kubernetes_schema/ (source and version in each file's
`$comment`, rebuilt by its build.py)."""

from __future__ import annotations

import base64
import json
import ssl
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import urllib3

from hyperpod_nccl.kube import eks_bearer_token
from hyperpod_nccl_sim.scenario import Scenario

SCHEMAS = Path(__file__).parents[1] / "data" / "kubernetes_schema"
# The oldest and the newest Kubernetes versions EKS supports in standard support that we vendor.
VERSIONS = ("1.30.0", "1.33.0")
# Every list the emulation serves, with the strict schema of its answer.
LISTS = {
    "/api/v1/nodes": "nodelist-v1",
    "/api/v1/namespaces": "namespacelist-v1",
    "/api/v1/pods": "podlist-v1",
    "/api/v1/services": "servicelist-v1",
    "/api/v1/endpoints": "endpointslist-v1",
    "/api/v1/configmaps": "configmaplist-v1",
    "/apis/apps/v1/daemonsets": "daemonsetlist-apps-v1",
    "/apis/networking.k8s.io/v1/networkpolicies": "networkpolicylist-networking-v1",
}


@cache
def _validator(root: str, version: str) -> jsonschema.protocols.Validator:
    bundle = json.loads((SCHEMAS / f"v{version}-strict.json").read_text())
    schema = {**bundle, "$ref": f"#/$defs/{root}"}
    validator_type = jsonschema.validators.validator_for(schema)
    validator_type.check_schema(schema)
    return validator_type(schema)


def _problems(root: str, document: Any) -> list[str]:
    """What each vendored version's strict schema finds wrong with `document` as a `root`."""
    return [
        f"v{version} {root} at {'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
        for version in VERSIONS
        for e in _validator(root, version).iter_errors(document)
    ]


class _Api:
    """Raw GETs against the emulated API server, verified with the cluster CA."""

    def __init__(self, sim: Any) -> None:
        aws = sim.clients()
        name = sim.scenario.cluster.eks_cluster_name or f"{sim.scenario.cluster.name}-eks"
        cluster = aws.client("eks").describe_cluster(name=name)["cluster"]
        self.endpoint = cluster["endpoint"]
        self.token = eks_bearer_token(name, sim.scenario.region, aws.session)
        ca_pem = base64.b64decode(cluster["certificateAuthority"]["data"]).decode()
        self.pool = urllib3.PoolManager(ssl_context=ssl.create_default_context(cadata=ca_pem))

    def get(self, path: str, token: str | None = None, **query: str) -> tuple[int, Any]:
        response = self.pool.request(
            "GET",
            self.endpoint + path,
            fields=query or None,
            headers={"Authorization": f"Bearer {token or self.token}"},
        )
        return response.status, json.loads(response.data)


@pytest.mark.parametrize("scenario", ["eks-p5", "healthy-eks", "hung-job"])
def test_every_object_validates_against_the_strict_schema(simulate, scenario: str) -> None:  # type: ignore[no-untyped-def]
    api = _Api(simulate(scenario))
    problems: list[str] = []
    for path, root in LISTS.items():
        status, page = api.get(path)
        assert status == 200, (path, page)
        problems += _problems(root, page)
        for item in page["items"]:
            # A single GET returns the object itself, kind and apiVersion included.
            meta = item["metadata"]
            base, resource = path.rsplit("/", 1)
            single = f"{base}/namespaces/{meta['namespace']}/{resource}" if "namespace" in meta else path
            status, document = api.get(f"{single}/{meta['name']}")
            assert status == 200 and document["kind"] + "List" == page["kind"], (single, document)
            problems += _problems(root.replace("list-", "-"), document)
    assert problems == []


def test_every_error_answer_is_a_strict_status(simulate) -> None:  # type: ignore[no-untyped-def]
    def edit(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.forbidden = ["networkpolicies"]
        scenario.kubernetes.server_errors = ["services"]
        scenario.kubernetes.expired_continues = 1

    api = _Api(simulate("eks-p5", edit=edit))
    _, first_page = api.get("/api/v1/nodes", limit="2")
    answers = [
        api.get("/api/v1/nodes", limit="2", **{"continue": "garbage"}),
        api.get("/api/v1/nodes", limit="2", **{"continue": first_page["metadata"]["continue"]}),
        api.get("/api/v1/namespaces/training/configmaps/no-such-map"),
        api.get("/apis/networking.k8s.io/v1/networkpolicies"),
        api.get("/api/v1/services"),
        api.get("/api/v1/nodes", token="k8s-aws-v1.bm90LWEtdG9rZW4"),
        api.get("/api/v1/namespaces/training/pods/llama-pretrain-worker-0/log", previous="true"),
    ]
    assert [status for status, _ in answers] == [400, 410, 404, 403, 500, 401, 400]
    assert [p for _, body in answers for p in _problems("status-meta-v1", body)] == []


def test_the_strict_schema_rejects_what_a_server_never_sends() -> None:
    # The guard itself: an unknown field, a wrong type and a missing required field are each caught.
    node = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n"}, "status": {"nodeInfo": {}}}
    assert any("required" in p for p in _problems("node-v1", node))
    assert _problems("node-v1", {**node, "status": {}, "surplus": 1})
    assert _problems("node-v1", {**node, "status": {}, "spec": {"unschedulable": "yes"}})
    assert _problems("node-v1", {**node, "status": {}}) == []
