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

from hyperpod_nccl.aws_errors import (
    TransientKind,
    error_message,
    is_access_denied,
    refuse_html_answers,
    transient_kind,
    transport_failure,
)
from hyperpod_nccl.models.findings import DegradedSource
from hyperpod_nccl.references import OPS_IAM, Reference

# Reading and parsing botocore's service models is most of what creating a client costs; a loader
# caches them, so every session shares one: a warm Lambda (and a sweep's threads) pays it once.
_MODEL_LOADER = botocore.loaders.create_loader()


# The first call of a run (sts:GetCallerIdentity) says whether AWS can be reached at all: it makes
# two attempts of at most this long each, so a dead endpoint or a proxy that swallows requests is
# told in seconds, not after the minute and a half of the SDK's defaults.
FIRST_CONTACT_TIMEOUT_SECONDS = 5.0
FIRST_CONTACT_ATTEMPTS = 2
DEFAULT_CONNECT_TIMEOUT_SECONDS = 5.0
DEFAULT_READ_TIMEOUT_SECONDS = 30.0


def shared_model_loader() -> botocore.loaders.Loader:
    """The process's one botocore loader, whose cache every session of ours shares."""
    return _MODEL_LOADER


def new_session(region: str | None, profile: str | None = None) -> boto3.Session:
    """A fresh boto3 session (its own credential resolution, from `profile` when given) sharing
    the process's model cache."""
    core = botocore.session.Session(profile=profile)
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
    read_timeout: float = DEFAULT_READ_TIMEOUT_SECONDS
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS
    profile: str | None = None
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)
    # Collectors run in threads; boto3 sessions are not safe to create clients from concurrently.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def client(self, service: str, *, paced: bool = False, first_contact: bool = False) -> Any:
        """The cached client for `service` (thread-safe).

        `paced`: a client for calls the caller paces and retries itself (StartSession): botocore
        makes one attempt, because its own retries of a throttled call would go out unpaced, each
        one more call against the account's rate.
        `first_contact`: a client for the run's first call, which fails fast on an endpoint that
        does not answer (FIRST_CONTACT_ATTEMPTS of at most FIRST_CONTACT_TIMEOUT_SECONDS)."""
        with self._lock:
            return self._client_locked(service, paced, first_contact)

    def table(self, name: str) -> Any:
        """The DynamoDB table `name` (a boto3 Table resource) through this run's session, region,
        endpoint and timeouts: what the CLI reads the deployed monitor's findings from."""
        with self._lock:
            resource: Any = self._session().resource(  # boto3's overloads want a literal service name
                "dynamodb", region_name=self.region, endpoint_url=self.endpoint_url, config=self._config(False, False)
            )
        refuse_html_answers(resource.meta.client)
        return resource.Table(name)

    def _session(self) -> boto3.Session:
        if self.session is None:
            self.session = new_session(self.region, self.profile)
        return self.session

    def _config(self, paced: bool, first_contact: bool) -> Config:
        retries: dict[str, Any] = {"mode": "standard"}
        connect_timeout, read_timeout = self.connect_timeout, self.read_timeout
        if paced:
            retries["total_max_attempts"] = 1
        elif first_contact:
            retries["total_max_attempts"] = FIRST_CONTACT_ATTEMPTS
            connect_timeout = min(connect_timeout, FIRST_CONTACT_TIMEOUT_SECONDS)
            read_timeout = min(read_timeout, FIRST_CONTACT_TIMEOUT_SECONDS)
        elif self.max_attempts is not None:
            retries["max_attempts"] = self.max_attempts
        return Config(
            retries=retries,  # type: ignore[arg-type]
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            user_agent_extra="hyperpod-nccl",
        )

    def _client_locked(self, service: str, paced: bool, first_contact: bool) -> Any:
        key = f"{service}#paced" if paced else f"{service}#first" if first_contact else service
        if key not in self._clients:
            factory: Any = self._session()  # boto3's overloads want a literal service name
            self._clients[key] = refuse_html_answers(
                factory.client(
                    service,
                    region_name=self.region,
                    endpoint_url=self.endpoint_url,
                    config=self._config(paced, first_contact),
                )
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
    """(what happened, the fix) when `error` is throttling, a server error, or a call that never got
    AWS's answer (what stopped it, when the error says: a proxy, TLS, DNS, a refused endpoint)."""
    kind = transient_kind(error)
    if kind in (None, "timeout"):
        told = transport_failure(error)
        if told is not None:
            return told
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
