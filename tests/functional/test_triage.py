"""`hyperpod-nccl triage`: text and JSON output, several inputs, stdin, healthy input, unreadable
or binary inputs reported without hiding the others, the error text given as an argument, empty
input, the prompt on a terminal, `--fail-on`, and the way back to `diagnose`."""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path

import pytest

WATCHDOG = (
    "[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, "
    "Timeout(ms)=600000) ran for 600061 milliseconds before timing out.\n"
)
HEALTHY = (
    "ip-172-31-6-104:9921:9986 [0] NCCL INFO comm 0x7fdc3c000dc0 rank 8 nranks 16 cudaDev 0 busId 101c0 "
    "- Init COMPLETE\n"
    "algo-1:462:462 [0] NCCL INFO Using network AWS Libfabric\n"
)


def test_text_output_names_cause_pointer_and_read_only_commands(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "train.log"
    log.write_text(HEALTHY + WATCHDOG * 3, encoding="utf-8")
    run = cli("triage", str(log))
    assert run.code == 0
    assert f"== {log} (5 lines) ==" in run.stdout
    assert "[FAIL] P0 NCCL collective timed out (watchdog) — 3 line(s)" in run.stdout
    assert "root cause:" in run.stdout and "next (read-only):" in run.stdout
    assert "→ references/debugging-guide.md § 22" in run.stdout
    assert "op=_REDUCE_SCATTER_BASE" in run.stdout and "seq=7753" in run.stdout


def test_json_lines_one_object_per_input(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    failing, healthy = tmp_path / "a.log", tmp_path / "b.log.gz"
    failing.write_text(WATCHDOG + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    healthy.write_bytes(gzip.compress(HEALTHY.encode()))
    run = cli("triage", "--format", "jsonl", str(failing), str(healthy))
    assert run.code == 0 and run.stderr == ""
    first, second = (json.loads(line) for line in run.stdout.splitlines())
    # --format json: the same objects in one document.
    assert json.loads(cli("triage", "--format", "json", str(failing), str(healthy)).stdout) == {
        "inputs": [first, second],
        "unreadable": [],
    }
    assert first["source"] == str(failing)
    by_id = {f["id"]: f for f in first["findings"]}
    assert by_id["watchdog_timeout"]["reference"] == {"file": "debugging-guide.md", "section": "22"}
    assert by_id["watchdog_timeout"]["fields"]["timeout_ms"] == 600000
    assert by_id["gpu_oom"]["reference"] == {"file": "debugging-guide.md", "section": "11"}
    assert by_id["gpu_oom"]["count"] == 1 and by_id["gpu_oom"]["class"] == "gpu_oom"
    assert second == {"source": str(healthy), "lines": 2, "success_markers": [], "findings": [], "resolved": []}


def test_one_finding_per_cause_and_what_a_later_line_settled_is_said(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # NCCL's generic result code under the socket line that says why; a c10d connect retry that
    # connected afterwards (issue 16, points 3 and 4).
    log = tmp_path / "rank0.log"
    log.write_text(
        "[W1206 socket.cpp:663] [c10d] The client socket has failed to connect to [node-0]:29500 "
        "(errno: 111 - Connection refused).\n"
        "[I1206 socket.cpp:811] [c10d] The client socket has connected to [node-0]:29500 on [node-1]:50312.\n"
        "node-1:1234:1300 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.1.0.7<43251> "
        "failed : Software caused connection abort\n"
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error "
        "(run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3\n",
        encoding="utf-8",
    )
    text = cli("triage", str(log)).stdout
    assert text.count("[FAIL]") == 1, text
    assert "explains: NCCL system error (socket, EFA, driver or device) — 1 line(s)" in text
    assert "unhandled system error" in text
    assert "[INFO] " in text and "settled by a later line" in text
    [document] = json.loads(cli("triage", "--format", "json", str(log)).stdout)["inputs"]
    (finding,) = document["findings"]
    assert finding["id"] == "nccl_connect_failed"
    assert [folded["id"] for folded in finding["folded"]] == ["nccl_system_error"]
    assert [settled["id"] for settled in document["resolved"]] == ["c10d_connect_failed"]


def test_unreadable_and_binary_inputs_are_named_and_the_rest_reported(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good = tmp_path / "good.log"
    good.write_text(WATCHDOG)
    blob = tmp_path / "core.bin"
    blob.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" * 50)
    missing = tmp_path / "missing.log"
    run = cli("triage", "--format", "jsonl", str(missing), str(blob), str(good))
    assert run.code == 1
    errors = run.stderr.strip().splitlines()
    assert len(errors) == 2
    assert str(missing) in errors[0] and "cannot read" in errors[0]
    assert str(blob) in errors[1] and "binary" in errors[1]
    [reported] = [json.loads(line) for line in run.stdout.splitlines()]
    assert reported["source"] == str(good) and reported["findings"][0]["id"] == "watchdog_timeout"
    # One document names what could not be read beside what was.
    document = json.loads(cli("triage", "--format", "json", str(missing), str(blob), str(good)).stdout)
    assert document["inputs"] == [reported]
    assert [u["source"] for u in document["unreadable"]] == [str(missing), str(blob)]


def test_stdin_is_the_default_input(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    pasted = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.14.3\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(pasted.encode())))
    run = cli("triage", "--format", "jsonl")
    assert run.code == 0
    [document] = [json.loads(line) for line in run.stdout.splitlines()]
    assert document["source"] == "-"
    [finding] = document["findings"]
    assert finding["id"] == "nccl_system_error" and finding["fields"]["nccl_code"] == "ncclSystemError"
    # The code alone does not say which call failed: the quick reference's runtime table, not a reboot.
    assert finding["reference"] == {"file": "error-patterns-quick-ref.md", "section": "2"}


class _Terminal(io.TextIOWrapper):
    """stdin as a person's terminal: a TTY, with what they pasted before Ctrl-D."""

    def isatty(self) -> bool:
        return True


def test_an_argument_that_names_no_file_is_the_error_text_itself(cli) -> None:  # type: ignore[no-untyped-def]
    run = cli("triage", "NCCL WARN NET/OFI fi_getinfo failed: No data available (-61)")
    assert run.code == 0
    assert "== text argument (1 lines) ==" in run.stdout
    assert "→ references/debugging-guide.md § 6" in run.stdout  # EFA configuration
    explicit = cli("triage", "--format", "jsonl", "-e", WATCHDOG.strip(), "-e", "all good")
    first, second = (json.loads(line) for line in explicit.stdout.splitlines())
    assert first["source"] == "-e text" and first["findings"][0]["id"] == "watchdog_timeout"
    assert second["findings"] == []


def test_a_mistyped_file_name_is_unreadable_not_classified_as_text(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for name in (str(tmp_path / "trian.log"), "worker-3.log", "logs.gz"):
        run = cli("triage", name)
        assert run.code == 1 and f"{name}: cannot read" in run.stderr, name
        assert run.stdout == ""


def test_empty_input_says_no_input(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    run = cli("triage")
    assert run.code == 0 and "[SKIP] no input: nothing was classified" in run.stdout
    assert "[PASS]" not in run.stdout


def test_a_terminal_is_asked_to_paste_the_error(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sys, "stdin", _Terminal(io.BytesIO(WATCHDOG.encode())))
    run = cli("triage")
    assert "paste the error, then Ctrl-D" in run.stderr
    assert "[FAIL] P0 NCCL collective timed out (watchdog)" in run.stdout


def test_fail_on_exits_3_at_or_above_the_priority_and_points_back_to_diagnose(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "train.log"
    log.write_text(HEALTHY + WATCHDOG, encoding="utf-8")
    failing = cli("triage", "--fail-on", "P1", str(log))
    assert failing.code == 3
    assert failing.stdout.rstrip().endswith("hyperpod-nccl diagnose --cluster <NAME> --region <REGION>")
    generic = cli("triage", "--fail-on", "P0", "-e", "host:1:1 [0] NCCL WARN Trees/rings search took too long")
    assert generic.code == 0  # a P2 finding is below P0
    healthy = cli("triage", "--fail-on", "P2", "-e", HEALTHY)
    assert healthy.code == 0 and "diagnose --cluster" not in healthy.stdout
