"""What a failed AWS call of the monitor's own (table, topic, state machine) tells the operator:
the exact IAM action, the function that made it, and the fix.

botocore names the operation of a refused call ("when calling the Query operation") but not its
service, and reports a timeout with the endpoint only. The functions' own clients therefore tag
the exception of a call that failed with its action (`remember_operations`).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from hyperpod_nccl.aws_errors import AWS_CALL_ERRORS, TransientKind, error_message, is_access_denied, transient_kind

_ACTION_ATTRIBUTE = "hyperpod_nccl_action"
# Told apart as a diagnosis tells them (transient_kind); worded for a function's own call.
_TRANSIENT_FIXES: dict[TransientKind, tuple[str, str]] = {
    "throttled": (
        "throttled after the SDK's retries in",
        "the next sweep retries; raise the account's limit if it persists",
    ),
    "server_error": (
        "returned a server error to",
        "AWS-side failure, the next sweep retries; check the AWS Health Dashboard if it persists",
    ),
    "timeout": (
        "timed out in",
        "check the function's network path to the AWS endpoint (VPC endpoints, NAT); the next sweep retries",
    ),
}


def remember_operations(client: Any) -> Any:
    """Make `client` tag the exception of a failed call with its IAM action; returns it."""
    signing_name = client.meta.service_model.signing_name

    def tag(exception: BaseException, event_name: str = "", **_: Any) -> None:
        setattr(exception, _ACTION_ATTRIBUTE, f"{signing_name}:{event_name.rsplit('.', 1)[-1]}")

    client.meta.events.register("after-call-error", tag)
    return client


def failed_action(error: BaseException, clients: tuple[Any, ...] = ()) -> str | None:
    """The IAM action ("dynamodb:Query") of the call that raised `error`, when it can be told."""
    tagged: str | None = getattr(error, _ACTION_ATTRIBUTE, None)
    if tagged or not isinstance(error, ClientError):
        return tagged
    operation = error.operation_name
    for client in clients:
        model = client.meta.service_model
        if operation in model.operation_names:
            return f"{model.signing_name}:{operation}"
    return operation or None


def describe_aws_failure(function: str, error: BaseException, clients: tuple[Any, ...] = ()) -> str:
    """One line: what failed in which function, and the fix (the IAM action to grant when denied)."""
    message = error_message(error)
    if not isinstance(error, AWS_CALL_ERRORS):
        return f"the {function} function failed ({message}); fix: see the function's logs"
    action = failed_action(error, clients) or "an AWS call"
    if is_access_denied(error):
        return (
            f"{action} denied to the {function} function ({message}); fix: grant {action} to the {function} "
            "function's execution role (the stack grants it: look for a changed policy, permissions boundary or SCP)"
        )
    kind = transient_kind(error)
    if kind is not None:
        what, fix = _TRANSIENT_FIXES[kind]
        return f"{action} {what} the {function} function ({message}); fix: {fix}"
    return f"{action} failed in the {function} function ({message}); fix: see the function's logs"
