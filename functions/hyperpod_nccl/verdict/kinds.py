"""The kinds of root cause the verdict can name, and which findings are evidence of which kind.

`CAUSE_KINDS` is the one priority table: a cause's priority follows from what it blocks (the
whole cluster, one job, one node) and how, never from the source that happened to see it, so an
Xid 79 is P0 whether it came from the health agent's log, the node's status or the probe.

`CLASSIFICATION` says, per check (and signature), which kind a FAIL/WARN finding is evidence of.
A finding it does not list is a cause of its own, with the check's priority and pointer: the
catalog can grow without the verdict hiding what it does not know yet.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from hyperpod_nccl import references as ref
from hyperpod_nccl.models.findings import Finding, Priority
from hyperpod_nccl.models.logs import stream_identity
from hyperpod_nccl.models.verdict import BlastRadius
from hyperpod_nccl.references import Reference
from hyperpod_nccl.xid import xid_info


@dataclass(frozen=True)
class CauseKind:
    """One kind of root cause: what it is called, what it blocks and which section fixes it."""

    id: str
    title: str
    scope: BlastRadius
    priority: Priority
    blocks: str
    reference: Reference
    # The priority when no evidence FAILs (every finding a WARN): a degraded state of the same
    # thing, e.g. an EFA device plugin with pods unavailable rather than no plugin at all.
    warn_priority: Priority | None = None
    # A kind that is a consequence by nature (a timeout, a fallback): when nothing explains it the
    # verdict says that the cause was not found, rather than presenting the symptom as the cause.
    symptom: bool = False

    def priority_for(self, any_fail: bool) -> Priority:
        """The cause's priority given whether any of its evidence is a FAIL."""
        return self.priority if any_fail or self.warn_priority is None else self.warn_priority


def _kind(
    id: str,
    title: str,
    scope: BlastRadius,
    priority: Priority,
    blocks: str,
    reference: Reference,
    *,
    warn: Priority | None = None,
    symptom: bool = False,
) -> tuple[str, CauseKind]:
    return id, CauseKind(id, title, scope, priority, blocks, reference, warn, symptom)


P0, P1, P2 = Priority.P0, Priority.P1, Priority.P2

CAUSE_KINDS: dict[str, CauseKind] = dict(
    [
        # --- the cluster -------------------------------------------------------------------
        _kind(
            "security_group_rules",
            "Security group blocks traffic between the cluster's nodes",
            "cluster",
            P0,
            "every collective between nodes behind the group (NCCL and EFA need all traffic to and from itself)",
            ref.OPS_REMEDIATIONS,
        ),
        _kind(
            "efa_device_plugin",
            "EFA device plugin missing or unhealthy",
            "cluster",
            P0,
            "every pod that requests EFA: it is not scheduled, or runs without its EFA devices",
            ref.DBG_EFA_CONFIG,
            warn=P1,
        ),
        _kind(
            "node_recovery_off",
            "Automatic node recovery is off",
            "cluster",
            P2,
            "nothing now; a faulty node stays in the cluster until someone replaces it",
            ref.OPS_NODE_HEALTH_LABELS,
        ),
        _kind(
            "cluster_capacity",
            "Instance group short of capacity",
            "cluster",
            P2,
            "scale-up and replacement of the group's nodes",
            ref.CLUSTER_INSTANCE_GROUPS,
        ),
        # --- one job -----------------------------------------------------------------------
        _kind(
            "network_policy",
            "NetworkPolicy blocks traffic between the job's pods",
            "job",
            P0,
            "the job's rendezvous and collectives",
            ref.OPS_REMEDIATIONS,
        ),
        _kind(
            "collective_hang",
            "NCCL collectives timed out",
            "job",
            P0,
            "the job: its ranks wait until the watchdog kills them",
            ref.DBG_TIMEOUT_RENDEZVOUS,
            symptom=True,
        ),
        _kind(
            "hang_attributed",
            "A rank stopped the job's collectives",
            "job",
            P0,
            "the job: every other rank waits on the one that never entered the collective",
            ref.DBG_FLIGHT_RECORDER,
        ),
        _kind(
            "peer_connection_failed",
            "NCCL connections between the job's nodes fail",
            "job",
            P0,
            "the job: its ranks cannot reach each other",
            ref.DBG_SECURITY_GROUPS,
            symptom=True,
        ),
        _kind(
            "rendezvous_failed",
            "Ranks failed to rendezvous",
            "job",
            P0,
            "the job's start: the ranks never form the process group",
            ref.DBG_TIMEOUT_RENDEZVOUS,
            symptom=True,
        ),
        _kind(
            "rendezvous",
            "Rendezvous endpoint unreachable",
            "job",
            P1,
            "the job's start: ranks cannot find MASTER_ADDR",
            ref.DBG_DNS,
        ),
        _kind(
            "efa_not_requested",
            "Pods use GPUs without requesting EFA: NCCL falls back to TCP sockets",
            "job",
            P1,
            "the job's speed (TCP sockets instead of EFA), and its stability at scale",
            ref.DBG_EFA_CONFIG,
        ),
        _kind(
            "tcp_fallback",
            "NCCL fell back to TCP sockets",
            "job",
            P1,
            "the job's speed (TCP sockets instead of EFA), and its stability at scale",
            ref.DBG_TCP_FALLBACK,
            symptom=True,
        ),
        _kind(
            "gpu_error_in_job_output",
            "GPU error reported in the job's output",
            "job",
            P0,
            "the job: one of its ranks lost its GPU",
            ref.NODE_GPU,
            symptom=True,
        ),
        _kind(
            "cuda_fault",
            "CUDA kernel fault in the job",
            "job",
            P1,
            "the job: the faulting rank aborts and the collective with it",
            ref.NODE_GPU,
        ),
        _kind(
            "efa_plugin_missing",
            "aws-ofi-nccl plugin not loaded: NCCL falls back to TCP sockets",
            "job",
            P1,
            "the job's speed (TCP sockets instead of EFA)",
            ref.DBG_TCP_FALLBACK,
        ),
        _kind(
            "version_mismatch",
            "Ranks run different NCCL / image versions",
            "job",
            P1,
            "the job: mismatched NCCL versions hang or corrupt collectives",
            ref.DBG_VERSION_MISMATCH,
        ),
        _kind(
            "pod_memory",
            "Container killed for memory (OOM)",
            "job",
            P1,
            "the job: the killed rank takes the collective down with it",
            ref.DBG_CONTAINER_OOM,
        ),
        _kind(
            "pod_crash",
            "Container crashing or restarting",
            "job",
            P1,
            "the job: a restarting rank breaks the collective",
            ref.DBG_POD_FAILURES,
        ),
        _kind(
            "pod_pending",
            "Pod not scheduled",
            "job",
            P1,
            "the job's start",
            ref.DBG_POD_FAILURES,
        ),
        _kind(
            "pod_shared_memory",
            "Pods lack the shared memory or memory locking EFA and NCCL need",
            "job",
            P1,
            "the job: memory registration and shared-memory transports fail",
            ref.DBG_MEMLOCK_SHM,
        ),
        _kind(
            "nccl_settings",
            "NCCL settings that slow or break the job",
            "job",
            P2,
            "the job's speed",
            ref.OPS_NCCL_ENV,
        ),
        _kind(
            "slurm_job",
            "Slurm job failed or cannot start",
            "job",
            P1,
            "the job",
            ref.OPS_SLURM,
        ),
        # --- one node ----------------------------------------------------------------------
        _kind(
            "gpu_hardware",
            "GPU hardware fault",
            "node",
            P0,
            "every job with a rank on the node: the GPU is gone or corrupts memory",
            ref.NODE_HARDWARE,
        ),
        _kind(
            "gpu_memory_health",
            "GPU memory needs a reset (row remap pending / DCGM warning)",
            "node",
            P1,
            "jobs on the node, after the next fault of the same memory",
            ref.NODE_ROW_REMAP,
        ),
        _kind(
            "efa_hardware",
            "EFA devices missing or failing",
            "node",
            P0,
            "every job with a rank on the node: its collectives lose network paths",
            ref.NODE_HARDWARE,
        ),
        _kind(
            "node_unhealthy",
            "Node marked unhealthy",
            "node",
            P1,
            "scheduling on the node",
            ref.NODE_HARDWARE,
        ),
        _kind(
            "node_unreachable",
            "Node not reachable over SSM",
            "node",
            P1,
            "what the probes can see of the node",
            ref.NODE_SSM,
        ),
        _kind(
            "lifecycle_script",
            "Lifecycle script failed",
            "node",
            P0,
            "the node: it never joins the cluster healthy",
            ref.NODE_LIFECYCLE,
        ),
        _kind(
            "node_memory_limits",
            "Memory limits too small for EFA and NCCL",
            "node",
            P1,
            "jobs on the node: memory registration and shared-memory transports fail",
            ref.DBG_MEMLOCK_SHM,
        ),
        _kind(
            "memory_registration_failed",
            "Memory registration or shared memory failed",
            "node",
            P0,
            "jobs on the node: EFA cannot register their buffers, or NCCL's shared-memory transport dies",
            ref.DBG_MEMLOCK_SHM,
            symptom=True,
        ),
        _kind(
            "node_shared_memory_state",
            "Shared-memory state left behind",
            "node",
            P2,
            "the next job on the node, when stale segments collide",
            ref.DBG_STALE_SHM,
        ),
        _kind(
            "node_software_drift",
            "Driver / NCCL versions differ from the instance group",
            "node",
            P1,
            "jobs spanning the node: mismatched versions hang or slow collectives",
            ref.DBG_VERSION_MISMATCH,
        ),
        _kind(
            "node_straggler",
            "Network slower or noisier than its peers",
            "node",
            P2,
            "the speed of every job spanning the node",
            ref.PERF_STRAGGLERS,
        ),
        _kind(
            "slurm_node_state",
            "Slurm node down or drained",
            "node",
            P1,
            "scheduling on the node",
            ref.OPS_SLURM,
        ),
        _kind(
            "gpu_p2p",
            "GPU peer-to-peer disabled",
            "node",
            P1,
            "the speed of collectives inside the node",
            ref.DBG_P2P_ACS,
        ),
    ]
)

# The kinds that are a hang of a job's collectives: what `incidents` and the escalation
# situations call a hang follows the classification below, never a list of signatures of their own.
HANG_KINDS = frozenset({"collective_hang", "hang_attributed"})


@dataclass(frozen=True)
class Classify:
    """Findings of `check` (with a signature in `signatures`, when given) are evidence of `kind`.
    `hardware_xid` restricts the entry to findings whose `xid` field is a hardware Xid."""

    check: str
    kind: str
    signatures: frozenset[str] = field(default_factory=frozenset)
    hardware_xid: bool = False
    # (field, value): the entry applies only to findings whose `fields[field]` is `value`.
    field_equals: tuple[str, str] | None = None
    # The entry applies only to findings read from log streams of these kinds (models.logs.StreamKind).
    streams: frozenset[str] = field(default_factory=frozenset)


def _c(
    check: str,
    kind: str,
    *signatures: str,
    hardware_xid: bool = False,
    field_equals: tuple[str, str] | None = None,
    streams: Iterable[str] = (),
) -> Classify:
    return Classify(check, kind, frozenset(signatures), hardware_xid, field_equals, frozenset(streams))


# First match wins: specific signatures before the catch-all of the same check.
_HARDWARE_LINES = (
    "xid", "gpu_fallen_off_bus", "ecc_uncorrectable", "nvlink_error", "nvswitch_fabric_error", "nvrm_init_failed",
    "gsp_rpc_timeout", "gsp_firmware_halted", "gpu_recovery_action", "gpu_pcie_fatal",
)  # fmt: skip
# A job's own output (its training and NCCL streams) gathers every rank's lines: a GPU error there
# is the job's report of a fault somewhere, not evidence about the node whose stream holds it.
_JOB_OUTPUT = ("training", "nccl")
# The two checks that classify log lines with `classifier/signatures.json`: CloudWatch streams and
# the pods' own logs. A line means the same wherever it was read, so both follow one table.
LOG_SIGNATURE_CHECKS = ("logs.signatures", "k8s.pod_logs")

# Signatures that name a cause of their own, with their own section: a finding of one is its own
# root cause (unless a rule explains it) rather than evidence of a kind. Every other signature of
# the catalog is classified below; `tests/unit/test_verdict.py` holds the two lists to the catalog.
OWN_CAUSE_SIGNATURES = frozenset(
    {
        "port_in_use",  # a second job or a stale process on the rendezvous port
        "world_size_mismatch",  # the launcher's configuration
        "dns_failure",  # the name service, not the network rules
        "socket_ifname",  # NCCL_SOCKET_IFNAME names no interface
        "socket_ifname_selection",  # a launcher's or transport's interface setting matches no device
        "ucx_net_device_unavailable",  # UCX_NET_DEVICES names a device the host lacks (beside no transport)
        "nccl_bridge_interface",  # NCCL's sockets on docker0/virbr0/lo or a link-local address
        "efa_health_check_failed",  # HyperPod's provisioning check: hardware or the group, not known here
        "efa_provider_error",  # libfabric / the EFA driver on the node
        "ibverbs_efa_provider",  # rdma-core's EFA provider missing or mismatched in the image or on the node
        "gpu_memory_registration",  # GPU buffers cannot be registered: no peer-memory module or dma-buf, not a limit
        "nccl_system_error",  # socket, EFA, driver or device: the line alone does not say which
        "nccl_internal_error",
        "nccl_invalid_usage",  # the program's rank/device mapping
        "nccl_warn",
        "ofi_warn",  # any other aws-ofi-nccl / libfabric EFA warning: the EFA configuration section
        "nccl_error_generic",
        "gpu_oom",  # the model does not fit the GPU (not a container killed for host memory)
        "cuda_visible_devices",  # the launcher's device mapping
        "neuron_unrecoverable",  # Trainium / Inferentia, not an NVIDIA GPU
        "nvls_topology",  # NVLS / multicast support of the node's NVSwitch fabric
        "nccl_topology_graph",  # the topology search itself (graph/*.cc)
        "ib_async_fatal_event",  # a fatal event of the node's RDMA device: its hardware section
        "net_device_count_mismatch",  # some ranks got fewer EFA devices than others
        # NVML cannot reach a GPU or the driver: a lost device, a driver not loaded, or a container
        # whose device access was revoked; the line alone does not say which (node-debugger.md § G)
        "nvml_device_error",
    }
)


def _log(kind: str, *signatures: str, hardware_xid: bool = False, streams: Iterable[str] = ()) -> tuple[Classify, ...]:
    """The same log-signature entry for each of `LOG_SIGNATURE_CHECKS`."""
    return tuple(
        _c(check, kind, *signatures, hardware_xid=hardware_xid, streams=streams) for check in LOG_SIGNATURE_CHECKS
    )


CLASSIFICATION: tuple[Classify, ...] = (
    # --- log lines (CloudWatch and pod logs alike) ---------------------------------------------
    # hardware, wherever the node or its agent saw it; in a job's gathered output, the job's report of it
    *_log("gpu_error_in_job_output", *_HARDWARE_LINES, streams=_JOB_OUTPUT),
    *_log("gpu_hardware", "xid", hardware_xid=True),
    *_log("gpu_hardware", "gpu_fallen_off_bus", "ecc_uncorrectable", "nvlink_error", "nvswitch_fabric_error"),
    # the GPU's firmware stopped answering (Xid 119) or stopped altogether (heartbeat lost, PMU halted),
    # or the driver asks for a reset or reboot (Xid 154)
    *_log("gpu_hardware", "gsp_rpc_timeout", "gsp_firmware_halted", "gpu_recovery_action"),
    *_log("gpu_hardware", "nvrm_init_failed"),  # the driver could not bring the GPU up
    *_log("gpu_hardware", "gpu_pcie_fatal"),  # the GPU's PCIe link failed beyond AER recovery
    # the health-monitoring agent's own lines: the same fault `logs.hma_detections` reports
    *_log("gpu_hardware", "hma_detection", "hma_node_health_event"),
    *_log("node_unhealthy", "hyperpod_deep_health_check", "hyperpod_node_action", "hma_health_record"),
    *_log("gpu_memory_health", "row_remap", "dcgm_failure"),
    *_log("cuda_fault", "cuda_illegal_access", "nccl_cuda_error", "cuda_runtime_error"),
    *_log("gpu_p2p", "peer_access", "p2p_unavailable"),
    *_log("lifecycle_script", "lifecycle_failure"),
    # the network between ranks, and the rendezvous before it
    *_log(
        "peer_connection_failed",
        "nccl_connect_failed",
        "ib_completion_error",
        "efa_peer_unreachable",
        "mpi_runtime_peer_lost",  # mpirun/prterun/PMIx/srun's PMIx plugin lost or could not reach a peer daemon
    ),
    *_log("rendezvous_failed", "c10d_store", "c10d_store_connection_lost", "rendezvous_failure", "c10d_connect_failed"),
    *_log("tcp_fallback", "tcp_fallback"),
    *_log("efa_plugin_missing", "ofi_plugin_missing"),
    # memory the transports need
    *_log("memory_registration_failed", "memlock_registration", "shm_exhausted"),
    *_log("node_shared_memory_state", "shm_stale"),
    # hangs, versions, the job's end
    *_log(
        "collective_hang",
        "watchdog_timeout",
        "gloo_timeout",
        "xla_rendezvous_stuck",  # XLA's collective rendezvous waits for ranks that have not arrived
        "ray_node_dead",  # Ray's GCS lost a node's heartbeats: the job's other workers wait on it
        "watchdog_stuck",
        "comm_abort",
        "nccl_ras_report",
        "nccl_remote_error",
    ),
    *_log(
        "version_mismatch",
        "nccl_version_mismatch",
        "nccl_version_check",
        "nccl_version_drift",
        "cuda_alignment",
        "cuda_driver_runtime_mismatch",
    ),
    *_log("nccl_settings", "nccl_config_mismatch"),  # NCCL_ALGO / NCCL_PROTO / NCCL_IB_HCA the node cannot serve
    *_log("pod_memory", "host_oom_kill", "slurm_memory_limit_reached"),
    *_log("pod_crash", "pod_crashloop"),
    *_log("slurm_job", "slurm_job_failure"),
    # --- every other source ------------------------------------------------------------------
    _c("logs.hma_detections", "gpu_hardware"),
    _c("node.gpu_xid", "gpu_hardware", hardware_xid=True),
    # a fatal SXid takes the node's NVLink fabric down; a non-fatal one is a cause of its own (P2)
    _c("node.nvswitch_sxid", "gpu_hardware", field_equals=("action", "reboot")),
    _c("node.gpu_row_remap", "gpu_memory_health"),
    _c("node.gpu_dcgm", "gpu_memory_health"),
    _c("node.efa_devices", "efa_hardware"),
    _c("cluster.events", "efa_hardware", "efa_health_check"),
    _c("cluster.events", "gpu_hardware", "hardware"),
    _c("cluster.events", "lifecycle_script", "lifecycle_script"),
    _c("cluster.events", "cluster_capacity", "capacity"),
    _c("cluster.events", "node_unhealthy"),
    # node state, as each source reports it
    _c("cluster.node_status", "node_unhealthy"),
    _c("k8s.node_ready", "node_unhealthy"),
    _c("k8s.node_health_labels", "node_unhealthy"),
    # Slurm took the node out because slurmd reported fewer GPUs than configured: a lost GPU
    _c("slurm.node_states", "gpu_hardware", field_equals=("cause", "gpu_missing")),
    _c("slurm.node_states", "slurm_node_state"),
    _c("node.reachability", "node_unreachable"),
    _c("cluster.node_recovery", "node_recovery_off"),
    # network
    _c("network.security_group_self_reference", "security_group_rules"),
    _c("network.security_group_cross_group", "security_group_rules"),
    _c("k8s.network_policies", "network_policy"),
    _c("k8s.efa_device_plugin", "efa_device_plugin"),
    _c("k8s.efa_requests", "efa_not_requested"),
    _c("k8s.rendezvous_service", "rendezvous"),
    _c("fleet.efa_error_outliers", "node_straggler"),
    _c("node.efa_latency", "node_straggler"),
    # hangs
    _c("hang.attribution", "hang_attributed"),
    # versions
    _c("k8s.image_digest_mismatch", "version_mismatch"),
    _c("k8s.nccl_version_logs", "version_mismatch"),
    _c("logs.nccl_versions", "version_mismatch"),
    _c("fleet.version_drift", "node_software_drift"),
    # pods and jobs
    _c("k8s.container_exit_codes", "pod_memory", "exit_137"),
    _c("k8s.container_exit_codes", "pod_crash"),
    _c("k8s.pod_status", "pod_pending", field_equals=("phase", "Pending")),
    _c("k8s.pod_status", "pod_crash"),
    _c("k8s.dev_shm", "pod_shared_memory"),
    _c("k8s.memlock_ipc_lock", "pod_shared_memory"),
    _c("k8s.nccl_env", "nccl_settings"),
    _c("slurm.nccl_env", "nccl_settings"),
    _c("slurm.queue", "slurm_job"),
    # node configuration
    _c("node.dev_shm", "node_memory_limits"),
    _c("node.memlock", "node_memory_limits"),
    _c("node.hugepages", "node_memory_limits"),
    _c("node.remove_ipc", "node_shared_memory_state"),
    _c("node.stale_shm", "node_shared_memory_state"),
    _c("node.nccl_p2p_env", "gpu_p2p"),
)


def base_signature(finding: Finding) -> str:
    """The finding's signature without the container suffix pod-log findings add
    (`watchdog_timeout@pytorch/previous` is a `watchdog_timeout`)."""
    return str(finding.fields.get("signature") or "").split("@", 1)[0]


def xid_code(finding: Finding) -> int | None:
    """The Xid a finding reports, as a number (some checks store it as text)."""
    value = finding.fields.get("xid")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _read_from(finding: Finding, streams: frozenset[str]) -> bool:
    return any(r.kind == "log_stream" and stream_identity(r.id)[0] in streams for r in finding.resources)


def classify(finding: Finding) -> str | None:
    """The cause kind `finding` is evidence of, or None when `CLASSIFICATION` does not know it
    (then the finding is a cause of its own). A software Xid is not hardware evidence."""
    if finding.fields.get("by_cue") is True:
        # A class cue's hit (`cue_<class>`: the class's words, no known message) is a P2 hint of a
        # cause of its own: never evidence of a kind, whose priority (P0 for GPU hardware) it would take.
        return None
    signature = base_signature(finding)
    for entry in CLASSIFICATION:
        if entry.check != finding.check_id:
            continue
        if entry.signatures and signature not in entry.signatures:
            continue
        if entry.field_equals and str(finding.fields.get(entry.field_equals[0])) != entry.field_equals[1]:
            continue
        if entry.streams and not _read_from(finding, entry.streams):
            continue
        if entry.hardware_xid:
            code = xid_code(finding)
            if code is not None and not xid_info(code).is_hardware:
                continue
        return entry.kind
    return None
