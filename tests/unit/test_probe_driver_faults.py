"""The GPU and NVSwitch drivers' fault lines, read as the drivers print them (issue 17, point 2).

Every shape is a line built from the driver's own format string (NVIDIA/open-gpu-kernel-modules
595.45.04, df1c9a3; the format is quoted beside each case), plus real reports where one is public.
The probe's own grep patterns are run on them too, so that what the node selects and what the parser
reads cannot drift apart.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hyperpod_nccl.checks import discover
from hyperpod_nccl.models.findings import Priority, Status
from hyperpod_nccl.models.node_probe import NodeProbeData
from hyperpod_nccl.probe import script
from hyperpod_nccl.probe.parsers import parse_driver_faults, parse_node_probe
from hyperpod_nccl.probe.sections import NodeSection, begin_line, end_line
from tests.builders import probed_node

CHECKS = discover()

# (line as the kernel log shows it, expected (kind, bus, code, GPU-I, GPU-CI / fatal, link))
SHAPES: dict[str, tuple[list[str], tuple[object, ...]]] = {
    # kernel_rc.c XID_PRINT_WITH_ATTR("PCI:%04x:%02x:%02x", ...): "NVRM: Xid (%s): %d, pid=%s, name=%s, %s%s"
    "xid with process": (
        ["[Tue Mar  3 10:41:07 2026] NVRM: Xid (PCI:0000:53:00): 13, pid=48213, name=python3, Graphics Exception"],
        ("xid", "0000:53:00.0", 13, None, None),
    ),
    # the same without a process: "NVRM: Xid (%s): %d, %s%s"
    "xid without process": (
        ["[ 812.1] NVRM: Xid (PCI:0000:53:00): 119, Timeout after 6s of waiting for RPC response from GPU0 GSP!"],
        ("xid", "0000:53:00.0", 119, None, None),
    ),
    # "PCI:%04x:%02x:%02x GPU-I:%02u": attributed to a MIG GPU instance
    "xid of a MIG GPU instance": (
        ["NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7, name=python3, Contained: SM (0x1). RST: No, D-RST: No"],
        ("xid", "0000:01:00.0", 94, 5, None),
    ),
    # "PCI:%04x:%02x:%02x GPU-I:%02u GPU-CI:%02u": and to its compute instance
    "xid of a MIG compute instance": (
        ["NVRM: Xid (PCI:0000:01:00 GPU-I:05 GPU-CI:02): 94, pid=7, name=python3, Contained: SM (0x1)"],
        ("xid", "0000:01:00.0", 94, 5, 2),
    ),
    # common_nvswitch.h NVSWITCH_PRINT_SXID "nvidia-%s: SXid (PCI:%04x:%02x:%02x.%x): %05d, " +
    # intr_nvswitch.h "Fatal, Link %02d %s%s"
    "fatal sxid": (
        ["nvidia-nvswitch2: SXid (PCI:0000:06:00.0): 24007, Fatal, Link 22 sourcetrack TCEN0 crumbstore ECC DBE Error"],
        ("sxid", "0000:06:00.0", 24007, True, [22]),
    ),
    # ... "Non-fatal, Link %02d %s%s"
    "non-fatal sxid": (
        ["nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)"],
        ("sxid", "0000:05:00.0", 12028, False, [32]),
    ),
    # ... and messages that name no severity ("NVSWITCH Temperature %dC | TSENSE WARN Threshold %dC")
    "sxid without severity": (
        ["nvidia-nvswitch0: SXid (PCI:0000:07:00.0): 10004, NVSWITCH Temperature 81C | TSENSE WARN Threshold 80C"],
        ("sxid", "0000:07:00.0", 10004, None, []),
    ),
    # osinit.c NV_DEV_PRINTF: "NVRM: GPU %04x:%02x:%02x.%x: " "GPU has fallen off the bus.\n"
    "fallen off the bus, one line": (
        ["[ 4254.197871] NVRM: GPU 0000:5d:00.0: GPU has fallen off the bus."],
        ("xid", "0000:5d:00.0", 79, None, None),
    ),
    # osapi.c: "NVRM: The NVIDIA GPU %04x:%02x:%02x.%x\n" "NVRM: (PCI ID: %04x:%04x) installed in this
    # system has\n" "NVRM: fallen off the bus and is not responding to commands.\n" (dmesg indents the
    # record's continuation lines)
    "fallen off the bus, three lines": (
        [
            "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0",
            "               NVRM: (PCI ID: 10de:2330) installed in this system has",
            "               NVRM: fallen off the bus and is not responding to commands.",
        ],
        ("xid", "0000:b3:00.0", 79, None, None),
    ),
    # the same message wrapped after "installed in this system has", as other releases print it
    "fallen off the bus, wrapped later": (
        [
            "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:2d04) installed in this system has",
            "NVRM: fallen off the bus and is not responding to commands.",
        ],
        ("xid", "0000:01:00.0", 79, None, None),
    ),
    # a real report's one-line form, https://github.com/Bumblebee-Project/Bumblebee/issues/554
    "fallen off the bus, older drivers (real)": (
        ["[   49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus."],
        ("xid", "0000:01:00.0", 79, None, None),
    ),
}


def _event_shape(lines: list[str]) -> tuple[object, ...]:
    xids, sxids = parse_driver_faults([lines])
    assert len(xids) + len(sxids) == 1, (xids, sxids)
    if xids:
        (x,) = xids
        return ("xid", x.bus_id, x.code, x.gpu_instance, x.compute_instance)
    (s,) = sxids
    return ("sxid", s.bus_id, s.code, s.fatal, s.links)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_of_the_drivers_fault_lines_is_read_with_its_gpu(shape: str) -> None:
    lines, expected = SHAPES[shape]
    assert _event_shape(lines) == expected


def _probe_pipelines() -> dict[str, str]:
    """The probe's own commands for the dmesg sections, reading a file instead of the kernel."""
    text = script("node")
    pipelines = {}
    for section in (NodeSection.XID_DMESG, NodeSection.XID_COUNTS_DMESG):
        body = re.search(rf"^begin {section}\n(?P<command>.+)\nend {section} ", text, re.M)
        assert body is not None, section
        pipelines[section] = re.sub(r"^timeout \d+ dmesg( -T)? 2>&1", 'cat "$1"', body.group("command"))
    return pipelines


def _run_probe(tmp_path: Path, kernel_log: list[str]) -> NodeProbeData:
    """What the probe's dmesg sections print for `kernel_log`, parsed as the monitor parses it."""
    log = tmp_path / "dmesg.txt"
    log.write_text("\n".join(kernel_log) + "\n", encoding="utf-8")
    out = []
    for section, command in _probe_pipelines().items():
        run = subprocess.run(["bash", "-c", command, "probe", str(log)], capture_output=True, text=True, check=False)
        out += [begin_line(section), *run.stdout.splitlines(), end_line(section, 0)]
    return parse_node_probe("\n".join(out) + "\n")


needs_grep = pytest.mark.skipif(shutil.which("grep") is None or shutil.which("bash") is None, reason="no grep/bash")


@needs_grep
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_probes_own_grep_selects_and_counts_every_shape(tmp_path: Path, shape: str) -> None:
    lines, expected = SHAPES[shape]
    probe = _run_probe(tmp_path, ["[    1.0] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.127.05", *lines])
    events = [("xid", x.bus_id, x.code, x.gpu_instance, x.compute_instance) for x in probe.xids]
    events += [("sxid", s.bus_id, s.code, s.fatal, s.links) for s in probe.sxids]
    assert events == [expected]
    assert [x.count for x in probe.xids] + [s.count for s in probe.sxids] == [1]


@needs_grep
def test_a_storm_of_one_xid_neither_hides_an_earlier_one_nor_loses_its_count(tmp_path: Path) -> None:
    fall = "[  100.0] NVRM: Xid (PCI:0000:44:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    storm = [
        f"[  2{i:05d}.0] NVRM: Xid (PCI:0000:53:00): 13, pid={i}, name=python3, Graphics Exception" for i in range(3000)
    ]
    probe = _run_probe(tmp_path, [fall, *storm])
    counts = {(x.bus_id, x.code): x.count for x in probe.xids}
    assert counts == {("0000:44:00.0", 79): 1, ("0000:53:00.0", 13): 3000}
    (finding,) = CHECKS["node.gpu_xid"].run(_inventory(probe))
    assert finding.fields["action"] == "replace" and finding.fields["xid_lines"] == "13:3000,79:1"
    assert any("Xid 13 x3000" in line for line in finding.evidence)


def test_one_fall_printed_twice_by_the_driver_counts_once() -> None:
    # osinit.c logs the fall as Xid 79 and then with NV_DEV_PRINTF; dmesg and the journal hold both.
    lines = [
        "[ 4254.197860] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "[ 4254.197871] NVRM: GPU 0000:5d:00.0: GPU has fallen off the bus.",
    ]
    journal = [f"Mar 03 10:41:07 node kernel: {line.split('] ', 1)[1]}" for line in lines]
    (event,), sxids = parse_driver_faults([lines, journal])
    assert (event.bus_id, event.code, event.count) == ("0000:5d:00.0", 79, 1) and sxids == []
    assert event.line.startswith("NVRM: Xid (PCI:0000:5d:00): 79")


def test_the_last_line_of_a_cut_message_is_still_a_fall() -> None:
    # The probe keeps the newest lines: a message's first line may be cut away. Real line:
    # https://github.com/NVIDIA/NVSentinel/issues/155
    (event,), _ = parse_driver_faults([["               NVRM: fallen off the bus and is not responding to commands."]])
    assert (event.bus_id, event.code) == ("unknown GPU", 79)
    # ... unless the counts name the GPU
    (event,), _ = parse_driver_faults(
        [["               NVRM: fallen off the bus and is not responding to commands."]],
        [["      1 NVRM: The NVIDIA GPU 0000:b3:00.0"]],
    )
    assert event.bus_id == "0000:b3:00.0"


def test_other_messages_opening_like_a_fall_are_not_falls() -> None:
    # osapi.c print_unsupported: the same opening, then "is not supported"
    lines = [
        "NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:2330)",
        "NVRM: installed in this system is not supported by the",
        "NVRM: NVIDIA 550.127.05 driver release.",
    ]
    assert parse_driver_faults([lines]) == ([], [])


def _inventory(probe: NodeProbeData):  # type: ignore[no-untyped-def]
    return probed_node(probe)


def test_a_fall_without_an_xid_line_is_a_replace() -> None:
    xids, _ = parse_driver_faults([SHAPES["fallen off the bus, three lines"][0]])
    (finding,) = CHECKS["node.gpu_xid"].run(_inventory(NodeProbeData(gpu_present=True, xids=xids)))
    assert (finding.status, finding.priority, finding.fields["action"]) == (Status.FAIL, Priority.P0, "replace")
    assert "fallen off the bus and is not responding" in " ".join(finding.evidence)


def test_a_mig_xid_names_its_instance() -> None:
    xids, _ = parse_driver_faults([SHAPES["xid of a MIG compute instance"][0]])
    (finding,) = CHECKS["node.gpu_xid"].run(_inventory(NodeProbeData(gpu_present=True, xids=xids)))
    assert "MIG GPU-I 5, GPU-CI 2" in finding.evidence[0]


def test_a_fatal_sxid_fails_with_a_reboot_and_a_non_fatal_one_warns() -> None:
    _, fatal = parse_driver_faults([SHAPES["fatal sxid"][0] + SHAPES["non-fatal sxid"][0]])
    (finding,) = CHECKS["node.nvswitch_sxid"].run(_inventory(NodeProbeData(gpu_present=True, sxids=fatal)))
    assert (finding.status, finding.priority, finding.fields["action"]) == (Status.FAIL, Priority.P0, "reboot")
    assert finding.fields["sxid_codes"] == 24007 and finding.suggested_commands
    assert "SXid 24007 (fatal) on nvswitch2 (PCI 0000:06:00.0), link(s) 22" in finding.evidence
    _, corrected = parse_driver_faults([SHAPES["non-fatal sxid"][0] * 3])
    (finding,) = CHECKS["node.nvswitch_sxid"].run(_inventory(NodeProbeData(gpu_present=True, sxids=corrected)))
    assert (finding.status, finding.priority, finding.fields["action"]) == (Status.WARN, Priority.P2, "none")
    assert finding.evidence[0].startswith("SXid 12028 x3 (non-fatal) on nvswitch3")
    assert not finding.suggested_commands
    (clean,) = CHECKS["node.nvswitch_sxid"].run(_inventory(NodeProbeData(gpu_present=True)))
    assert clean.status is Status.PASS
