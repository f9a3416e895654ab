"""Class cues, the classifier's second and weaker layer (`catalog.CueLayer`, the catalog's `cues`).

Every line in the tables of this file is INVENTED: written for these tests from the runbooks'
symptom lists and the usual shapes of the emitters' lines (another tool's wording, a wrapper's
paraphrase, a user's copy), never copied from a log or from a corpus file. A line of `CUE_CASES`
must be recognised by its class's cue (no signature knows it); a line of `LOOK_ALIKES` is healthy
text that carries a class's words and an error word in a harmless role, and must stay quiet.

The lines of `tests/data/log_corpus/healthy_runs.json` are the exception: REAL lines that healthy runs print,
each group with the public source it was copied from (an issue thread or a pinned repository file,
none of them a source of either log corpus); none may give a finding.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hyperpod_nccl import references
from hyperpod_nccl.checks import discover
from hyperpod_nccl.classifier import Catalog, hits_to_findings, load_catalog, scan_text
from hyperpod_nccl.classifier.catalog import CueLayer, HealthyRule, is_reference_name
from hyperpod_nccl.cli.commands.triage import render_text
from hyperpod_nccl.models.findings import Priority, Status
from hyperpod_nccl.verdict.kinds import classify
from tests.log_corpus import catalog_without, held_out, in_sample, source_key

CUES = load_catalog().cues
assert CUES is not None

# class → INVENTED lines that no signature knows and that the class's cue must recognise.
CUE_CASES: dict[str, list[str]] = {
    "dns": [
        "nscd: error: host name lookup of trainer-0 gave nothing",  # INVENTED
        "launcher.py: ERROR cannot resolve trainer-0.trainer-svc, giving up",  # INVENTED
        "resolver error: NXDOMAIN for master-0.trainer-svc",  # INVENTED
        "ray: error: c-ares gave up on gcs-head after 3 attempts",  # INVENTED
    ],
    "socket_ifname": [
        "launcher: fatal: getifaddrs returned no usable entry in this pod",  # INVENTED
        "ERROR: only the loopback address is up, the job needs a routable one",  # INVENTED
        "mpirun: error: btl_tcp_if_include names an interface that is not on this host",  # INVENTED
        "Fatal: NCCL_SOCKET_IFNAME points at nothing usable on worker-3",  # INVENTED
        "store.py: error: bind to 10.9.8.7:29500 refused: Cannot assign requested address",  # INVENTED
        "mpirun: error: oob_tcp_if_include=ib0 matches no device here",  # INVENTED
        "launcher error: UCX_NET_DEVICES lists mlx5_3:1, absent on this node",  # INVENTED
        "hydra: error: the -iface option names eth7, aborting",  # INVENTED
        "ERROR: rank 3 advertised 192.168.122.1 as its address, its peers cannot reach it",  # INVENTED
        "launcher fatal: could not determine the network interface for the store",  # INVENTED
    ],
    "memlock": [
        "ERROR: max locked memory is 64 kB, the job needs unlimited",  # INVENTED
        "rdma: pinning of the staging buffer failed (registration returned ENOMEM)",  # INVENTED
        "fatal: the completion queue of device 2 could not be created",  # INVENTED
        "rdma_transport: register_buffer_pd failed: Cannot allocate memory (os error 12)",  # INVENTED
        "ERROR mlx5_2: mlx5dv_devx_obj_create of the umem failed, errno 12 (ENOMEM)",  # INVENTED
    ],
    "shm": [
        "worker 3: fatal: shm quota of the pod exhausted",  # INVENTED
        "ERROR: shm_open of the ring buffer failed",  # INVENTED
        "DataLoader error: torch_shm_manager exited before the worker started",  # INVENTED
    ],
    "efa": [
        "health-check: error: fi_pingpong to node-2 exited early",  # INVENTED
        "comm_lib: init error: atl_ofi could not open a fabric on this host",  # INVENTED
        "setup-efa.sh: error: libfabric provider list is empty on this node",  # INVENTED
        "Error: EFA device rdmap16s27 could not be opened by the container",  # INVENTED
        "health-check error: no RDMA devices visible in the pod",  # INVENTED
        "ERROR: ibv_get_device_list returned nothing, the device plugin did not mount /dev/infiniband",  # INVENTED
    ],
    "tcp_fallback": [
        "error: no RDMA device found; provider=tcp will carry inter-node traffic",  # INVENTED
    ],
    "p2p": [
        "ERROR: P2P between GPU 2 and GPU 5 is disabled on this board",  # INVENTED
        "unable to open IPC handle exported by rank 1",  # INVENTED
        "kernel: DMAR fault on 0000:3b:00.0, blocked transaction (error)",  # INVENTED
    ],
    "version": [
        "ERROR: the plugin was compiled with an older NCCL than the one loaded",  # INVENTED
        "runtime check failed: driver too old for this container",  # INVENTED
        "container start failed: unsatisfied condition: cuda>=12.4 on this host",  # INVENTED
        "Error: please update your NVIDIA driver, the image needs a newer one",  # INVENTED
        "GPU 0 with CUDA capability sm_100 is not compatible with this build",  # INVENTED
    ],
    "topology": [
        "ERROR: cannot load the NCCL topology file given in the job spec",  # INVENTED
        "fatal: PCI path between GPU 0 and NIC 3 not found",  # INVENTED
    ],
    "xid": [
        "health-check: error: NVRM reported a fault on GPU 0000:53:00.0",  # INVENTED
        "monitor: ERROR GPU 4 lost, marking node bad",  # INVENTED
        "node-problem-detector: XidCriticalError condition set on the node (error)",  # INVENTED
        "[ 812.300] nvidia 0000:53:00.0: probe of the device failed with error -1",  # INVENTED
    ],
    "ecc": [
        "gpu-burn: error: ECC counters went up during the run",  # INVENTED
        "validation failed: uncorrectable memory fault reported by GPU 7",  # INVENTED
    ],
    "host_oom": [
        "worker exited: Killed (OOM) while loading the dataset",  # INVENTED
        "ERROR: container memory limit reached, process killed",  # INVENTED
        "worker-3 stopped: node is low on memory, the process was killed",  # INVENTED
    ],
    "gpu_oom": [
        "ERROR: ran out of GPU memory while building the KV cache, exceeded budget",  # INVENTED
        "XlaRuntimeError: RESOURCE_EXHAUSTED: failed to allocate 12.5GiB for the activations",  # INVENTED
        "engine error: not enough free memory for the cache blocks, lower gpu_memory_utilization",  # INVENTED
    ],
    "cuda_error": [
        "ERROR in kernel launch: illegal instruction on device 3",  # INVENTED
        "cuBLAS handle creation failed in layer 12",  # INVENTED
    ],
    "config": [
        "ERROR: CUDA_VISIBLE_DEVICES lists 8 devices but the pod got 4",  # INVENTED
    ],
    "rendezvous": [
        "trainer: error: the client socket to node-0 could not be opened",  # INVENTED
        "ERROR: rank 3 never reached the rendezvous endpoint",  # INVENTED
        "fatal: MASTER_PORT is not set in the job environment",  # INVENTED
        "raylet error: lost the GCS server on the head node, exiting",  # INVENTED
        "ERROR: task 3 could not register with the coordination service",  # INVENTED
    ],
    "connectivity": [
        "worker 7: error: socket closed by node-3 during the allgather",  # INVENTED
        "rank 5 -> rank 12: no route to host (is the traffic allowed?), aborting",  # INVENTED
        "ERROR: peer 10.1.2.3 closed the link: connection reset",  # INVENTED
        "worker 4: error: the TCP connection to node-7 dropped mid-step",  # INVENTED
        "rdma error: got completion with error on QP 0x2a, status 12",  # INVENTED
    ],
    "timeout": [
        "ERROR: allreduce step 812 hung for 30 minutes, job aborted",  # INVENTED
        "trainer: operation timed out after 1800 s on rank 7",  # INVENTED
        "ERROR: job aborted, the collective made no progress for 30 minutes",  # INVENTED
        "error: the job died in WorkNCCL::checkTimeout of /build/torch/csrc/distributed/c10d/Work.cpp",  # INVENTED
        "[rank4]:[E ProcessGroupNCCL.cpp:1290] FlightRecorder found no trace for the failed all_reduce",  # INVENTED
    ],
    "slurm": [
        "error: job 4211: scontrol requeue was denied",  # INVENTED
        "error: _slurm_rpc_kill_job: failed for JobId=812",  # INVENTED
    ],
    "k8s": [
        "Error: kubelet refused to start container trainer in pod job-worker-3",  # INVENTED
        "pod job-worker-2 evicted by the node, job failed",  # INVENTED
        "job admission error: insufficient quota for nvidia.com/gpu in the team queue",  # INVENTED
        "Error: the kubelet kept failing while pulling the image for the trainer",  # INVENTED
    ],
    "lifecycle": [
        "ERROR: lifecycle step install_packages failed with status 1",  # INVENTED
        "on_create_main.sh: step 4 failed, see the provisioning log",  # INVENTED
        "lifecycle_script.py exited with an error in setup_sssd",  # INVENTED
    ],
    "hma": [
        "node i-0abc123 failed the deep health check, marked for replacement",  # INVENTED
        "i-0abc123: GPU fault, the repair action failed and the node stays cordoned",  # INVENTED
    ],
    "nccl_error": [
        "ERROR: the NCCL communicator could not be split for pipeline group 3",  # INVENTED
    ],
}

# INVENTED healthy lines: class words with an error word in a harmless role, INFO/DEBUG levels,
# success, hedges, options and file names. Each must give no finding.
LOOK_ALIKES: list[str] = [
    "errors: 0",  # INVENTED
    "no errors found",  # INVENTED
    "0 failed, 128 passed",  # INVENTED
    "timeout=1800",  # INVENTED
    "NCCL_SOCKET_IFNAME=eth0 set",  # INVENTED
    "ECC errors: 0",  # INVENTED
    "GPU 3: ECC errors 0, retired pages 0",  # INVENTED
    "error_rate 0.00",  # INVENTED
    "dns lookups: 12, failures: 0",  # INVENTED
    "EFA devices: 32, link errors: 0",  # INVENTED
    "shm usage 12% (0 allocation failures)",  # INVENTED
    "xid events: none",  # INVENTED
    "rendezvous: 16/16 ranks joined, 0 timeouts",  # INVENTED
    "#SBATCH --error=logs/%x_%j.err",  # INVENTED
    "srun --kill-on-bad-exit=1 --output=train.log python train.py",  # INVENTED
    "torchrun --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29500 --max-restarts=3",  # INVENTED
    "writing the topology dump to /fsx/logs/nccl-topo-error.xml",  # INVENTED
    "ip-10-1-2-3:1234:1234 [0] NCCL INFO NET/OFI failed to find a provider for tcp, trying efa",  # INVENTED
    "2024-05-01 12:00:00,123 [INFO] dns: fallback resolver failed over to 10.0.0.2",  # INVENTED
    'time="2024-05-01T12:00:00Z" level=info msg="lookup of shm segment failed, recreating"',  # INVENTED
    "I1207 10:00:00.123456 1234 efa.go:88] EFA probe error on device 3 is expected on p4d",  # INVENTED
    "2024-05-01 12:00:00 DEBUG rendezvous: connection refused by 10.1.0.10, will retry",  # INVENTED
    "efa health check passed on all 32 devices (errors: none)",  # INVENTED
    "Connected to rank 3 after 2 attempts; connection refused earlier, now recovered",  # INVENTED
    "If the rendezvous fails, check MASTER_ADDR",  # INVENTED
    "Training would fail if /dev/shm were smaller than 1 GB; it is 64 GB",  # INVENTED
    "retrying: c10d store at master-0:29500 not reachable yet (connection refused)",  # INVENTED
    "deprecated: NCCL_IB_TIMEOUT is ignored by this plugin, error handling unchanged",  # INVENTED
    "| xid | GPU fault reported by the driver | failed jobs are restarted |",  # INVENTED
    "log_level=error p2p=enabled topology=auto",  # INVENTED
    "kubectl get pods: 16 Running, 0 Failed, 0 Pending",  # INVENTED
    "UCX  WARN  failed to register memory on md[3]=cuda_ipc: Cannot allocate memory",  # INVENTED
    "[W1206 18:44:12.715298746 socket.cpp:663] [c10d] hostname lookup failed for the client socket",  # INVENTED
    # aligned reports: a counter's padding, a flag that answers no, a heading that names counters
    "        DRAM Uncorrectable ECC Errors     : 0",  # INVENTED
    "        Remapping Failure Occurred        : No",  # INVENTED
    "    ECC Errors",  # INVENTED
    # a shell command's own text: what `echo` prints or `grep` seeks; a batch directive's comment
    "srun --nodes=2 sh -c 'nvidia-smi -q -d ECC' || echo \"ecc check failed\"",  # INVENTED
    'grep -i "nccl error" slurm-4211.out',  # INVENTED
    "#SBATCH --error=%x-%j.err   # error file of the NCCL test",  # INVENTED
    "If the job fails in case of hardware failure, srun --auto-resume=1 resubmits it",  # INVENTED
    # a program that says it goes on without the failed part
    "[WARN] could not query the EFA device list - proceeding without EFA verification",  # INVENTED
    "p2p probe failed on GPU 3, continuing without peer access checks",  # INVENTED
    # a field or metric name one of whose dotted components is an error word (nvidia-smi's query fields)
    '"ecc.errors.uncorrected.volatile.total"',  # INVENTED
    "index, name, ecc.errors.corrected.volatile.total, ecc.errors.uncorrected.aggregate.dram",  # INVENTED
    # beside the vocabulary widened on 2026-12-07: pulls that worked, counters, INFO sizing, successes
    'Successfully pulled image "nvcr.io/nvidia/pytorch:24.05-py3" in 41s; no errors',  # INVENTED
    "INFO 11-18 engine.py:300] # GPU blocks: 8192, cache blocks allocated, gpu_memory_utilization=0.9",  # INVENTED
    "RDMA devices: 4, errors: 0",  # INVENTED
    "[INFO] memory monitor: node low on memory threshold set to 0.95",  # INVENTED
    "TCP connection test passed on 16 of 16 ranks",  # INVENTED
    "docker0: 172.17.0.1/16 (excluded from NCCL_SOCKET_IFNAME), eth0: 10.1.2.3 used",  # INVENTED
    "slurmctld: _slurm_rpc_submit_batch_job: JobId=812 InitPrio=1 usec=305",  # INVENTED
    "ibv_create_qp succeeded on efa_0 (max_send_wr 256)",  # INVENTED
    "INFO: connected to the GCS server at 10.1.0.10:6379 after 0 errors",  # INVENTED
    # a C++ frame or a source path under torch's c10d directory is no rendezvous word
    "frame #3: c10d::ProcessGroupNCCL::runHookLoop() + 0x12 (0x7f in /opt/torch/lib/libtorch_cuda.so)",  # INVENTED
    # a node condition row whose status is False (kubectl describe node)
    "  XidCriticalError     False   Mon, 23 Jun 2025 18:45:43 +0000   NoXidCriticalError",  # INVENTED
]


def _hits(line: str, catalog: Catalog | None = None) -> list[tuple[str, str]]:
    return [(hit.id, hit.cls) for hit in scan_text(line + "\n", catalog).hits]


def _without_cues() -> Catalog:
    return load_catalog().model_copy(update={"cues": None})


@pytest.mark.parametrize(
    ("cls", "line"), [(cls, line) for cls, lines in CUE_CASES.items() for line in lines], ids=lambda v: str(v)[:40]
)
def test_a_class_cue_recognises_its_vocabulary_where_no_signature_does(cls: str, line: str) -> None:
    assert _hits(line, _without_cues()) == [], f"a signature knows this line, it tests no cue: {line}"
    [hit] = scan_text(line + "\n").hits
    cue = next(c for c in CUES.classes if c.cls == cls)
    assert (hit.id, hit.cls, hit.reference) == (f"cue_{cls}", cls, getattr(references, cue.reference)), line
    assert hit.priority is Priority.P2 and hit.fields["by_cue"] is True and hit.fields["cue"], line
    assert hit.title.startswith("Looks like a ") and hit.title.endswith("(no known message matched)")
    # CloudWatch downloads only lines with a filter term: a cue's line must carry one.
    assert any(term in line for term in load_catalog().cloudwatch_terms), line


def test_every_class_has_a_cue_in_the_section_of_its_signatures() -> None:
    catalog = load_catalog()
    assert [cue.cls for cue in CUES.classes] and {cue.cls for cue in CUES.classes} == set(catalog.classes)
    assert set(CUE_CASES) == set(catalog.classes)
    for cue in CUES.classes:
        sections = {s.reference for s in catalog.signatures if s.cls == cue.cls}
        assert cue.reference in sections, f"{cue.cls}: {cue.reference} is none of its signatures' sections"


def test_every_cue_cites_runbook_sections_that_exist_and_its_classs_sources() -> None:
    catalog = load_catalog()
    for cue in CUES.classes:
        runbook = [s for s in cue.vocabulary_from if is_reference_name(s)]
        assert runbook, f"{cue.cls}: no runbook section cited"
        for cited in runbook:
            assert references.section_heading(getattr(references, cited)), cited
        sources = {url for s in catalog.signatures if s.cls == cue.cls for url in s.written_from}
        assert all(s in sources for s in cue.vocabulary_from if not is_reference_name(s)), cue.cls
    broken = catalog.model_dump()
    broken["cues"]["classes"][0]["vocabulary_from"] = ["https://example.com/a-corpus-thread"]
    with pytest.raises(ValueError, match="neither a runbook section"):
        Catalog.model_validate(broken)


@pytest.mark.parametrize("line", LOOK_ALIKES)
def test_healthy_look_alikes_with_class_words_stay_quiet(line: str) -> None:
    # No cue fires, and the cues add nothing to what the signatures make of the line (a few of
    # these lines are signature findings: "connection refused ... will retry" stays c10d_connect_failed).
    assert _hits(line) == _hits(line, _without_cues()), line
    assert not [hit_id for hit_id, _ in _hits(line) if hit_id.startswith("cue_")], line


def test_most_look_alikes_give_no_finding_at_all() -> None:
    quiet = [line for line in LOOK_ALIKES if not _hits(line)]
    assert len(quiet) >= len(LOOK_ALIKES) - 8


def test_a_signature_takes_precedence_over_a_cue() -> None:
    # INVENTED: a line a signature knows ("Name or service not known") that also carries cue words.
    line = "ERROR rendezvous: getaddrinfo for master-0 failed: Name or service not known"
    ids = [hit_id for hit_id, _ in _hits(line)]
    assert ids and not any(hit_id.startswith("cue_") for hit_id in ids), ids


def test_a_cue_needs_an_error_word() -> None:
    for line in (
        "resolving trainer-0.trainer-svc through the cluster DNS",  # INVENTED
        "NVLS enabled on 8 GPUs, topology file /opt/topo.xml",  # INVENTED
        "rendezvous at master-0:29500 with 16 workers",  # INVENTED
        "/dev/shm is 64G, memlock unlimited",  # INVENTED
    ):
        assert _hits(line) == [], line
        assert _hits(line + ": failed") != [], line


def test_info_and_debug_lines_of_programs_that_print_levels_are_no_cue() -> None:
    failing = "c10d handshake with master-0 failed"  # INVENTED
    assert _hits(failing) == [("cue_rendezvous", "rendezvous")]
    for line in (
        f"ip-10-1-2-3:1234:1234 [0] NCCL INFO {failing}",
        f"[INFO] {failing}",
        f"2024-05-01 12:00:00,123 INFO {failing}",
        f"INFO:torch.distributed: {failing}",
        f'time="2024-05-01T12:00:00Z" level=info msg="{failing}"',
        f'{{"level": "debug", "msg": "{failing}"}}',
        f"I1207 10:00:00.123456 1234 agent.go:88] {failing}",
        f"[rank0]:[I1206 18:44:12.715298746 socket.cpp:663] {failing}",
        f"2024-08-20T22:26:28Z info {failing}",
        f"slurmd: debug: {failing}",
        f"libfabric:1:1::efa:core:x():1<info> {failing}",
    ):
        assert _hits(line) == [], line
    # warning and error levels stay eligible, and so does an error message that mentions INFO
    for line in (f"[WARN] {failing}", f'level=error msg="{failing}"', f"{failing}; rerun with NCCL_DEBUG=INFO"):
        assert _hits(line) == [("cue_rendezvous", "rendezvous")], line


def test_the_most_specific_class_wins_over_the_generic_ones() -> None:
    # INVENTED: a specific cause beside a rendezvous, timeout, connectivity or NCCL word.
    cases = {
        "ERROR: c10d handshake timed out because getaddrinfo returned nothing": "dns",
        "NCCL communicator init failed: /dev/shm is full": "shm",
        "connection reset while registering memory failed: ENOMEM from ibv_reg_mr": "memlock",
        "ERROR: MASTER_ADDR handshake timed out, connection reset by the EFA device": "efa",
        "ERROR: c10d handshake with master-0 failed: connection reset": "rendezvous",
        "ERROR: peer 10.1.2.3 stopped answering (connection reset), watchdog fired": "connectivity",
        "NCCL allreduce timed out on rank 3": "timeout",
        "ERROR: the NCCL communicator could not be split": "nccl_error",
    }
    for line, cls in cases.items():
        assert [c for _, c in _hits(line)] == [cls], line
    order = [cue.cls for cue in CUES.classes]
    assert order[-4:] == ["k8s", "slurm", "connectivity", "timeout", "nccl_error"][-4:]
    assert order.index("rendezvous") > max(order.index(c) for c in ("dns", "socket_ifname", "efa", "memlock"))


def test_a_healthy_line_rule_quiets_a_cue_too() -> None:
    line = "ERROR: c10d handshake with master-0 failed during the planned drain"  # INVENTED
    assert _hits(line) == [("cue_rendezvous", "rendezvous")]
    catalog = load_catalog()
    rule = HealthyRule(
        id="planned_drain",
        why="test",
        keywords=["planned drain"],
        patterns=[r"planned drain"],
        written_from=["https://example.com/drain"],
    )
    assert _hits(line, catalog.model_copy(update={"healthy": [*catalog.healthy, rule]})) == []


def test_a_generic_nccl_error_folds_under_a_cue_of_a_cause_and_not_under_an_outcome() -> None:
    # INVENTED: the generic result code on one line, the cause in a class's words on the next.
    generic = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1200, unhandled system error, NCCL version 2.21.5"
    cause = "ERROR: cannot resolve trainer-0.trainer-svc"
    [hit] = scan_text(f"{generic}\n{cause}\n").hits
    assert hit.id == "cue_dns" and hit.reference == references.DBG_DNS
    assert [f.id for f in hit.folded] == ["nccl_system_error"] and hit.priority is Priority.P0
    outcome = "ERROR: allreduce step 812 hung for 30 minutes"
    ids = {h.id for h in scan_text(f"{generic}\n{outcome}\n").hits}
    assert ids == {"nccl_system_error", "cue_timeout"}


def test_a_cue_hit_becomes_a_warning_finding_that_says_how_it_was_recognised() -> None:
    check = discover()["logs.signatures"]
    result = scan_text("ERROR: cannot resolve trainer-0.trainer-svc\n")
    [finding] = hits_to_findings(check, result.hits, where="stream s")
    assert finding.status is Status.WARN and finding.priority is Priority.P2
    assert finding.fields["signature"] == "cue_dns" and finding.fields["by_cue"] is True
    assert "not by a known message" in finding.detail
    # the verdict takes it as a cause of its own, never as evidence of a kind
    assert classify(finding) is None
    text = render_text("paste", result)
    assert "not by a known message" in text and "possible root cause:" in text


def test_the_prefilter_finds_every_cue_in_one_block() -> None:
    lines = [line for lines in CUE_CASES.values() for line in lines]
    chatter = "ip-10-1-2-3:1234:1234 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n" * 2000
    result = scan_text(chatter + "\n".join(lines) + "\n" + chatter + "\n".join(LOOK_ALIKES) + "\n")
    # one input: the cues of classes that fold (cuda_error, nccl_error) are folded under a cause
    counted = {
        found.id: found.count for hit in result.hits for found in (hit, *hit.folded) if found.id.startswith("cue_")
    }
    assert counted == {f"cue_{cls}": len(cls_lines) for cls, cls_lines in CUE_CASES.items()}


def test_every_error_word_contains_a_trigger() -> None:
    # The scanner looks for cue candidates by the layer's triggers: an error word without one
    # would never be read.
    words = [
        "error", "Errors", "failed", "FAIL", "failure", "fatal", "unable", "cannot", "can't", "could not",
        "couldn't", "refused", "timed out", "exception", "aborted", "killed", "denied", "no such", "not found",
        "invalid", "lost", "mismatch", "exceeded", "RuntimeError", "UnknownHostException", "cudaErrorLaunchFailure",
    ]  # fmt: skip
    for word in words:
        assert CUES.compiled_error.search(f"x {word} y"), word
        assert any(trigger in word.lower() for trigger in CUES.triggers), word
    for word in (
        "error_rate",
        "errorCount",
        "terror",
        "mirror",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "loss",
        "ErrorHandler",
    ):
        assert not CUES.compiled_error.search(f"x {word} y"), word


def _ere(pattern: str) -> str:
    """The pattern as POSIX ERE, as the classifier benchmark hands signatures to grep (bounded repeats
    as `*` / `+`: grep's DFA explodes on bounded repeats)."""
    ere = re.sub(r"\{0,\d+\}", "*", pattern.replace("(?:", "("))
    ere = re.sub(r"\{[1-9]\d*,\d+\}", "+", ere)
    return ere.replace(r"\d", "[0-9]").replace(r"\s", "[[:space:]]")


@pytest.mark.skipif(shutil.which("grep") is None, reason="no grep")
def test_cue_patterns_are_grep_compatible() -> None:
    grep = shutil.which("grep")
    assert grep is not None
    groups = [(["-i"], [p for cue in CUES.classes for p in [*cue.patterns, *cue.exclude]])]
    groups.append((["-i"], [*CUES.error_words, *CUES.harmless, *CUES.quiet, *CUES.carry_on, *CUES.gave_up]))
    groups.append(([], [*CUES.error_names, *CUES.quiet_levels, *CUES.emitter_tags]))
    for flags, patterns in groups:
        for pattern in patterns:
            assert not re.search(r"\(\?[<=!P]", pattern), f"not ERE: {pattern}"
            run = subprocess.run(
                [grep, "-E", *flags, "-c", _ere(pattern)], input=b"x\n", capture_output=True, timeout=10, check=False
            )
            assert run.returncode in (0, 1), f"grep rejects {pattern}: {run.stderr!r}"


# --- open question 1: warning levels ------------------------------------------------------------
FAILING = "c10d handshake with master-0 failed"  # INVENTED, as in the INFO/DEBUG test above


def test_an_in_process_warning_is_no_cue_and_a_warning_that_reports_a_failure_is() -> None:
    # Quiet: a warning the printing process itself carries on from. Its program has an error level
    # (C++ E-level / exceptions, Python exceptions, Slurm's "error:" / "fatal:") that it uses when it
    # cannot carry on, so a failure comes again in those words: PyTorch's TORCH_WARN ("[W file:N]"),
    # glog/klog W lines, Python's `warnings` module ("file.py:N: UserWarning: ..." and the source line
    # it echoes), the bracketed-timestamp and tool-tagged W levels, UCX WARN, and Slurm, whose log.c
    # has no warning level at all ("srun: Warning: ..." is an info() text of a setting it adjusted).
    assert _hits(FAILING) == [("cue_rendezvous", "rendezvous")]
    for line in (
        f"[W socket.cpp:663] [c10d] {FAILING}",
        f"[rank3]:[W1206 18:44:12.715298746 ProcessGroupNCCL.cpp:1250] {FAILING}",
        f"W1207 10:00:00.123456    1234 agent.go:88] {FAILING}",
        f"/opt/conda/lib/python3.10/site-packages/torch/distributed/rendezvous.py:12: UserWarning: {FAILING}",
        f"/usr/lib/python3/dist-packages/trainer/launch.py:40: RuntimeWarning: {FAILING}",
        f'  warnings.warn("{FAILING}")',
        f"[2024-06-28 18:30:50.171: W torch/distributed/launch.py:38] {FAILING}",
        f"2024-06-28 18:30:50.171234: W tensorflow/core/distributed_runtime/rpc.cc:61] {FAILING}",
        f"[NeMo W 2024-01-01 00:00:00 nemo_logging:349] {FAILING}",
        f"[1646226133.123456] [ip-10-1-2-3:1234:0]  ucp_context.c:1533 UCX  WARN  {FAILING}",
        f"srun: Warning: {FAILING}",
        f"slurmstepd: warning: {FAILING}",
    ):  # INVENTED, in each emitter's format
        assert _hits(line) == [], line
    # Eligible: a warning that reports a failure it does not carry on from itself (a launcher's or
    # agent's Python logging WARNING about its workers, a level=warning of a service), and every
    # error level, whatever the emitter
    for line in (
        f"WARNING:torch.distributed.elastic.agent.server.api:{FAILING}",
        f"2024-05-01 12:00:00,123 - launcher - WARNING - {FAILING}",
        f"[2024-05-01 12:00:00,123] [WARNING] [launch.py:88] {FAILING}",
        f'time="2024-05-01T12:00:00Z" level=warning msg="{FAILING}"',
        f"E1207 10:00:00.123456    1234 agent.go:88] {FAILING}",
        f"[E socket.cpp:610] [c10d] {FAILING}",
    ):  # INVENTED
        assert _hits(line) == [("cue_rendezvous", "rendezvous")], line


def test_a_python_warning_does_not_hide_a_signature() -> None:
    # The levels silence the cue layer only: a known message printed as a warning stays a finding.
    line = (  # INVENTED, in PyTorch's wording for a CUDA runtime that cannot start
        "/opt/conda/lib/python3.10/site-packages/torch/cuda/__init__.py:128: UserWarning: CUDA initialization: "
        "CUDA driver initialization failed, you might not have a CUDA gpu."
    )
    assert _hits(line) and not [hit_id for hit_id, _ in _hits(line) if hit_id.startswith("cue_")]


# --- open question 2: carrying on, and giving up ---------------------------------------------------


def test_a_line_that_carries_on_is_no_cue_unless_it_also_says_it_gave_up() -> None:
    for line in (
        "rendezvous: connection to master-0 refused, retrying",
        "c10d handshake with master-0 failed, will retry in 5 s",
        "ignoring a c10d store error during shutdown",
        "Exception ignored in: <function Agent.__del__ at 0x7f3a>: rendezvous handler already closed",
    ):  # INVENTED
        assert _hits(line) == [], line
    for line in (
        "rendezvous: connection to master-0 refused, retrying ... giving up",
        "c10d handshake with master-0 failed after 3 retries",
        "retrying the c10d handshake: failed after 5 attempts, job aborted",
        "c10d handshake with master-0 failed: retries exhausted, not retrying",
        "c10d handshake failed, max retries exceeded; ignoring NCCL_ASYNC_ERROR_HANDLING",
        "ignoring the peer list: c10d handshake with master-0 failed, aborting",
    ):  # INVENTED
        assert _hits(line, _without_cues()) == [], f"a signature knows this line: {line}"
        assert [cls for _, cls in _hits(line)] in (["rendezvous"], ["connectivity"]), line


def test_a_success_word_in_the_readers_instructions_does_not_silence_the_failure() -> None:
    # Ray's utils.py ends the worker's failure to reach the head node with advice (Ray's own docs
    # quote it so): "started successfully" there is what to check, not what happened.
    advice = (
        "2023-05-22 16:41:02,771 WARNING utils.py:1416 -- Unable to connect to GCS at 172.31.207.130:6379. "
        "Check that (1) Ray GCS with matching version started successfully at the specified address, "
        "and (2) there is no firewall setting preventing access."
    )
    assert [cls for _, cls in _hits(advice)] == ["rendezvous"]
    without_advice = CueLayer.model_validate({**CUES.model_dump(), "advice": []})
    assert without_advice.silenced(advice) and not CUES.silenced(advice)
    # a success said as what happened still quiets its line
    assert _hits("c10d handshake with master-0 failed once, then succeeded") == []  # INVENTED


# --- open question 3: where a cue's words may come from ----------------------------------------------


def test_a_cue_never_cites_a_thread_or_a_page_even_one_its_signatures_cite() -> None:
    catalog = load_catalog()
    assert CUES is not None
    cue = CUES.classes[0]
    signature = next(s for s in catalog.signatures if s.cls == cue.cls)
    for source in (
        "https://github.com/NVIDIA/nccl/issues/1234",  # an issue thread: what the corpora are made of
        "https://github.com/NVIDIA/nccl/pull/1234",
        "https://docs.aws.amazon.com/sagemaker/latest/dg/some-page.html",  # a documentation page
    ):
        dumped = catalog.model_dump()
        dumped["signatures"] = [
            {**s, "written_from": [*s["written_from"], source]} if s["id"] == signature.id else s
            for s in dumped["signatures"]
        ]
        dumped["cues"]["classes"][0]["vocabulary_from"].append(source)
        with pytest.raises(ValueError, match="a thread or a page"):
            Catalog.model_validate(dumped)
    # a pinned file is allowed only when a signature of the same class cites it
    dumped = catalog.model_dump()
    dumped["cues"]["classes"][0]["vocabulary_from"].append(
        "https://github.com/example/tool/blob/0123456789abcdef0123456789abcdef01234567/src/log.c"
    )
    with pytest.raises(ValueError, match="none of its class's signatures cite"):
        Catalog.model_validate(dumped)


def test_leaving_a_source_out_drops_the_cue_whose_vocabulary_cites_it() -> None:
    catalog = load_catalog()
    assert CUES is not None
    cue = next(c for c in CUES.classes if c.cls == "dns")
    source = source_key(next(url for url in cue.vocabulary_from if url.startswith("https://")))
    without = catalog_without(source, catalog)
    assert without.cues is not None
    citing = {c.cls for c in CUES.classes if source in {source_key(url) for url in c.vocabulary_from}}
    assert "dns" in citing and {c.cls for c in without.cues.classes} == {c.cls for c in CUES.classes} - citing
    line = CUE_CASES["dns"][0]
    assert "cue_dns" in {hit.id for hit in scan_text(line + "\n", catalog).hits}
    assert "cue_dns" not in {hit.id for hit in scan_text(line + "\n", without).hits}
    assert catalog_without("other/repo#1", catalog) is catalog


def test_no_cue_scores_an_in_sample_excerpt_of_a_source_its_words_were_taken_from() -> None:
    # A cue may cite a pinned file that is also a corpus source (an excerpt quoted from that file):
    # scored without its source, the excerpt meets no cue that cites it.
    assert CUES is not None
    cited = {source_key(url) for cue in CUES.classes for url in cue.vocabulary_from if url.startswith("https://")}
    for source in {source_key(e["url"]) for e in in_sample()} & cited:
        without = catalog_without(source)
        remaining = without.cues.classes if without.cues is not None else []
        assert all(source not in {source_key(url) for url in cue.vocabulary_from} for cue in remaining), source


def test_an_error_word_inside_a_dotted_field_name_names_the_field() -> None:
    # "ecc.errors.uncorrected.volatile.total" is a counter's name (nvidia-smi --query-gpu, a CSV header):
    # the word is set aside like "errors: 0", and an error said about the field is still read.
    assert _hits("ecc.errors.uncorrected.volatile.total [count]") == []
    said = "gpu-check: ecc.errors.uncorrected.volatile.total went up on GPU 2, node failed"  # INVENTED
    assert [cls for _, cls in _hits(said)] == ["ecc"]
    # a Python exception's dotted path keeps its exception name, which is read
    raised = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: rendezvous of worker 3"  # INVENTED
    assert _hits(raised) == _hits(raised.replace(".errors.", ".x."))


# --- emitter tags: who prints a line is not what failed -------------------------------------------


def test_the_program_that_prints_a_line_is_not_its_subject() -> None:
    # A syslog/journald tag ("name[pid]:") names the emitter; the class words must be in the message.
    tagged = "Jun  1 12:00:00 gpu-1 slurmd[23484]: error: cannot read /sys/devices/system/cpu/cpu0/x"  # INVENTED
    assert _hits(tagged) == []
    assert _hits(tagged.replace("slurmd[23484]:", "kernel:")) == []
    message = "Jun  1 12:00:00 gpu-1 slurmd[23484]: error: srun step 4211.0 could not be launched"  # INVENTED
    assert [cls for _, cls in _hits(message)] == ["slurm"]
    # a bare "prog:" prefix is also how tools name a message's subject ("srun: error: ..."): kept
    assert [cls for _, cls in _hits("slurmd: error: cannot read /sys/devices/system/cpu/cpu0/x")] == ["slurm"]


# --- real lines of healthy runs ------------------------------------------------------------------
HEALTHY_RUNS_FILE = Path(__file__).resolve().parents[1] / "data" / "log_corpus" / "healthy_runs.json"
HEALTHY_RUNS: list[dict[str, Any]] = json.loads(HEALTHY_RUNS_FILE.read_text(encoding="utf-8"))["sources"]
RUN_LINES = [(group["url"], line) for group in HEALTHY_RUNS for line in group["lines"]]
_THREAD = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+$")
_PINNED_FILE = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+$")


@pytest.mark.parametrize(("url", "line"), RUN_LINES, ids=[f"{i}" for i in range(len(RUN_LINES))])
def test_a_real_line_of_a_healthy_run_gives_no_finding(url: str, line: str) -> None:
    assert [(hit.id, hit.fields.get("cue")) for hit in scan_text(line + "\n").hits] == [], f"{url}: {line}"


def test_the_healthy_runs_of_a_source_give_no_finding_as_one_input() -> None:
    for group in HEALTHY_RUNS:
        assert scan_text("\n".join(group["lines"]) + "\n").hits == [], group["url"]


def test_the_healthy_runs_come_from_public_sources_outside_both_corpora() -> None:
    keys = [source_key(group["url"]) for group in HEALTHY_RUNS]
    assert len(keys) == len(set(keys)) >= 15 and len(RUN_LINES) >= 60
    assert not set(keys) & {source_key(e["url"]) for e in in_sample()}
    # Only the held-out sources' keys are read here, never their text: lines of a held-out thread
    # would have decided the cues' harmless forms from the measurement set.
    assert not set(keys) & {source_key(e["url"]) for e in held_out()}
    for group in HEALTHY_RUNS:
        assert _THREAD.match(group["url"]) or _PINNED_FILE.match(group["url"]), group["url"]
        assert group["what"] and group["lines"], group["url"]
    # the set is worth asserting: enough of its lines carry an error word that the cues must read past
    assert CUES is not None
    assert sum(1 for _, line in RUN_LINES if CUES.compiled_error.search(line)) >= 25
