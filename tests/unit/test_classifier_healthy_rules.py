"""Healthy line rules mined from the emitters' own sources (issue 16, point 3: "Healthy is mined the
same way"): a warning the program prints and then carries on from is no finding, and the nearest
failure wording of the same source stays one.

Every line here is built from the emitter's format string with concrete values filled in (host,
pid, device, file:line, port, numbers); none is copied from a log. The format strings, and the code
path that shows each warning harmless, are in the files each rule cites in `written_from`.
"""

from __future__ import annotations

import pytest

from hyperpod_nccl.classifier import Catalog, load_catalog, scan_text
from tests.classifier_support import CONSEQUENCE_LINES, ids_with_folded

NCCL = "ip-10-1-2-3:1234:1234 [0]"
EFA = "libfabric:2287:1718034012::efa:"

# rule id → (healthy lines the rule quiets, the nearest failure wordings of the same source: findings)
CASES: dict[str, tuple[list[str], list[str]]] = {
    # UCX src/ucs/sys/sys.c ucs_sysv_alloc: a System V segment asked with SHM_HUGETLB (0x800 in the
    # printed flags) and refused with EPERM or ENOMEM returns UCS_ERR_NO_MEMORY, and the caller retries
    # with regular pages; current UCX prints the refusal only without SHM_HUGETLB.
    "ucx_shm_hugetlb_fallback": (
        [
            "[1560244589.726560] [ip-10-1-2-3:6527 :0]            sys.c:619  UCX  ERROR shmget(size=2097152 "
            "flags=0xfb0) for mm_recv_desc failed: Operation not permitted, please check shared memory limits by "
            "'ipcs -l'",
        ],
        [
            # the same refusal of a regular-page segment: shared memory is really short
            "[1560244589.726560] [ip-10-1-2-3:6527 :0]            sys.c:619  UCX  ERROR shmget(size=2097152 "
            "flags=0x7b0) for mm_recv_desc failed: Cannot allocate memory, please check shared memory limits by "
            "'ipcs -l'",
        ],
    ),
    # NCCL src/ras/client_support.cc rasClientInitSocket: SYSCHECKGOTO(bind/listen) WARNs "Call to bind
    # failed: %s" (checks.h) and jumps to its fail label, which logs INFO and returns; ras.cc calls it
    # as `(void)rasClientInitSocket()`. Prefixes: 2.30 debug.cc "%s:%d (%s) NCCL WARN", 2.26/2.27
    # "%s:%d NCCL WARN".
    "nccl_ras_client_socket_busy": (
        [
            f"{NCCL} ras/client_support.cc:179 (rasClientInitSocket) NCCL WARN Call to bind failed: "
            "Address already in use",
            f"{NCCL} ras/client_support.cc:159 NCCL WARN Call to bind failed: Address already in use",
            f"{NCCL} ras/client_support.cc:182 (rasClientInitSocket) NCCL WARN Call to listen failed: "
            "Address already in use",
        ],
        [
            # the same SYSCHECK wording from NCCL's own socket listen (misc/socket.cc), which fails init
            f"{NCCL} misc/socket.cc:137 NCCL WARN Call to bind failed: Address already in use",
            f"{NCCL} misc/socket.cc:137 (ncclSocketListen) NCCL WARN Call to bind failed : Address already in use",
        ],
    ),
    # NCCL 2.23 src/net.cc and 2.26 src/plugin/net.cc + net_v*.cc: "NET/Plugin: Failed to find
    # ncclNetPlugin_v%d symbol." for each API version the opened plugin lacks, newest first.
    "nccl_net_plugin_version_probe": (
        [
            f"{NCCL} NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v10 symbol.",
            f"{NCCL} NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",
        ],
        [
            # no supported version at all (2.23 src/net.cc), and a plugin library that is absent
            f"{NCCL} NCCL INFO NET/Plugin: Failed to find ncclNetPlugin symbol (>= v5). ncclNetPlugin symbols v4 "
            "and lower are not supported.",
            f"{NCCL} NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
        ],
    ),
    # NCCL 2.30 init.cc, transport/net_socket.cc, transport/shm.cc: each WARN is followed by the
    # assignment of an allowed value and no return.
    "nccl_setting_adjusted": (
        [
            f"{NCCL} init.cc:621 (initTransportsRank) NCCL WARN NCCL_WORK_FIFO_BYTES=1000 is being ignored "
            "because it is not a power of 2.",
            f"{NCCL} transport/net_socket.cc:353 NCCL WARN NET/Socket : NCCL_SOCKET_NTHREADS is greater than the "
            "maximum allowed, setting to 16",
            f"{NCCL} transport/net_socket.cc:393 NCCL WARN NET/Socket : the total number of sockets is greater "
            "than the maximum allowed, setting NCCL_NSOCKS_PERTHREAD to 4",
            f"{NCCL} transport/shm.cc:298 NCCL WARN Ignoring SHM locality, must be 1 (sender side) or 2 "
            "(receiver side, default)",
            f"{NCCL} init.cc:2460 (ncclCommInitRankFunc) NCCL WARN graphStreamOrdering=0 with graphUsageMode=2 "
            "(graph mixing) is not supported; falling back to graphStreamOrdering=1 for this communicator",
            f"{NCCL} init.cc:2219 NCCL WARN Both NCCL_CTA_POLICY_ZERO and NCCL_CTA_POLICY_EFFICIENCY are set in "
            "CTAPolicy (3). Unsetting POLICY_EFFICIENCY.",
        ],
        [
            # init.cc: an invalid communicator config returns ncclInvalidArgument
            f"{NCCL} init.cc:2314 NCCL WARN Invalid config blocking attribute value 5",
            f"{NCCL} init.cc:2328 NCCL WARN Invalid config min/max channels attribute value 64/32",
        ],
    ),
    # PyTorch torch/csrc/distributed/c10d/socket.cpp SocketConnectOp: recordError() logs
    # "The client socket has failed to connect to {addr} {err}." with C10D_WARNING and the loop tries
    # the next resolved address; only when none connects does run() raise.
    "c10d_client_address_family_probe": (
        [
            "[W1206 18:44:12.715298746 socket.cpp:697] [c10d] The client socket has failed to connect to "
            "[localhost]:29500 (errno: 99 - Cannot assign requested address).",
            "[W socket.cpp:697] [c10d] The client socket has failed to connect to [node-0]:29500 "
            "(errno: 97 - Address family not supported by protocol).",
            "2026-12-06T18:44:12.715Z [rank1]:[W1206 18:44:12.715298746 socket.cpp:697] [c10d] The client socket "
            "has failed to connect to [localhost]:29500 (errno: 99 - Cannot assign requested address).",
        ],
        [
            # another errno on the same per-address warning, and run()'s error after every address failed
            "[W1206 18:44:12.715298746 socket.cpp:697] [c10d] The client socket has failed to connect to "
            "[node-0]:29500 (errno: 113 - No route to host).",
            "[E1206 18:44:12.715298746 socket.cpp:1019] [c10d] The client socket has failed to connect to any "
            "network address of (node-0, 29500).",
            # the raised error repeats the per-address errors after its own sentence: still a finding
            "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of "
            "(localhost, 29500). The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot "
            "assign requested address).",
            "RuntimeError: [c10d] The client socket has failed to connect to any network address of (localhost, "
            "29500). [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot "
            "assign requested address).",
            "torch.distributed.DistNetworkError: The client socket has timed out after 1800000ms while trying to "
            "connect to (node-0, 29500).",
        ],
    ),
    # libfabric prov/efa/src/efa_base_ep.c efa_generate_qkey: a failed random read is warned about and
    # the QKEY is computed from pid and time; the function returns it, never an error.
    "efa_qkey_random_fallback": (
        [
            f"{EFA}ep_ctrl:efa_generate_qkey():217<warn> Failed to generate random QKEY. Falling back to pid "
            "and timestamp."
        ],
        [
            # efa_base_ep.c efa_qp_create: the queue pair itself cannot be created
            f"{EFA}ep_ctrl:efa_qp_create():343<warn> ibv_create_qp failed. errno: 12",
        ],
    ),
    # libfabric efa_shm.c efa_shm_info_create: fi_getinfo for shm fails, shm_info is left NULL; the
    # callers in rdm/efa_rdm_domain.c and rdm/efa_rdm_ep_fiops.c then open no shm fabric or endpoint.
    "efa_shm_provider_unavailable": (
        [
            f"{EFA}core:efa_shm_info_create():134<warn> Disabling EFA shared memory support; failed to get shm "
            "provider's info: No data available",
        ],
        [
            # rdm/efa_rdm_domain.c and rdm/efa_rdm_cq.c: a shm fabric or CQ that fails to open returns the error
            f"{EFA}domain:efa_rdm_domain_init():77<warn> Failed to create shm_fabric: No data available",
            f"{EFA}cq:efa_rdm_cq_open():1319<warn> Unable to open shm cq: Cannot allocate memory",
        ],
    ),
    # libfabric rdm/efa_rdm_pke_nonreq.c efa_rdm_pke_handle_handshake_recv: warns, stores the peer's
    # user_recv_qp and goes on handling the handshake.
    "efa_peer_user_recv_qp_deprecated": (
        [
            f"{EFA}cq:efa_rdm_pke_handle_handshake_recv():122<warn> Peer requested zero-copy receive via "
            "USER_RECV_QP which has been deprecated in newer Libfabric versions. Communication will continue. "
            "Consider upgrading peer to a newer Libfabric version.",
        ],
        [
            # rdm/efa_rdm_cq.c: a request packet type this endpoint does not know writes an EQ error
            f"{EFA}cq:efa_rdm_cq_handle_recv_completion():576<warn> Peer fi_addr: 3 implicit fi_addr 3 is "
            "requesting feature 42, which this EP does not support.",
        ],
    ),
    # libfabric efa_hmem.c efa_hmem_info_init_protocol_thresholds: Neuron and Synapse keep fixed
    # thresholds; a set size variable is warned about and the function returns 0.
    "efa_hmem_protocol_env_not_applied": (
        [
            f"{EFA}core:efa_hmem_info_init_protocol_thresholds():87<warn> The environment variable "
            "FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE was set, but EFA HMEM via Neuron API only supports eager and "
            "runting read protocols. The variable will not modify Neuron memory run config.",
            f"{EFA}core:efa_hmem_info_init_protocol_thresholds():102<warn> One or more of the following "
            "environment variable(s) were set: [FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE, "
            "FI_EFA_INTER_MIN_READ_MESSAGE_SIZE, FI_EFA_INTER_MIN_READ_WRITE_SIZE, FI_EFA_RUNT_SIZE], but EFA HMEM "
            "via Synapse only supports long read protocol. The variable(s) will not modify Synapse memory run "
            "config.",
        ],
        [
            # efa_hmem.c efa_hmem_info_init_iface: the interface is left uninitialized
            f"{EFA}core:efa_hmem_info_init_iface():357<warn> FI_HMEM_NEURON requires p2p, unset FI_HMEM_DISABLE_P2P",
            f"{EFA}core:efa_hmem_info_init_iface():364<warn> No EFA RDMA read support, transfers using "
            "FI_HMEM_NEURON will fail.",
        ],
    ),
    # aws-ofi-nccl src/stats/histogram.cpp parse_print_format/parse_bool: an unknown
    # OFI_HISTOGRAM_PRINT_FORMAT or OFI_HISTOGRAM_SKIP_EMPTY_BINS value is ignored, the default kept.
    "ofi_histogram_env_ignored": (
        [
            f"{NCCL} parse_print_format:45 NCCL WARN NET/OFI Unrecognized histogram print format: XML, ignoring",
            f"{NCCL} parse_bool:59 NCCL WARN NET/OFI Unrecognized histogram skip-empty-bins flag: maybe, ignoring",
        ],
        [
            # include/nccl_ofi_param_impl.h: a plugin parameter with an invalid value fails its lookup
            f"{NCCL} initialize:221 NCCL WARN NET/OFI WARNING: OFI_NCCL_PROTOCOL set to invalid value FOO",
        ],
    ),
    # libfabric src/fabric.c fi_getinfo_: "fi_getinfo: provider %s returned -%d (%s)" for each provider that
    # answers an error, then `continue` to the next provider; at warn level before 1.9 (5dfd23e) for every
    # provider, since when the hints name one. Prefixes: "libfabric:%d:%ld::%s:%s:%s():%d<%s> " (now) and
    # "libfabric:%d:%s:%s:%s():%d<%s> " (before 1.9).
    "libfabric_provider_probe_no_data": (
        [
            f"{EFA.removesuffix('efa:')}core:core:fi_getinfo_():1452<warn> fi_getinfo: provider tcp;ofi_rxm returned "
            "-61 (No data available)",
            "libfabric:2287:core:core:fi_getinfo_():888<warn> fi_getinfo: provider ofi_mrail returned -61 (No data "
            "available)",
        ],
        [
            # the EFA provider itself has no device, and a provider that fails otherwise
            f"{EFA.removesuffix('efa:')}core:core:fi_getinfo_():1452<warn> fi_getinfo: provider efa returned -61 (No "
            "data available)",
            "libfabric:2287:core:core:fi_getinfo_():888<warn> fi_getinfo: provider tcp returned -22 (Invalid argument)",
        ],
    ),
    # Kubernetes pkg/kubelet/server/stats/summary_sys_containers.go GetSystemContainersStats: a system
    # container's cgroup stats that cannot be read are logged with klog.ErrorS and skipped (`continue`);
    # pkg/kubelet/eviction/helpers.go makeSignalObservations logs the missing observation and goes on.
    # Old klog text ("... for \"%s\": %v") and structured klog (`"msg" err=... containerName=...`).
    "kubelet_stats_observation_missing": (
        [
            "Dec  7 10:15:02 ip-10-1-2-3 kubelet[2398]: E1207 10:15:02.123456    2398 summary.go:92] Failed to get "
            'system container stats for "/system.slice/kubelet.service": failed to get cgroup stats for '
            '"/system.slice/kubelet.service": failed to get container info for "/system.slice/kubelet.service": '
            'unknown container "/system.slice/kubelet.service"',
            'E1207 10:15:02.123456    2398 summary_sys_containers.go:48] "Failed to get system container stats" '
            'err="failed to get cgroup stats for \\"/system.slice/kubelet.service\\": failed to get container info '
            'for \\"/system.slice/kubelet.service\\": unknown container \\"/system.slice/kubelet.service\\"" '
            'containerName="/system.slice/kubelet.service"',
            'E1207 10:15:02.123789    2398 helpers.go:722] "Eviction manager: failed to construct signal" '
            'err="system container \\"pods\\" not found in metrics" signal="allocatableMemory.available"',
        ],
        [
            # pkg/kubelet/pod_workers.go: a pod the kubelet cannot keep running
            'E1207 10:15:02.123456    2398 pod_workers.go:1298] "Error syncing pod, skipping" err="failed to '
            '\\"StartContainer\\" for \\"train\\" with CrashLoopBackOff: \\"back-off 5m0s restarting failed '
            'container=train pod=train-0_default(8f3c)\\"" pod="default/train-0" podUID="8f3c"',
        ],
    ),
    # NCCL src/misc/ibvwrap.cc wrap_ibv_symbols: without libibverbs.so[.1] NCCL goes to teardown and runs
    # without its IB transport; WARN before 2.11.4, INFO since (the commit cited). The same file's
    # wrapper errors, on a verbs library that is present, stay findings.
    "nccl_ibverbs_library_absent": (
        [
            f"{NCCL} misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
        ],
        [
            f"{NCCL} misc/ibvwrap.cc:72 NCCL WARN dlvsym failed on ibv_get_device_list - /usr/lib/libibverbs.so: "
            "undefined symbol: ibv_get_device_list version IBVERBS_1.1",
            f"{NCCL} misc/ibvwrap.cc:152 NCCL WARN Call to ibv_open_device failed",
            f"{NCCL} misc/ibvwrap.cc:140 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory",
        ],
    ),
    # libfabric src/hmem_cuda.c cuda_hmem_dl_init (the .so -> .so.1 NVML fallback, warn until the cited
    # commit made it info) and cuda_hmem_init, which disables gdrcopy silently on -FI_ENOSYS from
    # src/hmem_cuda_gdrcopy.c cuda_gdrcopy_hmem_init ("gdrcopy_dl_hmem_init failed!").
    "libfabric_optional_library_probe": (
        [
            f"{EFA.removesuffix('efa:')}core:core:cuda_hmem_dl_init():499<warn> Failed to dlopen libnvidia-ml.so.  "
            "Trying libnvidia-ml.so.1",
            f"{EFA.removesuffix('efa:')}core:core:cuda_gdrcopy_hmem_init():175<warn> gdrcopy_dl_hmem_init failed!",
        ],
        [
            # the CUDA driver library itself, a gdrcopy that is installed but cannot open its device, and a
            # CUDA call that fails
            f"{EFA.removesuffix('efa:')}core:core:cuda_hmem_dl_init():619<warn> Failed to dlopen libcuda.so.1",
            f"{EFA.removesuffix('efa:')}core:core:cuda_gdrcopy_hmem_init():183<warn> gdr_open failed!",
            f"{EFA.removesuffix('efa:')}core:core:cuda_set_sync_memops():314<warn> Failed to set "
            "CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: CUDA_ERROR_NOT_SUPPORTED:operation not supported",
        ],
    ),
    # libfabric prov/efa/src/rdm/efa_rdm_ep_fiops.c efa_rdm_ep_ctrl (FI_ENABLE): "libfabric %s efa
    # endpoint created! address: %s" at warn until the cited commit made it info. Prefixes of the
    # current and of the pre-1.9 log format (rxr_ep_ctrl).
    "libfabric_efa_endpoint_created": (
        [
            f"{EFA}ep_ctrl:efa_rdm_ep_ctrl():1053<warn> libfabric 1.19.0amzn4.0 efa endpoint created! address: "
            "fi_addr_efa://[fe80::4a1:f5ff:fe2c:1b2d]:0:1432",
            "libfabric:2287:efa:ep_ctrl:rxr_ep_ctrl():939<warn> libfabric 1.8.0amzn1.0 efa endpoint created! "
            "address: fi_addr_efa://[fe80::4a1:f5ff:fe2c:1b2d]:0:1432",
        ],
        [
            # the same file: an endpoint that cannot be set up or closed
            f"{EFA}ep_ctrl:efa_rdm_ep_open():610<warn> cannot alloc memory for efa_rdm_ep->pke_vec!",
            f"{EFA}ep_ctrl:efa_rdm_ep_close():1145<warn> Unable to close base endpoint",
        ],
    ),
}


def _without(rule_id: str) -> Catalog:
    catalog = load_catalog()
    return catalog.model_copy(update={"healthy": [r for r in catalog.healthy if r.id != rule_id]})


def _hits(line: str, catalog: Catalog | None = None) -> list[str]:
    return [hit.id for hit in scan_text(line + "\n", catalog).hits]


def _findings(line: str, catalog: Catalog | None = None) -> set[str]:
    """What `line` is a finding of, read beside the consequences a notice that is a failure only
    beside them waits for (a plugin miss beside a socket fallback, `Signature.only_beside`); the
    consequences' own hits aside."""
    consequences = "".join(f"{other}\n" for other in CONSEQUENCE_LINES.values())
    return set(ids_with_folded(scan_text(f"{line}\n{consequences}", catalog).hits)) - set(CONSEQUENCE_LINES)


def test_every_new_rule_is_in_the_catalog_as_a_line_rule_with_pinned_sources() -> None:
    rules = {rule.id: rule for rule in load_catalog().healthy}
    for rule_id in CASES:
        rule = rules[rule_id]
        assert not rule.resolves, rule_id
        assert all("/blob/" in url and len(url.split("/blob/")[1].split("/")[0]) == 40 for url in rule.written_from)


@pytest.mark.parametrize("rule_id", list(CASES))
def test_the_healthy_line_gives_no_finding_and_the_rule_is_what_quiets_it(rule_id: str) -> None:
    healthy, _ = CASES[rule_id]
    (rule,) = [r for r in load_catalog().healthy if r.id == rule_id]
    for line in healthy:
        assert rule.compiled.search(line), line
        assert _hits(line) == [], line
        assert _findings(line, _without(rule_id)), f"without {rule_id} the line should be a finding: {line}"


@pytest.mark.parametrize("rule_id", list(CASES))
def test_the_nearest_failure_wording_of_the_same_source_is_still_a_finding(rule_id: str) -> None:
    _, failures = CASES[rule_id]
    for line in failures:
        assert _findings(line), line


@pytest.mark.parametrize("rule_id", list(CASES))
def test_a_healthy_line_hides_no_failure_printed_beside_it(rule_id: str) -> None:
    healthy, failures = CASES[rule_id]
    for failure in failures:
        expected = set(_hits(failure))
        got = {hit.id for hit in scan_text(f"{healthy[0]}\n{failure}\n").hits}
        assert expected <= got, failure
