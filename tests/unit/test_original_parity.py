"""Parity with the original script's 38 log patterns (../shared/spec/original-checks.md § 2(c)).

The original grepped 38 case-insensitive substrings and sent every hit to one quick-reference page.
Each pattern here stands inside a line shaped as the program that prints it writes it, and must be
detected with the class and runbook section that fix it. The section is ours, not the original's
single page: where the original's own "meaning" column names the cause (#22 libnccl-net.so: the
plugin is missing; #38 invalid alignment: driver/NCCL compatibility), the section follows it. #13,
unhandled system error, is the exception: the original called it GPU/EFA hardware and sent it to a
reboot, but NCCL's own troubleshooting guide says the code means a call to an external library
failed and that its WARN line says which (shared memory, memory registration, a socket as often as
a device). Alone, it points at the quick reference's runtime table, which sends each WARN line to
its section; beside a line that names the cause it is folded under that cause. The original's
success markers give a PASS line.
"""

# The lines are kept whole, as the programs print them.
# ruff: noqa: E501

from __future__ import annotations

import pytest

from hyperpod_nccl import references
from hyperpod_nccl.checks import discover
from hyperpod_nccl.classifier import load_catalog, scan_lines, scan_text
from hyperpod_nccl.cli.commands.triage import render_json, render_text
from hyperpod_nccl.models.findings import Status
from hyperpod_nccl.models.kubernetes import ContainerLog, KubernetesInventory
from tests.builders import inventory

CHECKS = discover()
# (the original's row, its pattern, a line carrying it, the class, the references.py section)
ORIGINAL_PATTERNS = [
    (
        1,
        "Timeout waiting for",
        "[rank3]: RuntimeError: Timeout waiting for rank 0 to join the rendezvous at 10.1.2.3:29500",
        "rendezvous",
        "DBG_TIMEOUT_RENDEZVOUS",
    ),
    (
        2,
        "Connection refused",
        "[E socket.cpp:957] [c10d] The client socket has failed to connect to [ip-10-1-2-3.ec2.internal]:29500 (errno: 111 - Connection refused).",
        "rendezvous",
        "DBG_TIMEOUT_RENDEZVOUS",
    ),
    (
        3,
        "Address already in use",
        "[W socket.cpp:436] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
        "rendezvous",
        "DBG_TIMEOUT_RENDEZVOUS",
    ),
    (
        4,
        "NCCL WARN Connect to",
        "ip-10-1-2-3:1201:1340 [2] NCCL WARN Connect to 10.1.2.4<37415> failed : Connection timed out",
        "connectivity",
        "DBG_SECURITY_GROUPS",
    ),
    (
        5,
        "network is unreachable",
        "ip-10-1-2-3:1201:1340 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.1.2.4<50329> failed : Network is unreachable",
        "connectivity",
        "DBG_SECURITY_GROUPS",
    ),
    (
        6,
        "Error in Store",
        "RuntimeError: [1] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Error in Store: Socket Timeout",
        "rendezvous",
        "DBG_TIMEOUT_RENDEZVOUS",
    ),
    (
        7,
        "DistStoreError",
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 15/16 clients joined.",
        "rendezvous",
        "DBG_TIMEOUT_RENDEZVOUS",
    ),
    (
        8,
        "RendezvousConnectionError",
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.",
        "rendezvous",
        "DBG_TIMEOUT_RENDEZVOUS",
    ),
    (
        9,
        "RendezvousTimeout",
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
        "rendezvous",
        "DBG_TIMEOUT_RENDEZVOUS",
    ),
    (
        10,
        "Name or service not known",
        "[W socket.cpp:663] [c10d] The client socket could not resolve training-master-0.training-job: Name or service not known",
        "dns",
        "DBG_DNS",
    ),
    (
        11,
        "getaddrinfo failed",
        "ValueError: getaddrinfo failed for host 'training-master-0.training-job' (MASTER_ADDR)",
        "dns",
        "DBG_DNS",
    ),
    (
        12,
        "Watchdog timeout",
        "[Rank 3] Watchdog timeout: WorkNCCL(SeqNum=24, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800392 milliseconds before timing out.",
        "timeout",
        "DBG_FLIGHT_RECORDER",
    ),
    (
        13,
        "unhandled system error",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
        "nccl_error",
        "PAT_RUNTIME",
    ),
    (
        14,
        "unhandled cuda error",
        "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled cuda error, NCCL version 2.18.1",
        "cuda_error",
        "NODE_GPU",
    ),
    (
        15,
        "peer access is not supported",
        "ip-10-1-2-3:1201:1201 [1] NCCL WARN Cuda failure 'peer access is not supported between these two devices'",
        "p2p",
        "DBG_P2P_ACS",
    ),
    (
        16,
        "NCCL WARN Cuda failure",
        "ip-10-1-2-3:1201:1388 [4] enqueue.cc:1517 NCCL WARN Cuda failure 'an illegal memory access was encountered'",
        "cuda_error",
        "NODE_GPU",
    ),
    (
        17,
        "fi_getinfo failed",
        "ip-10-1-2-3:1201:1340 [0] NCCL WARN NET/OFI fi_getinfo failed: No data available (-61)",
        "efa",
        "DBG_EFA_CONFIG",
    ),
    (
        18,
        "NCCL_OFI_RDMA",
        "ip-10-1-2-3:1201:1401 [3] nccl_net_ofi_rdma.cpp:5907 NCCL WARN NET/OFI Error in NCCL_OFI_RDMA send: completion with error, Input/output error",
        "efa",
        "DBG_EFA_CONFIG",
    ),
    (
        19,
        "Call to ibv_reg_mr failed",
        "ip-10-1-2-3:1201:1401 [3] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory",
        "memlock",
        "DBG_MEMLOCK_SHM",
    ),
    (
        20,
        "NET/OFI Using TCP",
        "ip-10-1-2-3:1201:1340 [0] NCCL INFO NET/OFI Using TCP provider: no EFA device found",
        "tcp_fallback",
        "DBG_TCP_FALLBACK",
    ),
    (
        21,
        "Failed to load NCCL",
        "RuntimeError: Failed to load NCCL: NCCL_RUNTIME_PATH is not set and no NCCL library was found",
        "version",
        "DBG_VERSION_MISMATCH",
    ),
    (
        22,
        "libnccl-net.so",
        # The plugin miss with the socket fallback it causes on an EFA node: alone, NCCL's notice is
        # how InfiniBand clusters run (`only_beside`, test_classifier.py).
        "ip-10-1-2-3:1201:1201 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n"
        "ip-10-1-2-3:1201:1201 [0] NCCL INFO Using network Socket",
        "efa",
        # error-patterns-quick-ref.md maps `libnccl-net.so` to debugging-guide.md § 13, whose root
        # cause names aws-ofi-nccl missing from the image (§ 6 covers the device plugin and libfabric).
        "DBG_TCP_FALLBACK",
    ),
    (
        23,
        "OOMKilled",
        "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137",
        "host_oom",
        "DBG_CONTAINER_OOM",
    ),
    (
        24,
        "CUDA out of memory",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.10 GiB of which 1.12 GiB is free.",
        "gpu_oom",
        "DBG_GPU_OOM",
    ),
    (
        25,
        "cudaMalloc failed",
        "ip-10-1-2-3:1201:1201 [2] NCCL WARN cudaMalloc failed: out of memory (size 1073741824)",
        "gpu_oom",
        "DBG_GPU_OOM",
    ),
    (
        26,
        "failed to extend /dev/shm",
        "ip-10-1-2-3:1201:1388 [6] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-UpR3TW to 9637892 bytes",
        "shm",
        "DBG_MEMLOCK_SHM",
    ),
    (
        27,
        "Bus error",
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
        "shm",
        "DBG_MEMLOCK_SHM",
    ),
    (
        28,
        "NCCL function not found",
        "RuntimeError: NCCL function not found: ncclCommInitRankConfig (libnccl.so.2 is older than the NCCL this PyTorch was built with)",
        "version",
        "DBG_VERSION_MISMATCH",
    ),
    (
        29,
        "Incompatible NCCL version",
        "ip-10-1-2-3:1201:1201 [0] NCCL WARN Incompatible NCCL version 2.18.1 on rank 7 (rank 0 runs 2.21.5)",
        "version",
        "DBG_VERSION_MISMATCH",
    ),
    (
        30,
        "Could not find interface",
        "ip-10-1-2-3:1201:1201 [0] NCCL WARN Bootstrap : Could not find interface matching NCCL_SOCKET_IFNAME=eth9",
        "socket_ifname",
        "DBG_SOCKET_IFNAME",
    ),
    (
        31,
        "world_size mismatch",
        "ValueError: world_size mismatch: WORLD_SIZE=32 but 24 ranks joined the rendezvous",
        "rendezvous",
        "DBG_TIMEOUT_RENDEZVOUS",
    ),
    (
        32,
        "doesn't have NCCL built in",
        "RuntimeError: Distributed package doesn't have NCCL built in",
        "version",
        "DBG_VERSION_MISMATCH",
    ),
    (
        33,
        "CUDA_VISIBLE_DEVICES",
        "RuntimeError: CUDA error: invalid device ordinal (CUDA_VISIBLE_DEVICES=0,1,2,3 but LOCAL_RANK=5)",
        "config",
        "OPS_NCCL_ENV",
    ),
    (
        34,
        "unlink shared memory",
        "ip-10-1-2-3:1201:1388 [0] NCCL WARN unlink shared memory /dev/shm/nccl-X4dB2q failed, error: No such file or directory",
        "shm",
        "DBG_STALE_SHM",
    ),
    (
        35,
        "Call to ncclCommAbort",
        "[rank2]:[E ProcessGroupNCCL.cpp:1182] [PG 0 Rank 2] Call to ncclCommAbort on communicator 0x55d1c0 after a collective timed out",
        "timeout",
        "DBG_NCCL_RAS",
    ),
    (
        36,
        "MNNVL topology",
        "ip-10-1-2-3:1201:1201 [0] NCCL WARN MNNVL topology detection failed: cuMemCreate returned 2 (out of memory)",
        "topology",
        "DBG_TUNING_NVLS",
    ),
    (
        37,
        "ENOMEM",
        "libfabric:1201:1701823456::efa:mr:efa_mr_reg_impl():843<warn> Unable to register MR: ENOMEM",
        "memlock",
        "DBG_MEMLOCK_SHM",
    ),
    (
        38,
        "invalid alignment",
        "ip-10-1-2-3:1201:1388 [0] NCCL WARN Cuda failure 'invalid alignment' (cudaErrorMisalignedAddress)",
        "config",
        "DBG_VERSION_MISMATCH",
    ),
]


def test_the_table_holds_the_original_38_patterns_each_in_its_line() -> None:
    assert [row[0] for row in ORIGINAL_PATTERNS] == list(range(1, 39))
    for _, pattern, line, _, _ in ORIGINAL_PATTERNS:
        assert pattern.lower() in line.lower(), pattern


@pytest.mark.parametrize(
    ("row", "pattern", "line", "cls", "section"), ORIGINAL_PATTERNS, ids=[f"{r[0]}-{r[1]}" for r in ORIGINAL_PATTERNS]
)
def test_each_original_pattern_is_detected_with_its_class_and_section(
    row: int, pattern: str, line: str, cls: str, section: str
) -> None:
    hits = [h for h in scan_text(line + "\n").hits if h.cls == cls]
    assert hits, f"#{row} {pattern!r} not detected as {cls}: {line}"
    assert getattr(references, section) in {h.reference for h in hits}, f"#{row} {pattern!r}"


def test_the_original_success_markers_are_recorded_case_insensitively() -> None:
    assert load_catalog().success_markers == ["BASELINE TEST PASSED", "AllReduce SUCCESS", "Training complete"]
    result = scan_lines(["[rank0] step 9000 loss 1.93", "NCCL TEST: allreduce success on 16 ranks", "done"])
    assert result.success_markers == ["AllReduce SUCCESS"]
    assert scan_lines(["step 1", "all reduce succeeded"]).success_markers == []


def test_triage_prints_a_pass_line_for_a_success_marker_beside_any_failure() -> None:
    result = scan_lines(["BASELINE TEST PASSED", "[rank3] Watchdog timeout: WorkNCCL(SeqNum=24) ran for 1800392 ms"])
    text = render_text("job.log", result)
    assert "[PASS] the log printed 'BASELINE TEST PASSED'" in text and "[FAIL]" in text
    assert '"success_markers": ["BASELINE TEST PASSED"]' in render_json("job.log", result)


def test_a_pod_log_with_a_success_marker_gets_a_pass_line_for_that_pod() -> None:
    logs = [
        ContainerLog(namespace="ml", pod="train-0", container="pytorch", lines=["epoch 3", "Training complete"]),
        ContainerLog(namespace="ml", pod="train-1", container="pytorch", lines=["epoch 3", "still going"]),
    ]
    findings = list(CHECKS["k8s.pod_logs"].run(inventory(kubernetes=KubernetesInventory(pods=[], logs=logs))))
    passes = [f for f in findings if f.status is Status.PASS]
    assert [f.title for f in passes if "printed" in f.title] == ["ml/train-0 [pytorch]: printed 'Training complete'"]


def test_a_pod_log_failure_settled_by_a_later_line_is_an_info_line_not_a_finding() -> None:
    refused = (
        "[W1206 socket.cpp:663] [c10d] The client socket has failed to connect to [node-0]:29500 "
        "(errno: 111 - Connection refused)."
    )
    connected = "[I1206 socket.cpp:811] [c10d] The client socket has connected to [node-0]:29500 on [node-1]:50312."
    logs = [
        ContainerLog(namespace="ml", pod="train-0", container="pytorch", lines=[refused, connected]),
        ContainerLog(namespace="ml", pod="train-1", container="pytorch", lines=[connected, refused]),
    ]
    findings = list(CHECKS["k8s.pod_logs"].run(inventory(kubernetes=KubernetesInventory(pods=[], logs=logs))))
    by_pod = {pod: [f for f in findings if f.title.startswith(f"ml/{pod} ")] for pod in ("train-0", "train-1")}
    assert [f.status for f in by_pod["train-0"]] == [Status.INFO]
    assert "settled by a later line" in by_pod["train-0"][0].title
    # the refusal after the connection stands
    assert [f.status for f in by_pod["train-1"]] == [Status.FAIL]
