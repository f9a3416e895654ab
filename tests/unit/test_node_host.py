"""Host facts of each node (issue 17, point 7; original probes 1, 23 and 31): the instance type and
zone from IMDSv2, the memory total, and the kernel-log tail of EFA/RDMA/ECC lines, from the probe's
sections to the findings of `node.host_info` and `node.kernel_log`."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hyperpod_nccl.checks import discover
from hyperpod_nccl.models.findings import Priority, Status
from hyperpod_nccl.models.node_probe import HostIdentity, NodeProbeData, NodeProbeResult
from hyperpod_nccl.probe import script
from hyperpod_nccl.probe.parsers import (
    KERNEL_LOG_MAX_CHARS,
    KERNEL_LOG_MAX_LINES,
    parse_imds,
    parse_node_probe,
    split_sections,
)
from hyperpod_nccl.probe.sections import NodeSection, begin_line, end_line
from tests.builders import inventory, probed, probed_node

DATA = Path(__file__).resolve().parents[1] / "data" / "probe"
CHECKS = discover()


def _imds(*lines: str, rc: int = 0) -> HostIdentity | None:
    text = "\n".join([begin_line(NodeSection.IMDS), *lines, end_line(NodeSection.IMDS, rc)])
    return parse_imds(split_sections(text).get(NodeSection.IMDS))


# ----------------------------------------------------------------------------- parsing
def test_imds_values_of_their_shape_are_read() -> None:
    identity = _imds("instance-type p5en.48xlarge", "availability-zone us-east-1a", "availability-zone-id use1-az4")
    assert identity == HostIdentity(
        instance_type="p5en.48xlarge", availability_zone="us-east-1a", availability_zone_id="use1-az4"
    )
    # A Local Zone and a GB200 type have their shapes too.
    local = _imds("instance-type p6e-gb200.36xlarge", "availability-zone us-west-2-lax-1a")
    assert local is not None and local.availability_zone == "us-west-2-lax-1a"
    assert local.instance_type == "p6e-gb200.36xlarge"
    assert _imds("availability-zone-id usw2-lax1-az1") == HostIdentity(availability_zone_id="usw2-lax1-az1")


@pytest.mark.parametrize(
    "line",
    [
        "instance-type ml.p5.48xlarge.evil",
        "instance-type P5.48XLARGE",
        "instance-type p5.48xlarge\x1b[2J",
        "instance-type " + "p" * 60,
        "availability-zone us-west-2",  # a region, not a zone
        "availability-zone usw2-az1",  # an id where the name belongs
        "availability-zone-id us-west-2a",
    ],
)
def test_a_value_not_of_its_shape_is_refused_by_the_parser_too(line: str) -> None:
    # The probe refuses these on the node; a node that prints them anyway is not believed.
    identity = _imds(line)
    assert identity is not None
    assert (identity.instance_type, identity.availability_zone, identity.availability_zone_id) == (None, None, None)
    assert all(not re.search(r"[\x00-\x1f]", note) and len(note) <= 120 for note in identity.notes)


def test_why_imds_said_nothing_is_kept() -> None:
    assert _imds("unavailable: no IMDSv2 token (curl rc=28)", rc=28) == HostIdentity(
        notes=["unavailable: no IMDSv2 token (curl rc=28)"]
    )
    partial = _imds("instance-type p5.48xlarge", "availability-zone unavailable (curl rc=22)")
    assert partial is not None and partial.instance_type == "p5.48xlarge"
    assert partial.notes == ["availability-zone unavailable (curl rc=22)"]
    missing = _imds("unavailable: no IMDSv2 token (curl rc=127)", rc=127)
    assert missing is not None and missing.notes == ["curl is not installed on the node (IMDS not asked)"]
    # A section the probe never printed (an older probe) is no answer at all.
    assert parse_node_probe("").host_identity is None


def test_memory_total_of_a_real_meminfo() -> None:
    # tests/data/probe/README.md: /proc/meminfo quoted in elastic/beats issue #6351
    probe = parse_node_probe((DATA / "meminfo_hugepages_in_use.txt").read_text(encoding="utf-8"))
    assert probe.mem_total_kib == 132027020
    assert (probe.hugepages_total, probe.hugepages_free, probe.hugepage_size_kib) == (56274, 23506, 2048)


def test_a_number_of_thousands_of_digits_is_no_meminfo_value() -> None:
    # int() of more than 4300 digits raises: the parse of the whole node must not.
    text = "\n".join(
        [begin_line("hugepages"), "MemTotal: " + "9" * 5000 + " kB", "HugePages_Total: 4", end_line("hugepages", 0)]
    )
    probe = parse_node_probe(text)
    assert probe.mem_total_kib is None and probe.hugepages_total == 4


def _kernel_log_pipeline() -> str:
    """The probe's own kernel_log command, reading a file instead of the kernel."""
    body = re.search(r"^begin kernel_log\n(?P<command>.+)\nend kernel_log ", script("node"), re.M)
    assert body is not None
    return re.sub(r"^timeout \d+ dmesg -T 2>&1", 'cat "$1"', body.group("command"))


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("grep") is None, reason="needs bash and grep")
def test_the_probes_filter_keeps_the_efa_and_edac_lines_of_real_kernel_logs(tmp_path: Path) -> None:
    # The real lines of tests/data/probe/efa_and_edac_kernel_log.txt among others of the same sources
    # that the filter drops (a warning banner, the GPU driver's Xid line read by the Xid sections).
    real = split_sections((DATA / "efa_and_edac_kernel_log.txt").read_text(encoding="utf-8"))["kernel_log"].lines
    others = [
        "[68998.667638] ------------[ cut here ]------------",
        "[Tue Mar  3 10:41:07 2026] NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus.",
    ]
    log = tmp_path / "dmesg.txt"
    log.write_text("\n".join(real[:3] + others + real[3:]) + "\n", encoding="utf-8")
    env = {"LC_ALL": "C", "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        ["bash", "-c", _kernel_log_pipeline(), "probe", str(log)], capture_output=True, text=True, env=env, check=False
    )
    assert run.stdout.splitlines() == real


def test_the_kernel_log_is_bounded_in_lines_and_length() -> None:
    lines = [f"[{i}.0] efa 0000:4f:00.0: line {i} " + "x" * 1000 for i in range(50)]
    text = "\n".join([begin_line(NodeSection.KERNEL_LOG), *lines, end_line(NodeSection.KERNEL_LOG, 0)])
    kept = parse_node_probe(text).kernel_log
    assert len(kept) == KERNEL_LOG_MAX_LINES and kept[0].startswith("[30.0] efa")  # the newest
    assert all(len(line) == KERNEL_LOG_MAX_CHARS for line in kept)


# ----------------------------------------------------------------------------- findings
def _node(
    index: int, probe: NodeProbeData, *, listed: str = "ml.p5.48xlarge", group: str = "worker"
) -> NodeProbeResult:
    return NodeProbeResult(
        instance_id=f"i-0f1e2d3c4b5a6978{index}",
        reachable=True,
        instance_group=group,
        instance_type=listed,
        hostname=f"ip-10-1-0-{10 + index}.us-west-2.compute.internal",
        probe=probe,
    )


def _probe(instance_type: str | None = "p5.48xlarge", mem_kib: int | None = 2113442704) -> NodeProbeData:
    identity = HostIdentity(
        instance_type=instance_type, availability_zone="us-west-2a", availability_zone_id="usw2-az1"
    )
    return NodeProbeData(host_identity=identity, mem_total_kib=mem_kib)


def test_host_facts_are_one_info_per_group_with_a_line_per_node() -> None:
    unreachable = NodeProbeData(
        host_identity=HostIdentity(notes=["unavailable: no IMDSv2 token (curl rc=28)"]), mem_total_kib=2113442704
    )
    results = [_node(1, _probe()), _node(2, unreachable), _node(3, _probe(), group="login", listed="ml.m5.xlarge")]
    results[2].probe = _probe("m5.xlarge", 15918672)
    findings = CHECKS["node.host_info"].run(inventory(node_probes=probed(results)))
    assert [f.status for f in findings] == [Status.INFO, Status.INFO]
    login, worker = findings
    assert worker.title == "host facts of 2 node(s) of group worker" and worker.resources == []
    assert worker.evidence == [
        "i-0f1e2d3c4b5a69781 (worker) ip-10-1-0-11: p5.48xlarge in us-west-2a (usw2-az1), 2015.5 GiB memory",
        "i-0f1e2d3c4b5a69782 (worker) ip-10-1-0-12: IMDS: unavailable: no IMDSv2 token (curl rc=28), 2015.5 GiB memory",
    ]
    assert login.evidence == [
        "i-0f1e2d3c4b5a69783 (login) ip-10-1-0-13: m5.xlarge in us-west-2a (usw2-az1), 15.2 GiB memory"
    ]


def test_a_node_of_another_type_than_hyperpod_lists_warns() -> None:
    findings = CHECKS["node.host_info"].run(probed_node(_probe("p4d.24xlarge"), instance_type="ml.p5.48xlarge"))
    [warn] = [f for f in findings if f.status is Status.WARN]
    assert warn.priority is Priority.P2
    assert (
        warn.title
        == "i-0f1e2d3c4b5a69788 (worker) is a p4d.24xlarge by its instance metadata, HyperPod lists ml.p5.48xlarge"
    )
    assert warn.fields == {"imds_instance_type": "p4d.24xlarge", "listed_instance_type": "ml.p5.48xlarge"}
    assert [r.id for r in warn.resources] == ["i-0f1e2d3c4b5a69788"]
    # The same type, and a node whose IMDS did not answer, give no warning.
    for probe in (_probe("p5.48xlarge"), _probe(None)):
        same = CHECKS["node.host_info"].run(probed_node(probe, instance_type="ml.p5.48xlarge"))
        assert [f.status for f in same] == [Status.INFO]


def test_a_big_group_lists_the_first_nodes_and_counts_the_rest() -> None:
    results = [_node(i, _probe()) for i in range(3)]
    results += [
        NodeProbeResult(instance_id=f"i-0aaaaaaaaaaaa{i:04d}", reachable=True, instance_group="worker", probe=_probe())
        for i in range(60)
    ]
    [finding] = CHECKS["node.host_info"].run(inventory(node_probes=probed(results)))
    assert len(finding.evidence) == 51 and finding.evidence[-1] == "... and 13 more node(s)"
    assert finding.fields == {"nodes": 63}


def test_kernel_log_lines_are_one_info_per_node_and_quiet_nodes_pass() -> None:
    real = parse_node_probe((DATA / "efa_and_edac_kernel_log.txt").read_text(encoding="utf-8"))
    quiet = parse_node_probe(f"{begin_line(NodeSection.KERNEL_LOG)}\n{end_line(NodeSection.KERNEL_LOG, 0)}\n")
    findings = CHECKS["node.kernel_log"].run(inventory(node_probes=probed([_node(1, real), _node(2, quiet)])))
    info, passed = findings
    assert info.status is Status.INFO and [r.id for r in info.resources] == ["i-0f1e2d3c4b5a69781"]
    assert info.title == "8 kernel log line(s) about EFA, RDMA or memory errors on i-0f1e2d3c4b5a69781 (worker)"
    assert info.evidence[-1].startswith("[21584691.723198] EDAC MC0: 2 CE error on CPU#0Channel#2_DIMM#0")
    assert passed.status is Status.PASS and passed.title.endswith("on 1 node(s)")
    # An older probe without the section is neither.
    assert CHECKS["node.kernel_log"].run(probed_node(NodeProbeData())) == []


def test_the_simulated_nodes_answer_imds_and_their_knobs_reach_the_findings() -> None:
    from hyperpod_nccl_sim.node_behaviours import NodeBehaviour
    from hyperpod_nccl_sim.nodes import render_node_probe

    host = "ip-10-1-0-11.us-east-1.compute.internal"
    healthy = parse_node_probe(render_node_probe(NodeBehaviour(), "ml.p5en.48xlarge", host, "worker:0"))
    assert healthy.host_identity == HostIdentity(
        instance_type="p5en.48xlarge", availability_zone="us-east-1a", availability_zone_id="use1-az1"
    )
    assert healthy.mem_total_kib is not None and healthy.kernel_log == []
    off = parse_node_probe(render_node_probe(NodeBehaviour(imds_reachable=False), "ml.p5en.48xlarge", host, "w:0"))
    assert off.host_identity == HostIdentity(notes=["unavailable: no IMDSv2 token (curl rc=28)"])
    other = NodeBehaviour(
        imds_instance_type="p5.48xlarge", kernel_log=["[Tue Mar  3 10:41:07 2026] efa 0000:4f:00.0: x"]
    )
    probe = parse_node_probe(render_node_probe(other, "ml.p5en.48xlarge", host, "w:0"))
    inv = probed_node(probe, instance_type="ml.p5en.48xlarge")
    assert [f.status for f in CHECKS["node.host_info"].run(inv)] == [Status.WARN, Status.INFO]
    assert [f.status for f in CHECKS["node.kernel_log"].run(inv)] == [Status.INFO]
