"""When to escalate to AWS Support: exactly the five situations of the skill, judged on a sweep.

Each situation is judged ``applies`` (the evidence says so), ``confirm`` (the evidence fits but
one fact only the operator knows is missing, e.g. "training still fails") or ``no``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from hyperpod_nccl import thresholds
from hyperpod_nccl.incidents.models import Incident
from hyperpod_nccl.models.findings import Finding, Status, SweepResult
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.references import DBG_EFA_CONFIG, DBG_TCP_FALLBACK, NODE
from hyperpod_nccl.verdict.kinds import HANG_KINDS, classify

SITUATIONS: dict[int, str] = {
    1: "All SG rules are correct and EFA is verified on the nodes, yet NCCL still times out.",
    2: "Hardware checks pass on all nodes, yet AllReduce still hangs.",
    3: "Issues Found: 0, yet training still fails.",
    4: "GPU XID errors persist after node replacement.",
    5: "The collective timeout was raised and the memlock workaround applied, yet rendezvous on a large "
    "cluster still hangs.",
}
# A rendezvous that failed, as the verdict classifies it (its log signatures are listed there once).
RENDEZVOUS_KIND = "rendezvous_failed"
Verdict = Literal["applies", "confirm", "no"]


class Escalation(BaseModel):
    """One of the five situations, judged."""

    number: int
    situation: str
    verdict: Verdict
    why: str


def _kinds(result: SweepResult) -> set[str]:
    """The verdict's cause kinds of the sweep's issues (`verdict.kinds.classify`)."""
    return {kind for f in result.issues if (kind := classify(f)) is not None}


def _is_sg(finding: Finding) -> bool:
    return finding.check_id.startswith("network.security_group")


def _is_efa(finding: Finding) -> bool:
    return finding.reference in (DBG_EFA_CONFIG, DBG_TCP_FALLBACK) or "efa" in finding.check_id


def _is_hardware(finding: Finding) -> bool:
    return finding.reference.file == NODE or bool(finding.fields.get("xid"))


def judge(result: SweepResult, incidents: list[Incident], inventory: Inventory | None = None) -> list[Escalation]:
    """All five situations with a verdict each, in the skill's order."""
    kinds = _kinds(result)
    # A hang is what the verdict classifies as one; an incident's hang entry may also come from
    # attribution facts alone.
    hang_incident = any(e.kind == "hang" for i in incidents for e in i.timeline)
    hung = bool(kinds & HANG_KINDS) or hang_incident
    out: list[Escalation] = []

    sg_ran = any(_is_sg(f) for f in result.findings)
    sg_ok = sg_ran and not any(_is_sg(f) for f in result.issues)
    efa_verified = any(_is_efa(f) and f.status is Status.PASS for f in result.findings)
    efa_ok = efa_verified and not any(_is_efa(f) for f in result.issues)
    out.append(
        _verdict(
            1,
            applies=sg_ok and efa_ok and hung,
            confirm=sg_ok and efa_ok and not hung,
            why=f"security groups {'correct' if sg_ok else 'not verified correct'}, EFA "
            f"{'verified' if efa_ok else 'not verified on the probed nodes'}, NCCL timeouts "
            f"{'seen' if hung else 'not seen in this window'}",
        )
    )

    cov = result.coverage
    all_probed = cov.nodes_total > 0 and cov.nodes_probed == cov.nodes_total
    hardware_ok = not any(_is_hardware(f) for f in result.issues) and not any(
        i.root_cause.xid is not None for i in incidents
    )
    out.append(
        _verdict(
            2,
            applies=all_probed and hardware_ok and hung,
            confirm=hardware_ok and hung and not all_probed,
            why=f"hardware findings: {'none' if hardware_ok else 'present'}; nodes probed "
            f"{cov.nodes_probed}/{cov.nodes_total}"
            + ("" if all_probed else " (probe every node with --sample-nodes all to rule hardware out)")
            + f"; hang {'seen' if hung else 'not seen'}",
        )
    )

    no_issues = not result.issues
    out.append(
        _verdict(
            3,
            applies=False,
            confirm=no_issues,
            why="Issues Found: 0 — escalate if training still fails" if no_issues else f"{len(result.issues)} issue(s)",
        )
    )

    recurring = [i for i in incidents if i.recurrence is not None and i.root_cause.xid is not None]
    out.append(
        _verdict(
            4,
            applies=bool(recurring),
            confirm=False,
            why="; ".join(f"{i.id}: {i.recurrence.detail}" for i in recurring if i.recurrence)
            or "no Xid recurrence after replacement seen",
        )
    )

    large = cov.nodes_total >= thresholds.LARGE_CLUSTER_NODES
    rendezvous = RENDEZVOUS_KIND in kinds
    memlock_applied = _memlock_workaround(inventory)
    out.append(
        _verdict(
            5,
            applies=large and rendezvous and memlock_applied,
            confirm=large and rendezvous and not memlock_applied,
            why=f"{cov.nodes_total} nodes (large from {thresholds.LARGE_CLUSTER_NODES}); rendezvous hang "
            f"{'seen' if rendezvous else 'not seen'}; fixed memlock workaround "
            f"{'in place' if memlock_applied else 'not seen on the probed nodes'} "
            "(a raised collective timeout is not visible from outside the job: confirm it)",
        )
    )
    return out


def _memlock_workaround(inventory: Inventory | None) -> bool:
    """Every probed node runs the large fixed memlock instead of "unlimited"."""
    if inventory is None or inventory.node_probes is None:
        return False
    probes = [r.probe for r in inventory.node_probes.probed() if r.probe is not None]
    return bool(probes) and all(
        p.memlock_kib is not None and p.memlock_kib >= thresholds.LARGE_CLUSTER_MEMLOCK_KIB and not p.memlock_unlimited
        for p in probes
    )


def _verdict(number: int, *, applies: bool, confirm: bool, why: str) -> Escalation:
    verdict: Verdict = "applies" if applies else "confirm" if confirm else "no"
    return Escalation(number=number, situation=SITUATIONS[number], verdict=verdict, why=why)
