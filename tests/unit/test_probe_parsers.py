"""Parsers of the probe sections against public command outputs and rendered node outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperpod_nccl.models.node_probe import GpuInfo, XidEvent, canonical_pci_bus_id
from hyperpod_nccl.probe.parsers import (
    MAX_FI_INFO_ENTRIES,
    parse_node_probe,
    parse_shm,
    parse_slurm_controller,
    split_sections,
)
from hyperpod_nccl.probe.sections import NodeSection, begin_line, end_line
from hyperpod_nccl_sim.node_behaviours import NodeBehaviour, XidSpec
from hyperpod_nccl_sim.nodes import render_node_probe

DATA = Path(__file__).resolve().parents[1] / "data" / "probe"


def _fixture(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_fi_info_counts_distinct_efa_domains_and_reads_the_installer_version() -> None:
    probe = parse_node_probe(_fixture("fi_info_efa_single_device.txt"))
    assert probe.fi_info_efa_domains == 1  # efa_0 as rdm and dgram is one device
    assert probe.versions.efa_installer == "1.5.1"


def test_fi_info_values_not_of_their_shape_are_refused_and_the_entries_bounded() -> None:
    # fi_info's output is the node's: a value of another shape is never shown (an entry without a
    # provider or domain of its shape is not kept), and at most MAX_FI_INFO_ENTRIES entries are.
    lines = [
        "provider: efa",
        "    domain: rdmap16s27-rdm",
        "    version: 111.20; rm -rf /",
        "    type: FI_EP_RDM\x1b[2J",
        "provider: efa $(id)",
        "    domain: rdmap32s27-rdm",
        "    version: 111.20",
        "provider: efa",
        "    domain: ../../etc/passwd rdm",
        *[f"provider: efa\n    domain: rdmap{i}s27-rdm\n    version: 1.0\n    type: FI_EP_RDM" for i in range(100)],
    ]
    text = "\n".join([begin_line(NodeSection.FI_INFO_EFA), *lines, end_line(NodeSection.FI_INFO_EFA, 0)]) + "\n"
    entries = parse_node_probe(text).fi_info_efa_entries
    assert (entries[0].domain, entries[0].version, entries[0].endpoint_type) == ("rdmap16s27-rdm", None, None)
    assert entries[1].domain == "rdmap0s27-rdm" and len(entries) == MAX_FI_INFO_ENTRIES


@pytest.mark.parametrize(
    "spelling",
    ["00000000:53:00.0", "0000:53:00", "0000:53:00.0", "53:00.0", " 00000000:53:00.0\n", "0000:53:00.0".upper()],
)
def test_every_spelling_of_a_bus_id_normalises_to_one(spelling: str) -> None:
    # nvidia-smi's rows, the kernel's Xid lines (no function) and sysfs spell one GPU apart.
    assert canonical_pci_bus_id(spelling) == "0000:53:00.0"


def test_bus_ids_of_one_gpu_from_nvidia_smi_and_the_kernel_compare_equal() -> None:
    gpu = GpuInfo(index=5, name="NVIDIA H100 80GB HBM3", bus_id="00000000:A8:00.0")
    xid = XidEvent(bus_id="0000:a8:00", code=48, line="NVRM: Xid (PCI:0000:a8:00): 48, pid=1, DBE")
    assert gpu.bus_id == xid.bus_id == "0000:a8:00.0"
    # Other functions and domains stay apart; text that is no PCI address is kept as it is.
    assert canonical_pci_bus_id("0000:a8:00.1") == "0000:a8:00.1"
    assert canonical_pci_bus_id("00000001:A8:00.0") == "0001:a8:00.0"
    assert canonical_pci_bus_id("<unknown>") == "<unknown>"


def test_xid_lines_from_dmesg_and_journal_are_merged_once() -> None:
    probe = parse_node_probe(_fixture("xid79_dmesg.txt"))
    assert [(x.bus_id, x.code) for x in probe.xids] == [("0000:44:00.0", 79)]
    assert probe.gpu_present is True
    row = probe.remapped_rows[0]
    assert (row.uncorrectable, row.pending, row.failure) == (4, True, False)


def test_cpu_node_and_cut_off_sections() -> None:
    probe = parse_node_probe(_fixture("cpu_node_missing_tools.txt"))
    assert probe.gpu_present is False
    assert probe.fi_info_efa_domains is None and probe.fi_info_error == "fi_info not installed"
    assert (probe.memlock_kib, probe.memlock_unlimited) == (0, False)
    assert probe.stack_unlimited is True
    assert (probe.shm_fstype, probe.shm_size_bytes) == ("tmpfs", 67108864)
    assert probe.section_rc("dcgm_health") is None and probe.dcgm_overall is None


def test_rendered_p5_node_parses_completely() -> None:
    text = render_node_probe(
        NodeBehaviour(
            xids=[XidSpec(gpu=5, code=48)],
            remap_failure_gpus=[1],
            nvlink_inactive=["0:3"],
            acs_enabled=2,
            firewall_drops=1,
            mtu=1500,
            stack_kib=1024,
        ),
        "ml.p5.48xlarge",
        "ip-10-1-0-20.us-west-2.compute.internal",
        "worker:0",
    )
    probe = parse_node_probe(text)
    assert len(probe.gpus) == 8 and probe.gpus[5].bus_id == "0000:a8:00.0"
    assert [(x.bus_id, x.code) for x in probe.xids] == [("0000:a8:00.0", 48)]
    assert [r.failure for r in probe.remapped_rows].count(True) == 1
    assert probe.nvlink_active == 8 * 18 - 1 and probe.nvlink_inactive == ["GPU 0 Link 3: <inactive>"]
    assert probe.topology_nvlink_pairs == 56 and probe.topology_pcie_pairs == 0
    assert len(probe.acs_enabled_bridges) == 2 and len(probe.firewall_rules) == 1
    assert probe.fi_info_efa_domains == 32 and len(probe.efa_devices or []) == 32
    assert {i.name: i.mtu for i in probe.interfaces}["ens32"] == 1500
    assert probe.stack_kib == 1024 and probe.numa_nodes == 2
    assert probe.versions.nccl == "2.21.5" and probe.versions.ofi_nccl == "1.11.0"
    assert probe.versions.libfabric == "1.22.0amzn4.0" and probe.versions.cuda == "12.4"
    assert len(probe.efa_counters) == 32


def test_split_sections_ignores_text_outside_markers() -> None:
    sections = split_sections("banner\n@@BEGIN a\nx\n@@END a rc=3\nnoise\n@@BEGIN b\ny\n")
    assert (sections["a"].lines, sections["a"].rc) == (["x"], 3)
    assert (sections["b"].lines, sections["b"].rc) == (["y"], None)


def test_slurm_controller_sections() -> None:
    text = (
        "@@BEGIN slurm_ping\nSlurmctld(primary) at ip-10-1-0-10 is UP\n@@END slurm_ping rc=0\n"
        "@@BEGIN munge\ninactive\n@@END munge rc=3\n"
        "@@BEGIN sinfo\nip-10-1-0-12|ip-10-1-0-12|10.1.0.12|drained*|Kill task failed\n"
        "ip-10-1-0-13|ip-10-1-0-13|10.1.0.13|idle|none\n@@END sinfo rc=0\n"
        "@@BEGIN squeue\n42|train|PENDING|(Resources)\n@@END squeue rc=0\n"
    )
    slurm = parse_slurm_controller(text)
    assert [c.state for c in slurm.controllers] == ["UP"] and slurm.munge_state == "inactive"
    assert [(n.name, n.state, n.reason) for n in slurm.nodes] == [
        ("ip-10-1-0-12", "drained*", "Kill task failed"),
        ("ip-10-1-0-13", "idle", None),
    ]
    assert slurm.queue[0].reason == "(Resources)"


def test_sinfo_reason_may_contain_the_field_separator() -> None:
    # `scontrol update ... reason="..."` accepts any text (synthetic reason).
    text = "@@BEGIN sinfo\nip-10-1-0-12|ip-10-1-0-12|10.1.0.12|drained|GPU 3 | Xid 79\n@@END sinfo rc=0\n"
    [node] = parse_slurm_controller(text).nodes
    assert (node.state, node.reason) == ("drained", "GPU 3 | Xid 79")


@pytest.mark.parametrize(
    "lines, expected",
    [
        # The probe's own form: the type first, sizes in bytes.
        (
            ["Type    1B-blocks    Avail Mounted on", "tmpfs    67108864 67108864 /dev/shm"],
            ("tmpfs", 64 * 2**20, "/dev/shm"),
        ),
        # df -h as people paste it (tests/data/probe/slinky_pod_dev_shm_64m.txt): the first column
        # is the mount source, and "64M" is 1024-based.
        (["Filesystem Size  Used Avail Use% Mounted on", "shm 64M 0 64M 0% /dev/shm"], (None, 64 * 2**20, "/dev/shm")),
        (["tmpfs 1.5G 0 1.5G 0% /dev/shm"], (None, 3 * 2**29, "/dev/shm")),
        # Plain df counts 1K blocks, df -B1 bytes: the header says which.
        (
            ["Filesystem 1K-blocks Used Available Use% Mounted on", "tmpfs 65536 0 65536 0% /dev/shm"],
            (None, 2**26, "/dev/shm"),
        ),
        (
            ["Filesystem 1B-blocks Used Available Use% Mounted on", "tmpfs 65536 0 65536 0% /dev/shm"],
            (None, 2**16, "/dev/shm"),
        ),
        # df names the filesystem holding the path: /dev/shm as a link into /run, or a directory of
        # the root filesystem, is that mount (its size is what /dev/shm has).
        (["tmpfs 64M 0 64M 0% /run"], (None, 64 * 2**20, "/run")),
        (["Type 1B-blocks Avail Mounted on", "overlay 107374182400 53687091200 /"], ("overlay", 100 * 2**30, "/")),
        # A size df did not print is no answer.
        (["df: /dev/shm: No such file or directory"], (None, None, None)),
    ],
)
def test_dev_shm_size_in_the_probe_form_and_in_df_default_layout(
    lines: list[str], expected: tuple[str | None, int | None, str | None]
) -> None:
    assert parse_shm(lines) == expected
