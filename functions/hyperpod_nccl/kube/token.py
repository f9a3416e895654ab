"""The EKS bearer token: `k8s-aws-v1.` + the unpadded URL-safe base64 of a presigned STS
GetCallerIdentity URL that signs the `x-k8s-aws-id: <cluster>` header.

EKS validates the token by calling STS with that URL, so nothing but the caller's own AWS
credentials is needed: no aws-iam-authenticator, no awscli.
"""

from __future__ import annotations

import base64
from typing import Any

import boto3
from botocore.signers import RequestSigner

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
# EKS accepts a token for 15 minutes after signing; the signature itself only has to be valid
# when EKS forwards it, and the AWS tooling presigns for 60 seconds.
PRESIGN_EXPIRES_SECONDS = 60


class TokenError(Exception):
    """No AWS credentials to sign the token with."""


def eks_bearer_token(cluster_name: str, region: str, session: boto3.Session | None = None) -> str:
    """Build the bearer token for `cluster_name` from the session's credentials.

    The URL always names the regional public STS endpoint: EKS calls that endpoint, whatever
    endpoint our own boto3 clients use.
    """
    session = session or boto3.Session(region_name=region)
    credentials = session.get_credentials()
    if credentials is None:
        raise TokenError("no AWS credentials available to sign the EKS token")
    host = f"sts.{region}.amazonaws.com"
    factory: Any = session  # boto3's overloads want a literal service name
    sts = factory.client("sts", region_name=region, endpoint_url=f"https://{host}")
    signer = RequestSigner(sts.meta.service_model.service_id, region, "sts", "v4", credentials, sts.meta.events)
    url = signer.generate_presigned_url(
        {
            "method": "GET",
            "url": f"https://{host}/?Action=GetCallerIdentity&Version=2011-06-15",
            "body": {},
            "headers": {CLUSTER_ID_HEADER: cluster_name},
            "context": {},
        },
        region_name=region,
        expires_in=PRESIGN_EXPIRES_SECONDS,
        operation_name="",
    )
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def decode_token(token: str) -> str | None:
    """The presigned URL inside a token, or None when it is not an EKS token (the emulation
    uses this to check what the product sends)."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    payload = token[len(TOKEN_PREFIX) :]
    try:
        return base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return None
