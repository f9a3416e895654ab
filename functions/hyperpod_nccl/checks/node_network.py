"""On-node EFA and network checks: device count, libfabric provider, aws-ofi-nccl, GPUDirect
RDMA, MTU and the host firewall."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_nccl import instance_types
from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._node import counted_node_lines, node_label, node_resource, probed_nodes, reboot, replace
from hyperpod_nccl.models.findings import Finding, Priority
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import FiInfoEfaEntry, NodeProbeResult
from hyperpod_nccl.probe.sections import NodeSection
from hyperpod_nccl.references import (
    DBG_EFA_CONFIG,
    DBG_HOST_FIREWALL,
    DBG_TCP_FALLBACK,
    NODE_HARDWARE,
    PERF_EFA_SETTINGS,
)

# Jumbo frames on the VPC ENI (EC2 supports 9001 inside a VPC); below this NCCL's socket paths fragment.
MIN_ENI_MTU = 9000
# Nodes listed, one line each, in the evidence of the EFA provider's PASS (the count says the rest).
MAX_PROVIDER_LINES = 50
_GDR_MODULES = {"nvidia_peermem", "nv_peer_mem"}


@check(
    id="node.efa_devices",
    title="EFA devices present",
    priority=Priority.P0,
    reference=NODE_HARDWARE,
    source="node_probes",
)
def efa_devices(inv: Inventory) -> Iterator[Finding]:
    """Fewer EFA devices than the instance type has → reboot, then replace (node-debugger § F)."""
    ok = 0
    for result, probe in probed_nodes(inv):
        expected = instance_types.expected_efa(result.instance_type or "")
        if not expected:
            continue
        seen = probe.fi_info_efa_domains or (len(probe.efa_devices) if probe.efa_devices is not None else None)
        if seen is None:
            continue
        if seen < expected:
            yield efa_devices.fail(
                f"{seen} of {expected} EFA devices on {node_label(result)}",
                detail="a missing EFA device removes its bandwidth share from every collective of the node; "
                "reboot first, replace if the count stays short",
                evidence=[
                    f"fi_info -p efa domains: {probe.fi_info_efa_domains}",
                    f"/sys/class/infiniband: {len(probe.efa_devices or [])}",
                ],
                resources=[node_resource(result)],
                suggested_commands=[reboot(inv, result), replace(inv, result)],
                fields={"expected": expected, "found": seen},
            )
        else:
            ok += 1
    if ok:
        yield efa_devices.passed(f"every EFA device present on {ok} node(s)")


@check(
    id="node.efa_driver",
    title="EFA kernel driver",
    priority=Priority.P0,
    reference=DBG_EFA_CONFIG,
    source="node_probes",
)
def efa_driver(inv: Inventory) -> Iterator[Finding]:
    """EFA devices need the `efa` kernel driver: uverbs devices present while the driver is neither a
    loaded module (lsmod) nor built in (/sys/module/efa) fail (original probe 15). Nothing is claimed
    when lsmod did not run."""
    loaded = 0
    for result, probe in probed_nodes(inv):
        driver = "efa" in probe.kernel_modules or probe.versions.efa_module is not None
        if driver:
            loaded += 1
            continue
        if probe.section_rc(NodeSection.MODULES) is None or not probe.uverbs_devices:
            continue  # lsmod gave no answer, or no RDMA device to drive
        yield efa_driver.fail(
            f"EFA kernel driver not loaded on {node_label(result)} although {probe.uverbs_devices} uverbs "
            "device(s) exist",
            detail="libfabric's EFA provider cannot open the devices: NCCL falls back to TCP sockets or fails; "
            "reinstall the EFA driver (the EFA installer) or reboot into a kernel it was built for",
            evidence=[f"lsmod: {', '.join(probe.kernel_modules) or 'none of efa, ib_core, ib_uverbs'}"],
            resources=[node_resource(result)],
            suggested_commands=[reboot(inv, result)],
        )
    if loaded:
        yield efa_driver.passed(f"EFA kernel driver loaded on {loaded} node(s)")


@check(
    id="node.efa_provider",
    title="libfabric EFA provider",
    priority=Priority.P0,
    reference=DBG_EFA_CONFIG,
    source="node_probes",
)
def efa_provider(inv: Inventory) -> Iterator[Finding]:
    """`fi_info -p efa` must find the provider on EFA instance types, else NCCL falls back to TCP.
    Where it does, each node's provider version and endpoint type are shown (one PASS for all):
    nodes of one cluster that disagree run different libfabric builds."""
    found: list[str] = []
    for result, probe in probed_nodes(inv):
        if not instance_types.expects_efa_for_nccl(result.instance_type or ""):
            continue
        if probe.fi_info_efa_domains == 0 or (probe.fi_info_efa_domains is None and probe.fi_info_error):
            yield efa_provider.fail(
                f"EFA provider not available on {node_label(result)}",
                detail=f"NCCL will use TCP sockets (10-100x slower); see also {DBG_TCP_FALLBACK.pointer}",
                evidence=[
                    probe.fi_info_error or "fi_info -p efa found no EFA domain",
                    *[_fi_info_entry(entry) for entry in probe.fi_info_efa_entries[:8]],
                ],
                resources=[node_resource(result)],
            )
        elif probe.fi_info_efa_domains:
            found.append(_provider_line(result, probe.fi_info_efa_domains, probe.fi_info_efa_entries))
    if found:
        yield efa_provider.passed(
            f"EFA provider found on {len(found)} node(s)",
            evidence=counted_node_lines(found, MAX_PROVIDER_LINES),
        )


def _fi_info_entry(entry: FiInfoEfaEntry) -> str:
    """`efa rdmap16s27-rdm: version 111.20, FI_EP_RDM`: one fi_info entry in evidence."""
    return f"{entry.provider} {entry.domain}: version {entry.version or '?'}, {entry.endpoint_type or 'type ?'}"


def _provider_line(result: NodeProbeResult, domains: int, entries: list[FiInfoEfaEntry]) -> str:
    """`i-0abc (worker): 4 EFA domain(s), provider efa 111.20 (FI_EP_RDM)`: the distinct provider
    versions and endpoint types of one node (left out where fi_info printed none of their shape)."""
    kinds = sorted(
        {
            e.provider + (f" {e.version}" if e.version else "") + (f" ({e.endpoint_type})" if e.endpoint_type else "")
            for e in entries
        }
    )
    return f"{node_label(result)}: {domains} EFA domain(s)" + (f", provider {'; '.join(kinds[:4])}" if kinds else "")


@check(
    id="node.ofi_nccl_plugin",
    title="aws-ofi-nccl plugin installed",
    priority=Priority.P1,
    reference=DBG_TCP_FALLBACK,
    source="node_probes",
)
def ofi_nccl_plugin(inv: Inventory) -> Iterator[Finding]:
    """EFA nodes need libnccl-net (aws-ofi-nccl) on the host or in the image (original probe 18): a
    job whose NCCL_NET_PLUGIN names a file that is not there fails; no plugin on the host fails when
    the node's job asks for EFA (FI_PROVIDER=efa), and warns otherwise (the image may ship it)."""
    for result, probe in probed_nodes(inv):
        efa_node = instance_types.expects_efa_for_nccl(result.instance_type or "")
        if probe.nccl_net_plugin and probe.nccl_net_plugin_present is False:
            yield ofi_nccl_plugin.fail(
                f"NCCL_NET_PLUGIN={probe.nccl_net_plugin} of the job on {node_label(result)} names no file",
                detail="NCCL cannot load the network plugin it is told to: it fails to initialise or runs over TCP "
                "sockets; point NCCL_NET_PLUGIN at the plugin the image ships (or unset it)",
                resources=[node_resource(result)],
                fields={"nccl_net_plugin": probe.nccl_net_plugin},
            )
            continue
        if not (efa_node and probe.section_rc(NodeSection.OFI_NCCL) is not None and not probe.ofi_nccl_plugin):
            continue
        efa_job = [job.pid for job in probe.nccl_jobs if job.env.get("FI_PROVIDER", "").strip() == "efa"]
        if efa_job:
            yield ofi_nccl_plugin.fail(
                f"aws-ofi-nccl (libnccl-net) not found on {node_label(result)}, whose job asks for FI_PROVIDER=efa",
                detail="without the plugin NCCL never reaches libfabric: the job runs over TCP sockets whatever "
                "FI_PROVIDER says (unless its image ships the plugin on NCCL's library path)",
                evidence=[f"FI_PROVIDER=efa in pid(s) {', '.join(map(str, efa_job[:8]))}"],
                resources=[node_resource(result)],
            )
        else:
            yield ofi_nccl_plugin.warn(
                f"aws-ofi-nccl (libnccl-net) not found on the host of {node_label(result)}",
                detail="fine when every training image ships the plugin; otherwise NCCL uses TCP",
                resources=[node_resource(result)],
            )


@check(
    id="node.gpudirect_rdma",
    title="GPUDirect RDMA kernel module",
    priority=Priority.P2,
    reference=DBG_EFA_CONFIG,
    source="node_probes",
)
def gpudirect_rdma(inv: Inventory) -> Iterator[Finding]:
    """nvidia_peermem loaded, or a kernel new enough for DMA-BUF (>= 5.12)."""
    for result, probe in probed_nodes(inv):
        if not probe.gpu_present or not instance_types.expects_efa_for_nccl(result.instance_type or ""):
            continue
        if _GDR_MODULES & set(probe.kernel_modules):
            continue
        kernel = probe.versions.kernel or ""
        parts = kernel.split(".")
        new_enough = (
            len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() and (int(parts[0]), int(parts[1])) >= (5, 12)
        )
        if not new_enough:
            yield gpudirect_rdma.warn(
                f"no GPUDirect RDMA module on {node_label(result)} (kernel {kernel or 'unknown'})",
                detail="without nvidia_peermem (or DMA-BUF on kernel >= 5.12) EFA copies through host memory",
                resources=[node_resource(result)],
            )


@check(id="node.mtu", title="Interface MTU", priority=Priority.P2, reference=PERF_EFA_SETTINGS, source="node_probes")
def mtu(inv: Inventory) -> Iterator[Finding]:
    """VPC ENIs should run jumbo frames (9001)."""
    for result, probe in probed_nodes(inv):
        small = [i for i in probe.interfaces if i.kind == "eni" and i.state == "UP" and i.mtu and i.mtu < MIN_ENI_MTU]
        if small:
            yield mtu.warn(
                f"MTU below {MIN_ENI_MTU} on {', '.join(i.name for i in small)} of {node_label(result)}",
                evidence=[f"{i.name}: mtu {i.mtu}" for i in small],
                resources=[node_resource(result)],
            )


@check(
    id="node.firewall", title="Host firewall", priority=Priority.P1, reference=DBG_HOST_FIREWALL, source="node_probes"
)
def firewall(inv: Inventory) -> Iterator[Finding]:
    """DROP/REJECT rules outside the Kubernetes chains can cut rendezvous (29400-29500) or RDMA."""
    for result, probe in probed_nodes(inv):
        if probe.firewall_rules:
            yield firewall.warn(
                f"{len(probe.firewall_rules)} DROP/REJECT rule(s) in the host firewall of {node_label(result)}",
                evidence=probe.firewall_rules[:5],
                resources=[node_resource(result)],
            )
