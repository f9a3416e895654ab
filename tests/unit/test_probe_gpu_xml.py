"""`nvidia-smi -q -x` (the probe's `gpu_xml` section): real documents of three GPU generations and
driver layouts, the checks that read them, and hostile documents.

The real documents are netdata's captures (provenance: tests/data/probe/README.md); the pending-remap
and 8x H100 fixtures are values of real `nvidia-smi -q` posts written in this form (same README).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperpod_nccl.checks import discover
from hyperpod_nccl.models.findings import Finding, Priority, Status
from hyperpod_nccl.models.node_probe import NodeProbeData
from hyperpod_nccl.probe.nvidia_smi_xml import MAX_DOCUMENT_CHARS, MAX_GPUS, parse_gpu_report
from hyperpod_nccl.probe.parsers import parse_node_probe
from tests.builders import probed_node

DATA = Path(__file__).resolve().parents[1] / "data" / "probe"
CHECKS = discover()


def _probe(name: str) -> NodeProbeData:
    return parse_node_probe((DATA / name).read_text(encoding="utf-8"))


def _run(check_id: str, probe: NodeProbeData, instance_type: str = "ml.p4d.24xlarge") -> list[Finding]:
    return list(CHECKS[check_id].run(probed_node(probe, instance_type=instance_type)))


def _section(document: str) -> NodeProbeData:
    return parse_node_probe(f"@@BEGIN gpu_xml\n{document}\n@@END gpu_xml rc=0\n")


def _doc(gpus: str, head: str = "") -> str:
    return f'<?xml version="1.0" ?>\n<nvidia_smi_log>{head}{gpus}</nvidia_smi_log>'


def _gpu(bus: str = "00000000:53:00.0", body: str = "") -> str:
    name = "<product_name>NVIDIA H100 80GB HBM3</product_name>"
    return f'<gpu id="{bus}">{name}<pci><pci_bus_id>{bus}</pci_bus_id></pci>{body}</gpu>'


# --- real documents ---------------------------------------------------------------------------


def test_pascal_p100_reads_retired_pages_and_the_single_and_double_bit_layout() -> None:
    probe = _probe("p100_pascal_retired_pages_nvidia_smi_q_x.txt")
    [gpu] = probe.gpus
    assert (gpu.index, gpu.name, gpu.bus_id) == (0, "Tesla P100-PCIE-16GB", "0000:00:04.0")
    assert (gpu.serial, gpu.uuid) == ("0324217145110", "GPU-d3da8716-eaab-75db-efc1-60e88e1cd55e")
    assert (gpu.temperature_c, gpu.driver_version) == (38, "510.47.03")
    # Three single-bit errors over its life are corrected ones: uncorrectable counts the double-bit total.
    assert (gpu.ecc_uncorrected_volatile, gpu.ecc_uncorrected_aggregate) == (0, 0)
    assert (gpu.retired_pages_single_bit, gpu.retired_pages_double_bit, gpu.retirement_pending) == (0, 0, False)
    assert probe.remapped_rows == []  # Pascal does not remap rows: `<remapped_rows>N/A</remapped_rows>`
    assert (probe.versions.driver, probe.versions.cuda) == ("510.47.03", "11.6")
    assert gpu.clock_faults == []  # `clocks_throttle_reasons`, the older drivers' name, all "Not Active"
    # Page retirement is read, so the memory-repair check has read this node.
    assert [(f.status, f.title) for f in _run("node.gpu_row_remap", probe, "ml.p3.16xlarge")] == [
        (Status.PASS, "row-remap state read on 1 node(s)")
    ]
    assert [f.status for f in _run("node.gpu_clocks", probe, "ml.p3.16xlarge")] == [Status.PASS]


def test_a100_in_mig_mode_has_no_volatile_counts_and_no_row_remap_answer() -> None:
    probe = _probe("a100_40gb_mig_nvidia_smi_q_x.txt")
    [gpu] = probe.gpus
    assert (gpu.name, gpu.bus_id, gpu.serial) == ("NVIDIA A100-SXM4-40GB", "0000:00:04.0", "1324321002473")
    # In MIG mode the volatile counts are per MIG device (N/A at the GPU); aggregate is still given.
    assert (gpu.ecc_uncorrected_volatile, gpu.ecc_uncorrected_aggregate) == (None, 0)
    assert (gpu.retired_pages_double_bit, gpu.retirement_pending) == (None, None)
    assert probe.remapped_rows == []
    assert _run("node.gpu_row_remap", probe) == []  # nothing read: no PASS either
    assert _run("node.gpu_ecc", probe) == []


def test_driver_535_layout_reads_remapped_rows_and_clock_event_reasons() -> None:
    probe = _probe("rtx4090_driver_535_nvidia_smi_q_x.txt")
    [gpu] = probe.gpus
    assert (gpu.bus_id, gpu.serial, gpu.uuid) == ("0000:84:00.0", None, "GPU-71d1acc2-662d-2166-bf9f-65272d2fc437")
    assert (gpu.ecc_uncorrected_volatile, gpu.ecc_uncorrected_aggregate) == (None, None)  # a card without ECC
    [row] = probe.remapped_rows
    assert (row.bus_id, row.correctable, row.uncorrectable, row.pending, row.failure) == (
        "0000:84:00.0",
        0,
        0,
        False,
        False,
    )
    assert gpu.clock_faults == [] and probe.versions.cuda == "12.2"


def test_eight_h100_values_in_the_xml_form() -> None:
    probe = _probe("h100_8gpu_healthy_nvidia_smi_q.txt")
    assert [g.index for g in probe.gpus] == list(range(8))
    assert [r.bus_id for r in probe.remapped_rows] == [g.bus_id for g in probe.gpus]
    assert {g.ecc_uncorrected_volatile for g in probe.gpus} == {0}


# --- the checks on what only the XML tells -----------------------------------------------------


def _retirement(pending: str, double_bit: int) -> str:
    return (
        "<retired_pages><multiple_single_bit_retirement><retired_count>2</retired_count>"
        f"</multiple_single_bit_retirement><double_bit_retirement><retired_count>{double_bit}</retired_count>"
        f"</double_bit_retirement><pending_blacklist>{pending}</pending_blacklist></retired_pages>"
    )


def test_pending_page_retirement_calls_for_a_reboot() -> None:
    # `pending_blacklist`: the name older drivers print for the flag (the P100 document has both).
    probe = _section(_doc(_gpu(body=_retirement("Yes", 1))))
    [finding] = [f for f in _run("node.gpu_row_remap", probe, "ml.p3.16xlarge") if f.status != Status.PASS]
    assert (finding.status, finding.priority, finding.fields["state"]) == (
        Status.FAIL,
        Priority.P1,
        "retirement_pending",
    )
    assert finding.title.endswith("→ reboot") and "batch-reboot-cluster-nodes" in finding.suggested_commands[0].command
    assert "1 double-bit, 2 multiple single-bit" in finding.evidence[0]


def test_pages_retired_after_double_bit_errors_are_reported_not_acted_on() -> None:
    probe = _section(_doc(_gpu(body=_retirement("No", 3))))
    [finding] = [f for f in _run("node.gpu_row_remap", probe, "ml.p3.16xlarge") if f.status != Status.PASS]
    assert (finding.status, finding.priority, finding.suggested_commands) == (Status.WARN, Priority.P2, [])


@pytest.mark.parametrize("layout", ["clocks_event_reasons", "clocks_throttle_reasons"])
def test_a_gpu_held_down_by_a_hardware_slowdown_is_a_straggler(layout: str) -> None:
    reason = layout.removesuffix("s").replace("reasons", "reason")
    body = (
        f"<{layout}><{reason}_gpu_idle>Active</{reason}_gpu_idle>"
        f"<{reason}_hw_slowdown>Active</{reason}_hw_slowdown>"
        f"<{reason}_sw_power_cap>Active</{reason}_sw_power_cap></{layout}>"
        "<temperature><gpu_temp>87 C</gpu_temp></temperature>"
    )
    probe = parse_node_probe(
        f"@@BEGIN gpu_xml\n{_doc(_gpu(body=body) + _gpu('00000000:64:00.0'))}\n@@END gpu_xml rc=0\n"
    )
    assert [g.clock_faults for g in probe.gpus] == [["hw_slowdown"], []]  # idle and power cap are policy
    [finding] = [f for f in _run("node.gpu_clocks", probe) if f.status != Status.PASS]
    assert finding.status == Status.WARN
    assert finding.evidence == ["GPU 0 (0000:53:00.0, serial None): hw_slowdown active, 87 C"]


def test_ecc_evidence_gives_the_lifetime_count_beside_this_boot() -> None:
    counts = "".join(
        f"<{scope}><sram_uncorrectable_parity>0</sram_uncorrectable_parity><sram_uncorrectable_secded>{n}"
        f"</sram_uncorrectable_secded><dram_uncorrectable>1</dram_uncorrectable></{scope}>"
        for scope, n in (("volatile", 1), ("aggregate", 4))
    )
    probe = _section(_doc(_gpu(body=f"<ecc_errors>{counts}</ecc_errors>")))
    assert (probe.gpus[0].ecc_uncorrected_volatile, probe.gpus[0].ecc_uncorrected_aggregate) == (2, 5)
    [finding] = _run("node.gpu_ecc", probe)
    assert finding.status == Status.FAIL and finding.evidence[0].endswith(": 2 this boot, 5 over its life")


# --- what nvidia-smi prints around the document, and hostile documents --------------------------


def test_an_error_printed_before_the_document_is_kept_and_the_gpus_still_read() -> None:
    text = "Unable to determine the device handle for GPU 0000:64:00.0: Unknown Error\n" + _doc(_gpu())
    report = parse_gpu_report(text)
    assert [g.bus_id for g in report.gpus] == ["0000:53:00.0"] and report.error is None
    assert report.messages == ["Unable to determine the device handle for GPU 0000:64:00.0: Unknown Error"]


def test_a_node_whose_nvidia_smi_fails_says_why_in_the_inventory_finding() -> None:
    probe = parse_node_probe(
        "@@BEGIN gpu_list\nGPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n@@END gpu_list rc=0\n"
        "@@BEGIN gpu_xml\nUnable to determine the device handle for GPU0000:53:00.0: Unknown Error\n"
        "@@END gpu_xml rc=255\n"
    )
    assert probe.gpu_query_ok is False
    [finding] = [f for f in _run("node.gpu_inventory", probe, "ml.p5.48xlarge") if f.status == Status.FAIL]
    assert finding.evidence == [
        "no nvidia_smi_log document in the answer",
        "Unable to determine the device handle for GPU0000:53:00.0: Unknown Error",
    ]


@pytest.mark.parametrize(
    "document, error",
    [
        (
            '<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaa">]><nvidia_smi_log>&a;</nvidia_smi_log>',
            "not well-formed XML",  # the subset outside the document is never read: its entity is unknown
        ),
        ("<nvidia_smi_log><!ENTITY x SYSTEM 'file:///etc/passwd'></nvidia_smi_log>", "declarations inside"),
        ("<nvidia_smi_log><gpu></nvidia_smi_log>", "not well-formed XML"),
        (_doc(_gpu())[:-40], "cut off"),  # the probe's 1 MiB bound
        ("x" * (MAX_DOCUMENT_CHARS + 1), "not read"),
    ],
)
def test_documents_nvidia_smi_never_writes_are_refused_with_a_reason(document: str, error: str) -> None:
    report = parse_gpu_report(document)
    assert report.gpus == [] and report.error is not None and error in report.error


def test_the_doctype_nvidia_smi_writes_is_accepted_and_an_entity_reference_is_not_expanded() -> None:
    doctype = '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
    assert [g.bus_id for g in parse_gpu_report(doctype + _doc(_gpu())).gpus] == ["0000:53:00.0"]
    # An undeclared entity (no DTD is ever read) is a parse error, never a file's contents.
    report = parse_gpu_report(_doc(_gpu(body="<serial>&passwd;</serial>")))
    assert report.gpus == [] and report.error is not None and "not well-formed" in report.error


def test_values_are_bounded_and_shape_checked() -> None:
    long_name = "N" * 500
    gpus = _gpu(body=f"<serial>{long_name}</serial><temperature><gpu_temp>-5 C</gpu_temp></temperature>")
    gpus += '<gpu id="$(reboot)"><product_name>x</product_name></gpu>'
    gpus += "".join(_gpu(f"00000000:{i:02x}:00.0") for i in range(MAX_GPUS + 10))
    report = parse_gpu_report(_doc(gpus))
    assert report.gpus[0].serial is None and report.gpus[0].temperature_c is None
    assert len(report.gpus) == MAX_GPUS - 1  # the bounded first 64 elements, less the one without an address
    assert report.messages == ["GPU 1: no PCI address of its shape; not read"]
