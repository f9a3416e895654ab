"""The support bundle's default archive is named after a validated form of the cluster: never
a path, a `..` or a control character that an API response or an argument could carry."""

from __future__ import annotations

import re

import pytest

from hyperpod_nccl.cli.commands.support_bundle import default_name
from hyperpod_nccl.cli.validate import cluster_slug

ARN = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdef123456"


@pytest.mark.parametrize(
    ("value", "slug"),
    [
        ("ml-cluster-1", "ml-cluster-1"),
        ("a" * 63, "a" * 63),
        (ARN, "abcdef123456"),
        ("arn:aws-us-gov:sagemaker:us-gov-west-1:123456789012:cluster/0123456789ab", "0123456789ab"),
        ("../../etc", None),
        ("ml/cluster", None),
        ("ml\x1b]0;pwned\x07", None),
        ("ml-\n", None),
        ("-ml", None),
        ("a" * 64, None),
        ("", None),
        (ARN + "/..", None),
    ],
)
def test_cluster_slug_accepts_names_and_arn_ids_only(value: str, slug: str | None) -> None:
    assert cluster_slug(value) == slug


def test_default_name_prefers_the_clusters_name_then_what_the_operator_named() -> None:
    stamp = r"\d{8}T\d{6}Z"
    assert re.fullmatch(rf"support-ml-{stamp}", str(default_name("ml", ARN)))
    # DescribeCluster answered a name of no HyperPod shape: the validated --cluster names it.
    assert re.fullmatch(rf"support-abcdef123456-{stamp}", str(default_name("../\x1b[2Jx", ARN)))
    assert default_name("../x", "../y") is None
