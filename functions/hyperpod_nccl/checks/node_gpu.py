"""On-node GPU checks: Xid, ECC, row remapping, DCGM, GPU inventory, NVLink, P2P path."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_nccl import instance_types
from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._node import (
    gpu_resources,
    node_label,
    node_resource,
    nodes_count,
    probed_nodes,
    reboot,
    replace,
)
from hyperpod_nccl.models.findings import Finding, Priority
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import GpuInfo, GpuNicAffinity, NodeProbeResult, NvlinkGpu
from hyperpod_nccl.references import DBG_P2P_ACS, NODE_DCGM, NODE_GPU, NODE_NVIDIA, NODE_ROW_REMAP
from hyperpod_nccl.xid import most_severe_action, xid_info


@check(
    id="node.gpu_xid",
    title="GPU Xid errors on the node",
    priority=Priority.P0,
    reference=NODE_GPU,
    source="node_probes",
)
def gpu_xid(inv: Inventory) -> Iterator[Finding]:
    """Each node with Xid lines: hardware Xids are P0 (reboot or replace per § G), app Xids P1."""
    clean = 0
    for result, probe in probed_nodes(inv):
        if not probe.xids:
            clean += probe.gpu_present is True
            continue
        # The models hold one bus id spelling (`PciBusId`): nvidia-smi's rows and the kernel's Xid lines match.
        gpu_by_bus = {g.bus_id: g for g in probe.gpus}
        codes = sorted({x.code for x in probe.xids})
        action = most_severe_action(codes)
        hardware = any(xid_info(c).is_hardware or xid_info(c).category == "unknown" for c in codes)
        evidence = []
        for event in probe.xids[:8]:
            gpu = gpu_by_bus.get(event.bus_id)
            info = xid_info(event.code)
            where = f"GPU {gpu.index} serial {gpu.serial}" if gpu else f"PCI {event.bus_id}"
            if event.gpu_instance is not None:  # the driver attributed it to a MIG instance
                where += f" (MIG GPU-I {event.gpu_instance}"
                where += f", GPU-CI {event.compute_instance})" if event.compute_instance is not None else ")"
            times = f" x{event.count}" if event.count > 1 else ""
            evidence.append(f"Xid {event.code}{times} ({info.name}; {info.category}, action {info.action}) on {where}")
        commands = []
        if action == "replace":
            commands.append(replace(inv, result))
        elif action in ("reboot", "reset-gpu"):
            commands.append(reboot(inv, result))
        yield gpu_xid.fail(
            f"Xid {', '.join(map(str, codes))} on {node_label(result)} → {action}",
            priority=Priority.P0 if hardware else Priority.P1,
            detail=("hardware fault: drain the node, then " + action)
            if hardware
            else "application-level Xid: fix or restart the workload before touching hardware",
            evidence=evidence + [e.line for e in probe.xids[:3]],
            resources=[node_resource(result), *gpu_resources(gpu_by_bus.get(e.bus_id) for e in probe.xids)],
            suggested_commands=commands,
            # One code is a number, several a comma list (the classifier's rule for a field's values).
            fields={
                "xid_codes": codes[0] if len(codes) == 1 else ",".join(map(str, codes)),
                "action": action,
                # how many lines the kernel printed per code, over the probe's whole window
                "xid_lines": ",".join(f"{code}:{sum(x.count for x in probe.xids if x.code == code)}" for code in codes),
            },
        )
    if clean:
        yield gpu_xid.passed(f"no Xid in the kernel log of {clean} GPU node(s)")


@check(
    id="node.nvswitch_sxid",
    title="NVSwitch SXid errors on the node",
    priority=Priority.P0,
    reference=NODE_GPU,
    source="node_probes",
)
def nvswitch_sxid(inv: Inventory) -> Iterator[Finding]:
    """NVSwitch faults the switch driver logged (p4d, p4de, p5, p5en and p6 route every GPU-to-GPU
    byte through their NVSwitches). A fatal SXid leaves the node's NVLink fabric unusable until the
    switches are reset: drain, then reboot (replace if it recurs). Non-fatal ones were corrected:
    reported with their counts, since a link that keeps erring is wearing out."""
    clean = 0
    for result, probe in probed_nodes(inv):
        if not probe.sxids:
            clean += probe.gpu_present is True
            continue
        fatal = [event for event in probe.sxids if event.fatal]
        evidence = []
        for event in probe.sxids[:8]:
            kind = {True: "fatal", False: "non-fatal", None: "no severity given"}[event.fatal]
            links = f", link(s) {', '.join(map(str, event.links))}" if event.links else ""
            times = f" x{event.count}" if event.count > 1 else ""
            evidence.append(f"SXid {event.code}{times} ({kind}) on {event.switch} (PCI {event.bus_id}){links}")
        evidence += [event.line for event in (fatal or probe.sxids)[:3]]
        codes = sorted({event.code for event in (fatal or probe.sxids)})
        fields: dict[str, str | int | float | bool | None] = {
            "sxid_codes": codes[0] if len(codes) == 1 else ",".join(map(str, codes)),
            "action": "reboot" if fatal else "none",
        }
        if fatal:
            yield nvswitch_sxid.fail(
                f"fatal SXid {', '.join(map(str, codes))} on {node_label(result)} → reboot",
                detail="the NVSwitch fabric of the node stays down until its switches are reset: drain the node, "
                "then reboot it; replace it if the SXid recurs",
                evidence=evidence,
                resources=[node_resource(result)],
                suggested_commands=[reboot(inv, result)],
                fields=fields,
            )
        else:
            yield nvswitch_sxid.warn(
                f"non-fatal SXid {', '.join(map(str, codes))} on {node_label(result)}",
                priority=Priority.P2,
                detail="corrected by the switch; a link that keeps erring is degrading: watch the counts, and "
                "replace the node if they grow",
                evidence=evidence,
                resources=[node_resource(result)],
                fields=fields,
            )
    if clean:
        yield nvswitch_sxid.passed(f"no SXid in the kernel log of {clean} GPU node(s)")


@check(
    id="node.gpu_ecc",
    title="Uncorrectable ECC errors",
    priority=Priority.P0,
    reference=NODE_NVIDIA,
    source="node_probes",
)
def gpu_ecc(inv: Inventory) -> Iterator[Finding]:
    """Volatile uncorrectable ECC errors in the current boot."""
    for result, probe in probed_nodes(inv):
        bad = [g for g in probe.gpus if (g.ecc_uncorrected_volatile or 0) > 0]
        if bad:
            yield gpu_ecc.fail(
                f"uncorrectable ECC errors on {len(bad)} GPU(s) of {node_label(result)}",
                detail=f"read together with the row-remap state ({NODE_ROW_REMAP.pointer}): pending remap → reboot; "
                "failure → replace",
                evidence=[
                    f"{_gpu_label(g)}: {g.ecc_uncorrected_volatile} this boot"
                    + (
                        f", {g.ecc_uncorrected_aggregate} over its life"
                        if g.ecc_uncorrected_aggregate is not None
                        else ""
                    )
                    for g in bad
                ],
                resources=[node_resource(result), *gpu_resources(bad)],
                suggested_commands=[reboot(inv, result)],
            )


@check(
    id="node.gpu_row_remap",
    title="GPU memory repair pending or failed (row remapping, page retirement)",
    priority=Priority.P0,
    reference=NODE_ROW_REMAP,
    source="node_probes",
)
def gpu_row_remap(inv: Inventory) -> Iterator[Finding]:
    """Ampere and newer remap rows: failure → replace (P0); pending → reboot to apply it (P1).
    Older GPUs (V100, T4) retire pages instead: a retirement pending → reboot (P1); pages already
    retired after double-bit errors are reported (P2) so that their growth is seen."""
    checked = 0
    for result, probe in probed_nodes(inv):
        retiring = [g for g in probe.gpus if g.retirement_pending is not None]
        if not probe.remapped_rows and not retiring:
            continue
        checked += 1
        failed = [r for r in probe.remapped_rows if r.failure]
        pending = [r for r in probe.remapped_rows if r.pending and not r.failure]
        retire_pending = [g for g in retiring if g.retirement_pending]
        double_bit = [g for g in retiring if (g.retired_pages_double_bit or 0) > 0 and not g.retirement_pending]
        gpu_by_bus = {g.bus_id: g for g in probe.gpus}
        if retire_pending:
            yield gpu_row_remap.fail(
                f"page retirement pending on {len(retire_pending)} GPU(s) of {node_label(result)} → reboot",
                priority=Priority.P1,
                detail="a page marked for retirement is taken out of use only when the driver reloads; if it is "
                "still pending after a reboot, replace",
                evidence=[_retired(g) for g in retire_pending],
                resources=[node_resource(result), *gpu_resources(retire_pending)],
                suggested_commands=[reboot(inv, result)],
                fields={"state": "retirement_pending"},
            )
        elif double_bit:
            yield gpu_row_remap.warn(
                f"pages retired after double-bit ECC errors on {len(double_bit)} GPU(s) of {node_label(result)}",
                priority=Priority.P2,
                detail="retired pages are kept out of use (nothing to do now); a count that grows between "
                "sweeps means failing memory: replace",
                evidence=[_retired(g) for g in double_bit],
                resources=[node_resource(result), *gpu_resources(double_bit)],
                fields={"state": "retired"},
            )
        if failed:
            yield gpu_row_remap.fail(
                f"row remapping FAILED on {len(failed)} GPU(s) of {node_label(result)} → replace",
                detail="no spare rows are left: the GPU can no longer hide bad memory",
                evidence=[f"{r.bus_id}: failure=Yes uncorrectable={r.uncorrectable}" for r in failed],
                resources=[node_resource(result), *gpu_resources(gpu_by_bus.get(r.bus_id) for r in failed)],
                suggested_commands=[replace(inv, result)],
                fields={"state": "failure"},
            )
        elif pending:
            yield gpu_row_remap.fail(
                f"row remap pending on {len(pending)} GPU(s) of {node_label(result)} → reboot",
                priority=Priority.P1,
                detail="the remap takes effect only after a GPU reset; if it is still pending after a reboot, replace",
                evidence=[f"{r.bus_id}: pending=Yes uncorrectable={r.uncorrectable}" for r in pending],
                resources=[node_resource(result), *gpu_resources(gpu_by_bus.get(r.bus_id) for r in pending)],
                suggested_commands=[reboot(inv, result)],
                fields={"state": "pending"},
            )
    if checked:
        yield gpu_row_remap.passed(f"row-remap state read on {checked} node(s)")


def _gpu_label(gpu: GpuInfo) -> str:
    """`GPU 3 (0000:53:00.0, serial 1650923012345)`: how a GPU is named in evidence."""
    return f"GPU {gpu.index} ({gpu.bus_id}, serial {gpu.serial})"


def _retired(gpu: GpuInfo) -> str:
    pending = "Yes" if gpu.retirement_pending else "No"
    return (
        f"{_gpu_label(gpu)}: retirement pending={pending}, "
        f"retired pages: {gpu.retired_pages_double_bit} double-bit, {gpu.retired_pages_single_bit} multiple single-bit"
    )


@check(
    id="node.gpu_clocks",
    title="GPU clocks held down by hardware or heat",
    priority=Priority.P1,
    reference=NODE_NVIDIA,
    source="node_probes",
)
def gpu_clocks(inv: Inventory) -> Iterator[Finding]:
    """A GPU whose clocks a hardware slowdown, a power brake or a thermal limit holds down runs every
    kernel slower: its rank arrives late at each collective and the whole job waits on it (NCCL and
    PyTorch timeouts on the other ranks). Policy limits (idle, power cap, application clocks) are not faults."""
    checked = 0
    for result, probe in probed_nodes(inv):
        if not probe.gpus:
            continue
        checked += 1
        slow = [g for g in probe.gpus if g.clock_faults]
        if slow:
            yield gpu_clocks.warn(
                f"clocks held down on {len(slow)} GPU(s) of {node_label(result)}",
                detail="a slowed GPU makes its rank a straggler; check cooling and power (HW slowdown or power "
                "brake: drain and reboot; if it persists, replace)",
                evidence=[
                    f"{_gpu_label(g)}: {', '.join(g.clock_faults)} active"
                    + (f", {g.temperature_c} C" if g.temperature_c is not None else "")
                    for g in slow[:8]
                ],
                resources=[node_resource(result), *gpu_resources(slow)],
                suggested_commands=[reboot(inv, result)],
            )
    if checked:
        yield gpu_clocks.passed(f"no hardware or thermal clock limit active on the GPUs of {checked} node(s)")


@check(id="node.gpu_dcgm", title="DCGM health", priority=Priority.P1, reference=NODE_DCGM, source="node_probes")
def gpu_dcgm(inv: Inventory) -> Iterator[Finding]:
    """DCGM overall Fail/Warn, or FAIL lines in the newest nvvs log. Pass is not trusted alone."""
    for result, probe in probed_nodes(inv):
        overall = (probe.dcgm_overall or "").lower()
        if overall.startswith(("fail", "warn")) or probe.nvvs_failures:
            yield gpu_dcgm.fail(
                f"DCGM reports {probe.dcgm_overall or 'failures'} on {node_label(result)}",
                priority=Priority.P0 if overall.startswith("fail") else Priority.P1,
                evidence=[*probe.dcgm_incidents[:5], *probe.nvvs_failures[:5]],
                resources=[node_resource(result)],
                suggested_commands=[reboot(inv, result)],
            )


@check(
    id="node.gpu_inventory",
    title="GPUs visible to the driver",
    priority=Priority.P0,
    reference=NODE_GPU,
    source="node_probes",
)
def gpu_inventory(inv: Inventory) -> Iterator[Finding]:
    """nvidia-smi must answer and show every GPU of the instance type."""
    without_gpus: dict[str, int] = {}
    for result, probe in probed_nodes(inv):
        expected = instance_types.GPUS_PER_INSTANCE.get(result.instance_type or "")
        if result.instance_type and instance_types.accelerator(result.instance_type) != "nvidia":
            without_gpus[result.instance_type] = without_gpus.get(result.instance_type, 0) + 1
            continue
        if probe.gpu_present is False or probe.gpu_query_ok is False:
            yield gpu_inventory.fail(
                f"nvidia-smi cannot query the GPUs of {node_label(result)}",
                detail="driver not loaded, a GPU fell off the bus, or nvidia-smi hangs",
                evidence=probe.gpu_query_messages[:5],
                resources=[node_resource(result)],
                suggested_commands=[reboot(inv, result)],
            )
        elif expected and probe.gpus and len(probe.gpus) < expected:
            yield gpu_inventory.fail(
                f"{len(probe.gpus)} of {expected} GPUs visible on {node_label(result)}",
                resources=[node_resource(result)],
                suggested_commands=[reboot(inv, result), replace(inv, result)],
            )
    if without_gpus:
        types = ", ".join(f"{count} x {name}" for name, count in sorted(without_gpus.items()))
        yield gpu_inventory.info(
            f"GPU checks skipped on {sum(without_gpus.values())} node(s) without NVIDIA GPUs ({types})",
            detail="their instance types carry no NVIDIA GPU; limits, network and EFA checks still apply",
        )


def _inactive_nvlinks(entries: list[str]) -> str:
    """'2 NVLink link(s) inactive', or 'every NVLink of GPU 3 inactive' when NVML reports a GPU
    with all its links down (one entry, no link number)."""
    whole_gpus = [" ".join(e.split()[:2]) for e in entries if not re.search(r"\bLink \d+", e)]
    parts = []
    if len(entries) > len(whole_gpus):
        parts.append(f"{len(entries) - len(whole_gpus)} NVLink link(s) inactive")
    if whole_gpus:
        parts.append(f"every NVLink of {', '.join(whole_gpus)} inactive")
    return " and ".join(parts)


def _degraded_nvlinks(gpus: list[NvlinkGpu]) -> list[str]:
    """GPUs with fewer active links, or a slower link, than the most common count and speed of their
    peers (one line each); nothing with fewer than two GPUs to compare."""
    if len(gpus) < 2:
        return []
    counts = [len(g.speeds_gbps) for g in gpus]
    usual_count = max(set(counts), key=counts.count)
    speeds = [speed for g in gpus for speed in g.speeds_gbps]
    usual_speed = max(set(speeds), key=speeds.count) if speeds else None
    degraded = []
    for gpu in gpus:
        slow = [speed for speed in gpu.speeds_gbps if usual_speed is not None and speed < usual_speed]
        if len(gpu.speeds_gbps) < usual_count or slow:
            what = f"{len(gpu.speeds_gbps)} active link(s) where its peers have {usual_count}"
            if slow:
                what += f", {len(slow)} at {min(slow)} GB/s (peers {usual_speed} GB/s)"
            degraded.append(f"{gpu.gpu}: {what}")
    return degraded


@check(id="node.nvlink", title="NVLink links", priority=Priority.P0, reference=NODE_NVIDIA, source="node_probes")
def nvlink(inv: Inventory) -> Iterator[Finding]:
    """Inactive or erroring NVLinks → replace (after a reboot does not clear them). A GPU with fewer
    active links or a slower link than its peers warns (a degraded NVLink); link states nvidia-smi
    printed that are neither a speed nor a down state are reported as not understood."""
    for result, probe in probed_nodes(inv):
        if probe.nvlink_inactive:
            yield nvlink.fail(
                f"{_inactive_nvlinks(probe.nvlink_inactive)} on {node_label(result)}",
                detail="collectives fall back to slower paths or hang; reboot, then replace if it persists",
                evidence=probe.nvlink_inactive[:8],
                resources=[node_resource(result)],
                suggested_commands=[reboot(inv, result), replace(inv, result)],
            )
        # Down links already fail above; the comparison adds GPUs that are short or slow without one.
        degraded = [] if probe.nvlink_inactive else _degraded_nvlinks(probe.nvlink_gpus)
        if degraded:
            yield nvlink.warn(
                f"NVLink degraded on {len(degraded)} GPU(s) of {node_label(result)} compared with their peers",
                priority=Priority.P1,
                detail="fewer or slower links than the other GPUs: collectives run at that GPU's pace; reboot, "
                "then replace if it persists",
                evidence=degraded[:8],
                resources=[node_resource(result)],
                suggested_commands=[reboot(inv, result)],
            )
        unknown = [f"{g.gpu} {line}" for g in probe.nvlink_gpus for line in g.not_understood]
        if unknown:
            yield nvlink.info(
                f"{len(unknown)} NVLink state(s) not understood on {node_label(result)}",
                detail="nvidia-smi printed a link state that is neither a speed nor inactive/down: not counted "
                "as up or down; read it on the node",
                evidence=unknown[:8],
                resources=[node_resource(result)],
            )


@check(
    id="node.p2p_path", title="GPU peer-to-peer path", priority=Priority.P1, reference=DBG_P2P_ACS, source="node_probes"
)
def p2p_path(inv: Inventory) -> Iterator[Finding]:
    """PCI ACS source validation on bridges blocks P2P (FAIL); IOMMU on and PCIe-only topology warn."""
    for result, probe in probed_nodes(inv):
        if probe.acs_enabled_bridges:
            yield p2p_path.fail(
                f"PCI ACS enabled on {len(probe.acs_enabled_bridges)} bridge(s) of {node_label(result)}",
                detail="ACS redirects peer-to-peer traffic through the root complex (10-50x slower, or blocked)",
                evidence=probe.acs_enabled_bridges[:5],
                resources=[node_resource(result)],
            )
        if probe.iommu_enabled:
            yield p2p_path.warn(
                f"IOMMU enabled on {node_label(result)}",
                priority=Priority.P2,
                detail="an IOMMU in translation mode can break or slow GPU peer-to-peer and GPUDirect RDMA",
                resources=[node_resource(result)],
            )
        if probe.topology_pcie_pairs and not probe.topology_nvlink_pairs and nodes_count(inv):
            yield p2p_path.warn(
                f"GPUs of {node_label(result)} talk over PCIe only (no NVLink in nvidia-smi topo -m)",
                priority=Priority.P2,
                resources=[node_resource(result)],
            )
        if probe.gpu_nic_affinity:
            yield _nic_affinity(result, probe.gpu_nic_affinity)


def _nic_affinity(result: NodeProbeResult, affinity: list[GpuNicAffinity]) -> Finding:
    """INFO with each GPU's nearest NIC(s); WARN when a GPU reaches its nearest NIC only across the
    CPU interconnect (SYS) while other GPUs have one behind their own PCIe switch (PIX/PXB): that
    GPU's GPUDirect RDMA traffic then crosses sockets."""
    evidence = [f"{a.gpu}: {', '.join(a.nics)} ({a.link})" for a in affinity]
    far = [a.gpu for a in affinity if a.link == "SYS"]
    if far and any(a.link in ("PIX", "PXB") for a in affinity):
        return p2p_path.warn(
            f"{', '.join(far)} of {node_label(result)} reach(es) a NIC only across the CPU interconnect (SYS)",
            priority=Priority.P2,
            detail="other GPUs have a NIC behind their own PCIe switch; GPUDirect RDMA of these GPUs crosses "
            "sockets (slower, or staged through host memory): check that every NIC is up and listed",
            evidence=evidence,
            resources=[node_resource(result)],
            fields={"far_gpus": ",".join(far)},
        )
    kinds = sorted({a.link for a in affinity}, key=lambda link: ("PIX", "PXB", "PHB", "NODE", "SYS").index(link))
    return p2p_path.info(
        f"nearest NIC of {len(affinity)} GPU(s) of {node_label(result)}: {'/'.join(kinds)}",
        evidence=evidence,
        resources=[node_resource(result)],
    )
