"""boto3 access for collectors: one session per sweep, clients cached per service, and the
translation of AWS errors into degraded sources that name the fix (what an error is:
`hyperpod_nccl.aws_errors`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config

from hyperpod_nccl.aws_errors import TransientKind, error_message, is_access_denied, transient_kind
from hyperpod_nccl.models.findings import DegradedSource
from hyperpod_nccl.references import OPS_IAM, Reference

# Reading and parsing botocore's service models is most of what creating a client costs; a loader
# caches them, so every session shares one: a warm Lambda (and a sweep's threads) pays it once.
_MODEL_LOADER = botocore.loaders.create_loader()


def new_session(region: str) -> boto3.Session:
    """A fresh boto3 session (its own credential resolution) sharing the process's model cache."""
    core = botocore.session.get_session()
    core.register_component("data_loader", _MODEL_LOADER)
    return boto3.Session(botocore_session=core, region_name=region)


@dataclass
class AwsClients:
    """Lazily created boto3 clients sharing one session, region and (optional) endpoint.

    `endpoint_url` points every client at one endpoint: the embedded emulation uses it; against
    real AWS it stays None. `max_attempts` None keeps botocore's default (or AWS_MAX_ATTEMPTS).
    """

    region: str
    endpoint_url: str | None = None
    session: boto3.Session | None = None
    max_attempts: int | None = None
    read_timeout: float = 30.0
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)
    # Collectors run in threads; boto3 sessions are not safe to create clients from concurrently.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def client(self, service: str, *, paced: bool = False) -> Any:
        """The cached client for `service` (thread-safe).

        `paced`: a client for calls the caller paces and retries itself (StartSession): botocore
        makes one attempt, because its own retries of a throttled call would go out unpaced, each
        one more call against the account's rate."""
        with self._lock:
            return self._client_locked(service, paced)

    def _client_locked(self, service: str, paced: bool) -> Any:
        key = f"{service}#paced" if paced else service
        if key not in self._clients:
            if self.session is None:
                self.session = new_session(self.region)
            session = self.session
            retries: dict[str, Any] = {"mode": "standard"}
            if paced:
                retries["total_max_attempts"] = 1
            elif self.max_attempts is not None:
                retries["max_attempts"] = self.max_attempts
            config = Config(
                retries=retries,  # type: ignore[arg-type]
                connect_timeout=10,
                read_timeout=self.read_timeout,
                user_agent_extra="hyperpod-nccl",
            )
            factory: Any = session  # boto3's overloads want a literal service name
            self._clients[key] = factory.client(
                service, region_name=self.region, endpoint_url=self.endpoint_url, config=config
            )
        return self._clients[key]


# What happened and the fix, as a diagnosis reports a source it could not read.
_TRANSIENT_FIXES: dict[TransientKind, tuple[str, str]] = {
    "throttled": ("throttled after retries", "re-run later: the diagnosis is read-only and idempotent"),
    "server_error": (
        "returned a server error",
        "AWS-side failure: re-run later; check the AWS Health Dashboard if it persists",
    ),
    "timeout": ("timed out", "check the network path to the AWS endpoint (VPC endpoints, proxy, DNS), then re-run"),
}


def transient_failure(error: BaseException) -> tuple[str, str] | None:
    """(what happened, the fix) when `error` is throttling, a server error or a timeout."""
    kind = transient_kind(error)
    return None if kind is None else _TRANSIENT_FIXES[kind]


def degraded_from_error(
    source: str,
    action: str,
    error: BaseException,
    *,
    partial: bool = False,
    reference: Reference | None = None,
) -> DegradedSource:
    """Describe what could not be read and the fix, from the error that stopped it.

    `action` is the IAM action of the failed call (e.g. "sagemaker:ListClusterEvents"): always in
    `unread` (the checks that read it cannot pass), in `missing_action` only when it was denied.
    """
    message = error_message(error)
    if is_access_denied(error):
        return DegradedSource(
            source=source,
            reason=f"{action} denied ({message})",
            fix=f"grant {action} to the identity running the diagnosis",
            missing_action=action,
            reference=reference or OPS_IAM,
            partial=partial,
            unread=[action],
        )
    what, fix = transient_failure(error) or (
        "failed",
        "check the error above, the AWS service health and the network path, then re-run",
    )
    return DegradedSource(
        source=source,
        reason=f"{action} {what} ({message})",
        fix=fix,
        reference=reference,
        partial=partial,
        unread=[action],
    )
