"""Rows of the original script the probe collected but never judged (issue 17, point 7)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from hyperpod_nccl.checks import discover
from hyperpod_nccl.models.findings import Priority, Status
from hyperpod_nccl.probe import script
from hyperpod_nccl.probe.parsers import parse_node_probe
from hyperpod_nccl.probe.sections import NodeSection, begin_line, end_line
from tests.builders import probed_node

CHECKS = discover()


def _node(sections: dict[str, tuple[list[str], int]]):  # type: ignore[no-untyped-def]
    text = "".join(
        "\n".join([begin_line(name), *lines, end_line(name, rc)]) + "\n" for name, (lines, rc) in sections.items()
    )
    return probed_node(parse_node_probe(text))


UVERBS = ([f"uverbs{i}" for i in range(32)] + ["rdma_cm"], 0)
NO_MODULE_FILE = (["cat: /sys/module/efa/version: No such file or directory"], 1)


def test_uverbs_devices_without_the_efa_driver_fail() -> None:
    # original probe 15: `/dev/infiniband/uverbs*` present without the module → FAIL
    inv = _node(
        {
            NodeSection.MODULES: (["nvidia 12345 0", "ib_core 1 0", "ib_uverbs 1 0"], 0),
            NodeSection.EFA_MODULE_VERSION: NO_MODULE_FILE,
            NodeSection.UVERBS: UVERBS,
        }
    )
    (finding,) = CHECKS["node.efa_driver"].run(inv)
    assert (finding.status, finding.priority) == (Status.FAIL, Priority.P0)
    assert "32 uverbs device(s)" in finding.title and finding.suggested_commands


def test_a_loaded_or_built_in_efa_driver_passes() -> None:
    loaded = _node({NodeSection.MODULES: (["efa 1 0", "ib_core 1 0"], 0), NodeSection.UVERBS: UVERBS})
    built_in = _node(
        {
            NodeSection.MODULES: (["ib_core 1 0"], 0),
            NodeSection.EFA_MODULE_VERSION: (["2.13.0g"], 0),
            NodeSection.UVERBS: UVERBS,
        }
    )
    for inv in (loaded, built_in):
        assert [f.status for f in CHECKS["node.efa_driver"].run(inv)] == [Status.PASS]


def test_no_claim_about_the_driver_without_an_answer_from_lsmod() -> None:
    # lsmod cut off (no section end) or never run: the devices alone say nothing about the driver
    inv = _node({NodeSection.EFA_MODULE_VERSION: NO_MODULE_FILE, NodeSection.UVERBS: UVERBS})
    assert CHECKS["node.efa_driver"].run(inv) == []


def _plugin_node(**probe: object):  # type: ignore[no-untyped-def]
    from hyperpod_nccl.models.node_probe import NodeProbeData, SectionStatus

    data = NodeProbeData(sections=[SectionStatus(name=NodeSection.OFI_NCCL, rc=1)], **probe)  # type: ignore[arg-type]
    return CHECKS["node.ofi_nccl_plugin"].run(probed_node(data))


def test_aws_ofi_nccl_the_originals_rows() -> None:
    from hyperpod_nccl.models.node_probe import NcclJobProcess

    # NCCL_NET_PLUGIN pointing at a missing file → FAIL
    (finding,) = _plugin_node(nccl_net_plugin="/opt/amazon/ofi-nccl/lib/libnccl-net.so", nccl_net_plugin_present=False)
    assert finding.status is Status.FAIL and "names no file" in finding.title
    # no plugin found while the job asks for FI_PROVIDER=efa → FAIL; without that → WARN
    efa_job = [NcclJobProcess(pid=7300, rank=0, env={"FI_PROVIDER": "efa"})]
    (finding,) = _plugin_node(nccl_jobs=efa_job)
    assert finding.status is Status.FAIL and "FI_PROVIDER=efa" in finding.title
    (finding,) = _plugin_node()
    assert finding.status is Status.WARN
    # found on the host: nothing to say
    assert _plugin_node(ofi_nccl_plugin=["libnccl-net.so"]) == []


def _ofi_nccl_section(root: Path) -> str:
    """The probe's own `ofi_nccl` section, every directory it lists moved under `root`."""
    text = script("node")
    start = text.index("begin ofi_nccl\n")
    block = text[start : text.index("\n", text.index('end ofi_nccl "${PIPESTATUS[0]}"', start)) + 1]
    head = text[: text.index("\n", text.index("\nend() {") + 1) + 1]  # PATH, lastpipe, the section markers
    return head + re.sub(r"(?<= )/(?=(opt|usr)/)", f"{root}/", block)


@pytest.mark.parametrize("directory", ["usr/lib", "usr/lib64", "opt/amazon/ofi-nccl/lib"])
def test_the_plugin_is_found_in_each_directory_the_original_searched(tmp_path: Path, directory: str) -> None:
    # Original probe 22 lists /usr/lib too: a distribution's aws-ofi-nccl package installs there.
    (tmp_path / directory).mkdir(parents=True)
    (tmp_path / directory / "libnccl-net-ofi.so").write_text("", encoding="utf-8")
    (tmp_path / "usr/share").mkdir(parents=True)
    (tmp_path / "usr/share/libnccl-net.so").write_text("", encoding="utf-8")  # in no searched directory
    program = _ofi_nccl_section(tmp_path)
    assert f"{tmp_path}/usr/lib/ " in program and f"{tmp_path}/usr/lib64/ " in program
    run = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=False)
    probe = parse_node_probe(run.stdout)
    assert probe.ofi_nccl_plugin == ["libnccl-net-ofi.so"], run.stdout + run.stderr
    assert _plugin_node(ofi_nccl_plugin=probe.ofi_nccl_plugin) == []


def test_without_iptables_the_nftables_ruleset_is_read() -> None:
    # original probe: an nft fallback for the host-firewall check (`nft list ruleset` syntax)
    nft = (
        [
            "\t\ttype filter hook input priority filter; policy drop;",
            "\t\ttcp dport 29400-29500 drop",
        ],
        0,
    )
    inv = _node(
        {NodeSection.FIREWALL: (["bash: line 1: iptables: command not found"], 127), NodeSection.FIREWALL_NFT: nft}
    )
    (finding,) = CHECKS["node.firewall"].run(inv)
    assert finding.status is Status.WARN and "tcp dport 29400-29500 drop" in finding.evidence
    # with iptables there, its rules alone count (iptables-nft shows the same rules twice otherwise)
    inv = _node({NodeSection.FIREWALL: ([], 1), NodeSection.FIREWALL_NFT: nft})
    assert CHECKS["node.firewall"].run(inv) == []
