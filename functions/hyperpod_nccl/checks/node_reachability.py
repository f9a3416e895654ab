"""Whether each node answered the probe over SSM, and why not when it did not."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from hyperpod_nccl import reads, suggested, thresholds
from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._node import node_label, node_resource
from hyperpod_nccl.models.findings import Finding, Priority
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import NodeProbeResult
from hyperpod_nccl.probe.sections import SECTIONS, describe_missing, missing_sections
from hyperpod_nccl.references import NODE_SSM, OPS_IAM, OPS_SSM_TARGET


@check(
    id="node.reachability",
    title="Nodes reachable over SSM",
    priority=Priority.P1,
    reference=OPS_SSM_TARGET,
    source="node_probes",
)
def reachability(inv: Inventory) -> Iterator[Finding]:
    """Each unreachable node names why and what to fix (IAM, agent, target format, budget).

    A denied StartSession or a KMS-only Session Manager preference is the caller's or the
    account's, not the node's: it is one finding listing every node it kept out.
    """
    if inv.node_probes is None:
        return
    account_wide: dict[str, list[NodeProbeResult]] = defaultdict(list)
    for result in inv.node_probes.results:
        if result.reachable:
            yield from _short_answer(inv, result)
            continue
        # Skipped nodes were not probed (the StartSession rate left no start for them): a partial
        # source says so; nothing is known of the node, so it is no reachability finding.
        if result.instance_id in inv.node_probes.skipped_reasons:
            continue
        kind = result.error_kind or "transport"
        if kind in _ACCOUNT_WIDE:
            account_wide[kind].append(result)
            continue
        reference, detail = OPS_SSM_TARGET, "check the SSM agent on the node and the target format"
        title = f"{node_label(result)} not reachable over SSM ({kind.replace('_', ' ')})"
        if kind == "target_not_connected":
            reference = NODE_SSM
            detail = "the node's SSM agent is not connected: the instance is down, rebooting or being replaced"
            if result.status and result.status != "Running":
                detail += f" (HyperPod status {result.status})"
        elif kind == "budget_expired":
            detail = f"no complete answer within {thresholds.SSM_NODE_BUDGET_SECONDS:.0f} s; partial output kept"
            if result.probe is not None or result.slurm is not None:
                # It answered: what it sent is checked; a GPU tool that hangs (Xid 79) looks like this.
                title = f"{node_label(result)}: {result.error}"
                detail = (
                    "the node answered but did not finish within the probe budget (a GPU tool that hangs, as after "
                    "Xid 79, does this): the sections it sent are checked, the missing ones are not"
                )
        elif kind == "limit_exceeded":
            detail = "the node's answer broke the probe's bounds (a broken or compromised node): inspect the node"
        elif kind == "invalid_target":
            detail = "the SSM target was rejected: check cluster id, instance group and instance id"
        yield reachability.warn(
            title,
            reference=reference,
            detail=detail,
            evidence=[result.error or "", f"attempts: {result.attempts}"],
            resources=[node_resource(result)],
            suggested_commands=[suggested.describe_cluster_node(inv.cluster_name, result.instance_id, inv.region)],
            fields={"error_kind": kind, "signature": kind},
        )
    for kind, results in sorted(account_wide.items()):
        reference, title, detail = _ACCOUNT_WIDE[kind]
        if kind == "access_denied" and all((r.error or "").startswith(reads.OPEN_DATA_CHANNEL) for r in results):
            # Sessions started but their data channels were refused: the missing grant is the channel's.
            title, detail = _DATA_CHANNEL_DENIED
        yield reachability.warn(
            f"{len(results)} node(s) not probed: {title}",
            reference=reference,
            detail=detail,
            evidence=[results[0].error or "", *(node_label(r) for r in results[:10])],
            resources=[node_resource(r) for r in results],
            fields={"error_kind": kind, "signature": kind, "nodes": len(results)},
        )


def _short_answer(inv: Inventory, result: NodeProbeResult) -> Iterator[Finding]:
    """A node that answered with nothing, or with an answer cut off before the script's end (the
    session closed early, the shell was killed): what was not sent is not known, and says so."""
    ended = result.ended_sections()
    parsed = result.slurm if result.role == "slurm_controller" else result.probe
    if not (parsed and parsed.sections) and result.output_bytes == 0 and result.exit_code is None:
        return  # no session record to judge (a result built without one)
    missing = missing_sections(result.role, ended)
    if not missing:
        return
    empty = len(missing) == len(SECTIONS[result.role])
    what = "an empty answer" if empty else f"a cut-off answer ({describe_missing(missing)})"
    yield reachability.warn(
        f"{node_label(result)} gave {what}",
        reference=NODE_SSM,
        detail="the session ended before the probe script did: the checks that read the missing sections say "
        "nothing about this node (they are not passes); probe it again, and look at its SSM agent if it repeats",
        evidence=[f"{result.output_bytes} byte(s) received", f"exit code: {result.exit_code}"],
        resources=[node_resource(result)],
        suggested_commands=[suggested.describe_cluster_node(inv.cluster_name, result.instance_id, inv.region)],
        fields={"error_kind": "empty_answer" if empty else "cut_off_answer", "missing_sections": len(missing)},
    )


# Failures that are the caller's or the account's, not a node's: (reference, title, fix).
_ACCOUNT_WIDE = {
    "access_denied": (
        OPS_IAM,
        f"{reads.START_SESSION} denied",
        f"grant {reads.START_SESSION} and ssm:TerminateSession to the identity running the diagnosis",
    ),
    "kms_encryption": (
        NODE_SSM,
        "Session Manager requires KMS encryption",
        "Session Manager preferences require KMS encryption, which the probe refuses",
    ),
}
# An access denial of the data channel (every denied node's error names it), not of StartSession.
_DATA_CHANNEL_DENIED = (
    f"{reads.OPEN_DATA_CHANNEL} denied",
    f"grant {reads.OPEN_DATA_CHANNEL} on its sessions to the identity running the diagnosis",
)
