"""node.efa_latency thresholds: absolute slowness or an outlier in its group, never the 20 µs
of the original alone (public healthy loopback runs reach 24 µs)."""

from __future__ import annotations

from hyperpod_nccl.checks.node_latency import _slow


def test_public_healthy_loopback_figures_do_not_warn() -> None:
    assert _slow(23.45, None) is None  # the real p4d efa_test.sh run (tests/data/probe/README.md)
    assert _slow(23.45, 18.0) is None


def test_absolute_straggler_warns_without_a_group() -> None:
    assert _slow(75.0, None) is not None


def test_outlier_against_its_group_warns() -> None:
    why = _slow(47.5, 10.0)
    assert why is not None and "median" in why
    assert _slow(15.0, 5.0) is None  # fast in absolute terms, whatever the ratio
