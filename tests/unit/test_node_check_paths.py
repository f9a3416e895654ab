"""Every on-node check driven to its FAIL or WARN by the probe data that should trip it, and kept
quiet by the healthy neighbour of that data (issue 17, point 7: 31 checks had no test of either)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hyperpod_nccl import thresholds
from hyperpod_nccl.checks import discover
from hyperpod_nccl.models.findings import Priority, Status
from hyperpod_nccl.models.node_probe import (
    GpuInfo,
    LoopbackLatency,
    NcclJobProcess,
    NetInterface,
    NodeProbeData,
    ProcessLimits,
    SectionStatus,
    Versions,
)
from hyperpod_nccl.probe.parsers import parse_node_probe, parse_topology, split_sections
from hyperpod_nccl.probe.sections import NodeSection
from hyperpod_nccl.references import DBG_MEMLOCK_SHM, DBG_P2P_ACS, NODE_GPU, NODE_ROW_REMAP, Reference
from tests.builders import probed_node

CHECKS = discover()
P5 = "ml.p5.48xlarge"
H100 = {"name": "NVIDIA H100 80GB HBM3", "bus_id": "00000000:53:00.0"}
PROBE_DATA = Path(__file__).resolve().parents[1] / "data" / "probe"


def _run(check_id: str, instance_type: str = P5, orchestrator: str = "eks", **probe: Any):  # type: ignore[no-untyped-def]
    inv = probed_node(NodeProbeData(**probe), instance_type=instance_type, orchestrator=orchestrator)
    return CHECKS[check_id].run(inv)


def _issues(findings):  # type: ignore[no-untyped-def]
    return [(f.status, f.priority) for f in findings if f.status in (Status.FAIL, Status.WARN)]


# check id → (probe data that trips it, its healthy neighbour, the expected (status, priority))
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], tuple[Status, Priority]]] = {
    "node.gpu_ecc": (
        {"gpu_present": True, "gpus": [GpuInfo(index=0, ecc_uncorrected_volatile=2, **H100)]},
        {"gpu_present": True, "gpus": [GpuInfo(index=0, ecc_uncorrected_volatile=0, **H100)]},
        (Status.FAIL, Priority.P0),
    ),
    "node.gpu_dcgm": (
        {"gpu_present": True, "dcgm_overall": "Failure"},
        {"gpu_present": True, "dcgm_overall": "Healthy"},
        (Status.FAIL, Priority.P0),
    ),
    "node.p2p_path": (
        {"gpu_present": True, "acs_enabled_bridges": ["10:00.0 PCI bridge: PEX890xx"]},
        {"gpu_present": True, "acs_enabled_bridges": []},
        (Status.FAIL, Priority.P1),
    ),
    "node.efa_provider": (
        {"fi_info_efa_domains": 0, "fi_info_error": "fi_getinfo: -61 (No data available)"},
        {"fi_info_efa_domains": 32},
        (Status.FAIL, Priority.P0),
    ),
    "node.ofi_nccl_plugin": (
        {"ofi_nccl_plugin": [], "sections": [SectionStatus(name=NodeSection.OFI_NCCL, rc=1)]},
        {"ofi_nccl_plugin": ["libnccl-net.so"], "sections": [SectionStatus(name=NodeSection.OFI_NCCL, rc=0)]},
        (Status.WARN, Priority.P1),
    ),
    "node.gpudirect_rdma": (
        {"gpu_present": True, "kernel_modules": ["nvidia"], "versions": Versions(kernel="5.10.219-208.866.amzn2")},
        {"gpu_present": True, "kernel_modules": ["nvidia"], "versions": Versions(kernel="6.1.115-126.197.amzn2023")},
        (Status.WARN, Priority.P2),
    ),
    "node.mtu": (
        {"interfaces": [NetInterface(name="ens32", state="UP", mtu=1500)]},
        {"interfaces": [NetInterface(name="ens32", state="UP", mtu=9001)]},
        (Status.WARN, Priority.P2),
    ),
    "node.firewall": (
        {"firewall_rules": ["-A INPUT -p tcp --dport 29500 -j DROP"]},
        {"firewall_rules": []},
        (Status.WARN, Priority.P1),
    ),
    "node.stack": (
        {"process_limits": [ProcessLimits(role="job", pid=7300, command="python", stack_kib=1024)]},
        {"process_limits": [ProcessLimits(role="job", pid=7300, command="python", stack_kib=8192)]},
        (Status.FAIL, Priority.P1),
    ),
    "node.stale_shm": (
        {"stale_shm_files": ["nccl-3f2a1b"], "training_processes": 0},
        {"stale_shm_files": ["nccl-3f2a1b"], "training_processes": 8},
        (Status.WARN, Priority.P2),
    ),
    "node.nccl_driver_compat": (
        {"versions": Versions(nccl="2.21.5", driver="470.256.02")},
        {"versions": Versions(nccl="2.21.5", driver="550.127.05")},
        (Status.WARN, Priority.P1),
    ),
    "node.hugepages": (
        {"hugepages_total": 512, "hugepages_free": 0, "hugepage_size_kib": 2048},
        {"hugepages_total": 512, "hugepages_free": 300, "hugepage_size_kib": 2048},
        (Status.WARN, Priority.P2),
    ),
    "node.numa": (
        {"gpu_present": True, "numa_nodes": 0},
        {"gpu_present": True, "numa_nodes": 2},
        (Status.WARN, Priority.P2),
    ),
    "node.efa_latency": (
        {
            "efa_latency": LoopbackLatency(
                provider="efa", small_message_usec=thresholds.EFA_LOOPBACK_LATENCY_WARN_USEC * 3
            )
        },
        {"efa_latency": LoopbackLatency(provider="efa", small_message_usec=18.0)},
        (Status.WARN, Priority.P2),
    ),
    "node.nccl_p2p_env": (
        {"nccl_jobs": [NcclJobProcess(pid=4242, rank=0, env={"NCCL_P2P_DISABLE": "1"})]},
        {"nccl_jobs": [NcclJobProcess(pid=4242, rank=0, env={"NCCL_P2P_DISABLE": "0"})]},
        (Status.WARN, Priority.P1),
    ),
}


@pytest.mark.parametrize("check_id", sorted(CASES))
def test_each_node_check_trips_on_its_fault_and_not_on_its_healthy_neighbour(check_id: str) -> None:
    faulty, healthy, expected = CASES[check_id]
    found = _issues(_run(check_id, **faulty))
    assert found and found[0] == expected, (check_id, found)
    assert _issues(_run(check_id, **healthy)) == [], check_id


def test_stack_and_memlock_both_unlimited_warn() -> None:
    both = ProcessLimits(
        role="container_runtime", pid=812, command="containerd", stack_unlimited=True, memlock_unlimited=True
    )
    assert _issues(_run("node.stack", process_limits=[both])) == [(Status.WARN, Priority.P2)]
    # the SSM shell's own limits are never judged
    assert _issues(_run("node.stack", stack_unlimited=True, memlock_unlimited=True)) == []


def test_iommu_on_warns_on_the_p2p_path() -> None:
    assert _issues(_run("node.p2p_path", gpu_present=True, iommu_enabled=True)) == [(Status.WARN, Priority.P2)]


def test_remove_ipc_yes_warns_and_unset_warns_on_slurm_only() -> None:
    assert _issues(_run("node.remove_ipc", remove_ipc="yes")) == [(Status.WARN, Priority.P2)]
    unset = {"sections": [SectionStatus(name=NodeSection.REMOVE_IPC, rc=1)]}
    assert _issues(_run("node.remove_ipc", orchestrator="slurm", **unset))
    assert _issues(_run("node.remove_ipc", orchestrator="eks", **unset)) == []


def test_a_loopback_test_that_fell_back_to_tcp_is_said_not_judged() -> None:
    # fi_pingpong over TCP measures no EFA path: reported (INFO), not compared with EFA latencies
    (finding,) = _run("node.efa_latency", efa_latency=LoopbackLatency(provider="tcp", small_message_usec=60.0))
    assert finding.status is Status.INFO and "fell back" in finding.title


def test_a_gpu_finding_names_each_faulty_gpu_by_a_serial_of_serial_shape_once() -> None:
    # The monitor keys a GPU's fault history by its serial: a serial the node made up (a key of
    # its own choosing, a newline) names no GPU; the node still names the finding.
    gpus = [
        GpuInfo(index=0, serial="1652921001234", ecc_uncorrected_volatile=2, **H100),
        GpuInfo(index=1, serial="GPU#../x\n", ecc_uncorrected_volatile=1, name=H100["name"], bus_id="0000:64:00.0"),
        GpuInfo(index=2, serial=None, ecc_uncorrected_volatile=1, name=H100["name"], bus_id="0000:75:00.0"),
    ]
    [finding] = _run("node.gpu_ecc", gpu_present=True, gpus=gpus)
    assert [(r.kind, r.id) for r in finding.resources] == [("node", "i-0f1e2d3c4b5a69788"), ("gpu", "1652921001234")]


def test_a_node_finding_whose_faulty_gpus_grow_keeps_its_fingerprint() -> None:
    one = [GpuInfo(index=0, serial="1652921001234", ecc_uncorrected_volatile=2, **H100)]
    two = [
        *one,
        GpuInfo(index=1, serial="1652921005678", ecc_uncorrected_volatile=1, name=H100["name"], bus_id="0000:64:00.0"),
    ]
    [first] = _run("node.gpu_ecc", gpu_present=True, gpus=one)
    [worse] = _run("node.gpu_ecc", gpu_present=True, gpus=two)
    assert len(worse.resources) == 3 and worse.fingerprint == first.fingerprint


# --- FAIL/WARN branches of checks whose other branches are tested above ------------------------------

# Real values where tests/data/probe has them (provenance: its README): the eight H100 of a healthy
# host with their remapped rows, and the all-NVLink matrix of an 8x H100 host (56 GPU pairs, none
# over PCIe). No real remap failure, PCIe-only matrix or /dev/shm of 1-4 GiB or off tmpfs is in that
# directory: those values are ours.
_H100_HOST = parse_node_probe((PROBE_DATA / "h100_8gpu_healthy_nvidia_smi_q.txt").read_text(encoding="utf-8"))
_H100_NVLINK, _H100_PCIE = parse_topology(
    split_sections((PROBE_DATA / "h100_topology_and_dcgm_health.txt").read_text(encoding="utf-8"))["topology"].lines
)
_GPUS = {"gpu_present": True, "gpu_query_ok": True}
_ROWS = _H100_HOST.remapped_rows
_FAILED_ROWS = [_ROWS[0], _ROWS[1], _ROWS[2], _ROWS[3].model_copy(update={"failure": True}), *_ROWS[4:]]
_SHM = {"shm_fstype": "tmpfs", "shm_mount": "/dev/shm"}

# branch → (check id, probe data that trips it, its healthy neighbour, the expected (status, priority),
# the check's reference, what its suggested commands do (effect and words of the command), words of its title)
BRANCHES: dict[
    str, tuple[str, dict[str, Any], dict[str, Any], tuple[Status, Priority], Reference, list[tuple[str, str]], str]
] = {
    # A lost GPU: the driver lists 7 of the 8 a p5 has (the host's last GPU gone).
    "gpu_inventory-gpu-lost": (
        "node.gpu_inventory",
        {**_GPUS, "gpus": _H100_HOST.gpus[:7]},
        {**_GPUS, "gpus": _H100_HOST.gpus},
        (Status.FAIL, Priority.P0),
        NODE_GPU,
        [("reboot", "batch-reboot-cluster-nodes"), ("replace", "batch-replace-cluster-nodes")],
        "7 of 8 GPUs visible",
    ),
    "gpu_row_remap-failure": (
        "node.gpu_row_remap",
        {**_GPUS, "gpus": _H100_HOST.gpus, "remapped_rows": _FAILED_ROWS},
        {**_GPUS, "gpus": _H100_HOST.gpus, "remapped_rows": _ROWS},
        (Status.FAIL, Priority.P0),
        NODE_ROW_REMAP,
        [("replace", "batch-replace-cluster-nodes")],
        "row remapping FAILED on 1 GPU(s)",
    ),
    "p2p_path-pcie-only": (
        "node.p2p_path",
        {"gpu_present": True, "topology_nvlink_pairs": 0, "topology_pcie_pairs": _H100_NVLINK},
        {"gpu_present": True, "topology_nvlink_pairs": _H100_NVLINK, "topology_pcie_pairs": _H100_PCIE},
        (Status.WARN, Priority.P2),
        DBG_P2P_ACS,
        [],
        "talk over PCIe only",
    ),
    "dev_shm-under-4-gib": (
        "node.dev_shm",
        {**_SHM, "shm_size_bytes": 2 * 2**30},
        {**_SHM, "shm_size_bytes": thresholds.NODE_RECOMMENDED_SHM_BYTES},
        (Status.WARN, Priority.P2),
        DBG_MEMLOCK_SHM,
        [("change", "mountPath: /dev/shm")],
        "/dev/shm is 2.00 GiB",
    ),
    "dev_shm-not-tmpfs": (
        "node.dev_shm",
        {**_SHM, "shm_fstype": "xfs", "shm_size_bytes": 8 * 2**30},
        {**_SHM, "shm_size_bytes": 8 * 2**30},
        (Status.WARN, Priority.P2),
        DBG_MEMLOCK_SHM,
        [],
        "/dev/shm is xfs, not tmpfs",
    ),
}


@pytest.mark.parametrize("branch", sorted(BRANCHES))
def test_each_fail_or_warn_branch_trips_on_its_fault_and_not_on_its_healthy_neighbour(branch: str) -> None:
    check_id, faulty, healthy, expected, reference, commands, title = BRANCHES[branch]
    [finding] = [f for f in _run(check_id, **faulty) if f.status in (Status.FAIL, Status.WARN)]
    assert (finding.status, finding.priority) == expected, branch
    assert finding.reference == reference and title in finding.title, (branch, finding.title)
    assert len(finding.suggested_commands) == len(commands), branch
    for command, (effect, words) in zip(finding.suggested_commands, commands, strict=True):
        assert command.effect == effect and words in command.command, (branch, command)
    assert _issues(_run(check_id, **healthy)) == [], branch
