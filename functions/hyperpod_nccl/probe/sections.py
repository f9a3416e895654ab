"""The sections of the probe scripts' output: their names and markers, spelled once.

Each script section prints `@@BEGIN <name>`, its command's output, then `@@END <name> rc=<status>`.
The parsers (`probe/parsers.py`), the checks that ask for a section's status and the simulation
(`hyperpod_nccl_sim/nodes.py`) name sections through these enums; the shell scripts cannot import
them, so `tests/unit/test_probe_sections.py` requires each script to print exactly its enum's
sections, in order, and the parsers to read each one.
"""

from __future__ import annotations

from enum import StrEnum

from hyperpod_nccl.models.node_probe import ProbeRole

BEGIN_MARKER = "@@BEGIN"
END_MARKER = "@@END"


class NodeSection(StrEnum):
    """The sections of `node_probe.sh`, in the order it prints them."""

    # identity, GPUs and their faults
    KERNEL = "kernel"
    HOSTNAME = "hostname"
    CLOCK = "clock"
    IMDS = "imds"
    GPU_LIST = "gpu_list"
    GPU_XML = "gpu_xml"
    XID_DMESG = "xid_dmesg"
    XID_JOURNAL = "xid_journal"
    XID_COUNTS_DMESG = "xid_counts_dmesg"
    XID_COUNTS_JOURNAL = "xid_counts_journal"
    DCGM_HEALTH = "dcgm_health"
    NVVS_LOG = "nvvs_log"
    NVVS_TAIL = "nvvs_tail"
    NVLINK = "nvlink"
    TOPOLOGY = "topology"
    PCI_ACS = "pci_acs"
    CMDLINE = "cmdline"
    IOMMU_DMESG = "iommu_dmesg"
    KERNEL_LOG = "kernel_log"
    # EFA, libfabric, aws-ofi-nccl and NCCL
    MODULES = "modules"
    EFA_MODULE_VERSION = "efa_module_version"
    EFA_DEVICES = "efa_devices"
    UVERBS = "uverbs"
    FI_INFO_EFA = "fi_info_efa"
    FI_INFO_VERSION = "fi_info_version"
    EFA_INSTALLER = "efa_installer"
    OFI_NCCL = "ofi_nccl"
    NCCL_LIBS = "nccl_libs"
    NCCL_HEADER = "nccl_header"
    # host memory, limits and network
    HUGEPAGES = "hugepages"
    INTERFACES = "interfaces"
    LINKS = "links"
    SHM = "shm"
    MEMLOCK = "memlock"
    STACK = "stack"
    REMOVE_IPC = "remove_ipc"
    NUMA = "numa"
    FIREWALL = "firewall"
    FIREWALL_NFT = "firewall_nft"
    STALE_SHM = "stale_shm"
    TRAINING_PROCS = "training_procs"
    EFA_COUNTERS = "efa_counters"
    EFA_LATENCY = "efa_latency"
    EFA_LATENCY_TCP = "efa_latency_tcp"
    # hang attribution: the job, its NCCL RAS answer and its Flight Recorder dumps
    NCCL_JOBS = "nccl_jobs"
    NCCL_JOB_ENV = "nccl_job_env"
    NCCL_JOB = "nccl_job"
    NCCL_RAS = "nccl_ras"
    FLIGHT_RECORDER = "flight_recorder"
    NCCL_NET_PLUGIN = "nccl_net_plugin"
    PROCESS_LIMITS = "process_limits"


class SlurmSection(StrEnum):
    """The sections of `slurm_controller.sh`, in the order it prints them."""

    SLURM_PING = "slurm_ping"
    MUNGE = "munge"
    SINFO = "sinfo"
    SQUEUE = "squeue"
    NCCL_ENV_FILES = "nccl_env_files"
    REMOVE_IPC = "remove_ipc"


# Each role's sections, in script order.
SECTIONS: dict[ProbeRole, tuple[str, ...]] = {
    "node": tuple(NodeSection),
    "slurm_controller": tuple(SlurmSection),
}


def begin_line(name: str) -> str:
    """The line that opens section `name`."""
    return f"{BEGIN_MARKER} {name}"


def end_line(name: str, rc: int) -> str:
    """The line that closes section `name`, with its command's exit status."""
    return f"{END_MARKER} {name} rc={rc}"


def missing_sections(role: ProbeRole, ended: set[str]) -> list[str]:
    """The sections of `role`'s script that did not end (absent, or cut off before `@@END`), in order."""
    return [name for name in SECTIONS[role] if name not in ended]


def describe_missing(missing: list[str]) -> str:
    """`missing` in a few words: "no section missing", "section x missing", "sections a..z missing (n)"."""
    if not missing:
        return "no section missing"
    if len(missing) == 1:
        return f"section {missing[0]} missing"
    return f"sections {missing[0]}..{missing[-1]} missing ({len(missing)})"
