"""NCCL transports switched off in the environment of the training processes running on a node
(original probe 13, extended): settings that leave a job running, only slower."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._node import node_label, node_resource, probed_nodes
from hyperpod_nccl.models.findings import Finding, Priority, Resource, Status
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.references import DBG_MEMLOCK_SHM, DBG_P2P_ACS, DBG_TCP_FALLBACK, DBG_TUNING_NVLS, Reference

_MAX_EVIDENCE = 20


@dataclass(frozen=True)
class _Switch:
    """A transport switch: the value that turns it off and what that costs."""

    off_value: str
    status: Status
    priority: Priority
    reference: Reference
    detail: str


# NCCL reads these as integers; "1" disables (NVLS: "0" disables).
_SWITCHES: dict[str, _Switch] = {
    "NCCL_P2P_DISABLE": _Switch(
        "1",
        Status.WARN,
        Priority.P1,
        DBG_P2P_ACS,
        "GPU peer-to-peer (NVLink/PCIe) is off: every intra-node transfer is staged through host memory, "
        "far below NVLink bandwidth. Usually a workaround left from an ACS/IOMMU problem; remove it from the "
        "job and fix the P2P path instead.",
    ),
    "NCCL_SHM_DISABLE": _Switch(
        "1",
        Status.WARN,
        Priority.P2,
        DBG_MEMLOCK_SHM,
        "The shared-memory transport is off: where P2P is unavailable, intra-node traffic falls back to the "
        "network. Remove it unless a /dev/shm problem forced it, and fix that instead.",
    ),
    "NCCL_IB_DISABLE": _Switch(
        "1",
        Status.WARN,
        Priority.P2,
        DBG_TCP_FALLBACK,
        "NCCL's InfiniBand/verbs transport is off. With the aws-ofi-nccl plugin loaded EFA is still used, but "
        "if the plugin is missing from the image the job silently runs over TCP sockets.",
    ),
    "NCCL_NVLS_ENABLE": _Switch(
        "0",
        Status.INFO,
        Priority.P2,
        DBG_TUNING_NVLS,
        "NVLink SHARP is off: the documented workaround for NVLS hangs at init. Keep it only until the AMI, "
        "driver and container NCCL match again.",
    ),
}


@check(
    id="node.nccl_p2p_env",
    title="NCCL transports disabled in running jobs",
    priority=Priority.P1,
    reference=DBG_P2P_ACS,
    source="node_probes",
)
def nccl_p2p_env(inv: Inventory) -> Iterator[Finding]:
    """One finding per switched-off transport, naming the nodes and processes that run with it."""
    hits: dict[str, tuple[list[Resource], list[str]]] = {}
    for result, probe in probed_nodes(inv):
        for variable, switch in _SWITCHES.items():
            pids = [job.pid for job in probe.nccl_jobs if job.env.get(variable, "").strip() == switch.off_value]
            if pids:
                nodes, evidence = hits.setdefault(variable, ([], []))
                nodes.append(node_resource(result))
                evidence.append(f"{node_label(result)}: {variable}={switch.off_value} in {len(pids)} process(es)")
    for variable, (nodes, evidence) in sorted(hits.items()):
        switch = _SWITCHES[variable]
        yield nccl_p2p_env.finding(
            switch.status,
            f"{variable}={switch.off_value} in the training processes of {len(nodes)} node(s)",
            priority=switch.priority,
            reference=switch.reference,
            detail=switch.detail,
            evidence=evidence[:_MAX_EVIDENCE],
            resources=nodes,
            fields={"variable": variable, "value": switch.off_value},
        )
