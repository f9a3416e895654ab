"""The vocabulary of AWS errors: the error codes that mean the same thing across services, and
what kind of failure an exception is (denied, throttled, a server error, a timeout, a refused
conditional write).

The ground floor of the package: it imports nothing from it, so the collectors, the SSM client and
the monitor all read one definition without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ProxyConnectionError,
    ReadTimeoutError,
    SSLError,
)
from botocore.parsers import ResponseParserError

# Everything one boto3 call can raise for a reason outside this program: AWS's answer (ClientError),
# the way there (BotoCoreError: DNS, proxy, TLS, timeouts, credentials) and an answer that is not
# AWS's (ResponseParserError, which botocore does not derive from BotoCoreError: an HTML page from a
# proxy, a captive portal or a wrong AWS_ENDPOINT_URL).
AWS_CALL_ERRORS: tuple[type[Exception], ...] = (ClientError, BotoCoreError, ResponseParserError)

ACCESS_DENIED_CODES = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnrecognizedClientException"}
)
THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestThrottled",
        "SlowDown",
    }
)
NOT_FOUND_CODES = frozenset({"ResourceNotFound", "ResourceNotFoundException", "NotFoundException"})
SERVER_ERROR_CODES = frozenset(
    {"InternalFailure", "InternalError", "InternalServerError", "ServiceUnavailable", "ServiceUnavailableException"}
)
CREDENTIAL_CODES = frozenset(
    {"InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException", "SignatureDoesNotMatch", "InvalidAccessKeyId"}
)


def error_code(error: BaseException) -> str:
    """The AWS error code of a botocore exception ("" for non-AWS errors)."""
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code", ""))
    return ""


def error_message(error: BaseException) -> str:
    """A one-line human message for any AWS/transport error."""
    if isinstance(error, ClientError):
        err = error.response.get("Error", {})
        return f"{err.get('Code', 'Error')}: {err.get('Message', '')}".strip().rstrip(":")
    if isinstance(error, BotoCoreError):
        return f"{type(error).__name__}: {error}"
    return f"{type(error).__name__}: {error}"


def is_access_denied(error: BaseException) -> bool:
    """The caller lacks an IAM permission."""
    return error_code(error) in ACCESS_DENIED_CODES


def is_throttled(error: BaseException) -> bool:
    """The call was throttled even after botocore's own retries."""
    return error_code(error) in THROTTLING_CODES


def is_server_error(error: BaseException) -> bool:
    """AWS answered with a 5xx (after botocore's own retries)."""
    if isinstance(error, ClientError):
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return error_code(error) in SERVER_ERROR_CODES or int(status or 0) >= 500
    return False


def is_timeout(error: BaseException) -> bool:
    """The call never got an answer: connect/read timeout or an unreachable endpoint."""
    return isinstance(error, ReadTimeoutError | ConnectTimeoutError | EndpointConnectionError)


def _refuse_html(response_dict: dict[str, Any] | None = None, **_: Any) -> None:
    # By the body, not the Content-Type: an emulation (moto) labels JSON answers text/html.
    body = (response_dict or {}).get("body") or b""
    if isinstance(body, bytes) and body[:512].lstrip().lower().startswith((b"<!doctype html", b"<html")):
        status = (response_dict or {}).get("status_code", "?")
        raise ResponseParserError(f"HTTP {status} with an HTML page")


def refuse_html_answers(client: Any) -> Any:
    """Make `client` raise ResponseParserError on an HTML page instead of parsing it: AWS never
    answers HTML, and botocore parses a 200 HTML page as a malformed result (a KeyError from its
    parser, not an error anyone can act on). Returns the client."""
    client.meta.events.register("before-parse", _refuse_html)
    return client


_DNS_FAILURES = ("Name or service not known", "nodename nor servname", "Temporary failure in name resolution")
_NETWORK_FIX = "check the network path to the AWS endpoint (VPC endpoints, proxy, DNS), then re-run"


def transport_failure(error: BaseException) -> tuple[str, str] | None:
    """(what happened, the fix) for a call that never got an answer from AWS: a proxy, TLS, DNS, a
    refused or silent endpoint, or an answer that is not AWS's. None for anything else (an AWS
    error, or not an AWS call's error at all)."""
    if isinstance(error, ResponseParserError):
        return (
            "got an answer that is not an AWS response",
            "something between here and AWS answered instead (a proxy's or captive portal's page, a wrong "
            "AWS_ENDPOINT_URL): check the endpoint and HTTPS_PROXY/NO_PROXY, then re-run",
        )
    if isinstance(error, ProxyConnectionError):
        return ("could not connect through the proxy", "check HTTPS_PROXY/HTTP_PROXY and NO_PROXY, then re-run")
    if isinstance(error, SSLError):
        return (
            "failed TLS verification",
            "behind a TLS-inspecting proxy set AWS_CA_BUNDLE to its CA bundle; else check the endpoint, then re-run",
        )
    if isinstance(error, ConnectTimeoutError):
        return ("could not connect in time", _NETWORK_FIX)
    if isinstance(error, ReadTimeoutError):
        return ("timed out waiting for the answer", _NETWORK_FIX)
    if isinstance(error, EndpointConnectionError):
        cause = str(error.kwargs.get("error", ""))
        if any(marker in cause for marker in _DNS_FAILURES):
            return ("could not resolve the endpoint's name (DNS)", "check DNS and the region, then re-run")
        if "Connection refused" in cause:
            return ("was refused by the endpoint", _NETWORK_FIX)
        return ("could not reach the endpoint", _NETWORK_FIX)
    return None


TransientKind = Literal["throttled", "server_error", "timeout"]

# The order the kinds are told apart in (a throttling error can also carry a 5xx status).
_TRANSIENT_TESTS: tuple[tuple[TransientKind, Callable[[BaseException], bool]], ...] = (
    ("throttled", is_throttled),
    ("server_error", is_server_error),
    ("timeout", is_timeout),
)


def transient_kind(error: BaseException) -> TransientKind | None:
    """Throttling, a server error or a timeout: worth retrying later. None for anything else."""
    return next((kind for kind, test in _TRANSIENT_TESTS if test(error)), None)


def is_conditional_failure(error: ClientError) -> bool:
    """True when a conditional write was refused (the idempotency guard fired)."""
    return error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
