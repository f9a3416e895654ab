"""A GET-only Kubernetes REST client on urllib3: bearer token, the cluster's CA bundle,
timeouts, list pagination (`limit`/`continue`) and typed errors.

It deliberately cannot write: there is no method for any verb but GET.

Time is bounded three ways: a connect timeout, a read timeout per request (a read that times
out is not retried: the server answered nothing in that time, asking again only multiplies the
wait), and a budget for all the reads of one client, after which every request fails at once.
The read timeout defaults to $HYPERPOD_NCCL_KUBE_READ_TIMEOUT seconds when that is set.

Pod logs are written by the job, so their size is too: `get_log` asks for `limitBytes` and reads
no more than that from the socket itself, whatever the server (or a proxy) sends.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import ReadTimeoutError, SSLError

DEFAULT_PAGE_SIZE = 500
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_READ_TIMEOUT = 20.0
READ_TIMEOUT_ENV = "HYPERPOD_NCCL_KUBE_READ_TIMEOUT"
# All the reads of one collection (lists, ConfigMaps, pod logs) within this; well inside the
# monitor's 300 s Kubernetes state, and minutes for a person waiting on the CLI at worst.
DEFAULT_BUDGET_SECONDS = 120.0
# A list must not page forever (a server that keeps returning `continue`).
MAX_PAGES = 1000
# How often a list whose continue token expired (410 Expired) starts again from its first page. Tokens live
# for the API server's etcd compaction interval (5 minutes by default): one that expires mid-list says the
# list is slow, and a second expiry says the next try would be as slow, so the list is reported unread.
LIST_RESTARTS = 1
# What is read of an error answer to a size-capped request (a Status object is far smaller).
STATUS_BODY_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class LogText:
    """A log read up to a byte limit; `truncated` when the log went on past it (the rest unread)."""

    text: str
    truncated: bool


class KubeError(Exception):
    """A Kubernetes API call failed. `status` is the HTTP status (0 when none arrived)."""

    def __init__(self, path: str, status: int, message: str) -> None:
        super().__init__(f"GET {path}: {status or 'no response'} {message}".strip())
        self.path = path
        self.status = status
        self.message = message


class KubeUnauthorized(KubeError):
    """401: the API server does not accept the token (no EKS access entry / aws-auth mapping)."""


class KubeForbidden(KubeError):
    """403: authenticated, but RBAC does not allow this read."""


class KubeNotFound(KubeError):
    """404: the object (or API group) does not exist."""


class KubeServerError(KubeError):
    """5xx or an unexpected answer."""


class KubeExpired(KubeError):
    """410 Gone (reason Expired): the continue token of a paged list outlived the API server's etcd
    compaction window, so the rest of that list cannot be read consistently."""


class KubeUnreachable(KubeError):
    """No HTTP answer at all: DNS, TCP, TLS or timeout."""


class KubeUntrusted(KubeUnreachable):
    """TLS refused: the API server's certificate does not verify against the cluster CA of
    eks:DescribeCluster (a stale CA, or a TLS-intercepting proxy between here and the endpoint)."""


class KubeTimeout(KubeUnreachable):
    """Connected, but the API server did not answer within the read timeout (or the client's
    budget for all its reads is spent): the server is slow or overloaded, not unreachable."""


class _Retry(urllib3.Retry):
    """urllib3's Retry, except that a read timeout or a TLS failure is raised at once instead of
    retried (a certificate that did not verify will not verify on the next try)."""

    def increment(self, *args: Any, **kwargs: Any) -> Any:
        error = kwargs.get("error")
        if isinstance(error, ReadTimeoutError | SSLError):
            raise error
        return super().increment(*args, **kwargs)


def _read_timeout() -> float:
    """The read timeout a client gets by default ($HYPERPOD_NCCL_KUBE_READ_TIMEOUT or 20 s)."""
    value = os.environ.get(READ_TIMEOUT_ENV, "").strip()
    try:
        return float(value) if value and float(value) > 0 else DEFAULT_READ_TIMEOUT
    except ValueError:
        return DEFAULT_READ_TIMEOUT


def _status_message(body: bytes) -> str:
    """The `message` of a Kubernetes Status object, or the start of the body."""
    try:
        document = json.loads(body)
        if isinstance(document, dict) and document.get("message"):
            return str(document["message"])
    except (ValueError, RecursionError):  # json raises RecursionError on deep nesting
        pass
    return body[:200].decode("utf-8", "replace")


def _ssl_reason(error: SSLError) -> str:
    """OpenSSL's reason (`certificate verify failed: …`) without the `[SSL: …]` tag and C source line."""
    cause = error.args[0] if error.args else error
    verify = getattr(cause, "verify_message", None)
    if verify:
        return f"certificate verify failed: {verify}"
    return str(getattr(cause, "reason", None) or cause).strip() or type(error).__name__


def _identity(item: Any) -> str | None:
    """What tells one listed object from another across two attempts at a list: its uid, which the API
    server always sets (namespace/name when an answer lacks it; None when it has neither)."""
    meta = item.get("metadata") if isinstance(item, dict) else None
    if not isinstance(meta, dict):
        return None
    if meta.get("uid"):
        return f"uid:{meta['uid']}"
    return f"name:{meta.get('namespace', '')}/{meta['name']}" if meta.get("name") else None


def write_ca_bundle(certificate_authority_data: str) -> str:
    """Decode eks:DescribeCluster's `certificateAuthority.data` into a temporary PEM file."""
    try:
        pem = base64.b64decode(certificate_authority_data, validate=False)
    except (binascii.Error, ValueError) as error:
        raise KubeUnreachable("/", 0, f"certificate authority data is not base64: {error}") from error
    handle, path = tempfile.mkstemp(prefix="eks-ca-", suffix=".pem")
    with os.fdopen(handle, "wb") as stream:
        stream.write(pem)
    return path


@dataclass
class KubeClient:
    """Read-only client for one API server.

    `ca_data` is the base64 CA of eks:DescribeCluster, which the server's certificate must verify
    against. Only https endpoints are read (every EKS endpoint is one): the bearer token is never
    sent in clear.
    """

    endpoint: str
    token: str
    ca_data: str | None = None
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float = field(default_factory=_read_timeout)
    page_size: int = DEFAULT_PAGE_SIZE
    budget_seconds: float = DEFAULT_BUDGET_SECONDS
    _pool: urllib3.PoolManager | None = field(default=None, init=False, repr=False)
    _ca_file: str | None = field(default=None, init=False, repr=False)
    _deadline: float = field(default=0.0, init=False, repr=False)

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.budget_seconds

    def _manager(self) -> urllib3.PoolManager:
        if self._pool is None:
            options: dict[str, Any] = {
                "timeout": urllib3.Timeout(connect=self.connect_timeout, read=self.read_timeout),
                # Every call is an idempotent GET, so dropped or reset connections (e.g. a pooled
                # keep-alive connection the server closed) are retried; HTTP statuses are answers.
                "retries": _Retry(total=3, connect=2, read=2, other=1, status=0, redirect=0, backoff_factor=0.1),
                "maxsize": 8,
            }
            options["cert_reqs"] = "CERT_REQUIRED"
            if self.ca_data:
                self._ca_file = write_ca_bundle(self.ca_data)
                options["ca_certs"] = self._ca_file
            self._pool = urllib3.PoolManager(**options)
        return self._pool

    def _get(
        self, path: str, params: dict[str, str | int | bool] | None, accept: str, max_bytes: int | None = None
    ) -> bytes:
        """The body of a 200 answer; with `max_bytes`, at most `max_bytes` + 1 bytes of it are read
        (the connection is dropped with the rest unread), so the caller can tell it went on."""
        if not self.endpoint.startswith("https://"):
            raise KubeUnreachable(path, 0, "the endpoint is not https, and the token is never sent in clear")
        query = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (params or {}).items()}
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise KubeTimeout(path, 0, f"the {self.budget_seconds:g} s budget for this client's reads is spent")
        read = min(self.read_timeout, left)
        try:
            response = self._manager().request(
                "GET",
                self.endpoint.rstrip("/") + path,
                fields=query or None,
                headers={"Authorization": f"Bearer {self.token}", "Accept": accept},
                timeout=urllib3.Timeout(connect=min(self.connect_timeout, left), read=read),
                preload_content=max_bytes is None,
            )
            if max_bytes is None:
                body = bytes(response.data)
            else:
                try:
                    body = response.read(max_bytes + 1 if response.status == 200 else STATUS_BODY_MAX_BYTES)
                finally:
                    response.close()  # unread bytes must not stay on a pooled connection
                    response.release_conn()
        except ReadTimeoutError as error:
            raise KubeTimeout(path, 0, f"no answer within {read:g} s (read timeout)") from error
        except SSLError as error:
            raise KubeUntrusted(path, 0, f"TLS failed: {_ssl_reason(error)}") from error
        except Urllib3Error as error:
            raise KubeUnreachable(path, 0, f"{type(error).__name__}: {error}") from error
        if response.status == 200:
            return body
        message = _status_message(body)
        error_type: type[KubeError] = {
            401: KubeUnauthorized,
            403: KubeForbidden,
            404: KubeNotFound,
            410: KubeExpired,
        }.get(response.status, KubeServerError)
        raise error_type(path, response.status, message)

    def get_json(self, path: str, params: dict[str, str | int | bool] | None = None) -> dict[str, Any]:
        """GET one object (or one page) as JSON."""
        body = self._get(path, params, "application/json")
        try:
            document = json.loads(body)
        except (ValueError, RecursionError) as error:  # json raises RecursionError on deep nesting
            raise KubeServerError(path, 200, f"answer is not JSON: {error}") from error
        if not isinstance(document, dict):
            raise KubeServerError(path, 200, "answer is not a JSON object")
        return document

    def get_log(self, path: str, params: dict[str, str | int | bool] | None, max_bytes: int) -> LogText:
        """GET a pod log with `limitBytes=max_bytes`, reading at most `max_bytes` + 1 bytes from the
        socket (a server that ignores limitBytes cannot exhaust memory). Truncated when more than
        `max_bytes` arrived, or exactly that many: the API server stops at the limit without saying
        so, and a log of exactly that size is the rare case that errs on the side of "cut"."""
        body = self._get(path, {**(params or {}), "limitBytes": max_bytes}, "text/plain, */*", max_bytes=max_bytes)
        return LogText(text=body[:max_bytes].decode("utf-8", "replace"), truncated=len(body) >= max_bytes)

    def iter_list(self, path: str, params: dict[str, str | int | bool] | None = None) -> Iterator[dict[str, Any]]:
        """Every item of a list, following `metadata.continue` page by page.

        When the server expires a continue token (410 Expired), the list starts again from its first page
        (`LIST_RESTARTS` times), as the API concepts page tells a client that wants a consistent list; items
        already yielded are not yielded twice. An expiry after that raises `KubeExpired`, naming how many
        items were read and that the rest were not: a list is never cut short silently."""
        first: dict[str, str | int | bool] = {**(params or {}), "limit": self.page_size}
        query = dict(first)
        seen: set[str] = set()
        restarts = read = 0
        for _ in range(MAX_PAGES):
            try:
                page = self.get_json(path, query)
            except KubeExpired as error:
                if "continue" not in query:
                    raise
                if restarts >= LIST_RESTARTS:
                    raise KubeExpired(
                        path,
                        410,
                        f"Expired: the continue token expired again after {restarts} restart(s) of the list; "
                        f"{read} item(s) read, the rest unread",
                    ) from error
                restarts += 1
                query = dict(first)
                continue
            for item in page.get("items") or []:
                identity = _identity(item)
                if restarts and identity in seen:
                    continue
                if identity is not None:
                    seen.add(identity)
                read += 1
                yield item
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return
            query["continue"] = token
        raise KubeServerError(path, 200, f"more than {MAX_PAGES} pages")

    def list(self, path: str, params: dict[str, str | int | bool] | None = None) -> list[dict[str, Any]]:
        """All items of a list (see `iter_list`)."""
        return list(self.iter_list(path, params))

    def close(self) -> None:
        """Release connections and remove the temporary CA file."""
        if self._pool is not None:
            self._pool.clear()
            self._pool = None
        if self._ca_file:
            Path(self._ca_file).unlink(missing_ok=True)
            self._ca_file = None

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
