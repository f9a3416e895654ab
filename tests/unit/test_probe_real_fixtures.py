"""Parsers against real command outputs from public sources (provenance: tests/data/probe/README.md)."""

from __future__ import annotations

from pathlib import Path

from hyperpod_nccl.probe.parsers import parse_node_probe, parse_pingpong

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
