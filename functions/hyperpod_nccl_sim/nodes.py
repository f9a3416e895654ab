# ruff: noqa: E501 - canned tool output lines are kept whole, as the tools print them
"""Simulated SSM agents for the scenario's nodes.

`start_node_agents` starts one protocol-faithful agent (one websocket endpoint, like the real
ssmmessages endpoint) and routes the emulation's `ssm:StartSession` to it: the target is
validated, dead nodes are refused with TargetNotConnected, and each session streams the output
the probe script would print on that node (rendered from the scenario's node behaviours).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from typing import Any

from hyperpod_nccl import instance_types
from hyperpod_nccl.hang.flight_recorder import DEFAULT_DUMP_PREFIX
from hyperpod_nccl.probe import script
from hyperpod_nccl.probe.sections import NodeSection, SlurmSection, begin_line, end_line
from hyperpod_nccl.ssm.client import RC_MARKER
from hyperpod_nccl.xid import XID_LINE
from hyperpod_nccl_sim.aws import (
    EmulatedAws,
    SessionRefused,
    register_start_session_handler,
    terminated_sessions,
)
from hyperpod_nccl_sim.hang_job import HungJob, flight_recorder_pickle, ras_status_text
from hyperpod_nccl_sim.node_behaviours import NodeBehaviour, NodeBehaviours, SessionFaultSpec
from hyperpod_nccl_sim.scenario import Scenario, zone_id_of
from hyperpod_nccl_sim.slurm_queue import squeue_command, squeue_rows
from hyperpod_nccl_sim.ssm_agent import SimulatedSsmAgent

# HyperPod node statuses whose instance has no running agent.
UNREACHABLE_STATUSES = {"Failure", "Pending", "ShuttingDown"}
_GPU_BUSES = ["53", "64", "75", "86", "97", "A8", "B9", "CA"]
_GPU_NAMES = {
    "ml.p5en.48xlarge": "NVIDIA H200",
    "ml.p5e.48xlarge": "NVIDIA H200",
    "ml.p4d.24xlarge": "NVIDIA A100-SXM4-40GB",
}
_DEFAULTS = {
    "driver_version": "550.127.08",
    "cuda_version": "12.4",
    "nccl_version": "2.21.5",
    "ofi_nccl_version": "1.11.0",
    "libfabric_version": "1.22.0amzn4.0",
    "efa_installer_version": "1.36.0",
    "kernel": "5.10.228-219.884.amzn2.x86_64",
}
_COUNTERS = ("rx_drops", "retrans_timeout_events", "unresponsive_remote_events", "impaired_remote_conn_events")


def _section(name: str, body: list[str], rc: int = 0) -> list[str]:
    return [begin_line(name), *body, end_line(name, rc)]


def _counted_faults(lines: list[str]) -> list[str]:
    """The probe's fault counts of `lines`: each Xid line's "NVRM: Xid (PCI:…): code", sorted and
    counted as `uniq -c` prints them."""
    counts = Counter(match.group(0) for line in lines if (match := XID_LINE.search(line)))
    return [f"{counts[key]:7d} {key}" for key in sorted(counts)]


def _value(behaviour: NodeBehaviour, field: str) -> str:
    return str(getattr(behaviour, field) or _DEFAULTS[field])


def _seeded(key: str, modulo: int) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % modulo


def _imds_section(behaviour: NodeBehaviour, instance_type: str, hostname: str) -> list[str]:
    """The `imds` section: the node's EC2 type (HyperPod's without `ml.`) and zone, or, where IMDS
    does not answer, curl's timeout (exit 28) for the token."""
    if not behaviour.imds_reachable:
        return _section(NodeSection.IMDS, ["unavailable: no IMDSv2 token (curl rc=28)"], rc=28)
    # The region is the hostname's (ip-10-1-0-12.us-west-2.compute.internal); the zone its first.
    parts = hostname.split(".")
    region = parts[1] if len(parts) > 2 and parts[-1] == "internal" else "us-west-2"
    answered = behaviour.imds_instance_type or instance_type.removeprefix("ml.")
    lines = [
        f"instance-type {answered}",
        f"availability-zone {region}a",
        f"availability-zone-id {zone_id_of(region)}",
    ]
    return _section(NodeSection.IMDS, lines)


def render_node_probe(behaviour: NodeBehaviour, instance_type: str, hostname: str, node_key: str) -> str:
    """The output of `node_probe.sh` on a node that behaves like `behaviour`."""
    out: list[str] = []
    short = hostname.split(".", 1)[0]
    kernel = _value(behaviour, "kernel")
    out += _section(NodeSection.KERNEL, [kernel]) + _section(NodeSection.HOSTNAME, [short])
    out += _section(NodeSection.CLOCK, [str(int(time.time()) + behaviour.clock_skew_seconds)])
    out += _imds_section(behaviour, instance_type, hostname)
    gpus = (
        instance_types.GPUS_PER_INSTANCE.get(instance_type, 0)
        if instance_types.accelerator(instance_type) == "nvidia"
        else 0
    )
    driver = _value(behaviour, "driver_version")
    if gpus:
        name = _GPU_NAMES.get(instance_type, "NVIDIA H100 80GB HBM3")
        uuids = [
            f"GPU-{hashlib.sha256(f'{node_key}/{i}'.encode()).hexdigest()[:8]}-5e1c-2f3a-8b7d-{i:012x}"
            for i in range(gpus)
        ]
        buses = [f"00000000:{_GPU_BUSES[i % len(_GPU_BUSES)]}:00.0" for i in range(gpus)]
        out += _section(NodeSection.GPU_LIST, [f"GPU {i}: {name} (UUID: {uuids[i]})" for i in range(gpus)])
        out += _section(
            NodeSection.GPU_XML,
            _gpu_xml(behaviour, node_key, name, uuids, buses, driver, _value(behaviour, "cuda_version")).splitlines(),
        )
        xid_lines: list[str] = []
        for xid in behaviour.xids:
            bus = buses[xid.gpu][4:].rsplit(".", 1)[0].lower()
            text = xid.message or {
                79: "GPU has fallen off the bus.",
                48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.",
                63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
                74: "NVLink: fatal error detected on link 4",
            }.get(xid.code, "Graphics Exception")
            line = f"[Tue Mar  3 10:41:07 2026] NVRM: Xid (PCI:{bus}): {xid.code}, pid={xid.pid}, name={xid.process}, {text}"
            xid_lines.extend([line] * xid.count)
        # As the probe prints them: the newest 50 lines, and every fault counted (`grep -o | sort | uniq -c`).
        out += _section(NodeSection.XID_DMESG, xid_lines[-50:], rc=0)
        out += _section(NodeSection.XID_JOURNAL, [], rc=0)
        out += _section(NodeSection.XID_COUNTS_DMESG, _counted_faults(xid_lines), rc=0)
        out += _section(NodeSection.XID_COUNTS_JOURNAL, [], rc=0)
        out += _section(NodeSection.DCGM_HEALTH, [_dcgm_json(behaviour)], rc=0)
        out += _section(NodeSection.NVVS_LOG, [], rc=0) + _section(NodeSection.NVVS_TAIL, [], rc=1)
        nvlink = []
        for i in range(gpus):
            nvlink.append(f"GPU {i}: {name} (UUID: {uuids[i]})")
            for link in range(18):
                down = f"{i}:{link}" in behaviour.nvlink_inactive
                nvlink.append(f"\t Link {link}: <inactive>" if down else f"\t Link {link}: 26.562 GB/s")
        out += _section(NodeSection.NVLINK, nvlink)
        header = "\t" + "\t".join(f"GPU{i}" for i in range(gpus)) + "\tCPU Affinity\tNUMA Affinity"
        topo = [header]
        for i in range(gpus):
            cells = ["X" if j == i else "NV18" for j in range(gpus)]
            topo.append(
                f"GPU{i}\t "
                + "\t".join(cells)
                + f"\t{0 if i < gpus // 2 else 48}-{47 if i < gpus // 2 else 95}\t{0 if i < gpus // 2 else 1}"
            )
        out += _section(NodeSection.TOPOLOGY, topo)
    else:
        # A node without the NVIDIA tools answers every section all the same, as the script does.
        no_smi = ["bash: line 1: nvidia-smi: command not found"]
        out += _section(NodeSection.GPU_LIST, no_smi, rc=127) + _section(NodeSection.GPU_XML, no_smi, rc=127)
        for name in (
            NodeSection.XID_DMESG,
            NodeSection.XID_JOURNAL,
            NodeSection.XID_COUNTS_DMESG,
            NodeSection.XID_COUNTS_JOURNAL,
        ):
            out += _section(name, [], rc=0)
        out += _section(NodeSection.DCGM_HEALTH, ["bash: line 1: dcgmi: command not found"], rc=127)
        out += _section(
            NodeSection.NVVS_LOG, ["find: '/var/log/nvidia-dcgm': No such file or directory"], rc=1
        ) + _section(NodeSection.NVVS_TAIL, [], rc=1)
        out += _section(NodeSection.NVLINK, no_smi, rc=127) + _section(NodeSection.TOPOLOGY, no_smi, rc=127)
    acs = [
        f"{0x10 + i:02x}:00.0 PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)\n\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
        for i in range(behaviour.acs_enabled)
    ]
    out += _section(NodeSection.PCI_ACS, [line for block in acs for line in block.split("\n")], rc=0 if acs else 1)
    out += _section(
        NodeSection.CMDLINE,
        [
            f"BOOT_IMAGE=/boot/vmlinuz-{kernel} root=UUID=7a1c0e1d ro console=tty0 console=ttyS0,115200n8 nvme_core.io_timeout=4294967295"
        ],
    )
    out += _section(NodeSection.IOMMU_DMESG, [], rc=1)
    # As the probe keeps them, the newest 20; none by default (a node whose ring buffer holds no such line).
    out += _section(NodeSection.KERNEL_LOG, behaviour.kernel_log[-20:])
    efa_expected = instance_types.expected_efa(instance_type) or 0
    efa_count = behaviour.efa_devices if behaviour.efa_devices is not None else efa_expected
    modules = [
        "efa                   139264  0",
        "ib_uverbs             188416  2 rdma_ucm,efa",
        "ib_core               434176  5 rdma_cm,iw_cm,ib_uverbs,rdma_ucm,efa",
    ]
    if gpus:
        modules = [
            "nvidia_peermem         16384  0",
            *modules,
            "nvidia              56410112  245 nvidia_uvm,nvidia_peermem,gdrdrv,nvidia_modeset",
        ]
    out += _section(NodeSection.MODULES, modules if efa_expected or gpus else [], rc=0)
    out += _section(
        NodeSection.EFA_MODULE_VERSION,
        ["2.13.0g"] if efa_expected else ["cat: /sys/module/efa/version: No such file or directory"],
        rc=0 if efa_expected else 1,
    )
    devices = [f"rdmap{80 + i}s0" for i in range(efa_count)]
    out += _section(NodeSection.EFA_DEVICES, devices, rc=0)
    out += _section(
        NodeSection.UVERBS, [f"uverbs{i}" for i in range(efa_count)] + (["rdma_cm"] if efa_count else []), rc=0
    )
    if efa_expected and not behaviour.efa_provider_missing:
        fi = []
        for device in devices:
            fi += ["provider: efa", "    fabric: efa", f"    domain: {device}-rdm"]
        out += _section(NodeSection.FI_INFO_EFA, fi)
    else:
        out += _section(NodeSection.FI_INFO_EFA, ["fi_getinfo: -61 (No data available)"], rc=0)
    libfabric = _value(behaviour, "libfabric_version")
    out += _section(
        NodeSection.FI_INFO_VERSION, [f"fi_info: {libfabric}", f"libfabric: {libfabric}", "libfabric api: 1.22"]
    )
    ofi = _value(behaviour, "ofi_nccl_version")
    installer = _value(behaviour, "efa_installer_version")
    out += (
        _section(
            NodeSection.EFA_INSTALLER,
            [
                f"# EFA installer version: {installer}",
                "# Debug packages installed: no",
                "# Packages installed:",
                f"efa-2.13.0-1.amzn2.x86_64 libfabric-aws-{libfabric}-1.amzn2.x86_64 rdma-core-54.0-1.amzn2.x86_64 aws-ofi-nccl-{ofi}-1.amzn2.x86_64",
            ],
        )
        if efa_expected
        else _section(
            NodeSection.EFA_INSTALLER, ["cat: /opt/amazon/efa_installed_packages: No such file or directory"], rc=1
        )
    )
    out += _section(
        NodeSection.OFI_NCCL,
        ["libnccl-net-ofi.so", "libnccl-net.so", "libnccl-ofi-tuner.so"] if efa_expected else [],
        rc=0 if efa_expected else 1,
    )
    nccl = _value(behaviour, "nccl_version")
    out += _section(
        NodeSection.NCCL_LIBS,
        [f"libnccl.so.{nccl}", f"libnccl.so.{nccl.split('.')[0]}"] if gpus else [],
        rc=0 if gpus else 1,
    )
    out += _section(NodeSection.NCCL_HEADER, [], rc=2)
    out += _section(
        NodeSection.HUGEPAGES,
        [
            "MemTotal:       2113442704 kB",
            f"HugePages_Total:    {behaviour.hugepages_total}",
            f"HugePages_Free:     {behaviour.hugepages_free}",
            "Hugepagesize:       2048 kB",
        ],
    )
    mtu = behaviour.mtu
    out += _section(
        NodeSection.INTERFACES,
        [
            "lo               UNKNOWN        127.0.0.1/8 ::1/128",
            f"ens32            UP             {_ip(hostname)}/20 fe80::8ff:2aff:fe4b:1c7/64",
            "docker0          DOWN           172.17.0.1/16",
        ],
    )
    out += _section(
        NodeSection.LINKS,
        [
            "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\\    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00",
            f"2: ens32: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu {mtu} qdisc mq state UP mode DEFAULT group default qlen 1000\\    link/ether 0a:ff:2a:4b:01:c7 brd ff:ff:ff:ff:ff:ff",
            "3: docker0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state DOWN mode DEFAULT group default \\    link/ether 02:42:9e:0b:3f:11 brd ff:ff:ff:ff:ff:ff",
        ],
    )
    shm = behaviour.shm_bytes if behaviour.shm_bytes is not None else 1082103451648
    out += _section(
        NodeSection.SHM, ["Type      1B-blocks         Avail Mounted on", f"tmpfs  {shm:>13} {shm:>13} /dev/shm"]
    )
    out += _section(
        NodeSection.MEMLOCK,
        [
            "unlimited"
            if behaviour.memlock_kib is None and behaviour.memlock_unlimited
            else str(64 if behaviour.memlock_kib is None else behaviour.memlock_kib)
        ],
    )
    out += _section(NodeSection.STACK, [str(behaviour.stack_kib)])
    out += _section(
        NodeSection.REMOVE_IPC,
        [f"RemoveIPC={behaviour.remove_ipc}"] if behaviour.remove_ipc else [],
        rc=0 if behaviour.remove_ipc else 1,
    )
    numa = [f"node{i}" for i in range(behaviour.numa_nodes)]
    out += _section(NodeSection.NUMA, numa, rc=0 if numa else 1)
    drops = ["-A INPUT -p tcp -m tcp --dport 29400:29500 -j DROP" for _ in range(behaviour.firewall_drops)]
    out += _section(NodeSection.FIREWALL, drops, rc=0 if drops else 1)
    # nft lists the same (iptables-nft) rules in its own syntax; the parser reads it only without iptables
    out += _section(NodeSection.FIREWALL_NFT, [], rc=0)
    out += _section(NodeSection.STALE_SHM, behaviour.stale_shm_files, rc=0 if behaviour.stale_shm_files else 1)
    out += _section(NodeSection.TRAINING_PROCS, ["0"], rc=1)
    counters = []
    for device in devices:
        for counter in _COUNTERS:
            base = _seeded(f"{node_key}/{device}/{counter}", 4)
            counters.append(
                f"/sys/class/infiniband/{device}/ports/1/hw_counters/{counter}:{base + behaviour.efa_counters.get(counter, 0)}"
            )
    out += _section(NodeSection.EFA_COUNTERS, counters, rc=0 if counters else 2)
    out += _loopback_latency(behaviour, bool(efa_expected) and not behaviour.efa_provider_missing)
    return "\n".join(out) + "\n"


_PINGPONG_HEADER = "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec"


def _pingpong_table(usec: float) -> list[str]:
    """A 100-iteration `fi_pingpong` table whose small messages take `usec` (the first size also
    carries the connection set-up, as real runs show)."""
    rows = [_PINGPONG_HEADER]
    # (size label, bytes, total label for 100 iterations of 2 transfers, latency factor)
    for label, size, total, factor in (
        ("64", 64, "12.5k", 12.0),
        ("256", 256, "50k", 1.0),
        ("1k", 1024, "200k", 1.02),
        ("4k", 4096, "800k", 1.1),
        ("64k", 65536, "12.5m", 2.4),
        ("1m", 1048576, "200m", 9.5),
    ):
        latency = usec * factor
        seconds = latency * 200 / 1e6
        rows.append(
            f"{label:<8}{'100':<8}{'=100':<9}{total:<8}{seconds:8.2f}s{size / latency:10.2f}{latency:11.2f}{1 / latency:11.2f}"
        )
    return rows


def _loopback_latency(behaviour: NodeBehaviour, efa_works: bool) -> list[str]:
    """The `efa_latency` sections: EFA loopback when the provider works, else the TCP fallback."""
    if efa_works:
        return _section(NodeSection.EFA_LATENCY, _pingpong_table(behaviour.efa_latency_usec)) + _section(
            NodeSection.EFA_LATENCY_TCP, []
        )
    failed = _section(NodeSection.EFA_LATENCY, ["fi_getinfo(): -61 (No data available)"], rc=1)
    return failed + _section(NodeSection.EFA_LATENCY_TCP, _pingpong_table(31.4))


_NO_RAS = ["nc: connect to localhost port 28028 (tcp) failed: Connection refused"]


def _job_choice(pid: int | None, candidates: int) -> list[str]:
    """The probe's `nccl_job` section: the simulated ranks run as root (a container's default)."""
    if pid is None:
        return _section(NodeSection.NCCL_JOB, ["none: no process carries NCCL or TORCH_NCCL settings"], rc=1)
    why = "lowest pid of the python/torchrun processes with NCCL or TORCH_NCCL settings"
    return _section(NodeSection.NCCL_JOB, [f"pid={pid} uid=0 comm=python candidates={candidates} why={why}"])


def render_nccl_job(scenario: Scenario, behaviours: NodeBehaviours, node_key: str, now: float) -> str:
    """The hang-attribution sections of `node_probe.sh`: the node's training processes and their
    NCCL environment, the local NCCL RAS answer and the Flight Recorder dumps (base64 lines)."""
    import base64

    spec = behaviours.hung_job
    own_env = behaviours.for_node(node_key).nccl_job_env
    if (spec is None or node_key not in spec.nodes) and own_env:
        # A running (not hung) job: eight local ranks with the node's configured environment.
        index = scenario.node_keys().index(node_key)
        jobs, env = [], []
        for local in range(8):
            pid = 7300 + local
            jobs.append(f"{pid:>7} python")
            values = {"RANK": str(index * 8 + local), "LOCAL_RANK": str(local), **own_env}
            env += [f"/proc/{pid}/environ:{name}={value}" for name, value in values.items()]
        out = (
            _section(NodeSection.NCCL_JOBS, jobs)
            + _section(NodeSection.NCCL_JOB_ENV, env)
            + _job_choice(7300, len(jobs))
        )
        out += _section(NodeSection.NCCL_RAS, _NO_RAS, rc=1)
        out += _section(NodeSection.FLIGHT_RECORDER, [])
        out += _net_plugin_section(own_env.get("NCCL_NET_PLUGIN"), job=True)
        return "\n".join(out + _limits_section(scenario, behaviours, node_key, job_pid=7300)) + "\n"
    if spec is None or node_key not in spec.nodes:
        out = (
            _section(NodeSection.NCCL_JOBS, [], rc=1)
            + _section(NodeSection.NCCL_JOB_ENV, [], rc=1)
            + _job_choice(None, 0)
        )
        out += _section(NodeSection.NCCL_RAS, _NO_RAS, rc=1)
        no_job = ["skipped: no NCCL job runs on this node (no Flight Recorder dump to read)"]
        out += _section(NodeSection.FLIGHT_RECORDER, no_job, rc=1)
        out += _net_plugin_section(None, job=False)
        return "\n".join(out + _limits_section(scenario, behaviours, node_key, job_pid=None)) + "\n"
    written = now - spec.minutes_ago * 60
    job = HungJob(
        world_size=len(spec.nodes) * spec.ranks_per_node,
        ranks_per_node=spec.ranks_per_node,
        hung_rank=spec.hung_rank,
        hung_seq=spec.hung_seq,
        start_ns=int((written - 120) * 1e9),
        dead_ranks=tuple(spec.dead_ranks) if spec.dead_ranks is not None else None,
    )
    index = spec.nodes.index(node_key)
    ranks = range(index * spec.ranks_per_node, (index + 1) * spec.ranks_per_node)
    prefix = spec.trace_prefix or DEFAULT_DUMP_PREFIX
    jobs, env, dumps = [], [], []
    for local, rank in enumerate(ranks):
        pid = job.pid(rank)
        jobs.append(f"{pid:>7} python")
        values = {"RANK": str(rank), "LOCAL_RANK": str(local), "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"}
        values["TORCH_NCCL_DUMP_ON_TIMEOUT"] = "1"
        if spec.nccl_debug:
            values["NCCL_DEBUG"] = spec.nccl_debug
        if spec.ras_addr:
            values["NCCL_RAS_ADDR"] = spec.ras_addr
        if spec.trace_prefix:
            values["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] = spec.trace_prefix
        env += [f"/proc/{pid}/environ:{name}={value}" for name, value in values.items()]
        data = flight_recorder_pickle(job, rank)
        dumps.append(f"file {written:.6f} {len(data)} /proc/{job.pid(ranks[0])}/root{prefix}{rank}")
        dumps.append(base64.b64encode(data).decode("ascii"))
    hosts = [scenario.hostname(key).split(".", 1)[0] for key in spec.nodes]
    out = (
        _section(NodeSection.NCCL_JOBS, jobs)
        + _section(NodeSection.NCCL_JOB_ENV, env)
        + _job_choice(job.pid(ranks[0]), len(jobs))
    )
    out += _section(NodeSection.NCCL_RAS, ras_status_text(job, hosts).splitlines())
    out += _section(NodeSection.FLIGHT_RECORDER, dumps)
    out += _net_plugin_section(None, job=True)
    return "\n".join(out + _limits_section(scenario, behaviours, node_key, job_pid=job.pid(ranks[0]))) + "\n"


def _limits_section(scenario: Scenario, behaviours: NodeBehaviours, node_key: str, job_pid: int | None) -> list[str]:
    """The probe's `process_limits` section: the job's process (when one runs) and the node's
    job-starting daemon (slurmd on Slurm, containerd on EKS), each with the node's memlock and
    stack limits, in the kernel's /proc/<pid>/limits layout."""
    behaviour = behaviours.for_node(node_key)
    if behaviour.memlock_kib is None and behaviour.memlock_unlimited:
        memlock = "unlimited"
    else:
        memlock = str((64 if behaviour.memlock_kib is None else behaviour.memlock_kib) * 1024)
    stack = str(behaviour.stack_kib * 1024)
    rows = [
        f"{'Max stack size':<25} {stack:<20} {'unlimited':<20} {'bytes':<10}",
        f"{'Max open files':<25} {'1048576':<20} {'1048576':<20} {'files':<10}",
        f"{'Max locked memory':<25} {memlock:<20} {memlock:<20} {'bytes':<10}",
    ]
    daemon = "slurmd" if scenario.cluster.orchestrator == "slurm" else "containerd"
    lines = [f"daemon 1450 {daemon}", *rows]
    if job_pid is not None:
        lines = [f"job {job_pid} python", *rows, *lines]
    return _section(NodeSection.PROCESS_LIMITS, lines)


def _net_plugin_section(value: str | None, *, job: bool) -> list[str]:
    """The probe's `nccl_net_plugin` section for a job whose NCCL_NET_PLUGIN is `value` (a path the
    simulated node always has)."""
    if not job:
        line = "no job"
    elif not value:
        line = "unset"
    else:
        line = f"present {value}" if value.startswith("/") else f"name {value}"
    return _section(NodeSection.NCCL_NET_PLUGIN, [line])


def _ip(hostname: str) -> str:
    return hostname.split(".", 1)[0].removeprefix("ip-").replace("-", ".")


def _gpu_xml(
    behaviour: NodeBehaviour, node_key: str, name: str, uuids: list[str], buses: list[str], driver: str, cuda: str
) -> str:
    """`nvidia-smi -q -x` as a driver of the 550-580 series prints it, cut to the elements the probe
    reads (the real samples in tests/data/probe have every element; the parser reads both)."""
    out = [
        '<?xml version="1.0" ?>',
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
        "<nvidia_smi_log>",
        f"\t<driver_version>{driver}</driver_version>",
        f"\t<cuda_version>{cuda}</cuda_version>",
        f"\t<attached_gpus>{len(buses)}</attached_gpus>",
    ]
    for i, bus in enumerate(buses):
        ecc = 2 if i in behaviour.ecc_uncorrected_gpus else 0
        pending = 1 if i in behaviour.remap_pending_gpus else 0
        failure = 1 if i in behaviour.remap_failure_gpus else 0
        serial = 1650923000000 + _seeded(f"{node_key}/{i}", 99999)
        counts = "".join(
            f"<{scope}><sram_correctable>0</sram_correctable><sram_uncorrectable_parity>0</sram_uncorrectable_parity>"
            f"<sram_uncorrectable_secded>0</sram_uncorrectable_secded><dram_correctable>0</dram_correctable>"
            f"<dram_uncorrectable>{ecc}</dram_uncorrectable></{scope}>"
            for scope in ("volatile", "aggregate")
        )
        out += [
            f'\t<gpu id="{bus}">',
            f"\t\t<product_name>{name}</product_name>",
            f"\t\t<serial>{serial}</serial>",
            f"\t\t<uuid>{uuids[i]}</uuid>",
            f"\t\t<minor_number>{i}</minor_number>",
            f"\t\t<pci><pci_bus_id>{bus}</pci_bus_id></pci>",
            "\t\t<clocks_event_reasons><clocks_event_reason_hw_slowdown>Not Active"
            "</clocks_event_reason_hw_slowdown></clocks_event_reasons>",
            f"\t\t<ecc_mode><current_ecc>Enabled</current_ecc></ecc_mode><ecc_errors>{counts}</ecc_errors>",
            "\t\t<retired_pages><multiple_single_bit_retirement><retired_count>N/A</retired_count>"
            "</multiple_single_bit_retirement><double_bit_retirement><retired_count>N/A</retired_count>"
            "</double_bit_retirement><pending_blacklist>N/A</pending_blacklist>"
            "<pending_retirement>N/A</pending_retirement></retired_pages>",
            f"\t\t<remapped_rows><remapped_row_corr>0</remapped_row_corr><remapped_row_unc>{pending + failure}"
            f"</remapped_row_unc><remapped_row_pending>{'Yes' if pending else 'No'}</remapped_row_pending>"
            f"<remapped_row_failure>{'Yes' if failure else 'No'}</remapped_row_failure></remapped_rows>",
            f"\t\t<temperature><gpu_temp>{31 + i % 5} C</gpu_temp></temperature>",
            "\t</gpu>",
        ]
    return "\n".join([*out, "</nvidia_smi_log>"])


def _dcgm_json(behaviour: NodeBehaviour) -> str:
    overall, gpu = behaviour.dcgm_overall, behaviour.dcgm_gpu
    error = behaviour.dcgm_error or f"A pending row remap was detected on GPU {gpu}; reset the GPU."
    incidents = (
        {}
        if overall == "Healthy"
        else {
            "GPU": {
                "children": {
                    f"GPU ID: {gpu}": {
                        "children": {
                            "Memory": {
                                "children": {
                                    "Health": {"value": overall},
                                    "Error": {"value": error},
                                }
                            }
                        }
                    }
                }
            }
        }
    )
    import json

    return json.dumps(
        {"body": {"Overall Health": {"value": overall}, **incidents}, "header": ["Health Monitor Report"]}
    )


def render_slurm_controller(scenario: Scenario, behaviours: NodeBehaviours) -> str:
    """The output of `slurm_controller.sh` on the scenario's controller."""
    slurm = behaviours.slurm
    assert slurm is not None
    controller = next(
        (k for k in scenario.node_keys() if _slurm_type(scenario, k) == "Controller"), scenario.node_keys()[0]
    )
    ctl_host = scenario.hostname(controller).split(".", 1)[0]
    out: list[str] = []
    ping = f"Slurmctld(primary) at {ctl_host} is {'UP' if slurm.slurmctld_up else 'DOWN'}"
    # As the probe asks: until slurmctld answers UP, at most 3 times, each answer after its attempt line.
    tries = 1 if slurm.slurmctld_up else 3
    answers = [line for attempt in range(1, tries + 1) for line in (f"attempt {attempt}", ping)]
    out += _section(SlurmSection.SLURM_PING, answers, rc=0 if slurm.slurmctld_up else 1)
    out += _section(
        SlurmSection.MUNGE, ["active" if slurm.munge_active else "inactive"], rc=0 if slurm.munge_active else 3
    )
    rows = []
    for key in scenario.node_keys():
        if _slurm_type(scenario, key) != "Compute":
            continue
        short = scenario.hostname(key).split(".", 1)[0]
        state, _, reason = slurm.node_states.get(key, "idle|none").partition("|")
        rows.append(f"{short}|{short}|{_ip(short)}|{state}|{reason or 'none'}")
    out += _section(SlurmSection.SINFO, rows)
    # The queue as the script's own squeue command filters and formats it.
    command = squeue_command(script("slurm_controller"))
    out += _section(
        SlurmSection.SQUEUE,
        squeue_rows(command, slurm.queue(), lambda key: scenario.hostname(key).split(".", 1)[0]),
    )
    out += _section(
        SlurmSection.NCCL_ENV_FILES,
        [f"/etc/profile.d/nccl.sh:{line}" for line in slurm.nccl_env],
        rc=0 if slurm.nccl_env else 1,
    )
    out += _section(
        SlurmSection.REMOVE_IPC,
        [f"RemoveIPC={slurm.remove_ipc}"] if slurm.remove_ipc else [],
        rc=0 if slurm.remove_ipc else 1,
    )
    return "\n".join(out) + "\n"


def _slurm_type(scenario: Scenario, key: str) -> str | None:
    group = scenario.cluster.instance_groups
    name = key.split(":", 1)[0]
    return next((g.slurm_node_type for g in group if g.name == name), None)


class NodeAgents:
    """Handle on the running simulated agent and its StartSession routing."""

    def __init__(self, agent: SimulatedSsmAgent) -> None:
        self.agent = agent

    def stop(self) -> None:
        """Stop the agent."""
        self.agent.stop()


def start_node_agents(scenario: Scenario, emulation: EmulatedAws, cluster_arn: str) -> NodeAgents:
    """Start the agent and route ssm:StartSession for the scenario's account and region to it."""
    agent = SimulatedSsmAgent(is_terminated=lambda sid: sid in terminated_sessions()).start()
    behaviours = scenario.node_behaviours or NodeBehaviours()
    cluster_id = cluster_arn.rsplit("/", 1)[-1]
    by_target = {
        f"sagemaker-cluster:{cluster_id}_{key.split(':', 1)[0]}-{scenario.instance_id(key)}": key
        for key in scenario.node_keys()
    }
    sessions_started: dict[str, int] = {}

    def start_session(target: str, document: str, command: str) -> dict[str, Any]:
        # `command` is what the agent runs: the custom document's embedded command, or the
        # managed document's with its free-text parameter (resolved by the emulated StartSession).
        key = by_target.get(target)
        if key is None:
            raise SessionRefused("InvalidTarget", f"Target {target} is not a valid target for this account and region.")
        override = scenario.override(key)
        behaviour = behaviours.for_node(key)
        if behaviour.unreachable or (override is not None and override.status in UNREACHABLE_STATUSES):
            raise SessionRefused("TargetNotConnected", f"{target} is not connected.")
        output = _answer(scenario, behaviours, key, behaviour, command)
        count = sessions_started.get(key, 0)
        sessions_started[key] = count + 1
        faults = behaviour.session_faults[count] if count < len(behaviour.session_faults) else SessionFaultSpec()
        return agent.add_session(target, output.encode("utf-8"), faults)

    register_start_session_handler(f"{scenario.account_id}/{scenario.region}", start_session)
    return NodeAgents(agent)


def _answer(scenario: Scenario, behaviours: NodeBehaviours, key: str, behaviour: NodeBehaviour, command: str) -> str:
    """What the command prints: the script is recognised from its base64 text, not executed."""
    import base64
    import re

    match = re.search(r"echo ([A-Za-z0-9+/=]+) \| base64 -d", command)
    text = base64.b64decode(match.group(1)).decode("utf-8", "replace") if match else ""
    if text == script("slurm_controller") and behaviours.slurm is not None:
        body = render_slurm_controller(scenario, behaviours)
    elif text == script("node"):
        group = next(g for g in scenario.cluster.instance_groups if g.name == key.split(":", 1)[0])
        body = render_node_probe(behaviour, group.instance_type, scenario.hostname(key), key)
        body += render_nccl_job(scenario, behaviours, key, time.time())
    else:
        return f"bash: simulated node cannot run this command\n\n{RC_MARKER}=127\n"
    return f"{body}\n{RC_MARKER}=0\n"
