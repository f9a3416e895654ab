"""Security-group checks: EFA and NCCL need all traffic allowed between cluster members,
inbound and outbound, on every security group the nodes carry."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_nccl import suggested
from hyperpod_nccl.checks import check
from hyperpod_nccl.models.cluster import SecurityGroup, SecurityGroupRule
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.reads import DESCRIBE_SECURITY_GROUPS
from hyperpod_nccl.references import OPS_REMEDIATIONS


def _allows_group(rules: list[SecurityGroupRule], source_group: str) -> str:
    """'all' when a rule allows all traffic to/from `source_group`, 'partial' when only some
    protocols/ports are allowed, '' when nothing is."""
    matching = [r for r in rules if source_group in r.group_ids]
    if any(r.protocol == "-1" for r in matching):
        return "all"
    return "partial" if matching else ""


def _describe(rules: list[SecurityGroupRule], group_id: str) -> list[str]:
    return [f"{r.protocol} {r.from_port}-{r.to_port} from/to {group_id}" for r in rules if group_id in r.group_ids]


@check(
    id="network.security_group_self_reference",
    title="Security-group self-referencing rules (inbound and outbound)",
    priority=Priority.P0,
    reference=OPS_REMEDIATIONS,
    source="control_plane",
    reads=(DESCRIBE_SECURITY_GROUPS,),
)
def security_group_self_reference(inv: Inventory) -> Iterator[Finding]:
    """Each attached SG must allow all traffic from and to itself (EFA needs protocol -1)."""
    cp = inv.control_plane
    if cp.security_groups is None:
        return
    if not cp.security_group_attachments:
        yield security_group_self_reference.warn(
            "the cluster's VpcConfig lists no security groups",
            priority=Priority.P1,
        )
        return
    for group_id, attached_to in sorted(cp.security_group_attachments.items()):
        group = cp.security_groups.get(group_id)
        resource = [Resource(kind="security_group", id=group_id)]
        if group is None:
            yield security_group_self_reference.warn(
                f"security group {group_id} was not returned by DescribeSecurityGroups",
                priority=Priority.P1,
                detail=f"attached to {', '.join(attached_to)}; it may have been deleted",
                resources=resource,
            )
            continue
        yield from _evaluate_group(inv, group, attached_to)


def _evaluate_group(inv: Inventory, group: SecurityGroup, attached_to: list[str]) -> Iterator[Finding]:
    check_ = security_group_self_reference
    resource = [Resource(kind="security_group", id=group.group_id, name=group.name)]
    clean = True
    for direction, rules in (("ingress", group.ingress), ("egress", group.egress)):
        allowed = _allows_group(rules, group.group_id)
        word = "inbound" if direction == "ingress" else "outbound"
        if allowed == "all":
            continue
        clean = False
        if allowed == "partial":
            yield check_.fail(
                f"{group.group_id} allows only some {word} traffic from itself; EFA needs all protocols",
                priority=Priority.P1,
                evidence=_describe(rules, group.group_id),
                detail=f"attached to {', '.join(attached_to)}",
                resources=resource,
                suggested_commands=[suggested.sg_self_reference(group.group_id, inv.region, direction)],
                fields={"signature": direction},
            )
        else:
            yield check_.fail(
                f"{group.group_id} has no {word} self-referencing rule",
                detail=(
                    f"attached to {', '.join(attached_to)}; NCCL rendezvous and EFA RDMA between nodes are dropped. "
                    "Do not add 0.0.0.0/0 egress on the EFA group instead."
                ),
                resources=resource,
                suggested_commands=[suggested.sg_self_reference(group.group_id, inv.region, direction)],
                fields={"signature": direction},
            )
    if clean:
        yield check_.passed(f"{group.group_id} allows all traffic to and from itself", resources=resource)


@check(
    id="network.security_group_cross_group",
    title="Security groups of different instance groups admit each other",
    priority=Priority.P1,
    reference=OPS_REMEDIATIONS,
    source="control_plane",
    reads=(DESCRIBE_SECURITY_GROUPS,),
)
def security_group_cross_group(inv: Inventory) -> Iterator[Finding]:
    """When instance groups override the cluster's SGs, nodes of one group must still reach
    the other's for a communicator spanning both."""
    cp = inv.control_plane
    if cp.security_groups is None or len(cp.security_group_attachments) < 2:
        return
    ids = sorted(cp.security_group_attachments)
    for target in ids:
        group = cp.security_groups.get(target)
        if group is None:
            continue
        for source_id in ids:
            if source_id == target or _allows_group(group.ingress, source_id) == "all":
                continue
            yield security_group_cross_group.warn(
                f"{target} does not admit all traffic from {source_id}",
                detail=(
                    f"{target} is attached to {', '.join(cp.security_group_attachments[target])}; "
                    f"{source_id} to {', '.join(cp.security_group_attachments[source_id])}. "
                    "A job spanning both instance groups cannot form its NCCL rings."
                ),
                resources=[
                    Resource(kind="security_group", id=target),
                    Resource(kind="security_group", id=source_id),
                ],
            )
