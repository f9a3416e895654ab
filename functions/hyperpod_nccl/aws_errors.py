"""The vocabulary of AWS errors: the error codes that mean the same thing across services, and
what kind of failure an exception is (denied, throttled, a server error, a timeout, a refused
conditional write).

The ground floor of the package: it imports nothing from it, so the collectors, the SSM client and
the monitor all read one definition without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

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
