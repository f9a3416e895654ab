"""Read-only access to an EKS cluster's Kubernetes API without kubectl.

`eks_bearer_token` builds the token EKS accepts (a presigned STS GetCallerIdentity URL), and
`KubeClient` is a small GET-only REST client on urllib3 (already a boto3 dependency, so the
Lambda package stays small; the `kubernetes` package alone is ~100 MB unzipped).
"""

from __future__ import annotations

from hyperpod_nccl.kube.client import (
    KubeClient,
    KubeError,
    KubeExpired,
    KubeForbidden,
    KubeNotFound,
    KubeServerError,
    KubeTimeout,
    KubeUnauthorized,
    KubeUnreachable,
    KubeUntrusted,
)
from hyperpod_nccl.kube.token import TOKEN_PREFIX, eks_bearer_token

__all__ = [
    "TOKEN_PREFIX",
    "KubeClient",
    "KubeError",
    "KubeExpired",
    "KubeForbidden",
    "KubeNotFound",
    "KubeServerError",
    "KubeTimeout",
    "KubeUnauthorized",
    "KubeUnreachable",
    "KubeUntrusted",
    "eks_bearer_token",
]
