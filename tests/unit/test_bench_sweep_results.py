"""The sweep section's kept rows: a run replaces what it measured and keeps the rest."""

from __future__ import annotations

from pathlib import Path

from hyperpod_nccl_sim.synthetic import SweepMeasurement
from tests.bench.bench_sweep import RESULTS, SweepResults, SweepRow, load_results, report


def _row(nodes: int, probe: float, wall: float, measured: str) -> SweepRow:
    def one(path: str) -> SweepMeasurement:
        return SweepMeasurement(
            nodes=nodes,
            path=path,
            probe_latency_s=probe,
            wall_s=wall,
            bound_s=nodes / 3 + probe,
            serial_s=nodes * probe,
            api_calls=nodes,
            nodes_probed=nodes,
            nodes_unreachable=0,
        )

    return SweepRow(nodes=nodes, probe_s=probe, measured=measured, cli=one("cli"), state_machine=one("state-machine"))


def test_a_run_replaces_the_rows_it_measured_and_keeps_the_others() -> None:
    kept = SweepResults(rows=[_row(16, 2.0, 8.0, "old"), _row(64, 2.0, 25.0, "old"), _row(16, 20.0, 27.0, "old")])
    merged = kept.merged([_row(64, 2.0, 24.0, "new"), _row(4096, 2.0, 1400.0, "new")])
    assert [(r.nodes, r.probe_s, r.measured) for r in merged.rows] == [
        (16, 2.0, "old"),
        (64, 2.0, "new"),
        (4096, 2.0, "new"),
        (16, 20.0, "old"),
    ]


def test_the_kept_rows_load_and_a_missing_size_keeps_the_target_missed(tmp_path: Path) -> None:
    assert load_results(tmp_path / "none.json").rows == []
    results = load_results(RESULTS)
    assert results.rows, "the committed rows load"
    section = report(SweepResults(rows=[r for r in results.rows if r.nodes != 4096]), plot=False)
    assert "**MISSED**" in section and "not run yet: 4,096 nodes of 2 s probes" in section
