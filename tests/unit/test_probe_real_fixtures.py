"""Parsers against real command outputs from public sources (provenance: tests/data/probe/README.md)."""

from __future__ import annotations

from pathlib import Path

from hyperpod_nccl.probe.parsers import (
    parse_dcgm_health,
    parse_node_probe,
    parse_pingpong,
    parse_topology,
    split_sections,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "probe"


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
