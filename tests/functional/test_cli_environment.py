"""The CLI in the environments it meets outside a developer's terminal (issue 18, points 2 and 3):
a reader that goes away (`| head`), a stdout that cannot encode the report's arrows, an endpoint
that answers an HTML page, a `--debug` wire log that must not leak the credentials, and progress in
a log (no TTY): one line per phase, no control sequence. Each runs `hyperpod-nccl` as a process, as
a person or a pipeline would."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hyperpod_nccl.cli.exit_codes import EXIT_BROKEN_PIPE, EXIT_OK, EXIT_PREREQUISITE
from hyperpod_nccl_sim.aws import FAKE_ACCESS_KEY, FAKE_SECRET_KEY

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
WATCHDOG = (
    "[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, "
    "Timeout(ms)=600000) ran for 600061 milliseconds before timing out.\n"
)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHONIOENCODING"))}
    env.update({"PYTHONPATH": str(FUNCTIONS), "AWS_EC2_METADATA_DISABLED": "true"}, **extra)
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    return env


def _hyperpod_nccl(
    *args: str, stdin: str = "", stdout: int | None = subprocess.PIPE, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hyperpod_nccl.cli.main", *args],
        input=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(**env),
        timeout=120,
    )


def _diagnose(endpoint: str, *flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`diagnose` of a cluster through `endpoint`, with the emulation's fake credentials."""
    return _hyperpod_nccl(
        "diagnose",
        "--cluster",
        "c1",
        "--region",
        "us-west-2",
        *flags,
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID=FAKE_ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=FAKE_SECRET_KEY,
        **env,
    )


def test_a_reader_that_went_away_stops_the_command_quietly() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head` that has already exited: the first write meets a closed pipe
    try:
        run = _hyperpod_nccl("triage", stdin=WATCHDOG, stdout=write_end)
    finally:
        os.close(write_end)
    assert run.returncode == EXIT_BROKEN_PIPE
    assert run.stderr == "", run.stderr


def test_a_stdout_that_cannot_encode_the_arrows_gets_ascii_stand_ins() -> None:
    run = _hyperpod_nccl("triage", stdin=WATCHDOG, PYTHONIOENCODING="ascii")
    assert run.returncode == EXIT_OK, run.stderr
    assert "Traceback" not in run.stderr
    assert "-> references/debugging-guide.md S 22" in run.stdout
    assert run.stdout.isascii()


def test_bench_meets_a_closed_pipe_quietly() -> None:
    # The smallest sweep `bench` runs (one node, no probe latency, in its own emulation): it prints
    # one summary line at the end, through the same entry point as every other command.
    # Its line is ASCII already, so the closed pipe is the case to run (each run sweeps, ~9 s).
    argv = ("bench", "sweep", "--nodes", "1", "--probe-latency", "0")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        closed = _hyperpod_nccl(*argv, stdout=write_end)
    finally:
        os.close(write_end)
    assert closed.returncode == EXIT_BROKEN_PIPE and "Traceback" not in closed.stderr, closed.stderr


class _HtmlPage(BaseHTTPRequestHandler):
    """What a captive portal or a misconfigured proxy answers to anything."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = b"<html><body><h1>Welcome to the hotel network</h1></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def html_endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HtmlPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_endpoint_answering_html_is_named_in_one_finding_not_a_traceback(html_endpoint: str) -> None:
    run = _diagnose(html_endpoint)
    assert run.returncode == EXIT_PREREQUISITE
    assert "Traceback" not in run.stderr
    assert "not an AWS response" in run.stderr
    assert "fix AWS credentials" not in run.stderr, "an HTML page is no credentials problem"


def test_debug_shows_the_wire_without_the_credentials(html_endpoint: str) -> None:
    run = _diagnose(
        html_endpoint,
        "--debug",
        AWS_SESSION_TOKEN="IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQDexampleSessionTokenValue0123456789",
    )
    assert "botocore" in run.stderr and "GetCallerIdentity" in run.stderr, "the wire log must be shown"
    assert FAKE_SECRET_KEY not in run.stderr
    assert "exampleSessionTokenValue" not in run.stderr
    assert "Authorization" in run.stderr and "Signature=" not in run.stderr, "the signed header is scrubbed"
    assert not re.search(r"[0-9a-f]{40}", run.stderr), "no signature or hash of the signing survives"


def test_progress_in_a_log_is_a_line_per_phase_without_control_sequences(html_endpoint: str) -> None:
    run = _diagnose(html_endpoint, "--verbose")
    assert "\033" not in run.stderr and "\r" not in run.stderr
    assert "] verifying AWS credentials" in run.stderr


# Each way a command first reaches AWS, as an operator would run it against one cluster (history
# reaches it through the same `read_monitor` as status: each case costs the ~11 s of the timeouts).
AWS_COMMANDS = {
    "diagnose": ("diagnose", "--cluster", "c1"),
    "status": ("status", "--cluster", "c1", "--format", "json"),
    "sweep-now": ("sweep-now", "--cluster", "c1"),
}


@pytest.mark.parametrize("command", sorted(AWS_COMMANDS))
def test_an_endpoint_that_accepts_and_never_answers_is_told_within_15_seconds(command: str) -> None:
    import socket
    import time

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # the kernel completes the handshakes; nothing ever reads or answers
    try:
        started = time.monotonic()
        run = _hyperpod_nccl(
            *AWS_COMMANDS[command],
            "--region",
            "us-west-2",
            AWS_ENDPOINT_URL=f"http://127.0.0.1:{silent.getsockname()[1]}",
            AWS_ACCESS_KEY_ID=FAKE_ACCESS_KEY,
            AWS_SECRET_ACCESS_KEY=FAKE_SECRET_KEY,
        )
        elapsed = time.monotonic() - started
    finally:
        silent.close()
    assert run.returncode == EXIT_PREREQUISITE
    assert elapsed < 15, f"a dead endpoint took {elapsed:.0f} s to report"
    assert "sts:GetCallerIdentity timed out waiting for the answer" in run.stderr
    assert "127.0.0.1" in run.stderr, "the message names what was unreachable"
    assert "Traceback" not in run.stderr
    if "json" in AWS_COMMANDS[command]:  # stopped, and still one JSON document on stdout
        error = json.loads(run.stdout)["error"]
        assert "sts:GetCallerIdentity" in error["message"] and error["exit_code"] == EXIT_PREREQUISITE
        assert error["fix"]


@pytest.mark.parametrize(
    ("where", "told"),
    [
        ("proxy", "could not connect through the proxy: check HTTPS_PROXY/HTTP_PROXY and NO_PROXY"),
        ("tls", "TLS"),
        ("dns", "could not resolve the endpoint's name (DNS)"),
    ],
)
def test_a_network_path_that_fails_is_named_with_its_fix(html_endpoint: str, where: str, told: str) -> None:
    # Each is a botocore transport error of its own class (aws_errors.transport_failure): a proxy
    # that refuses, a TLS handshake with a server that speaks plain HTTP, a name that cannot resolve.
    if where == "proxy":
        run = _diagnose("https://sts.us-west-2.amazonaws.com", HTTPS_PROXY="http://127.0.0.1:9")
    elif where == "tls":
        run = _diagnose(html_endpoint.replace("http://", "https://"))
    else:
        run = _diagnose("http://no-such-host.invalid")
    assert run.returncode == EXIT_PREREQUISITE, run.stderr
    assert told in run.stderr and "Traceback" not in run.stderr, run.stderr


@pytest.mark.parametrize("command", ["diagnose", "incidents", "demo", "support-bundle"])
def test_report_commands_meet_a_closed_pipe_and_an_ascii_stdout(simulate, tmp_path: Path, command: str) -> None:  # type: ignore[no-untyped-def]
    # The cases `triage` is tested for above, for the commands that print a report of a cluster (the
    # simulated one, reached through the emulation as through AWS; `demo` starts its own). `bench`
    # prints one summary line through the same entry point (main.py's handler of a closed pipe).
    sim = simulate("eks-p5")
    target = [] if command == "demo" else ["--cluster", sim.scenario.cluster.name, "--region", sim.scenario.region]
    reach = {"AWS_ENDPOINT_URL": sim.emulation.endpoint_url, "AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY}
    reach["AWS_SECRET_ACCESS_KEY"] = FAKE_SECRET_KEY
    extra = {"demo": ["--scenario", "eks-p5"], "support-bundle": ["--output-dir", str(tmp_path), "--force"]}
    argv = [command, *target, *extra.get(command, [])]
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        closed = _hyperpod_nccl(*argv, stdout=write_end, **reach)
    finally:
        os.close(write_end)
    assert closed.returncode == EXIT_BROKEN_PIPE, closed.stderr
    assert "Traceback" not in closed.stderr and "BrokenPipe" not in closed.stderr, closed.stderr
    ascii_run = _hyperpod_nccl(*argv, PYTHONIOENCODING="ascii", **reach)
    assert "Traceback" not in ascii_run.stderr, ascii_run.stderr
    told = "Support bundle written to" if command == "support-bundle" else "-> references/"
    assert ascii_run.stdout.isascii() and told in ascii_run.stdout, ascii_run.stdout[-2000:]
    if command == "support-bundle":
        assert any(tmp_path.iterdir()), "an ASCII terminal must not keep the bundle from being written"


@pytest.mark.parametrize(
    "argv",
    [
        ["incidents", "--cluster", "c1"],
        ["support-bundle", "--cluster", "c1", "--output-dir", "{tmp}"],
        ["status", "--cluster", "c1"],
        ["history", "--node", "i-0123456789abcdef0"],
        ["sweep-now", "--cluster", "c1"],
    ],
    ids=lambda argv: argv[0],
)
def test_each_aws_command_names_an_html_answer(html_endpoint: str, tmp_path: Path, argv: list[str]) -> None:
    # diagnose is tested above; the others reach AWS through other first calls (DescribeStacks for
    # the monitor's commands), each of which must refuse the page the same way.
    filled = [str(tmp_path) if arg == "{tmp}" else arg for arg in argv]
    run = _hyperpod_nccl(
        *filled,
        "--region",
        "us-west-2",
        AWS_ENDPOINT_URL=html_endpoint,
        AWS_ACCESS_KEY_ID=FAKE_ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=FAKE_SECRET_KEY,
    )
    assert run.returncode == EXIT_PREREQUISITE, run.stderr
    assert "Traceback" not in run.stderr and "not an AWS response" in run.stderr, run.stderr


def test_profile_signs_the_calls_with_that_profiles_keys(emulation, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Two IAM users of the emulation, one per profile: sts:GetCallerIdentity answers the ARN of the
    # user whose key signed it, and `--debug` shows that answer (the wire log, secrets scrubbed).
    iam = emulation.client("iam", "us-west-2")
    users, sections = {}, []
    for profile in ("default", "oncall"):
        name = f"profile-test-{profile}"
        users[profile] = iam.create_user(UserName=name)["User"]["Arn"]
        key = iam.create_access_key(UserName=name)["AccessKey"]
        sections.append(
            f"[{profile}]\naws_access_key_id = {key['AccessKeyId']}\naws_secret_access_key = {key['SecretAccessKey']}\n"
        )
    credentials = tmp_path / "credentials"
    credentials.write_text("\n".join(sections), encoding="utf-8")
    env = _env(AWS_ENDPOINT_URL=emulation.endpoint_url)
    env["AWS_SHARED_CREDENTIALS_FILE"] = str(credentials)

    def history(*flags: str) -> subprocess.CompletedProcess[str]:
        argv = ["history", "--node", "i-0123456789abcdef0", "--table", "no-such-findings", "--region", "us-west-2"]
        return subprocess.run(
            [sys.executable, "-m", "hyperpod_nccl.cli.main", *argv, "--debug", *flags],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

    oncall = history("--profile", "oncall")
    assert "Traceback" not in oncall.stderr and "no table no-such-findings" in oncall.stderr, oncall.stderr
    assert users["oncall"] in oncall.stderr and users["default"] not in oncall.stderr
    default = history()  # the same run without --profile: the default profile's user (the control)
    assert users["default"] in default.stderr and users["oncall"] not in default.stderr


def test_monitor_commands_meet_a_closed_pipe_and_an_ascii_stdout(simulate) -> None:  # type: ignore[no-untyped-def]
    # status, history and sweep-now against a monitor deployed in the emulation (one sweep stored):
    # each prints its answer on stdout, so the closed pipe is met by the command's own write.
    import time
    from datetime import UTC, datetime

    from hyperpod_nccl.models.findings import Finding
    from hyperpod_nccl.monitor.payloads import SweepRef
    from hyperpod_nccl_sim.serverless import TABLE_NAME, LocalMonitor

    with LocalMonitor(simulate("eks-p5"), node_coverage=2) as deployed:
        assert deployed.sweep().status == "SUCCEEDED"
        cluster, region = deployed.simulation.scenario.cluster.name, deployed.region
        # A fault of a node whose title needs more than ASCII (stored as the Aggregate state stores
        # faults), so that history's answer meets the ASCII stdout.
        store = deployed.store()
        [item, *_] = [i for i in store.open_findings(region, cluster) if '"kind":"node"' in str(i["finding"])]
        finding = Finding.model_validate_json(str(item["finding"]))
        finding = finding.model_copy(update={"title": "NCCL stall — 40 µs → references/x.md § 2"})
        [node, *_] = [r.id for r in finding.resources if r.kind == "node"]
        ref = SweepRef(
            sweep_id="unicode-title",
            execution="unicode-title",
            cluster=cluster,
            region=region,
            started_at=datetime.now(UTC),
        )
        store.add_fault_history(ref, {finding.fingerprint: finding}, expires_at=int(time.time()) + 3600)
        table = ["--table", TABLE_NAME]
        commands = {
            "status": ["status", "--cluster", cluster, *table],
            "history": ["history", "--node", node, *table],
            "sweep-now": ["sweep-now", "--cluster", cluster, "--function", deployed.function_arns["trigger"]],
        }
        reach = {"AWS_ENDPOINT_URL": deployed.emulation.endpoint_url, "AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY}
        reach["AWS_SECRET_ACCESS_KEY"] = FAKE_SECRET_KEY
        utf8 = _hyperpod_nccl(*commands["history"], "--region", region, PYTHONIOENCODING="utf-8", **reach)
        assert "40 µs → references/x.md §" in utf8.stdout, utf8.stdout  # more than ASCII reaches stdout
        for command, argv in commands.items():
            read_end, write_end = os.pipe()
            os.close(read_end)
            try:
                closed = _hyperpod_nccl(*argv, "--region", region, stdout=write_end, **reach)
            finally:
                os.close(write_end)
            assert closed.returncode == EXIT_BROKEN_PIPE, (command, closed.stderr)
            assert "Traceback" not in closed.stderr and "BrokenPipe" not in closed.stderr, (command, closed.stderr)
            ascii_run = _hyperpod_nccl(*argv, "--region", region, PYTHONIOENCODING="ascii", **reach)
            assert ascii_run.returncode == EXIT_OK, (command, ascii_run.stderr)
            assert "Traceback" not in ascii_run.stderr and "UnicodeEncodeError" not in ascii_run.stderr, command
            assert ascii_run.stdout.isascii() and ascii_run.stdout.strip(), (command, ascii_run.stdout)
            if command == "history":
                assert "-> references/x.md S 2" in ascii_run.stdout, ascii_run.stdout  # stand-ins, not "?"
        for execution in deployed.executions():  # the sweeps sweep-now started end before the monitor goes
            deployed.wait(execution["executionArn"])
