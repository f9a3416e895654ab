"""`hyperpod-nccl demo` (what `make demo` runs): exit 0, [FAIL] lines, every pointer resolves."""

from __future__ import annotations

import io
import re

from hyperpod_nccl import references
from hyperpod_nccl.cli.progress import PROGRESS_LINE, ProgressLine
from hyperpod_nccl.cli.render import use_colour

POINTER = re.compile(r"→ references/(?P<file>[\w.-]+\.md) § (?P<section>[A-Za-z0-9.]+)")


def test_demo_exits_0_and_every_pointer_resolves(cli) -> None:  # type: ignore[no-untyped-def]
    run = cli("demo", "--no-color")
    assert run.code == 0, run.stderr
    assert "[FAIL]" in run.stdout
    pointers = POINTER.findall(run.stdout)
    assert pointers
    for file, section in pointers:
        assert references.section_heading(references.Reference(file=file, section=section)), (file, section)
    assert "Traceback" not in run.stdout + run.stderr


def test_demo_json_is_one_document_with_a_report_per_scenario(cli) -> None:  # type: ignore[no-untyped-def]
    import json

    run = cli("demo", "--scenario", "healthy-eks", "--scenario", "healthy-eks", "--format", "json")
    assert run.code == 0
    first, second = json.loads(run.stdout)  # one valid document, whatever the number of scenarios
    assert first["cluster_name"] == "healthy-eks" and first["issues_found"] == 0
    assert second["cluster_name"] == "healthy-eks"


def test_a_diagnosis_that_stops_still_prints_one_json_document(cli) -> None:  # type: ignore[no-untyped-def]
    import json

    from hyperpod_nccl.cli.exit_codes import EXIT_PREREQUISITE

    for command in ("diagnose", "incidents"):
        run = cli(command, "--cluster", "no-such-cluster", "--region", "us-west-2", "--format", "json")
        assert run.code == EXIT_PREREQUISITE, run.stderr
        error = json.loads(run.stdout)["error"]
        assert "no-such-cluster" in error["message"] and error["exit_code"] == EXIT_PREREQUISITE
        assert error["fix"] and "[FAIL]" in run.stderr  # stderr tells a person as before


def test_html_is_one_page_whatever_happened(cli) -> None:  # type: ignore[no-untyped-def]
    from hyperpod_nccl.cli.exit_codes import EXIT_PREREQUISITE, EXIT_USAGE

    run = cli("demo", "--scenario", "healthy-eks", "--scenario", "slurm-p5en", "--format", "html")
    assert run.code == 0, run.stderr
    assert run.stdout.count("<!doctype html>") == 1 and run.stdout.count('<section class="report"') == 2
    stopped = cli("diagnose", "--cluster", "no-such-cluster", "--region", "us-west-2", "--format", "html")
    assert stopped.code == EXIT_PREREQUISITE  # the exit code of the text run, and a page saying why
    assert stopped.stdout.startswith("<!doctype html>") and "no-such-cluster" in stopped.stdout
    assert 'data-error="1"' in stopped.stdout and "[FAIL]" in stopped.stderr
    refused = cli("demo", "status", "--format", "html")
    assert refused.code == EXIT_USAGE and not refused.stdout and "--format html" in refused.stderr


def test_an_unknown_scenario_is_one_line_on_every_path(cli) -> None:  # type: ignore[no-untyped-def]
    import json

    from hyperpod_nccl.cli.exit_codes import EXIT_USAGE

    serverless = cli("demo", "--serverless", "--scenario", "nosuch")
    assert serverless.code == EXIT_USAGE and "Traceback" not in serverless.stderr and "nosuch" in serverless.messages
    for argv in (["status"], ["history"], ["incidents"], []):
        run = cli("demo", *argv, "--scenario", "nosuch", "--format", "json")
        assert run.code == EXIT_USAGE, argv
        assert "Traceback" not in run.stderr and "nosuch" in run.messages, argv
        assert json.loads(run.stdout)["error"]["exit_code"] == EXIT_USAGE, argv  # still one document
    told = cli("demo", "--serverless", "--format", "json")
    assert told.code == EXIT_USAGE and "demo status --format json" in told.messages
    assert json.loads(told.stdout)["error"]["message"].startswith("--serverless tells its sweeps as text")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_tty_without_opt_outs(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert use_colour(_Tty()) is True
    assert use_colour(io.StringIO()) is False
    assert use_colour(_Tty(), disabled=True) is False
    monkeypatch.setenv("TERM", "dumb")
    assert use_colour(_Tty()) is False
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_colour(_Tty()) is False
    monkeypatch.setenv("NO_COLOR", "")  # no-color.org: only a non-empty value disables colour
    assert use_colour(_Tty()) is True


def test_progress_rewrites_a_terminal_line_and_writes_a_log_a_line_per_phase(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TERM", "xterm")
    log = io.StringIO()
    progress = ProgressLine(log)
    for done in range(1, 5):
        progress(f"SSM probes {done}/4 done")
    progress("scanning CloudWatch /aws/sagemaker/Clusters/c1")
    progress.clear()
    lines = log.getvalue().splitlines()
    # One line for the probes' phase (the repeats within 10 s are left out), one for the scan.
    assert [PROGRESS_LINE.sub("", line) for line in lines] == [
        "SSM probes 1/4 done",
        "scanning CloudWatch /aws/sagemaker/Clusters/c1",
    ]
    assert "\033" not in log.getvalue() and "\r" not in log.getvalue()
    tty = _Tty()
    line = ProgressLine(tty)
    line("describing cluster")
    line.clear()
    assert "describing cluster" in tty.getvalue() and tty.getvalue().endswith("\r\033[K")
    monkeypatch.setenv("TERM", "dumb")  # a terminal that cannot rewrite a line gets lines
    dumb = _Tty()
    ProgressLine(dumb)("describing cluster")
    assert "\033" not in dumb.getvalue() and dumb.getvalue().endswith("describing cluster\n")


def test_demo_status_and_history_read_the_table_the_serverless_monitor_filled(cli) -> None:  # type: ignore[no-untyped-def]
    import json

    status = cli("demo", "status", "--scenario", "hung-job", "--format", "json")
    assert status.code == 0, status.stderr
    [cluster] = json.loads(status.stdout)["clusters"]  # stdout is the status alone: the sweeps go to stderr
    assert cluster["cluster"] == "ml-hung-job-eks" and cluster["last_sweep"]["status"] == "complete"
    assert [c["occurrences"] for c in cluster["open_root_causes"]] == [2] * len(cluster["open_root_causes"]) != []
    assert "Sweep 2" in status.stderr

    history = cli("demo", "history", "--scenario", "hung-job")
    assert history.code == 0, history.stderr
    assert re.match(r"Node i-[0-9a-f]+: \d+ faults? recorded, oldest first", history.stdout), history.stdout


def test_demo_incidents_and_support_bundle_run_against_the_simulated_cluster(cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    incidents = cli("demo", "incidents", "--scenario", "hung-job")
    assert incidents.code == 0, incidents.stderr
    assert "Cluster: ml-hung-job-eks" in incidents.stdout and "Incidents: 1 " in incidents.stdout
    monkeypatch.chdir(tmp_path)
    bundle = cli("demo", "support-bundle", "--scenario", "healthy-eks")
    assert bundle.code == 0, bundle.stderr
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("support-healthy-eks-")], bundle.stdout


def test_progress_on_a_terminal_fits_its_width(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("COLUMNS", "60")  # shutil.get_terminal_size reads it first
    tty = _Tty()
    line = ProgressLine(tty)
    long = "SSM probes 3/1024 done: " + ", ".join(f"i-0{n:016x}" for n in range(12))
    line(long)
    line("describing cluster")
    line.clear()
    segments = [s for s in tty.getvalue().split("\r\033[K") if s]
    assert len(segments) == 2, segments
    assert all(len(s) <= 59 for s in segments), [len(s) for s in segments]  # the cursor stays on the line
    assert segments[0].startswith("… SSM probes 3/1024 done: i-0") and segments[1] == "… describing cluster"


def test_verbose_tells_each_check_what_it_read_its_time_and_what_it_found(cli) -> None:  # type: ignore[no-untyped-def]
    import json
    from collections import Counter

    from hyperpod_nccl.checks import discover

    run = cli("demo", "--scenario", "healthy-eks", "--verbose", "--format", "json")
    assert run.code == 0, run.stderr
    told = re.compile(r"^check (?P<id>\S+) \((?P<reads>[^()]+)\): (?P<ms>\d+\.\d) ms, (?P<found>.+)$")
    lines = [PROGRESS_LINE.sub("", line) for line in run.stderr.splitlines() if PROGRESS_LINE.match(line)]
    checks = [m for m in map(told.match, lines) if m]
    assert checks, run.stderr
    ids = [m["id"] for m in checks]
    assert len(ids) == len(set(ids)), "one line per check"
    assert set(ids) <= set(discover()), set(ids) - set(discover())
    found = {m["id"]: m["found"] for m in checks}
    [report] = json.loads(run.stdout)
    produced: dict[str, Counter[str]] = {}
    for finding in report["findings"]:
        produced.setdefault(finding["check_id"], Counter())[finding["status"]] += 1
    assert produced
    for check_id, statuses in produced.items():  # what the line says it found is what the report holds
        assert found.get(check_id) == ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())), check_id
    assert "nothing" in found.values(), "a check that produced no finding still has its line"
    quiet = cli("demo", "--scenario", "healthy-eks", "--format", "json")
    assert not any(told.match(PROGRESS_LINE.sub("", line)) for line in quiet.stderr.splitlines())
