"""On-node probe inventory: what the SSM probes of nodes (and the Slurm controller) found.

`ProbeTarget`, `ProbePlan`, `NodeProbeResult` and `NodeProbeInventory` are the interface of the
monitor's per-node state machine and of the CLI; the other models are the parsed sections of
the probe scripts under `hyperpod_nccl/probe/`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field, computed_field

ProbeRole = Literal["node", "slurm_controller"]


# The parts of an SSM target, as AWS defines them (pydantic uses Rust regexes: `$` is the end of
# the text, never before a trailing newline). Validated because they come from API
# responses and state-machine payloads and end up in a session target: nothing else may.
INSTANCE_ID_PATTERN = r"^i-[0-9a-f]{8,17}$"
INSTANCE_GROUP_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
CLUSTER_ID_PATTERN = r"^[a-z0-9]{12}$"
# A GPU serial as nvidia-smi prints it (digits on NVIDIA's boards): only such a serial names a GPU
# resource, whose fault history the monitor keys by it (and `hyperpod-nccl history --gpu` asks for).
GPU_SERIAL_PATTERN = r"^[A-Za-z0-9-]{1,64}$"
# What the instance metadata service (IMDS) may answer, strictly: an EC2 instance type
# (`p5.48xlarge`, `p6e-gb200.36xlarge`, `u-6tb1.metal`), an Availability Zone name (`us-west-2a`,
# a Local Zone's `us-west-2-lax-1a`) and a zone ID (`usw2-az1`, `usw2-lax1-az1`). Anything else a
# node prints there is refused: the node's output is untrusted. node_probe.sh spells the same three
# (tests/functional/test_probe_runtime_hostile.py holds them equal).
EC2_INSTANCE_TYPE_PATTERN = r"^[a-z][a-z0-9-]{0,15}\.[a-z0-9]{1,16}$"
AVAILABILITY_ZONE_PATTERN = r"^[a-z]{2}(-[a-z0-9]{1,12}){2,5}[a-z]$"
AVAILABILITY_ZONE_ID_PATTERN = r"^[a-z]{2,5}[0-9]{1,2}(-[a-z]{3}[0-9]{1,2})?-az[0-9]{1,2}$"


# nvidia-smi writes `00000000:53:00.0` (a 32-bit domain, upper case), the kernel's Xid lines
# `0000:53:00` (no function), sysfs and lspci `0000:53:00.0`: one GPU, three spellings.
_PCI_ADDRESS = re.compile(
    r"(?:(?P<domain>[0-9a-f]{1,8}):)?(?P<bus>[0-9a-f]{1,2}):(?P<device>[0-9a-f]{1,2})(?:\.(?P<function>[0-7]))?",
    re.IGNORECASE,
)


def canonical_pci_bus_id(text: str) -> str:
    """`text` as the one PCI address spelling we write: sysfs's `domain:bus:device.function`
    in lower case with a 4-digit domain (`00000000:53:00.0` and `0000:53:00` → `0000:53:00.0`).

    The kernel's Xid line names no function; a GPU is function 0 of its device, so none means 0.
    Text that is not a PCI address comes back stripped, otherwise unchanged (it is still shown).
    """
    text = text.strip()
    match = _PCI_ADDRESS.fullmatch(text)
    if match is None:
        return text
    domain = int(match.group("domain") or "0", 16)
    bus, device = int(match.group("bus"), 16), int(match.group("device"), 16)
    return f"{domain:04x}:{bus:02x}:{device:02x}.{match.group('function') or '0'}"


# A PCI bus id field: whichever tool spelled it, the model holds `canonical_pci_bus_id`'s form,
# so that a GPU's rows from nvidia-smi and its Xid lines compare equal and print alike.
PciBusId = Annotated[str, AfterValidator(canonical_pci_bus_id)]


class ProbeTarget(BaseModel):
    """One node to probe: enough to build its SSM target."""

    instance_id: str = Field(pattern=INSTANCE_ID_PATTERN)
    instance_group: str = Field(pattern=INSTANCE_GROUP_PATTERN)
    instance_type: str
    cluster_id: str = Field(pattern=CLUSTER_ID_PATTERN)
    role: ProbeRole = "node"
    hostname: str | None = None
    status: str | None = None
    # Why this node was asked in its role when nothing marks it for it (the Slurm controller fallback).
    chosen_because: str | None = None

    @property
    def ssm_target(self) -> str:
        """`sagemaker-cluster:<cluster-id>_<group>-<instance-id>` (operations.md § 3)."""
        return f"sagemaker-cluster:{self.cluster_id}_{self.instance_group}-{self.instance_id}"


class ProbePlan(BaseModel):
    """Which nodes a sweep probes, and which it skips (with the reason)."""

    targets: list[ProbeTarget] = Field(default_factory=list)
    skipped: dict[str, str] = Field(default_factory=dict)


class SectionStatus(BaseModel):
    """Exit status of one probe section (124 = the command hit its `timeout`)."""

    name: str
    rc: int | None
    lines: int = 0


class GpuInfo(BaseModel):
    """One GPU of `nvidia-smi -q -x` (probe/nvidia_smi_xml.py). None: not given, or N/A on this GPU."""

    index: int = Field(description="its position in nvidia-smi's answer (nvidia-smi's own index)")
    name: str
    bus_id: PciBusId
    serial: str | None = None
    uuid: str | None = None
    driver_version: str | None = None
    temperature_c: int | None = None
    ecc_uncorrected_volatile: int | None = Field(None, description="since the driver loaded")
    ecc_uncorrected_aggregate: int | None = Field(None, description="over the GPU's life")
    # Dynamic page retirement, the memory repair of GPUs before Ampere (None on Ampere and newer,
    # which remap rows instead: RemappedRows).
    retired_pages_single_bit: int | None = None
    retired_pages_double_bit: int | None = None
    retirement_pending: bool | None = None
    clock_faults: list[str] = Field(
        default_factory=list, description="active hardware/thermal clock limits (nvidia_smi_xml.CLOCK_FAULT_REASONS)"
    )


class XidEvent(BaseModel):
    """The Xid lines of one GPU (or MIG instance) and code in the kernel log: counted, the last kept.

    "GPU has fallen off the bus" printed without an Xid line of its own is Xid 79 here (the driver's
    code for that event)."""

    bus_id: PciBusId
    code: int
    line: str
    # How many times the kernel log (or the journal's window, whichever holds more) printed it.
    count: int = Field(default=1, ge=1)
    # The MIG GPU instance and compute instance the driver attributed it to, when it did.
    gpu_instance: int | None = None
    compute_instance: int | None = None


class SXidEvent(BaseModel):
    """The SXid lines of one NVSwitch and code (`nvidia-nvswitchN: SXid (PCI:…): code, Fatal, Link …`)."""

    switch: str
    bus_id: PciBusId
    code: int
    # True / False when the message says "Fatal" / "Non-fatal"; None when it says neither (thermal,
    # firmware and other messages).
    fatal: bool | None = None
    links: list[int] = Field(default_factory=list)
    line: str
    count: int = Field(default=1, ge=1)


class RemappedRows(BaseModel):
    """One GPU's row-remapping state (`remapped_rows` of `nvidia-smi -q -x`; Ampere and newer)."""

    bus_id: PciBusId
    correctable: int | None = None
    uncorrectable: int | None = None
    pending: bool = False
    failure: bool = False


class NetInterface(BaseModel):
    """One interface of `ip -br addr` with its MTU from `ip -o link`."""

    name: str
    state: str
    addresses: list[str] = Field(default_factory=list)
    mtu: int | None = None

    @property
    def kind(self) -> Literal["loopback", "efa", "bridge", "eni", "other"]:
        """Rough classification used by the MTU check (bridges and veths are not NCCL paths)."""
        if self.name == "lo":
            return "loopback"
        if self.name.startswith(("rdmap", "efa")):
            return "efa"
        if self.name.startswith(("docker", "veth", "virbr", "cni", "br-", "eni", "cali", "flannel", "vxlan", "pod")):
            return "bridge"
        if self.name.startswith(("ens", "eth", "enp")):
            return "eni"
        return "other"


class Versions(BaseModel):
    """Software versions compared across the nodes of an instance group."""

    driver: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    ofi_nccl: str | None = None
    libfabric: str | None = None
    efa_installer: str | None = None
    kernel: str | None = None
    efa_module: str | None = None


class LoopbackLatency(BaseModel):
    """A loopback `fi_pingpong` run on the node (original probe 34).

    `small_message_usec` is the lowest `usec/xfer` of the message sizes up to 4 KiB: the first size
    also carries the connection set-up, which a 10-iteration run shows as ~1000 µs.
    """

    provider: Literal["efa", "tcp"]
    small_message_usec: float | None = None
    usec_by_size: dict[int, float] = Field(default_factory=dict)
    error: str | None = Field(default=None, description="why there is no measurement (first output line)")


class ProcessLimits(BaseModel):
    """The limits of one process that runs jobs (`/proc/<pid>/limits`): soft ones judged (they are what
    applies), hard ones shown beside them; None = not read, `*_unlimited` = no limit."""

    role: Literal["job", "slurmd", "container_runtime"]
    pid: int
    command: str
    memlock_kib: int | None = None
    memlock_unlimited: bool = False
    stack_kib: int | None = None
    stack_unlimited: bool = False
    open_files: int | None = None
    open_files_unlimited: bool = False
    hard: dict[Literal["memlock", "stack", "open_files"], str] = Field(
        default_factory=dict, description="the hard limits as shown: `unlimited`, `65536 KiB`, `4096` (files)"
    )

    @property
    def label(self) -> str:
        """`containerd (pid 812)`."""
        return f"{self.command} (pid {self.pid})"

    def kib(self, limit: Literal["memlock", "stack"]) -> int | None:
        """The soft `limit` in KiB (None: unlimited or not read)."""
        return self.memlock_kib if limit == "memlock" else self.stack_kib

    def unlimited(self, limit: Literal["memlock", "stack"]) -> bool:
        """Whether `limit` is unlimited."""
        return self.memlock_unlimited if limit == "memlock" else self.stack_unlimited

    def shown(self, limit: Literal["memlock", "stack", "open_files"]) -> str:
        """`containerd (pid 812) [container_runtime]: memlock 64 KiB` (`open files 1024` for files)."""
        hard = self.hard.get(limit)
        if limit == "open_files":
            value = "unlimited" if self.open_files_unlimited else str(self.open_files)
        else:
            value = "unlimited" if self.unlimited(limit) else f"{self.kib(limit)} KiB"
        # The hard limit bounds what the process could raise itself to: a fix must lift both.
        hard_shown = f" (hard {hard})" if hard is not None and hard != value else ""
        return f"{self.label} [{self.role}]: {limit.replace('_', ' ')} {value}{hard_shown}"


class NcclJobProcess(BaseModel):
    """A training process on the node with the NCCL/PyTorch settings of its environment."""

    pid: int
    command: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    env: dict[str, str] = Field(default_factory=dict, description="only the NCCL/TORCH_NCCL names the probe reads")


class NcclJobChoice(BaseModel):
    """The process whose settings the probe read (NCCL_RAS_ADDR, the Flight Recorder prefix), and
    why that one: the probe's `nccl_job` section."""

    pid: int
    uid: int | None = Field(default=None, description="its effective uid: the only owner of dumps the probe reads")
    command: str | None = None
    candidates: int = Field(default=0, description="processes carrying NCCL/TORCH_NCCL settings")
    reason: str = ""
    refused: dict[str, str] = Field(
        default_factory=dict,
        description="settings of this process the probe refused to use (NCCL_RAS_ADDR, the dump prefix): the reason",
    )

    @property
    def label(self) -> str:
        """`pid 4242 (python, uid 1000)`: which process, run by which user."""
        user = "uid unknown" if self.uid is None else f"uid {self.uid}"
        return f"pid {self.pid} ({self.command or 'command unknown'}, {user})"


class FlightRecorderFile(BaseModel):
    """One PyTorch Flight Recorder dump found on the node, still encoded (it is a pickle: it is
    only ever decoded by `hang.flight_recorder`'s restricted loader, at evaluation time)."""

    path: str
    rank: int | None = None
    modified_epoch: float | None = None
    size_bytes: int = 0
    data_base64: str = ""
    not_stored: str | None = Field(
        default=None, description="why `data_base64` is empty: the monitor did not store this dump (its size)"
    )


class HostIdentity(BaseModel):
    """The instance type and zone the node's instance metadata service (IMDSv2) answered, each
    only when it has its shape (None otherwise); `notes` say why a value is missing."""

    instance_type: str | None = Field(default=None, pattern=EC2_INSTANCE_TYPE_PATTERN)
    availability_zone: str | None = Field(default=None, pattern=AVAILABILITY_ZONE_PATTERN)
    availability_zone_id: str | None = Field(default=None, pattern=AVAILABILITY_ZONE_ID_PATTERN)
    notes: list[str] = Field(default_factory=list, description="`instance-type unavailable (curl rc=28)` ...")


class GpuNicAffinity(BaseModel):
    """The NIC(s) nearest one GPU in `nvidia-smi topo -m`, and how they connect (the matrix's
    legend: PIX one PCIe bridge, PXB several, PHB a host bridge, NODE across host bridges of one
    NUMA node, SYS across the CPU interconnect between sockets)."""

    gpu: str = Field(pattern=r"^GPU\d{1,3}$")
    nics: list[str] = Field(default_factory=list, description="`NIC0`, … (the matrix's column names)")
    link: Literal["PIX", "PXB", "PHB", "NODE", "SYS"]


# What `fi_info -p efa` may print for an entry (libfabric's fi_tostr: a provider name, `;`-joined
# when a utility provider is layered on it; a domain name; the provider's version as major.minor of
# FI_VERSION; an endpoint type FI_EP_*). Anything else a node prints there is refused.
FI_INFO_PROVIDER_PATTERN = r"^[a-z0-9_]{1,32}(;[a-z0-9_]{1,32}){0,2}$"
FI_INFO_DOMAIN_PATTERN = r"^[A-Za-z0-9_.:-]{1,64}$"
FI_INFO_VERSION_PATTERN = r"^[0-9]{1,5}\.[0-9]{1,5}$"
FI_INFO_TYPE_PATTERN = r"^FI_EP_[A-Z_]{1,16}$"


class FiInfoEfaEntry(BaseModel):
    """One entry of `fi_info -p efa -t FI_EP_RDM`: its provider (`efa`, or a utility provider layered
    on it such as `efa;ofi_rxd`), domain, and the provider's `version:` and `type:` lines (None when
    the entry had none of that shape)."""

    provider: str = Field(pattern=FI_INFO_PROVIDER_PATTERN)
    domain: str = Field(pattern=FI_INFO_DOMAIN_PATTERN)
    version: str | None = Field(default=None, pattern=FI_INFO_VERSION_PATTERN)
    endpoint_type: str | None = Field(default=None, pattern=FI_INFO_TYPE_PATTERN)


class NvlinkGpu(BaseModel):
    """One GPU's NVLinks in `nvidia-smi nvlink --status`: links up with their speeds, links down,
    and link lines whose state was not understood (reported, never counted as up or down)."""

    gpu: str = Field(description="`GPU 3` as the header names it")
    speeds_gbps: list[float] = Field(default_factory=list, description="one per active link")
    down_lines: list[str] = Field(default_factory=list, description="`GPU 3 Link 5: <inactive>`, as shown")
    not_understood: list[str] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def down(self) -> int:
        """Links down (NVML's all-links-inactive message counts as one)."""
        return len(self.down_lines)


class NodeProbeData(BaseModel):
    """Every signal the node probe collected, parsed. None = the section gave no answer."""

    hostname: str | None = None
    # The node's clock when the probe read it (seconds since the epoch).
    clock_epoch: int | None = None
    # What IMDSv2 says the instance is (None: an older probe, or the section is missing).
    host_identity: HostIdentity | None = None
    gpu_present: bool | None = None
    # Whether `nvidia-smi -q -x` answered with GPUs; what it printed beside (or instead of) them.
    gpu_query_ok: bool | None = None
    gpu_query_messages: list[str] = Field(default_factory=list)
    gpus: list[GpuInfo] = Field(default_factory=list)
    xids: list[XidEvent] = Field(default_factory=list)
    sxids: list[SXidEvent] = Field(default_factory=list)
    remapped_rows: list[RemappedRows] = Field(default_factory=list)
    dcgm_overall: str | None = None
    dcgm_incidents: list[str] = Field(default_factory=list)
    nvvs_failures: list[str] = Field(default_factory=list)
    nvlink_active: int | None = None
    nvlink_inactive: list[str] = Field(default_factory=list)
    topology_pcie_pairs: int | None = None
    topology_nvlink_pairs: int | None = None
    # Per GPU, its nearest NIC(s) in the topology matrix (empty: no NIC columns, or no matrix).
    gpu_nic_affinity: list[GpuNicAffinity] = Field(default_factory=list)
    # Per GPU, its NVLinks (empty: the section gave no answer).
    nvlink_gpus: list[NvlinkGpu] = Field(default_factory=list)
    acs_enabled_bridges: list[str] = Field(default_factory=list)
    iommu_enabled: bool | None = None
    # The newest kernel log lines about EFA, RDMA and memory errors (ECC, EDAC, machine checks),
    # bounded in number and length: evidence for the engineer, judged by no check.
    kernel_log: list[str] = Field(default_factory=list)
    kernel_modules: list[str] = Field(default_factory=list)
    efa_devices: list[str] | None = None
    uverbs_devices: int | None = None
    fi_info_efa_domains: int | None = None
    fi_info_error: str | None = None
    # The entries of `fi_info -p efa` with their provider version and endpoint type (bounded).
    fi_info_efa_entries: list[FiInfoEfaEntry] = Field(default_factory=list)
    ofi_nccl_plugin: list[str] = Field(default_factory=list)
    # The job's NCCL_NET_PLUGIN when it names a file, and whether that file is in the job's root
    # (None: unset, a plugin name, no job, or not asked).
    nccl_net_plugin: str | None = None
    nccl_net_plugin_present: bool | None = None
    versions: Versions = Field(default_factory=Versions)
    hugepages_total: int | None = None
    hugepages_free: int | None = None
    hugepage_size_kib: int | None = None
    # /proc/meminfo's MemTotal (the memory the kernel manages, a little under the instance's).
    mem_total_kib: int | None = None
    interfaces: list[NetInterface] = Field(default_factory=list)
    shm_fstype: str | None = None
    shm_size_bytes: int | None = None
    # The mount that holds /dev/shm ("/dev/shm" itself when it is a mount of its own).
    shm_mount: str | None = None
    memlock_kib: int | None = None
    memlock_unlimited: bool = False
    stack_kib: int | None = None
    stack_unlimited: bool = False
    # Limits of the job's process, slurmd and the container runtime (None: the probe did not read them);
    # memlock_kib / stack_kib above are the SSM shell's own, shown but never judged.
    process_limits: list[ProcessLimits] | None = None
    remove_ipc: str | None = None
    numa_nodes: int | None = None
    firewall_rules: list[str] = Field(default_factory=list)
    stale_shm_files: list[str] = Field(default_factory=list)
    training_processes: int | None = None
    efa_counters: dict[str, dict[str, int]] = Field(default_factory=dict)
    efa_latency: LoopbackLatency | None = Field(
        default=None, description="loopback fi_pingpong over EFA, or over TCP when EFA could not run"
    )
    nccl_jobs: list[NcclJobProcess] = Field(default_factory=list)
    ras_status: str | None = Field(default=None, description="NCCL RAS STATUS answer, verbatim (capped)")
    ras_error: str | None = None
    flight_recorder_dumps: list[FlightRecorderFile] = Field(default_factory=list)
    nccl_job: NcclJobChoice | None = Field(default=None, description="None: no NCCL job (or an older probe)")
    flight_recorder_error: str | None = Field(
        default=None, description="why dumps were not read, or not from the prefix the job set"
    )
    sections: list[SectionStatus] = Field(default_factory=list)

    def section_rc(self, name: str) -> int | None:
        """The exit status of section `name` (None when it never ran or was cut off)."""
        return next((s.rc for s in self.sections if s.name == name), None)


class SlurmNodeState(BaseModel):
    """One line of `sinfo -N -o '%N|%n|%o|%T|%E'`."""

    name: str
    hostname: str | None = None
    address: str | None = None
    state: str
    reason: str | None = None
    instance_id: str | None = None


class SlurmQueueEntry(BaseModel):
    """A pending or completing job of `squeue`."""

    job_id: str
    name: str
    state: str
    reason: str


class SlurmctldState(BaseModel):
    """One controller of `scontrol ping`: `Slurmctld(primary) at ip-10-1-0-5 is UP`."""

    role: str
    host: str
    state: str


class SlurmControllerData(BaseModel):
    """What the controller probe found (original Check 0, 2 and 7 [Slurm])."""

    ping_output: str | None = None
    # How many times the probe asked `scontrol ping` (it retries while the answer is not UP).
    ping_attempts: int = 0
    # `scontrol` was not found on the node named as the controller.
    scontrol_missing: bool = False
    controllers: list[SlurmctldState] = Field(default_factory=list)
    contact_errors: list[str] = Field(
        default_factory=list, description="sinfo/squeue answers such as 'Unable to contact slurm controller'"
    )
    munge_state: str | None = None
    nodes: list[SlurmNodeState] = Field(default_factory=list)
    queue: list[SlurmQueueEntry] = Field(default_factory=list)
    nccl_env: list[str] = Field(default_factory=list)
    remove_ipc: str | None = None
    sections: list[SectionStatus] = Field(default_factory=list)


class NodeProbeResult(BaseModel):
    """What probing one node produced."""

    instance_id: str
    reachable: bool
    error: str | None = None
    error_kind: str | None = None
    error_code: str | None = None
    instance_group: str | None = None
    instance_type: str | None = None
    hostname: str | None = None
    role: ProbeRole = "node"
    status: str | None = None
    chosen_because: str | None = None
    # The collector's clock when the session started and when its answer ended (seconds since the
    # epoch): the window the node's own clock reading must fall in.
    started_at: float | None = None
    answered_at: float | None = None
    attempts: int = 0
    # StartSession calls AWS throttled (each retried) and sessions tried again (attempts - 1);
    # stored results from before they were counted read as 0.
    throttles: int = 0
    retries: int = 0
    # Seconds of `duration_seconds` spent waiting for the account's StartSession rate, not probing.
    paced_seconds: float = 0.0
    duration_seconds: float = 0.0
    exit_code: int | None = None
    complete: bool = False
    output_bytes: int = 0
    # The SSM document the session was started with (the stack's probe document, or the AWS
    # managed one whose command is free text).
    session_document: str | None = None
    probe: NodeProbeData | None = None
    slurm: SlurmControllerData | None = None

    def ended_sections(self) -> set[str]:
        """The names of the sections of the answer that ended (`@@END` with a status)."""
        parsed = self.slurm if self.role == "slurm_controller" else self.probe
        return {s.name for s in (parsed.sections if parsed else []) if s.rc is not None}


class NodeProbeInventory(BaseModel):
    """Results of probing nodes over SSM."""

    planned_instance_ids: list[str] = Field(default_factory=list)
    probed_instance_ids: list[str] = Field(default_factory=list)
    unreachable_instance_ids: list[str] = Field(default_factory=list)
    skipped_instance_ids: list[str] = Field(default_factory=list)
    skipped_reasons: dict[str, str] = Field(default_factory=dict)
    results: list[NodeProbeResult] = Field(default_factory=list)
    probes_at_once: int | None = Field(
        default=None, description="the most probes the CLI ran at once (None: the monitor's Map sized them)"
    )

    def probed(self, role: ProbeRole = "node") -> list[NodeProbeResult]:
        """Results with parsed probe data for `role` (unreachable nodes with partial output included)."""
        return [r for r in self.results if r.role == role and (r.probe is not None or r.slurm is not None)]
