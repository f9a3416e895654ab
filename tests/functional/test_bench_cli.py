"""`hyperpod-nccl bench sweep` as an operator runs it: its own process, its own emulation."""

from __future__ import annotations

import json
import subprocess
import sys

DOCUMENTED_KEYS = ("nodes", "path", "wall_s", "bound_s", "serial_s", "api_calls", "nodes_probed", "nodes_unreachable")


def _bench(*argv: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "hyperpod_nccl.cli.main", "bench", "sweep", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_bench_sweep_prints_the_documented_keys() -> None:
    done = _bench("--nodes", "8", "--probe-latency", "0.2", "--format", "json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert tuple(document)[: len(DOCUMENTED_KEYS)] == DOCUMENTED_KEYS
    assert document["nodes"] == 8 and document["path"] == "cli"
    assert document["nodes_probed"] == 8 and document["nodes_unreachable"] == 0
    assert document["bound_s"] == round(8 / 3 + 0.2, 3)
    assert document["serial_s"] == round(8 * 0.2, 3)
    assert document["wall_s"] > 0.2  # at least one probe's stall
    # One listing page and one session per node: no other per-node AWS call.
    assert document["api_calls_by_operation"]["ssm:StartSession"] == 8
    assert document["api_calls_by_operation"]["sagemaker:ListClusterNodes"] == 1


def test_bench_sweep_rejects_bad_sizes() -> None:
    done = _bench("--nodes", "0")
    assert done.returncode == 2
    assert "node count" in done.stderr
