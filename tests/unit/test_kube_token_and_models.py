"""The EKS token format and the pure parts of the Kubernetes model: selectors, quantities,
NetworkPolicy defaults and redaction at conversion time."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import boto3

from hyperpod_nccl.kube import convert
from hyperpod_nccl.kube.token import TOKEN_PREFIX, decode_token, eks_bearer_token
from hyperpod_nccl.models.kubernetes import (
    LabelSelector,
    SelectorRequirement,
    instance_id_from_provider_id,
    parse_quantity,
)
from hyperpod_nccl.redaction import REDACTED, is_secret_name


def test_token_is_a_presigned_get_caller_identity_url_signing_the_cluster_header() -> None:
    session = boto3.Session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="us-west-2")
    token = eks_bearer_token("my-eks", "us-west-2", session)
    assert token.startswith(TOKEN_PREFIX) and not token.endswith("=")
    url = decode_token(token)
    assert url is not None
    parsed = urlparse(url)
    query = parse_qs(parsed.query)
    assert parsed.netloc == "sts.us-west-2.amazonaws.com"
    assert query["Action"] == ["GetCallerIdentity"]
    assert query["X-Amz-Expires"] == ["60"]
    assert query["X-Amz-SignedHeaders"] == ["host;x-k8s-aws-id"]
    assert query["X-Amz-Credential"][0].startswith("AKIDEXAMPLE/")
    assert decode_token("Bearer nonsense") is None


def test_label_selector_semantics() -> None:
    selector = LabelSelector(
        match_labels={"app": "train"},
        match_expressions=[
            SelectorRequirement(key="tier", operator="In", values=["a", "b"]),
            SelectorRequirement(key="debug", operator="DoesNotExist"),
        ],
    )
    assert selector.matches({"app": "train", "tier": "a"})
    assert not selector.matches({"app": "train", "tier": "c"})
    assert not selector.matches({"app": "train", "tier": "a", "debug": "1"})
    assert LabelSelector().matches({"anything": "x"})
    assert SelectorRequirement(key="k", operator="NotIn", values=["x"]).matches({})


def test_the_health_agents_fault_conditions() -> None:
    # A True condition of a documented fault type, or of a type the fault-type(s) label names, is the
    # agent's; the kubelet's own conditions and a recovered (False) fault condition are not.
    def node(labels: dict[str, str], *conditions: tuple[str, str]) -> list[str]:
        obj = {
            "metadata": {"name": "hyperpod-i-0123456789abcdef0", "labels": labels},
            "status": {"conditions": [{"type": t, "status": s, "reason": "XidHardwareFailure"} for t, s in conditions]},
        }
        return [c.type for c in convert.node(obj).hma_fault_conditions]

    assert node({}, ("Ready", "True"), ("NvidiaErrorTerminate", "True")) == ["NvidiaErrorTerminate"]
    assert node({}, ("NvidiaErrorReboot", "False"), ("MemoryPressure", "True")) == []
    assert node({}, ("NvidiaGPUUnhealthy", "True")) == []
    labelled = {"sagemaker.amazonaws.com/fault-types": "NvidiaGPUUnhealthy"}
    assert node(labelled, ("NvidiaGPUUnhealthy", "True")) == ["NvidiaGPUUnhealthy"]


def test_quantities_and_provider_ids() -> None:
    assert parse_quantity("10Gi") == 10 * 2**30
    assert parse_quantity("512Mi") == 512 * 2**20
    assert parse_quantity("2") == 2
    assert parse_quantity("bogus") is None
    assert instance_id_from_provider_id("aws:///us-west-2a/i-0123456789abcdef0") == "i-0123456789abcdef0"
    assert (
        instance_id_from_provider_id("aws:///usw2-az2/sagemaker/cluster/hyperpod-abc123-i-0123456789abcdef0")
        == "i-0123456789abcdef0"
    )
    assert instance_id_from_provider_id(None) is None


def test_network_policy_policy_types_default() -> None:
    ingress_only = convert.network_policy({"metadata": {"name": "a"}, "spec": {"podSelector": {}}})
    with_egress = convert.network_policy(
        {"metadata": {"name": "b"}, "spec": {"podSelector": {}, "egress": [{"to": [{"podSelector": {}}]}]}}
    )
    assert ingress_only.policy_types == ["Ingress"]
    assert with_egress.policy_types == ["Ingress", "Egress"]
    assert with_egress.egress[0].peers[0].pod_selector == LabelSelector()


def test_secret_looking_values_are_redacted_at_conversion() -> None:
    pod = convert.pod(
        {
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "env": [
                            {"name": "HF_TOKEN", "value": "hf_real"},
                            {"name": "AWS_SECRET_ACCESS_KEY", "value": "s3cr3t"},
                            {"name": "NCCL_DEBUG", "value": "WARN"},
                            {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}},
                        ],
                    }
                ]
            },
        }
    )
    env = {e.name: e for e in pod.containers[0].env}
    assert env["HF_TOKEN"].value == REDACTED and env["AWS_SECRET_ACCESS_KEY"].value == REDACTED
    assert env["NCCL_DEBUG"].value == "WARN"
    assert env["DB_PASSWORD"].value is None and env["DB_PASSWORD"].value_from == "secretKeyRef:db/pw"
    assert "hf_real" not in pod.model_dump_json() and "s3cr3t" not in pod.model_dump_json()
    config_map = convert.config_map({"metadata": {"name": "m"}, "data": {"WANDB_API_KEY": "k", "FI_PROVIDER": "efa"}})
    assert config_map.data == {"WANDB_API_KEY": REDACTED, "FI_PROVIDER": "efa"}
    assert is_secret_name("MY_API_KEY") and not is_secret_name("MASTER_PORT")


def test_secret_shaped_values_are_scrubbed_from_free_text() -> None:
    from hyperpod_nccl.redaction import redact_value, scrub

    token = "k8s-aws-v1." + "a" * 60
    assert token not in scrub(f"Authorization: Bearer {token}")
    assert redact_value("NCCL_DEBUG", "WARN") == "WARN"
    assert redact_value("HF_TOKEN", "short") == REDACTED
    assert redact_value("INNOCENT", "AKIA" + "ABCDEFGHIJKLMNOP") == REDACTED
