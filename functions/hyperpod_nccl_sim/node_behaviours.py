"""Per-node behaviour of the simulated cluster, and the probe output such a node would print.

The simulated agent does not execute the probe script: it answers with the output the script
would produce on a node with this behaviour, in the same section format and with the command
output formats of the real tools (nvidia-smi CSV, fi_info, df, ip, sinfo, ...).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class XidSpec(_Strict):
    """An Xid the node's kernel log shows for GPU `gpu`."""

    gpu: int
    code: int
    message: str = ""
    pid: int = Field(default=48213, ge=1, description="the process the driver names (pid=...)")
    process: str = Field(default="python3", pattern=r"^\S+$", description="its name (name=...)")
    count: int = Field(default=1, ge=1, le=100_000, description="how many times the kernel printed it (a storm)")


class SessionFaultSpec(_Strict):
    """Data-channel faults the simulated agent injects into one session (see ssm_agent), and the
    session document's output mode. "Output messages" are the command's stream messages: Output,
    and with `separate_output_streams` StdErr and ExitCode too. Every field is also a
    `--fault NAME=VALUE` of the agent's command line (`python -m hyperpod_nccl_sim.ssm_agent
    --list-faults` lists them with their descriptions): give a new field one."""

    drop_first: int = Field(
        default=0, description="skip the first send of the first N output messages (retransmission must recover them)"
    )
    duplicate: bool = Field(default=False, description="send every output message twice")
    reorder: bool = Field(default=False, description="swap each pair of consecutive output messages")
    corrupt_digest: int = Field(
        default=0,
        description="send the first N output messages with a wrong payload digest (retransmission must recover them)",
    )
    stall_seconds: float = Field(
        default=0.0, description="pause this long halfway through the output (or before stall_at_section)"
    )
    stall_at_section: str | None = Field(
        default=None, description="stall before this probe section instead of halfway (a tool that hangs)"
    )
    close_without_channel_closed: bool = Field(
        default=False, description="after the output and the drain, close the socket without channel_closed"
    )
    disconnect_after: int | None = Field(
        default=None, description="drop the connection (no channel_closed) after sending N output messages"
    )
    kms: bool = Field(default=False, description="request KMS encryption in the handshake (the client must refuse it)")
    separate_output_streams: bool = Field(
        default=False,
        description="a document with separateOutputStream: stdout as Output (1), stderr as StdErr (11), "
        "then the exit code as ExitCode (12) 'EXIT_CODE: <n>'",
    )
    # Hostile agents (a compromised node): what the client must bound.
    out_of_order_flood: int = Field(
        default=0, description="send this many output messages past one that never comes, instead of the output"
    )
    giant_frame_bytes: int = Field(default=0, description="send one output frame with a payload this big first")


class NodeBehaviour(_Strict):
    """How one node looks from the inside. Unset fields take the scenario's defaults."""

    unreachable: bool = False
    driver_version: str | None = None
    cuda_version: str | None = None
    nccl_version: str | None = None
    ofi_nccl_version: str | None = None
    libfabric_version: str | None = None
    efa_installer_version: str | None = None
    kernel: str | None = None
    xids: list[XidSpec] = Field(default_factory=list)
    remap_pending_gpus: list[int] = Field(default_factory=list)
    remap_failure_gpus: list[int] = Field(default_factory=list)
    ecc_uncorrected_gpus: list[int] = Field(default_factory=list)
    dcgm_overall: str = "Healthy"
    dcgm_gpu: int = Field(default=3, ge=0, description="the GPU a DCGM incident names (when not Healthy)")
    dcgm_error: str | None = Field(
        default=None, description="the incident's text; None = a pending row remap on dcgm_gpu"
    )
    nvlink_inactive: list[str] = Field(default_factory=list, description='"gpu:link" pairs')
    efa_devices: int | None = None
    efa_provider_missing: bool = False
    memlock_kib: int | None = None
    memlock_unlimited: bool = True
    stack_kib: int = 8192
    clock_skew_seconds: int = Field(default=0, description="how far the node's clock is off (date -u +%s)")
    imds_reachable: bool = Field(
        default=True, description="whether the instance metadata service answers (off, or hop-limited, when False)"
    )
    imds_instance_type: str | None = Field(
        default=None, description="the instance type IMDS answers; None = the node's own, without `ml.`"
    )
    kernel_log: list[str] = Field(
        default_factory=list, description="kernel log lines about EFA, RDMA or memory errors (dmesg -T form)"
    )
    shm_bytes: int | None = None
    remove_ipc: str | None = "no"
    acs_enabled: int = 0
    firewall_drops: int = 0
    stale_shm_files: list[str] = Field(default_factory=list)
    mtu: int = 9001
    efa_counters: dict[str, int] = Field(default_factory=dict, description="added to every device's counters")
    efa_latency_usec: float = Field(default=8.2, description="loopback fi_pingpong usec/xfer of small messages")
    hugepages_total: int = 5128
    hugepages_free: int = 5120
    numa_nodes: int = 2
    nccl_job_env: dict[str, str] = Field(
        default_factory=dict, description="NCCL settings of a training process on the node (no hung job)"
    )
    session_faults: list[SessionFaultSpec] = Field(
        default_factory=list, description="faults of the node's first sessions, one per session"
    )


SlurmJobState = Literal["PENDING", "RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING"]


class SlurmJobSpec(_Strict):
    """A job in the controller's queue, in any state: a running job holds `nodes` (node keys, as
    squeue's %R and %N print them, a hostlist), a pending one waits for `reason`."""

    id: str = Field(pattern=r"^\d+(_\d+)?$")
    name: str = Field(pattern=r"^[^|\n]+$")
    state: SlurmJobState
    nodes: list[str] = Field(default_factory=list, description="node keys the job holds (RUNNING, COMPLETING)")
    reason: str | None = Field(default=None, description="why it waits (PENDING), shown as squeue shows it: (...)")
    partition: str = "dev"

    @model_validator(mode="after")
    def _state_has_its_fields(self) -> SlurmJobSpec:
        if self.state == "PENDING" and (self.reason is None or self.nodes):
            raise ValueError(f"job {self.id}: a pending job has a reason and holds no nodes")
        if self.state in ("RUNNING", "COMPLETING", "SUSPENDED") and not self.nodes:
            raise ValueError(f"job {self.id}: a {self.state.lower()} job holds nodes")
        return self


class SlurmControllerBehaviour(_Strict):
    """The Slurm controller's view: slurmctld, munge, node states and the queue."""

    slurmctld_up: bool = True
    munge_active: bool = True
    node_states: dict[str, str] = Field(default_factory=dict, description='node key -> "drain|reason"')
    pending_jobs: list[str] = Field(default_factory=list, description='"id|name|reason" (a shorthand for PENDING jobs)')
    jobs: list[SlurmJobSpec] = Field(default_factory=list, description="the queue's jobs in any state")
    nccl_env: list[str] = Field(default_factory=list)
    remove_ipc: str | None = "no"

    def queue(self) -> list[SlurmJobSpec]:
        """Every job of the queue: the `pending_jobs` shorthand first, then `jobs`."""
        pending = []
        for line in self.pending_jobs:
            job_id, name, reason = line.split("|", 2)
            # The shorthand spells the reason as squeue prints it, parentheses included.
            reason = reason.removeprefix("(").removesuffix(")")
            pending.append(SlurmJobSpec(id=job_id, name=name, state="PENDING", reason=reason))
        return pending + self.jobs


class HungJobSpec(_Strict):
    """An NCCL job hung in a collective, spread over `nodes` (node keys in job order, block layout).

    Nodes of the job answer the probe's RAS query with `hang_job.ras_status_text` and hold one
    Flight Recorder dump per local rank (`hang_job.flight_recorder_pickle`): rank `hung_rank`
    never enqueued collective `hung_seq`.
    """

    nodes: list[str]
    ranks_per_node: int = 8
    hung_rank: int = 13
    hung_seq: int = 1580
    ras_addr: str | None = Field(default=None, description="NCCL_RAS_ADDR in the job's environment")
    trace_prefix: str | None = Field(default=None, description="TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    minutes_ago: int = Field(default=20, description="when the dumps were written")
    nccl_debug: str | None = "WARN"
    dead_ranks: list[int] | None = Field(
        default=None, description="ranks whose processes NCCL RAS considers dead; None = hung_rank's alone"
    )

    @model_validator(mode="after")
    def _ranks_in_job(self) -> HungJobSpec:
        world = len(self.nodes) * self.ranks_per_node
        outside = [r for r in self.dead_ranks or [] if not 0 <= r < world]
        if outside:
            raise ValueError(f"dead ranks {outside} are outside the job's {world} ranks")
        return self


class NodeBehaviours(_Strict):
    """The `node_behaviours` section of a scenario (`<scenario>.node_behaviours.json`)."""

    defaults: NodeBehaviour = Field(default_factory=NodeBehaviour)
    nodes: dict[str, NodeBehaviour] = Field(default_factory=dict)
    slurm: SlurmControllerBehaviour | None = None
    hung_job: HungJobSpec | None = None

    def for_node(self, node_key: str) -> NodeBehaviour:
        """The node's behaviour: its own fields over the defaults."""
        own = self.nodes.get(node_key)
        if own is None:
            return self.defaults
        merged = self.defaults.model_dump()
        merged.update(own.model_dump(exclude_unset=True))
        return NodeBehaviour.model_validate(merged)
