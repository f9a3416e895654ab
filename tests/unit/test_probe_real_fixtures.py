"""Parsers against real command outputs from public sources (provenance: tests/data/probe/README.md)."""

from __future__ import annotations

import os
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hyperpod_nccl.checks import discover
from hyperpod_nccl.models.cluster import ClusterNode, ControlPlaneInventory
from hyperpod_nccl.models.findings import Finding, Priority, Status
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import (
    FiInfoEfaEntry,
    NodeProbeData,
    NodeProbeInventory,
    NodeProbeResult,
    ProcessLimits,
    SlurmControllerData,
    SlurmQueueEntry,
)
from hyperpod_nccl.probe import script
from hyperpod_nccl.probe.parsers import (
    nvlink_totals,
    parse_dcgm_health,
    parse_gpu_nic_affinity,
    parse_node_probe,
    parse_nvlink_gpus,
    parse_pingpong,
    parse_slurm_controller,
    parse_topology,
    split_sections,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "probe"
CHECKS = discover()
NOW = datetime(2026, 1, 1, tzinfo=UTC)
# The public outputs carry no instance ids: the ids, group and instance types below are ours.
NODE_ID = "i-0f1e2d3c4b5a69788"
CONTROLLER_ID = "i-0c0c0c0c0c0c0c0c0"


def _probe(name: str):  # type: ignore[no-untyped-def]
    return parse_node_probe((DATA / name).read_text(encoding="utf-8"))


def test_p4d_fi_info_has_four_efa_devices_and_a_loopback_latency() -> None:
    probe = _probe("p4d_fi_info_and_loopback_pingpong.txt")
    assert probe.fi_info_efa_domains == 4  # p4d.24xlarge: 4 EFA devices
    latency = probe.efa_latency
    assert latency is not None and latency.provider == "efa"
    # The 64-byte row carries the connection set-up (1579 µs); the latency is the best small size.
    assert latency.usec_by_size[64] == 1579.10 and latency.small_message_usec == 23.45
    assert latency.usec_by_size[1 << 20] == 401.10


@pytest.mark.parametrize(
    "instance_type, name, entries",
    [
        # p4d.24xlarge: four devices, libfabric's EFA provider 111.20, RDM endpoints only (-t FI_EP_RDM).
        (
            "ml.p4d.24xlarge",
            "p4d_fi_info_and_loopback_pingpong.txt",
            [
                ("efa", f"{device}-rdm", "111.20", "FI_EP_RDM")
                for device in ("rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27")
            ],
        ),
        # libfabric 1.8 (provider 2.0) asked without -t: an RDM and a datagram entry, and RxD layered on EFA.
        (
            "ml.p5.48xlarge",
            "fi_info_efa_single_device.txt",
            [
                ("efa", "efa_0-rdm", "2.0", "FI_EP_RDM"),
                ("efa", "efa_0-dgrm", "2.0", "FI_EP_DGRAM"),
                ("efa;ofi_rxd", "efa_0-dgrm", "1.0", "FI_EP_RDM"),
            ],
        ),
    ],
)
def test_fi_info_entries_keep_the_providers_version_and_endpoint_type(
    instance_type: str, name: str, entries: list[tuple[str, str, str, str]]
) -> None:
    probe = _probe(name)
    assert [(e.provider, e.domain, e.version, e.endpoint_type) for e in probe.fi_info_efa_entries] == entries
    [finding] = _run("node.efa_provider", _inventory(probe, instance_type=instance_type))
    kinds = "; ".join(sorted({f"{p} {v} ({t})" for p, _, v, t in entries}))
    domains = probe.fi_info_efa_domains
    assert finding.status is Status.PASS
    assert finding.evidence == [f"{NODE_ID} (worker): {domains} EFA domain(s), provider {kinds}"]


# `fi_info -p efa -t FI_EP_RDM` of a p4d.24xlarge worker as its source prints it (protocol lines
# included), https://github.com/pbelevich/fair_seq_fsdp_slurm/blob/3fb30079d5b06202195877632118e49c0232ccd2/efa_support.md
P4D_FI_INFO = "".join(
    f"provider: efa\n    fabric: EFA-{fabric}\n    domain: {device}-rdm\n    version: 111.20\n"
    "    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA\n"
    for fabric, device in (
        ("fe80::10d8:baff:fec9:6c1", "rdmap16s27"),
        ("fe80::1011:66ff:feeb:c5af", "rdmap32s27"),
        ("fe80::102f:29ff:fe3d:1685", "rdmap144s27"),
        ("fe80::1059:7cff:fe95:ed6d", "rdmap160s27"),
    )
)


def test_the_probes_fi_info_filter_keeps_each_entrys_version_and_type(tmp_path: Path) -> None:
    # The probe's own fi_info_efa lines, with an fi_info that prints the real p4d answer.
    fake = tmp_path / "fi_info"
    (tmp_path / "answer.txt").write_text(P4D_FI_INFO, encoding="utf-8")
    fake.write_text(f"#!/bin/sh\ncat {tmp_path / 'answer.txt'}\n", encoding="utf-8")
    fake.chmod(0o755)
    text = script("node")
    start = text.index("begin fi_info_efa\n")
    block = text[start : text.index("\n", text.index('end fi_info_efa "${PIPESTATUS[0]}"', start)) + 1]
    head = text[: text.index("\n", text.index("\nend() {") + 1) + 1]  # PATH, lastpipe, the section markers
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    run = subprocess.run(["bash", "-c", head + block], capture_output=True, text=True, check=False, env=env)
    probe = parse_node_probe(run.stdout)
    assert "protocol:" not in run.stdout, run.stdout
    assert probe.fi_info_efa_entries == _probe("p4d_fi_info_and_loopback_pingpong.txt").fi_info_efa_entries
    assert probe.fi_info_efa_entries[0] == FiInfoEfaEntry(
        provider="efa", domain="rdmap16s27-rdm", version="111.20", endpoint_type="FI_EP_RDM"
    )


def test_pingpong_rows_with_count_suffixes_and_failed_runs() -> None:
    # Rows as fi_pingpong prints them with -I 10000 (counts "10k", totals "1.2m"), then a failure.
    rows = parse_pingpong(
        [
            "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec",
            "64      10k     =10k     1.2m        0.10s     12.89       4.97       0.20",
            "1m      10k     =10k     19g         0.99s  21234.98      49.38       0.02",
            "fi_getinfo(): -61 (No data available)",
        ]
    )
    assert rows == {64: 4.97, 1 << 20: 49.38}


def _sections(name: str):  # type: ignore[no-untyped-def]
    return split_sections((DATA / name).read_text(encoding="utf-8"))


def test_h100_topology_is_all_nvlink_and_dcgm_reports_healthy() -> None:
    sections = _sections("h100_topology_and_dcgm_health.txt")
    # 8 H100 behind NVSwitch (as on p5): every ordered GPU pair is NV18, none over PCIe.
    assert parse_topology(sections["topology"].lines) == (56, 0)
    # Posted for a node whose GPU 1 needed a reset: DCGM still answers "Healthy", which is why a
    # DCGM pass alone never clears a node (original Check 8, probe 7).
    assert parse_dcgm_health(sections["dcgm_health"].text) == ("Healthy", [])


def test_a100_topology_counts_gpu_columns_only() -> None:
    # NIC columns (PXB/SYS) are not GPU pairs; rows GPU4-7 were cut in the source.
    assert parse_topology(_sections("a100_topology_with_nics.txt")["topology"].lines) == (28, 0)


# --- Evaluation through the real checks -------------------------------------------------------


def _inventory(
    probe: NodeProbeData | None = None,
    *,
    instance_type: str | None = None,
    slurm: SlurmControllerData | None = None,
    nodes: list[ClusterNode] | None = None,
) -> Inventory:
    results = []
    if probe is not None:
        results.append(
            NodeProbeResult(
                instance_id=NODE_ID, reachable=True, instance_group="worker", instance_type=instance_type, probe=probe
            )
        )
    if slurm is not None:
        results.append(
            NodeProbeResult(
                instance_id=CONTROLLER_ID,
                reachable=True,
                instance_group="controller",
                role="slurm_controller",
                slurm=slurm,
            )
        )
    return Inventory(
        cluster_name="c1",
        region="us-west-2",
        orchestrator="slurm" if slurm is not None else "unknown",
        collected_at=NOW,
        window_start=NOW,
        window_end=NOW,
        control_plane=ControlPlaneInventory(nodes=nodes or []),
        node_probes=NodeProbeInventory(results=results),
    )


def _run(check_id: str, inventory: Inventory) -> list[Finding]:
    return CHECKS[check_id].run(inventory)


def _nvlink_node(name: str) -> NodeProbeData:
    """A node whose only probe data is the fixture's `nvidia-smi nvlink --status` (the GPUs it lists
    are present: the probe reads NVLink only when `nvidia-smi -L` showed GPUs)."""
    active, inactive = nvlink_totals(parse_nvlink_gpus(_sections(name)["nvlink"].lines))
    return NodeProbeData(gpu_present=True, nvlink_active=active, nvlink_inactive=inactive)


@pytest.mark.parametrize(
    "name, links",
    [
        ("nvlink_h100_healthy_gpu0.txt", 18),  # H100 (p5): 18 links at 26.562 GB/s
        ("nvlink_p4de_healthy_gpu0.txt", 12),  # A100-SXM4-80GB of a p4de.24xlarge: 12 links at 25 GB/s
    ],
)
def test_healthy_nvlink_status_counts_every_link_and_raises_nothing(name: str, links: int) -> None:
    node = _nvlink_node(name)
    assert (node.nvlink_active, node.nvlink_inactive) == (links, [])
    assert _run("node.nvlink", _inventory(node, instance_type="ml.p5.48xlarge")) == []


def test_inactive_nvlinks_fail_with_reboot_then_replace() -> None:
    node = _nvlink_node("nvlink_v100_two_inactive_links.txt")
    assert node.nvlink_active == 4
    assert node.nvlink_inactive == ["GPU 3 Link 3: <inactive>", "GPU 3 Link 5: <inactive>"]
    [finding] = _run("node.nvlink", _inventory(node))
    assert (finding.status, finding.priority) == (Status.FAIL, Priority.P0)
    assert finding.title.startswith(f"2 NVLink link(s) inactive on {NODE_ID}")
    assert finding.evidence == node.nvlink_inactive
    commands = " ".join(c.command for c in finding.suggested_commands)
    assert "batch-reboot-cluster-nodes" in commands and "batch-replace-cluster-nodes" in commands


def test_gpu_with_all_links_down_is_reported_from_the_nvml_message() -> None:
    # nvidia-smi prints no "Link N:" rows then, only NVML's message under the GPU header.
    node = _nvlink_node("nvlink_b200_all_links_inactive.txt")
    assert node.nvlink_active == 0
    assert node.nvlink_inactive == ["GPU 2 NVML: Unable to retrieve NVLink information as all links are inActive"]
    [finding] = _run("node.nvlink", _inventory(node, instance_type="ml.p6-b200.48xlarge"))
    assert finding.status == Status.FAIL and "all links are inActive" in finding.evidence[0]
    assert finding.title.startswith(f"every NVLink of GPU 2 inactive on {NODE_ID}")


def test_dbe_with_pending_row_remap_needs_a_reboot() -> None:
    probe = _probe("row_remap_pending_after_dbe.txt")
    # One event per GPU and code, its repeats counted: the DBE (48) was printed twice.
    assert [(x.code, x.count) for x in probe.xids] == [(48, 2), (171, 1), (63, 1), (154, 1)]
    assert {x.bus_id for x in probe.xids} == {"0000:55:00.0"}
    [row] = probe.remapped_rows
    assert (row.bus_id, row.correctable, row.uncorrectable, row.pending, row.failure) == (
        "0000:55:00.0",
        0,
        1,
        True,
        False,
    )
    inventory = _inventory(probe)
    remap = [f for f in _run("node.gpu_row_remap", inventory) if f.status == Status.FAIL]
    assert len(remap) == 1 and remap[0].priority == Priority.P1 and remap[0].fields["state"] == "pending"
    assert remap[0].title.endswith("→ reboot")
    assert "batch-reboot-cluster-nodes" in remap[0].suggested_commands[0].command
    [xid] = _run("node.gpu_xid", inventory)
    # 48 (DBE) and 63 (remap recorded) call for a reboot; nothing here calls for a replacement yet.
    assert (xid.status, xid.priority, xid.fields["action"]) == (Status.FAIL, Priority.P0, "reboot")
    assert xid.fields["xid_codes"] == "48,63,154,171"


def test_a100_80gb_xid63_with_pending_remap() -> None:
    probe = _probe("row_remap_pending_a100_80gb.txt")
    assert [(x.bus_id, x.code) for x in probe.xids] == [("0000:10:1c.0", 63)]
    # Page retirement answers N/A on Ampere (it remaps rows instead): no retirement state is read.
    assert probe.gpus[0].retirement_pending is None and probe.gpus[0].ecc_uncorrected_aggregate == 0
    [row] = probe.remapped_rows
    assert (row.bus_id, row.correctable, row.uncorrectable, row.pending) == ("0000:10:1c.0", 1, 0, True)
    inventory = _inventory(probe, instance_type="ml.p4de.24xlarge")
    assert [f.fields["state"] for f in _run("node.gpu_row_remap", inventory) if f.status == Status.FAIL] == ["pending"]
    [xid] = _run("node.gpu_xid", inventory)
    assert xid.fields["action"] == "reboot"


@pytest.mark.parametrize("instance_type", ["ml.p5.48xlarge", "ml.p5e.48xlarge"])
def test_p5_with_all_32_efa_devices_passes(instance_type: str) -> None:
    probe = _probe("p5_efa_devices.txt")
    assert probe.efa_devices is not None and len(probe.efa_devices) == 32
    assert probe.efa_devices[0] == "rdmap113s0" and probe.efa_devices[-1] == "rdmap99s0"
    [finding] = _run("node.efa_devices", _inventory(probe, instance_type=instance_type))
    assert finding.status == Status.PASS


@pytest.mark.parametrize(
    "instance_type, expected",
    [
        ("ml.c5.18xlarge", []),  # a CPU node: no GPU check has anything to say
        ("ml.p5.48xlarge", ["node.gpu_inventory"]),  # the same output on a GPU type: nvidia-smi is missing
    ],
)
def test_node_without_nvidia_tools(instance_type: str, expected: list[str]) -> None:
    inventory = _inventory(_probe("cpu_node_missing_tools.txt"), instance_type=instance_type)
    gpu_checks = ("node.gpu_xid", "node.gpu_ecc", "node.gpu_row_remap", "node.gpu_dcgm", "node.gpu_inventory")
    failing = [check for check in gpu_checks for f in _run(check, inventory) if f.status == Status.FAIL]
    assert failing == expected
    skipped = [f.title for f in _run("node.gpu_inventory", inventory) if f.status == Status.INFO]
    assert skipped == ([] if expected else ["GPU checks skipped on 1 node(s) without NVIDIA GPUs (1 x ml.c5.18xlarge)"])


@pytest.mark.parametrize(
    "instance_type, expected",
    [("ml.c5.18xlarge", []), ("ml.p5.48xlarge", [(Status.FAIL, Priority.P0)])],
)
def test_memlock_zero_matters_only_where_efa_registers_memory(instance_type: str, expected: list[object]) -> None:
    # The CPU node's `ulimit -l` of 0 is written by hand (only the `command not found` lines of that
    # file are real bash text; README). It is the SSM shell's own limit (the SSM agent's), never
    # judged; the same 0 for the job's process is harmless without EFA, a P0 on an EFA GPU node.
    probe = _probe("cpu_node_missing_tools.txt")
    assert probe.memlock_kib == 0 and probe.process_limits is None
    assert _run("node.memlock", _inventory(probe, instance_type=instance_type)) == []
    job = ProcessLimits(role="job", pid=7300, command="python", memlock_kib=0)
    inventory = _inventory(probe.model_copy(update={"process_limits": [job]}), instance_type=instance_type)
    assert [(f.status, f.priority) for f in _run("node.memlock", inventory)] == expected


def _slurm(name: str) -> SlurmControllerData:
    return parse_slurm_controller((DATA / name).read_text(encoding="utf-8"))


def test_drained_hyperpod_node_is_named_with_its_instance_id() -> None:
    slurm = _slurm("slurm_drain_kill_task_failed.txt")
    assert [(n.name, n.state, n.reason) for n in slurm.nodes] == [("ip-10-0-1-23", "drain", "Kill task failed")]
    # Slurm node names on HyperPod are the short PrivateDnsHostname (the mapping below is ours).
    node = ClusterNode(
        instance_id=NODE_ID,
        instance_group="worker",
        instance_type="ml.p5.48xlarge",
        status="Running",
        private_dns_hostname="ip-10-0-1-23.us-west-2.compute.internal",
    )
    [finding] = _run("slurm.node_states", _inventory(slurm=slurm, nodes=[node]))
    # `drain` is sinfo's short form of DRAINED (node_state_string_compact): drained, so a warning
    assert finding.status == Status.WARN and finding.fields["condition"] == "drained"
    assert finding.title == f"Slurm node ip-10-0-1-23 ({NODE_ID}) is drain: Kill task failed"
    assert {(r.kind, r.id) for r in finding.resources} == {("slurm_node", "ip-10-0-1-23"), ("node", NODE_ID)}


def test_not_responding_nodes_each_fail_and_none_counts_as_usable() -> None:
    slurm = _slurm("slurm_down_not_responding.txt")
    findings = _run("slurm.node_states", _inventory(slurm=slurm))
    assert [f.title for f in findings] == [f"Slurm node compute00{i} is down*: Not responding" for i in range(1, 5)]
    assert all(f.status == Status.FAIL and f.fields["signature"] == "down" for f in findings)


# --- Slurm controller: squeue pending reasons, scontrol ping, an unreachable controller ------------


@pytest.mark.parametrize(
    "name, expected",
    [
        # ParallelCluster: a spot node retired under the job, then requeued.
        ("slurm_squeue_parallelcluster_nodedown.txt", [("2", "wrap", "(NodeDown)")]),
        # ParallelCluster 3.6: waiting out a failed launch, and a queue whose nodes cannot start.
        (
            "slurm_squeue_parallelcluster_begintime_partition_inactive.txt",
            [("10", "test-job", "(BeginTime)"), ("12", "test-job", "(PartitionInactive)")],
        ),
        # The reason is free text with a comma and a space; %R keeps its parentheses.
        (
            "slurm_squeue_reqnodenotavail.txt",
            [
                ("8724936", "sleep", "(ReqNodeNotAvail, UnavailableNodes:r34n5)"),
                ("8724937", "sleep", "(ReqNodeNotAvail, May be reserved for other job)"),
                ("8724938", "sleep", "(ReqNodeNotAvail, May be reserved for other job)"),
            ],
        ),
        # Array tasks (id_index) held after the node failed to launch them.
        (
            "slurm_squeue_launch_failed_requeued_held.txt",
            [
                ("80520_36", "get_phone_alignments.sh", "(launch failed requeued held)"),
                ("80520_56", "get_phone_alignments.sh", "(launch failed requeued held)"),
            ],
        ),
        (
            "slurm_squeue_dependency_priority.txt",
            [
                ("50202934", "poststds", "(Dependency)"),
                ("50202933", "stdstarf", "(Dependency)"),
                ("50202930", "prestdst", "(Priority)"),
                ("50202924", "poststds", "(Dependency)"),
                ("50202923", "stdstarf", "(Dependency)"),
                ("50202922", "prestdst", "(Priority)"),
            ],
        ),
    ],
)
def test_pending_jobs_are_listed_with_their_reasons(name: str, expected: list[tuple[str, str, str]]) -> None:
    slurm = _slurm(name)
    assert [(e.job_id, e.name, e.reason) for e in slurm.queue] == expected
    assert {e.state for e in slurm.queue} == {"PENDING"}
    # Reasons naming a down node or partition warn per job; ordinary scheduling reasons are listed.
    node_fault = ("NodeDown", "PartitionInactive", "UnavailableNodes:", "launch failed")
    held = [(i, n, r) for i, n, r in expected if any(word in r for word in node_fault)]
    waiting = [(i, n, r) for i, n, r in expected if (i, n, r) not in held]
    findings = _run("slurm.queue", _inventory(slurm=slurm))
    warned = [f for f in findings if f.status == Status.WARN]
    assert [f.title for f in warned] == [f"job {i} ({n}) is PENDING: {r}" for i, n, r in held]
    listed = [f for f in findings if f.status == Status.INFO]
    if waiting:
        [info] = listed
        assert info.title == f"{len(waiting)} job(s) pending or completing"
        assert info.evidence == [f"job {i} {n}: PENDING {r}" for i, n, r in waiting]
    else:
        assert listed == []


def test_unavailable_nodes_of_a_pending_job_are_named_with_their_instances() -> None:
    slurm = _slurm("slurm_squeue_reqnodenotavail.txt")
    node = ClusterNode(
        instance_id=NODE_ID,
        instance_group="worker",
        instance_type="ml.p5.48xlarge",
        status="Running",
        private_dns_hostname="r34n5.cluster.internal",  # the mapping is ours; the name is the thread's
    )
    warned = [f for f in _run("slurm.queue", _inventory(slurm=slurm, nodes=[node])) if f.status == Status.WARN]
    [finding] = warned
    assert {(r.kind, r.id) for r in finding.resources} == {
        ("job", "8724936"),
        ("slurm_node", "r34n5"),
        ("node", NODE_ID),
    }


def test_scontrol_ping_with_a_primary_and_three_backups_up() -> None:
    slurm = _slurm("slurm_ping_four_controllers_up.txt")
    assert [c.state for c in slurm.controllers] == ["UP"] * 4
    [finding] = _run("slurm.controller", _inventory(slurm=slurm))
    assert (finding.status, finding.title) == (Status.PASS, "slurmctld is UP")
    assert finding.evidence == [slurm.ping_output, "scontrol ping asked 1 time(s)"]
    assert finding.evidence[0].splitlines()[0] == "Slurmctld(primary) at juju-9cf56a-13 is UP"


def test_unreachable_controller_errors_are_not_read_as_nodes_or_jobs() -> None:
    slurm = _slurm("slurm_controller_unreachable.txt")
    assert (slurm.nodes, slurm.queue) == ([], [])
    assert {(s.name, s.rc) for s in slurm.sections} == {("sinfo", 1), ("squeue", 1)}
    inventory = _inventory(slurm=slurm)
    # The connect failure is not one "usable" node, and there is no queue to report...
    assert _run("slurm.node_states", inventory) == []
    assert _run("slurm.queue", inventory) == []
    # ...it is the controller that fails.
    [finding] = _run("slurm.controller", inventory)
    assert (finding.status, finding.title) == (Status.FAIL, "Slurm commands cannot contact slurmctld")
    assert finding.evidence and all("Unable to contact slurm controller" in e for e in finding.evidence)


@pytest.mark.parametrize(
    "ping, expected",
    [
        # (synthetic) one line per controller: the primary down, a backup answering
        (
            ["Slurmctld(primary) at ip-10-1-0-5 is DOWN", "Slurmctld(backup) at ip-10-1-0-6 is UP"],
            [(Status.WARN, "slurmctld primary at ip-10-1-0-5 is DOWN")],
        ),
        # (synthetic) the older single-line form
        (["Slurmctld(primary/backup) at ip-10-1-0-5/ip-10-1-0-6 are UP/UP"], [(Status.PASS, "slurmctld is UP")]),
        (["Slurmctld(primary) at ip-10-1-0-5 is DOWN"], [(Status.FAIL, "slurmctld is not UP")]),
    ],
)
def test_every_controller_of_scontrol_ping_is_judged(ping: list[str], expected: list[tuple[Status, str]]) -> None:
    slurm = parse_slurm_controller("@@BEGIN slurm_ping\n" + "\n".join(ping) + "\n@@END slurm_ping rc=0\n")
    assert [(f.status, f.title) for f in _run("slurm.controller", _inventory(slurm=slurm))] == expected


# --- GPU nodes: a healthy 8x H100 and a node whose driver is not loaded -------------------------


def test_healthy_h100_node_reads_eight_gpus_and_clean_remap_rows() -> None:
    probe = _probe("h100_8gpu_healthy_nvidia_smi_q.txt")
    assert probe.gpu_present is True and probe.gpu_query_ok is True
    assert [g.index for g in probe.gpus] == list(range(8))
    assert {g.name for g in probe.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert (probe.gpus[0].bus_id, probe.gpus[0].serial) == ("0000:19:00.0", "1650124031592")
    assert (probe.versions.driver, probe.versions.cuda) == ("535.161.08", "12.2")
    assert [r.bus_id for r in probe.remapped_rows] == [g.bus_id for g in probe.gpus]
    rows = {(r.correctable, r.uncorrectable, r.pending, r.failure) for r in probe.remapped_rows}
    assert rows == {(0, 0, False, False)}
    inventory = _inventory(probe, instance_type="ml.p5.48xlarge")
    assert _run("node.gpu_inventory", inventory) == []
    assert _run("node.gpu_ecc", inventory) == []
    assert [(f.status, f.title) for f in _run("node.gpu_row_remap", inventory)] == [
        (Status.PASS, "row-remap state read on 1 node(s)")
    ]
    assert [f.status for f in _run("node.gpu_xid", inventory)] == [Status.PASS]


@pytest.mark.parametrize(
    "instance_type, failing",
    [
        ("ml.p5.48xlarge", [f"nvidia-smi cannot query the GPUs of {NODE_ID}"]),
        ("ml.p4d.24xlarge", [f"nvidia-smi cannot query the GPUs of {NODE_ID}"]),
        ("ml.c5.18xlarge", []),  # no NVIDIA GPU expected: the same text only skips the GPU checks
    ],
)
def test_nvidia_driver_not_loaded(instance_type: str, failing: list[str]) -> None:
    probe = _probe("nvidia_driver_not_loaded.txt")
    assert (probe.gpu_present, probe.gpu_query_ok, probe.gpus) == (False, None, [])
    findings = _run("node.gpu_inventory", _inventory(probe, instance_type=instance_type))
    assert [f.title.removesuffix(" (worker)") for f in findings if f.status == Status.FAIL] == failing


# --- EFA on a 4-device (p4d) node, and /dev/shm of a Slinky compute pod -----------------------------


@pytest.mark.parametrize(
    "instance_type, expected",
    [("ml.p4d.24xlarge", [(Status.PASS, None)]), ("ml.p5.48xlarge", [(Status.FAIL, "4 of 32")])],
)
def test_p4d_efa_devices_and_rx_drops(instance_type: str, expected: list[tuple[Status, str | None]]) -> None:
    probe = _probe("p4d_efa_devices_and_rx_drops.txt")
    assert probe.efa_devices == ["rdmap144s27", "rdmap160s27", "rdmap16s27", "rdmap32s27"]
    assert probe.efa_counters == {device: {"rx_drops": 0} for device in probe.efa_devices}
    inventory = _inventory(probe, instance_type=instance_type)
    findings = _run("node.efa_devices", inventory)
    assert [(f.status, f.title.split(" EFA")[0] if f.status == Status.FAIL else None) for f in findings] == expected
    assert _run("fleet.efa_error_outliers", inventory) == []


def test_dev_shm_of_64_mib_in_df_h_form_fails() -> None:
    probe = _probe("slinky_pod_dev_shm_64m.txt")
    # df's default layout names the mount source ("shm"), not the filesystem type.
    assert (probe.shm_fstype, probe.shm_size_bytes) == (None, 64 * 2**20)
    [finding] = _run("node.dev_shm", _inventory(probe, instance_type="ml.p5.48xlarge"))
    assert finding.status == Status.FAIL and finding.title.startswith(f"/dev/shm is 64 MiB on {NODE_ID}")


def test_a_hosts_own_dev_shm_of_126_gib_passes() -> None:
    probe = _probe("host_dev_shm_tmpfs_126g.txt")
    assert (probe.shm_fstype, probe.shm_size_bytes, probe.shm_mount) == (None, 126 * 2**30, "/dev/shm")
    assert _run("node.dev_shm", _inventory(probe, instance_type="ml.p5.48xlarge")) == []  # nothing to say


@pytest.mark.parametrize(
    "reason, names",
    [
        # (synthetic) Slurm writes several unavailable nodes as a hostlist
        ("(ReqNodeNotAvail, UnavailableNodes:ip-10-1-0-[15,17-18])", ["ip-10-1-0-15", "ip-10-1-0-17", "ip-10-1-0-18"]),
        ("(ReqNodeNotAvail, UnavailableNodes:r34n[a-b])", ["r34n[a-b]"]),  # not expandable: kept as written
    ],
)
def test_unavailable_hostlists_are_expanded_to_slurm_nodes(reason: str, names: list[str]) -> None:
    slurm = SlurmControllerData(queue=[SlurmQueueEntry(job_id="7", name="train", state="PENDING", reason=reason)])
    [finding] = [f for f in _run("slurm.queue", _inventory(slurm=slurm)) if f.status == Status.WARN]
    assert [r.id for r in finding.resources if r.kind == "slurm_node"] == names


# --- GPU↔NIC affinity and NVLink per GPU (issue 17, point 5) ---------------------------------------


def _topology_lines(drop_columns: tuple[str, ...] = ()) -> list[str]:
    """The DGX A100 matrix (NVIDIA/nccl#1505), optionally without some NIC columns: a host whose NICs
    behind the first GPUs' switch are missing from the matrix (the cells kept are the source's)."""
    lines = _sections("a100_topology_with_nics.txt")["topology"].lines
    header = lines[0].split()
    keep = [i for i, name in enumerate(header) if name not in drop_columns]
    out = []
    for line in lines:
        cells = line.split()
        if cells == header:
            out.append("\t" + "\t".join(header[i] for i in keep))
        else:
            out.append("\t".join([cells[0], *(cells[i + 1] for i in keep if i + 1 < len(cells))]))
    return out


def test_each_gpus_nearest_nics_are_read_from_the_matrix() -> None:
    affinity = parse_gpu_nic_affinity(_sections("a100_topology_with_nics.txt")["topology"].lines)
    assert [(a.gpu, a.nics, a.link) for a in affinity] == [
        ("GPU0", ["NIC0", "NIC1"], "PXB"),
        ("GPU1", ["NIC0", "NIC1"], "PXB"),
        ("GPU2", ["NIC2", "NIC3"], "PXB"),
        ("GPU3", ["NIC2", "NIC3"], "PXB"),
    ]
    # every GPU has NICs behind its own PCIe switches: said, not flagged
    [finding] = _run("node.p2p_path", _inventory(NodeProbeData(gpu_present=True, gpu_nic_affinity=affinity)))
    assert finding.status is Status.INFO and finding.title.endswith(": PXB")
    assert finding.evidence[0] == "GPU0: NIC0, NIC1 (PXB)"


def test_a_gpu_whose_nearest_nic_is_across_sockets_warns() -> None:
    affinity = parse_gpu_nic_affinity(_topology_lines(drop_columns=("NIC0", "NIC1")))
    assert [(a.gpu, a.link) for a in affinity] == [("GPU0", "SYS"), ("GPU1", "SYS"), ("GPU2", "PXB"), ("GPU3", "PXB")]
    [finding] = _run("node.p2p_path", _inventory(NodeProbeData(gpu_present=True, gpu_nic_affinity=affinity)))
    assert (finding.status, finding.priority) == (Status.WARN, Priority.P2)
    assert finding.title.startswith("GPU0, GPU1 of ") and finding.fields["far_gpus"] == "GPU0,GPU1"


def test_matrix_rows_with_cells_outside_the_legend_are_not_read() -> None:
    lines = _sections("a100_topology_with_nics.txt")["topology"].lines
    hostile = [lines[0], lines[1].replace("PXB", "P" * 5000, 1), lines[2], "GPU9 " + "SYS " * 3]
    assert [a.gpu for a in parse_gpu_nic_affinity(hostile)] == ["GPU1"]
    # matrices without NIC columns (the H100 fixture) give nothing, and no finding
    assert parse_gpu_nic_affinity(_sections("h100_topology_and_dcgm_health.txt")["topology"].lines) == []


@pytest.mark.parametrize(
    "name, gpu, speeds, down",
    [
        ("nvlink_h100_healthy_gpu0.txt", "GPU 0", [26.562] * 18, 0),
        ("nvlink_p4de_healthy_gpu0.txt", "GPU 0", [25.0] * 12, 0),
        ("nvlink_v100_two_inactive_links.txt", "GPU 3", [25.781] * 4, 2),
        ("nvlink_b200_all_links_inactive.txt", "GPU 2", [], 1),
    ],
)
def test_nvlink_links_and_speeds_are_read_per_gpu(name: str, gpu: str, speeds: list[float], down: int) -> None:
    [parsed] = parse_nvlink_gpus(_sections(name)["nvlink"].lines)
    assert (parsed.gpu, parsed.speeds_gbps, parsed.down, parsed.not_understood) == (gpu, speeds, down, [])


def _nvlink_gpus(*names: str) -> NodeProbeData:
    """A node whose GPUs are the fixtures' GPU blocks, renumbered 0, 1, … (each source shows one GPU)."""
    lines: list[str] = []
    for number, name in enumerate(names):
        block = _sections(name)["nvlink"].lines
        lines += [re.sub(r"^GPU \d+:", f"GPU {number}:", block[0]), *block[1:]]
    gpus = parse_nvlink_gpus(lines)
    active, inactive = nvlink_totals(gpus)
    return NodeProbeData(gpu_present=True, nvlink_active=active, nvlink_inactive=inactive, nvlink_gpus=gpus)


def test_a_gpu_with_fewer_or_slower_links_than_its_peers_warns() -> None:
    # three H100 GPU blocks and one A100 block (12 links at 25 GB/s): the odd one is short and slow
    node = _nvlink_gpus(*["nvlink_h100_healthy_gpu0.txt"] * 3, "nvlink_p4de_healthy_gpu0.txt")
    [finding] = _run("node.nvlink", _inventory(node))
    assert (finding.status, finding.priority) == (Status.WARN, Priority.P1)
    assert finding.evidence == ["GPU 3: 12 active link(s) where its peers have 18, 12 at 25.0 GB/s (peers 26.562 GB/s)"]
    # identical GPUs: nothing
    assert _run("node.nvlink", _inventory(_nvlink_gpus(*["nvlink_h100_healthy_gpu0.txt"] * 4))) == []


def test_nvlink_states_neither_up_nor_down_are_reported_not_dropped() -> None:
    lines = _sections("nvlink_p4de_healthy_gpu0.txt")["nvlink"].lines
    # a state outside both shapes (the word is ours: no real sample of one was found)
    odd = [*lines[:3], "  Link 2: <sleep>", *lines[4:]]
    [gpu] = parse_nvlink_gpus(odd)
    assert (len(gpu.speeds_gbps), gpu.down, gpu.not_understood) == (11, 0, ["Link 2: <sleep>"])
    [finding] = _run("node.nvlink", _inventory(NodeProbeData(gpu_present=True, nvlink_gpus=[gpu])))
    assert finding.status is Status.INFO and finding.evidence == ["GPU 0 Link 2: <sleep>"]
