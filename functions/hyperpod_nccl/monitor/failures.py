"""What a failed AWS call of the monitor's own (table, topic, state machine) tells the operator:
the exact IAM action, the function that made it, and the fix.

botocore names the operation of a refused call ("when calling the Query operation") but not its
service, and reports a timeout with the endpoint only. The functions' own clients therefore tag
the exception of a call that failed with its action (`remember_operations`).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_nccl.collectors.aws import error_message, is_access_denied, is_server_error, is_throttled, is_timeout

_ACTION_ATTRIBUTE = "hyperpod_nccl_action"


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
    if not isinstance(error, ClientError | BotoCoreError):
        return f"the {function} function failed ({message}); fix: see the function's logs"
    action = failed_action(error, clients) or "an AWS call"
    if is_access_denied(error):
        return (
            f"{action} denied to the {function} function ({message}); fix: grant {action} to the {function} "
            "function's execution role (the stack grants it: look for a changed policy, permissions boundary or SCP)"
        )
    if is_throttled(error):
        fix = "the next sweep retries; raise the account's limit if it persists"
        return f"{action} throttled after the SDK's retries in the {function} function ({message}); fix: {fix}"
    if is_server_error(error):
        fix = "AWS-side failure, the next sweep retries; check the AWS Health Dashboard if it persists"
        return f"{action} returned a server error to the {function} function ({message}); fix: {fix}"
    if is_timeout(error):
        fix = "check the function's network path to the AWS endpoint (VPC endpoints, NAT); the next sweep retries"
        return f"{action} timed out in the {function} function ({message}); fix: {fix}"
    return f"{action} failed in the {function} function ({message}); fix: see the function's logs"
