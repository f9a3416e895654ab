"""cdk-nag (AwsSolutions) acknowledgements, each with its reason, recorded where the finding is caused.

cdk-nag 3 reports one finding per wildcard (`AwsSolutions-IAM5[Resource::<arn>]`,
`AwsSolutions-IAM5[Action::<action>]`) and acknowledges them one by one through CDK's
`Validations.of(construct).acknowledge(...)`. Constructs call `acknowledge_*` next to the statement
that needs it; `apply(stack)` writes them out once, joining the reasons when several causes share a
finding id on the same construct (for example two different `"*"` statements of one role).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from aws_cdk import Acknowledgment, Stack, Token, Validations
from constructs import IConstruct

IAM5 = "AwsSolutions-IAM5"

# (construct path, object id) -> (construct, finding id -> reasons); the object id keeps two apps
# built in one process (tests) apart.
_PENDING: dict[tuple[str, int], tuple[IConstruct, dict[str, list[str]]]] = {}


def nag_text(scope: IConstruct, value: str) -> str:
    """Render a (possibly tokenized) string the way cdk-nag prints it in finding ids:
    `{"Ref": "AWS::Partition"}` becomes `<AWS::Partition>`, a GetAtt becomes `<Logical.Attr>`."""
    if not Token.is_unresolved(value):
        return value
    return _render(Stack.of(scope).resolve(value))


def _render(resolved: Any) -> str:
    if isinstance(resolved, str):
        return resolved
    if isinstance(resolved, dict) and "Fn::Join" in resolved:
        separator, parts = resolved["Fn::Join"]
        return str(separator).join(_render(part) for part in parts)
    if isinstance(resolved, dict) and "Ref" in resolved:
        return f"<{resolved['Ref']}>"
    if isinstance(resolved, dict) and "Fn::GetAtt" in resolved:
        logical, attribute = resolved["Fn::GetAtt"]
        return f"<{logical}.{attribute}>"
    raise ValueError(f"cannot render {resolved!r} as a cdk-nag finding id")


def acknowledge(construct: IConstruct, finding: str, reason: str) -> None:
    """Record that `finding` (a full cdk-nag id such as `AwsSolutions-IAM5[Resource::*]`) is accepted
    on `construct` and its children, because of `reason`."""
    _, findings = _PENDING.setdefault((construct.node.path, id(construct)), (construct, {}))
    reasons = findings.setdefault(finding, [])
    if reason not in reasons:
        reasons.append(reason)


def acknowledge_wildcard_resources(construct: IConstruct, resources: Iterable[str], reason: str) -> None:
    """Acknowledge AwsSolutions-IAM5 for every resource of `resources` that contains a wildcard."""
    for resource in resources:
        text = nag_text(construct, resource)
        if "*" in text:
            acknowledge(construct, f"{IAM5}[Resource::{text}]", reason)


def apply(stack: Stack) -> None:
    """Write out every acknowledgement recorded for constructs of `stack`."""
    prefix = stack.node.path
    for key in [k for k in _PENDING if k[0] == prefix or k[0].startswith(prefix + "/")]:
        construct, findings = _PENDING.pop(key)
        for finding, reasons in findings.items():
            Validations.of(construct).acknowledge(Acknowledgment(id=finding, reason=" ".join(reasons)))
