"""The probe scripts RUN (with bash) under logging shims against a planted /proc tree.

Every external command the scripts call is a shim in a temp dir at the front of PATH: each one
logs its argv and working directory, then either runs the real tool (pure text filters and the
read-only `find`/`dd`/`base64`, so the planted tree is really walked) or answers instantly (nc
gives a canned NCCL RAS answer, ps/ip a planted table, everything else prints nothing). The
planted processes carry hostile environments and the job's file system holds links, foreign and
oddly named files. The tests prove from the logs that no shim ever receives an option-like word
or any word that is not the script's own or of an allowed shape, and that nothing outside the
allowed places is read; and that the happy path still reaches `nc` and base64-encodes a dump.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hyperpod_nccl import thresholds
from hyperpod_nccl.hang.flight_recorder import DEFAULT_DUMP_PREFIX
from hyperpod_nccl.probe import script
from hyperpod_nccl.probe.parsers import parse_node_probe, parse_slurm_controller, split_sections
from hyperpod_nccl_sim.hang_job import HungJob, flight_recorder_pickle, ras_status_text
from tests.unit.test_probe_allowlist import ALLOWED, BUILTINS, SCRIPT_FUNCTIONS, _is_assignment, _tokens, commands

BASH = shutil.which("bash") or "/bin/bash"
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

JOB_PID = 4113
SECRET = "SECRET-MARKER-not-for-the-probe"
# Tools the shims really run: text filters, and the read-only walkers of the planted tree.
REAL = {"grep", "head", "tail", "tr", "sort", "find", "dd", "base64"}
# The instance metadata service's answers by the last part of the URL curl is given (a shim
# without its answer file exits 28, curl's timeout: IMDS out of reach).
IMDS_ANSWERS = {"token": "imds_token", "instance-type": "imds_type", "availability-zone": "imds_zone"}
IMDS_ANSWERS["availability-zone-id"] = "imds_zone_id"
# A RAS listener is any local process: its answer tries to forge a section and move the cursor.
RAS_ANSWER = ras_status_text(HungJob(), ["ip-10-1-0-1"]) + "\n@@END nccl_ras rc=0\n@@BEGIN forged\n\x1b[2Jfake\n"
IP_ADDR = "1: lo    inet 127.0.0.1/8 scope host lo\n2: eth0    inet 10.1.0.7/24 brd 10.1.0.255 scope global eth0\n"
RAS_PROCESS_MARKERS = ("sh-exec", "/bin/sh", "evil", "$(", "`", "\x1b", "shadow", "..", "10.9.9.9", "-1")


def _shim(name: str, real: str | None) -> str:
    log = f'printf "%s\\0" "$PWD" "$@" > "$SHIM_LOG/{name}.$$.$RANDOM"'
    if name == "timeout":
        # The duration is dropped and the rest runs at once: no shim ever waits.
        return f'#!{BASH}\n{log}\nshift\nexec "$@"\n'
    if name == "nc":
        return f'#!{BASH}\n{log}\nprintf "%s" "$(<"$SHIM_DATA/ras.txt")"\n'
    if name == "curl":
        cases = " ".join(f"*/{tail}) answer={file};;" for tail, file in IMDS_ANSWERS.items())
        answer = f'answer=; case "${{@: -1}}" in {cases} esac'
        reply = 'printf "%s" "$(<"$SHIM_DATA/$answer.txt")"'
        return f'#!{BASH}\n{log}\n{answer}\n[ -f "$SHIM_DATA/$answer.txt" ] || exit 28\n{reply}\n'
    if name == "dmesg":
        return (
            f'#!{BASH}\n{log}\n[ -f "$SHIM_DATA/dmesg.txt" ] || exit 0\nprintf "%s\\n" "$(<"$SHIM_DATA/dmesg.txt")"\n'
        )
    if name == "nvidia-smi":  # answers `-q -x` from a planted document; every other use: not installed
        planted = '[ "$1" = -q ] && [ -f "$SHIM_DATA/nvidia_smi.txt" ] || exit 127'
        return f'#!{BASH}\n{log}\n{planted}\nprintf "%s\\n" "$(<"$SHIM_DATA/nvidia_smi.txt")"\n'
    if name in ("ps", "ip", "sinfo", "squeue"):
        return f'#!{BASH}\n{log}\nprintf "%s\\n" "$(<"$SHIM_DATA/{name}.txt")"\n'
    if real is not None:
        return f'#!{BASH}\n{log}\nexec {shlex.quote(real)} "$@"\n'
    return f"#!{BASH}\n{log}\nexit 127\n"


@dataclass
class Call:
    tool: str
    cwd: str
    argv: list[str]


@dataclass
class Run:
    output: str
    calls: list[Call]
    sandbox: Path
    text: str = ""
    sections: dict[str, list[str]] = field(default_factory=dict)

    def of(self, tool: str) -> list[Call]:
        return [c for c in self.calls if c.tool == tool]


def _hang_sections() -> str:
    """The node probe's header (PATH, section markers) and its hang-attribution sections, as
    written: the many runs below need only those, the full script runs in the others."""
    text = script("node")
    header = text[: text.index("\n", text.index("\nend() {") + 1) + 1]  # through the `end` line
    return header + text[text.index("# Hang attribution (read-only).") :]


def _run(
    role: str, sandbox: Path, *, whole: bool = True, ps: str | None = None, answers: dict[str, str] | None = None
) -> Run:
    shims, log, data = sandbox / "shims", sandbox / "log", sandbox / "data"
    for path in (shims, log, data):
        path.mkdir(exist_ok=True)
    names = ALLOWED | {"timeout"}
    # Every command the script names has a shim, so none of the node's real tools can run.
    named = {c[2] if c[0] == "timeout" else c[0] for c in commands(script(role)) if not _is_assignment(c[0])}
    assert named - names <= BUILTINS | SCRIPT_FUNCTIONS, named - names
    for name in names:
        shim = shims / name
        shim.write_text(_shim(name, shutil.which(name) if name in REAL else None))
        shim.chmod(0o755)
    (data / "ras.txt").write_text(RAS_ANSWER)
    (data / "ip.txt").write_text(IP_ADDR)
    (data / "ps.txt").write_text(ps if ps is not None else f"{JOB_PID:>7} python\n")
    for name, text in (answers or {}).items():  # IMDS answers, the kernel log
        (data / f"{name}.txt").write_text(text)
    (data / "sinfo.txt").write_text("ip-10-1-0-1|ip-10-1-0-1|10.1.0.1|drained|\x1b]0;pwned\x07bad\rnode")
    (data / "squeue.txt").write_text("12|\x1b[2Jtrain\x9b|PENDING|Resources")
    env = {
        "PATH": str(shims),
        "SHIM_LOG": str(log),
        "SHIM_DATA": str(data),
        "HYPERPOD_NCCL_PROBE_PROC_ROOT": str(sandbox / "proc"),
        "LC_ALL": "C",
    }
    text = script(role) if whole else _hang_sections()
    done = subprocess.run(
        [BASH, "-c", text], env=env, capture_output=True, text=True, timeout=60, cwd=sandbox, check=False
    )
    calls = []
    for entry in sorted(log.iterdir()):
        words = entry.read_bytes().decode("utf-8", "replace").split("\0")[:-1]
        calls.append(Call(tool=entry.name.split(".", 1)[0], cwd=words[0], argv=words[1:]))
    run = Run(output=done.stdout, calls=calls, sandbox=sandbox, text=script(role))
    run.sections = {name: s.lines for name, s in split_sections(done.stdout).items()}
    return run


def _static_words(text: str) -> set[str]:
    """Every word the script itself spells (the only option-like words a tool may receive)."""
    words: set[str] = set()
    for line in text.splitlines():
        if line.strip() and not line.strip().startswith("#"):
            words |= set(_tokens(line))
    return words


def _process(proc: Path, pid: int, env: dict[str, str], comm: str = "python", uid: int = 0) -> Path:
    """A planted /proc/<pid>: environ (NUL-separated), comm, status, and a root directory."""
    directory = proc / str(pid)
    (directory / "root" / "tmp").mkdir(parents=True, exist_ok=True)
    (directory / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
    (directory / "comm").write_text(comm + "\n")
    (directory / "status").write_text(f"Name:\t{comm}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    return directory / "root"


def _assert_no_hostile_word(run: Run, markers: tuple[str, ...] = RAS_PROCESS_MARKERS) -> None:
    """No option-like word a tool receives is one the script did not spell, and no word that is
    not the script's own carries a hostile marker or a control character."""
    static = _static_words(run.text)
    for call in run.calls:
        for word in call.argv:
            if word in static:
                continue
            assert not word.startswith("-"), f"{call.tool} got option-like {word!r}"
            planted = word.replace(str(run.sandbox), "<sandbox>")  # the temp dir's own name is no value
            assert not any(m in planted for m in markers), f"{call.tool} got {word!r}"
            assert not re.search(r"[\x00-\x1f\x7f]", word), f"{call.tool} got {word!r}"


def _reads(run: Run) -> list[tuple[str, Path]]:
    """(tool, path) for every file or directory a reading tool was pointed at by a word the
    script does not spell itself, resolved against the tool's working directory."""
    static = _static_words(run.text)
    paths: list[tuple[str, Path]] = []
    for call in run.calls:
        words = [w for w in call.argv if w not in static]
        if call.tool == "dd":
            paths += [(call.tool, Path(call.cwd, w.removeprefix("if="))) for w in words if w.startswith("if=")]
        elif call.tool == "find":
            paths += [(call.tool, Path(call.cwd, w)) for w in call.argv if w == "."]
        else:
            paths += [(call.tool, Path(call.cwd, w)) for w in words if w.startswith("/")]
    return paths


def _assert_reads_stay_inside(run: Run, walk: list[Path]) -> None:
    """find only lists the directories of `walk` (the job's root down to its dump directory), dd
    only reads files of the last one; other tools only /proc/<pid>/{environ,status,limits} of the
    planted tree; no secret reaches the output."""
    proc = (run.sandbox / "proc").resolve()
    walk = [p.resolve() for p in walk]
    for tool, path in _reads(run):
        real = Path(os.path.realpath(path))
        if tool == "find":
            assert real in walk, f"find listed {path}"
        elif tool == "dd":
            assert real.parent == walk[-1] and not Path(path).is_symlink(), f"dd read {path}"
        else:
            assert real.parent.parent == proc and real.name in ("environ", "status", "limits"), f"{tool} read {path}"
        if real.is_file():
            assert SECRET not in real.read_text(errors="replace"), f"{tool} read {path}"
    assert SECRET not in run.output
    assert base64.b64encode(SECRET.encode()).decode()[:16] not in run.output


def _happy_tree(sandbox: Path) -> tuple[Path, bytes]:
    """The job of the happy path: a valid RAS address and prefix, one valid dump among hostile
    neighbours, and lower/higher pids that are not the preferred job."""
    proc = sandbox / "proc"
    env = {"RANK": "13", "NCCL_RAS_ADDR": "127.0.0.1:28028", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": DEFAULT_DUMP_PREFIX}
    root = _process(proc, JOB_PID, env)
    _process(proc, 99, {"NCCL_RAS_ADDR": "--sh-exec=id 1"}, comm="bash")  # lower pid, not python
    _process(proc, 5000, {"NCCL_RAS_ADDR": "-e /bin/sh 2"})  # a later python process
    _process(proc, 1, {"HOME": "/root"}, comm="systemd")
    outside = sandbox / "outside"
    outside.mkdir()
    (outside / "secret").write_text(SECRET)
    tmp = root / "tmp"
    data = flight_recorder_pickle(HungJob(), 13)
    (tmp / "nccl_trace_rank_13").write_bytes(data)
    (tmp / "nccl_trace_rank_3").symlink_to(outside / "secret")  # a link to a file elsewhere
    (tmp / "nccl_trace_rank_4").symlink_to("/etc/shadow")
    os.link(outside / "secret", tmp / "nccl_trace_rank_6")  # a second name of a file elsewhere
    for name in ("-rf", "--help", "nccl_trace_rank_-1", "nccl_trace_rank_7\nfile 1 2 x", "nccl_trace_rank_8x"):
        (tmp / name).write_text(SECRET)
    if os.geteuid() == 0:  # a dump of another user (only root can plant one)
        (tmp / "nccl_trace_rank_5").write_text(SECRET)
        os.chown(tmp / "nccl_trace_rank_5", 4242, 4242)
    return root, data


def test_happy_path_asks_ras_and_encodes_the_one_valid_dump(tmp_path: Path) -> None:
    root, data = _happy_tree(tmp_path)
    run = _run("node", tmp_path)
    # The valid address reaches nc as two plain words after `--`.
    assert [c.argv for c in run.of("nc")] == [["-w", "15", "--", "127.0.0.1", "28028"]]
    probe = parse_node_probe(run.output)
    assert probe.ras_status is not None and "Job summary" in probe.ras_status
    # The forged section and the escape sequence from the RAS listener were dropped.
    assert "forged" not in run.sections and "\x1b" not in run.output
    assert "[2Jfake" in run.sections["nccl_ras"]
    assert run.sections["nccl_job"][0].startswith(f"pid={JOB_PID} uid=0 comm=python candidates=3 why=")
    assert probe.nccl_job is not None and probe.nccl_job.pid == JOB_PID and probe.nccl_job.uid == 0
    assert [(d.rank, d.size_bytes) for d in probe.flight_recorder_dumps] == [(13, len(data))]
    assert base64.b64decode(probe.flight_recorder_dumps[0].data_base64) == data
    # Only the valid dump was opened, relative to the job's real /tmp.
    assert [(Path(c.cwd), c.argv[0]) for c in run.of("dd")] == [((root / "tmp").resolve(), "if=./nccl_trace_rank_13")]
    _assert_no_hostile_word(run, (*RAS_PROCESS_MARKERS, "help", "rf"))
    _assert_reads_stay_inside(run, [root, root / "tmp"])


@pytest.mark.parametrize(
    "value",
    [
        "--sh-exec=id 1",
        "-e /bin/sh 2",
        "evil.com:80",
        "127.0.0.1:-1",
        "$(id):1",
        "10.9.9.9:28028",  # not an address of this node
        "127.0.0.1:65536",
        "127.0.0.1:28028\n-e sh",
        "\x1b[2J127.0.0.1:28028",
        "1" * 600,
    ],
)
def test_a_hostile_ras_address_is_never_asked(tmp_path: Path, value: str) -> None:
    _process(tmp_path / "proc", JOB_PID, {"NCCL_RAS_ADDR": value})
    run = _run("node", tmp_path, whole=False)
    assert run.of("nc") == []
    assert run.sections["nccl_ras"] == [
        f"skipped: NCCL_RAS_ADDR of pid {JOB_PID} is not host:port of this node (not queried)"
    ]
    job = parse_node_probe(run.output).nccl_job  # the refusal reaches hang.evidence_source
    assert job is not None and set(job.refused) == {"NCCL_RAS_ADDR"}
    _assert_no_hostile_word(run)


@pytest.mark.parametrize(
    ("value", "host", "port"),
    [("10.1.0.7:29000", "10.1.0.7", "29000"), ("0.0.0.0:28028", "127.0.0.1", "28028"), ("[::1]:00080", "::1", "80")],
)
def test_an_address_of_this_node_is_asked(tmp_path: Path, value: str, host: str, port: str) -> None:
    _process(tmp_path / "proc", JOB_PID, {"NCCL_RAS_ADDR": value})
    run = _run("node", tmp_path, whole=False)
    assert [c.argv for c in run.of("nc")] == [["-w", "15", "--", host, port]]


@pytest.mark.parametrize(
    "prefix",
    [
        "/../../etc/shadow",
        "/tmp/../etc/",
        "relative",
        "/tmp//nccl_",
        "/tmp/nccl_\n",
        "/tmp/\x1b[2Jnccl_",
        "/tmp/-rf/nccl_",
        "/" + "a" * 300,
    ],
)
def test_a_hostile_dump_prefix_falls_back_to_the_default_and_says_why(tmp_path: Path, prefix: str) -> None:
    root = _process(tmp_path / "proc", JOB_PID, {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": prefix})
    (root / "tmp" / "nccl_trace_rank_0").write_bytes(b"dump")
    run = _run("node", tmp_path, whole=False)
    lines = run.sections["flight_recorder"]
    assert lines[0] == (
        f"skipped: TORCH_NCCL_DEBUG_INFO_TEMP_FILE of pid {JOB_PID} not a plain absolute path "
        f"(reading the default {DEFAULT_DUMP_PREFIX})"
    )
    assert lines[1].startswith("file ") and lines[1].endswith("/tmp/nccl_trace_rank_0")
    probe = parse_node_probe(run.output)
    assert probe.flight_recorder_error is not None
    assert probe.nccl_job is not None and set(probe.nccl_job.refused) == {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}
    _assert_no_hostile_word(run, ("..", "\x1b", "shadow", "etc", "rf", "relative", " "))
    _assert_reads_stay_inside(run, [root, root / "tmp"])


@pytest.mark.parametrize("linked", ["tmp", "tmp/traces"])
def test_a_linked_directory_on_the_way_to_the_dumps_is_not_entered(tmp_path: Path, linked: str) -> None:
    root = _process(tmp_path / "proc", JOB_PID, {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/tmp/traces/rank_"})
    outside = tmp_path / "outside"
    (outside / "traces").mkdir(parents=True)
    for directory in (outside, outside / "traces"):
        (directory / "rank_0").write_text(SECRET)
    if linked == "tmp":
        shutil.rmtree(root / "tmp")
        (root / "tmp").symlink_to(outside)
    else:
        (root / "tmp" / "traces").symlink_to(outside / "traces")
    run = _run("node", tmp_path, whole=False)
    assert run.of("dd") == [] and run.of("base64") == []
    assert run.sections["flight_recorder"] == [
        f"skipped: /tmp/traces/ is not a directory reached without links in the root of pid {JOB_PID}"
    ]
    _assert_reads_stay_inside(run, [root] if linked == "tmp" else [root, root / "tmp"])


def test_without_a_job_nothing_is_read_and_the_default_ras_port_is_asked(tmp_path: Path) -> None:
    _process(tmp_path / "proc", 1, {"HOME": "/root"}, comm="systemd")
    (tmp_path / "proc" / "1" / "root" / "tmp" / "nccl_trace_rank_0").write_text(SECRET)
    run = _run("node", tmp_path)
    assert run.sections["nccl_job"] == ["none: no process carries NCCL or TORCH_NCCL settings"]
    assert run.sections["flight_recorder"] == [
        "skipped: no NCCL job runs on this node (no Flight Recorder dump to read)"
    ]
    # (the one other find lists the fixed DCGM log directory for the newest nvvs log: no job's file)
    assert [c for c in run.of("find") if "/var/log/nvidia-dcgm" not in c.argv] == [] and run.of("dd") == []
    assert [c.argv for c in run.of("nc")] == [["-w", "15", "--", "localhost", "28028"]]
    assert parse_node_probe(run.output).nccl_job is None


def test_environment_values_are_bounded_printable_ascii(tmp_path: Path) -> None:
    _process(tmp_path / "proc", JOB_PID, {"NCCL_DEBUG": "INFO\x1b]52;c;cGF5bG9hZA==\x07", "RANK": "7" * 400})
    run = _run("node", tmp_path, whole=False)
    env_lines = run.sections["nccl_job_env"]
    assert all(re.fullmatch(r"[ -~]{1,400}", line) for line in env_lines), env_lines
    assert max(len(line.split("=", 1)[1]) for line in env_lines) <= 256


def test_the_scripts_caps_match_the_thresholds() -> None:
    text = script("node")
    assert f"fr_prefix={DEFAULT_DUMP_PREFIX}\n" in text
    assert f"-size -{thresholds.FLIGHT_RECORDER_MAX_BYTES >> 10}k " in text
    assert f"bs=1M count={thresholds.FLIGHT_RECORDER_MAX_BYTES >> 20} " in text
    assert f"| head -n {thresholds.FLIGHT_RECORDER_MAX_FILES} |" in text
    assert f"head -c {thresholds.RAS_STATUS_MAX_BYTES}" in text


def test_the_slurm_controller_probe_passes_no_runtime_value_to_any_tool(tmp_path: Path) -> None:
    run = _run("slurm_controller", tmp_path)
    static = _static_words(run.text)
    assert run.calls and all(word in static for call in run.calls for word in call.argv)
    # Node reasons and job names (any user's) lose their control characters on the node.
    slurm = parse_slurm_controller(run.output)
    assert [(n.name, n.reason) for n in slurm.nodes] == [("ip-10-1-0-1", "]0;pwnedbadnode")]
    # A C1 control is a multi-byte character tr cannot see: the renderers' sanitizer shows it.
    assert [q.name for q in slurm.queue] == ["[2Jtrain\x9b"]
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", run.output)


@pytest.mark.parametrize(
    "value, planted, expected",
    [
        ("/opt/amazon/ofi-nccl/lib/libnccl-net.so", True, "present /opt/amazon/ofi-nccl/lib/libnccl-net.so"),
        ("/opt/amazon/ofi-nccl/lib/libnccl-net.so", False, "absent /opt/amazon/ofi-nccl/lib/libnccl-net.so"),
        ("aws-ofi", False, "name aws-ofi"),
        ("/opt/../../etc/shadow", False, "not a plain path or name"),
        ("$(id) `id` --evil", False, "not a plain path or name"),
    ],
)
def test_the_jobs_net_plugin_file_is_tested_in_its_root_and_never_read(
    tmp_path: Path, value: str, planted: bool, expected: str
) -> None:
    # original probe 18: NCCL_NET_PLUGIN pointing at a missing file is a failure
    root = _process(tmp_path / "proc", JOB_PID, {"RANK": "0", "NCCL_NET_PLUGIN": value})
    if planted:
        plugin = root / "opt/amazon/ofi-nccl/lib/libnccl-net.so"
        plugin.parent.mkdir(parents=True)
        plugin.write_text(SECRET)
    run = _run("node", tmp_path, whole=False)
    assert run.sections["nccl_net_plugin"] == [expected]
    _assert_no_hostile_word(run, (*RAS_PROCESS_MARKERS, "shadow", "evil", "id`"))
    assert SECRET not in run.output
    probe = parse_node_probe(run.output)
    if expected.startswith(("present", "absent")):
        assert (probe.nccl_net_plugin, probe.nccl_net_plugin_present) == (value, planted)
    else:
        assert (probe.nccl_net_plugin, probe.nccl_net_plugin_present) == (None, None)


def test_process_limits_are_read_for_the_job_and_the_daemons_only(tmp_path: Path) -> None:
    # issue 17, point 3: every training process and the job-starting daemons, from /proc/<pid>/limits
    rows = "Max locked memory         65536                65536                bytes     \n"
    _process(tmp_path / "proc", JOB_PID, {"RANK": "0", "NCCL_DEBUG": "WARN"})
    (tmp_path / "proc" / str(JOB_PID) / "limits").write_text(rows)
    # a second rank, unlimited; a bash with NCCL settings (not a training process); a forged comm
    _process(tmp_path / "proc", 5000, {"RANK": "1", "NCCL_DEBUG": "WARN"})
    (tmp_path / "proc" / "5000" / "limits").write_text(rows.replace("65536 ", "unlimited", 2))
    _process(tmp_path / "proc", 99, {"NCCL_DEBUG": "INFO"}, comm="bash")
    (tmp_path / "proc" / "99" / "limits").write_text(rows)
    for pid, comm in ((812, "containerd"), (900, "sshd")):
        _process(tmp_path / "proc", pid, {}, comm=comm)
        (tmp_path / "proc" / str(pid) / "limits").write_text(rows)
    # ps lists a job-starting daemon, a process of no interest, and a forged comm
    ps = f"{JOB_PID:>7} python\n    812 containerd\n    900 sshd\n   901 -e containerd\n"
    run = _run("node", tmp_path, whole=False, ps=ps)
    limits = parse_node_probe(run.output).process_limits
    assert limits is not None
    assert [(p.role, p.pid, p.command, p.memlock_kib, p.memlock_unlimited) for p in limits] == [
        ("job", JOB_PID, "python", 64, False),
        ("job", 5000, "python", None, True),
        ("container_runtime", 812, "containerd", 64, False),
    ]
    read = [w for c in run.of("grep") for w in c.argv if w.endswith("/limits")]
    assert sorted(read) == sorted(str(tmp_path / "proc" / str(pid) / "limits") for pid in (JOB_PID, 5000, 812))
    _assert_no_hostile_word(run)


IMDS_TOKEN = "AQAEAFbC5a0Yw2m9vO3Hn1Xk0c7QZq8rT4uWyEiPpLdGsJfK1w=="
IMDS_HEALTHY = {
    "imds_token": IMDS_TOKEN,
    "imds_type": "p5.48xlarge",
    "imds_zone": "us-west-2a",
    "imds_zone_id": "usw2-az1",
}


def _curl_urls(run: Run) -> list[str]:
    return [call.argv[-1] for call in run.of("curl")]


def test_imds_values_are_asked_with_a_token_and_printed_when_of_their_shape(tmp_path: Path) -> None:
    # issue 17, point 7 (original probe 1): the instance type and zone from IMDSv2
    run = _run("node", tmp_path, answers=IMDS_HEALTHY)
    assert run.sections["imds"] == [
        "instance-type p5.48xlarge",
        "availability-zone us-west-2a",
        "availability-zone-id usw2-az1",
    ]
    identity = parse_node_probe(run.output).host_identity
    assert identity is not None
    assert (identity.instance_type, identity.availability_zone, identity.availability_zone_id) == (
        "p5.48xlarge",
        "us-west-2a",
        "usw2-az1",
    )
    base = "http://169.254.169.254/latest/"
    assert _curl_urls(run) == [
        f"{base}api/token",
        f"{base}meta-data/instance-type",
        f"{base}meta-data/placement/availability-zone",
        f"{base}meta-data/placement/availability-zone-id",
    ]
    for call in run.of("curl"):  # bounded, never through a proxy; the token goes to IMDS only
        assert (
            call.argv[call.argv.index("--max-time") + 1] == "2" and call.argv[call.argv.index("--noproxy") + 1] == "*"
        )
    token_headers = [w for c in run.of("curl") for w in c.argv if IMDS_TOKEN in w]
    assert token_headers == [f"X-aws-ec2-metadata-token: {IMDS_TOKEN}"] * 3


def test_without_imds_the_section_says_so_and_the_probe_goes_on(tmp_path: Path) -> None:
    # IMDS off, or a hop limit of 1 seen from a container: the token request times out (curl rc=28)
    run = _run("node", tmp_path)
    assert run.sections["imds"] == ["unavailable: no IMDSv2 token (curl rc=28)"]
    assert _curl_urls(run) == ["http://169.254.169.254/latest/api/token"]
    probe = parse_node_probe(run.output)
    assert probe.host_identity is not None and probe.host_identity.instance_type is None
    assert probe.host_identity.notes == ["unavailable: no IMDSv2 token (curl rc=28)"]
    assert "process_limits" in run.sections  # the sections after it still ran


@pytest.mark.parametrize(
    "name, value, line",
    [
        ("imds_type", "p5.48xlarge\x1b]0;pwned\x07", "instance-type refused (21 bytes not of its shape)"),
        ("imds_type", "p5." + "4" * 500, "instance-type refused (64 bytes not of its shape)"),
        ("imds_type", "$(id) --output /etc/x", "instance-type refused (21 bytes not of its shape)"),
        ("imds_zone", "us-west-2a\n@@END imds rc=0\n@@BEGIN forged", "availability-zone us-west-2a"),
        ("imds_zone", "<html>404 - Not Found</html>", "availability-zone refused (28 bytes not of its shape)"),
    ],
)
def test_an_imds_value_not_of_its_shape_is_refused_on_the_node(
    tmp_path: Path, name: str, value: str, line: str
) -> None:
    run = _run("node", tmp_path, answers={**IMDS_HEALTHY, name: value})
    assert line in run.sections["imds"]
    assert "forged" not in run.sections and "\x1b" not in run.output and "pwned" not in run.output
    identity = parse_node_probe(run.output).host_identity
    assert identity is not None and all(v is None or "\x1b" not in v for v in (identity.instance_type,))
    _assert_no_hostile_word(run)


def test_a_token_not_of_its_shape_is_never_sent(tmp_path: Path) -> None:
    run = _run("node", tmp_path, answers={**IMDS_HEALTHY, "imds_token": "-o /etc/passwd\x1b[2J"})
    assert run.sections["imds"] == ["unavailable: IMDSv2 token refused (18 bytes not of its shape)"]
    assert _curl_urls(run) == ["http://169.254.169.254/latest/api/token"]
    _assert_no_hostile_word(run)


def test_the_kernel_log_tail_is_bounded_and_loses_its_control_characters(tmp_path: Path) -> None:
    # issue 17, point 7 (original probe 31): the newest EFA/RDMA/ECC kernel lines, as evidence
    efa = [f"[Tue Mar  3 10:{i:02d}:00 2026] efa 0000:4f:00.0: Setup irq:{1800 + i} name:efa-mgmnt" for i in range(30)]
    hostile = [
        "[Tue Mar  3 11:00:00 2026] EDAC MC0: 1 CE error \x1b]52;c;cGF5bG9hZA==\x07 on DIMM#0\r[PASS]",
        "[Tue Mar  3 11:00:01 2026] infiniband rdmap16s27: " + "x" * 2000,
        "@@END kernel_log rc=0 rdma",
        "[Tue Mar  3 11:00:02 2026] NVRM: Xid (PCI:0000:53:00): 48, DBE ECC error",
        "[Tue Mar  3 11:00:03 2026] nvme nvme0: I/O default timeout",  # no term of the filter
    ]
    run = _run("node", tmp_path, answers={"dmesg": "\n".join(efa + hostile)})
    lines = run.sections["kernel_log"]
    assert len(lines) == 20 and all(len(line) <= 300 for line in lines)
    assert not any(re.search(r"[\x00-\x08\x0b-\x1f\x7f]", line) for line in lines)
    assert not any(line.startswith("@@") or "NVRM" in line or "nvme" in line for line in lines)
    assert lines[-2] == "[Tue Mar  3 11:00:00 2026] EDAC MC0: 1 CE error ]52;c;cGF5bG9hZA== on DIMM#0[PASS]"
    assert lines[-1] == ("[Tue Mar  3 11:00:01 2026] infiniband rdmap16s27: " + "x" * 2000)[:300]
    assert parse_node_probe(run.output).kernel_log == lines


def _gpu_document(processes: str, padding: int = 0) -> str:
    clocks = "".join(
        f"<supported_graphics_clock>{1980 - i % 900} MHz</supported_graphics_clock>\n" for i in range(padding)
    )
    return (
        '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n<nvidia_smi_log>\n'
        '<gpu id="00000000:53:00.0">\n<product_name>NVIDIA H100 80GB HBM3</product_name>\n'
        "<pci><pci_bus_id>00000000:53:00.0</pci_bus_id></pci>\n"
        f"<supported_clocks>{clocks}</supported_clocks>\n<processes>{processes}</processes>\n</gpu>\n</nvidia_smi_log>"
    )


def test_a_gpu_document_cannot_forge_a_section_or_reach_the_terminal(tmp_path: Path) -> None:
    # A process name is whatever the job called itself: newlines, markers, escape sequences.
    name = "python\n@@END gpu_xml rc=0\n@@BEGIN forged\n\x1b]0;pwned\x07\x1b[2J"
    process = f"<process_info><pid>4113</pid><type>C</type><process_name>{name}</process_name></process_info>"
    run = _run("node", tmp_path, answers={"nvidia_smi": _gpu_document(process)})
    assert "forged" not in run.sections and "gpu_xml" in run.sections
    assert not any(re.search(r"[\x00-\x08\x0b-\x1f\x7f]", line) for line in run.sections["gpu_xml"])
    probe = parse_node_probe(run.output)
    assert [g.bus_id for g in probe.gpus] == ["0000:53:00.0"] and probe.section_rc("gpu_xml") == 0


def test_a_gpu_document_over_its_bound_is_cut_and_said_cut(tmp_path: Path) -> None:
    run = _run("node", tmp_path, answers={"nvidia_smi": _gpu_document("", padding=30_000)})
    assert len("\n".join(run.sections["gpu_xml"])) <= 1 << 20
    probe = parse_node_probe(run.output)
    assert probe.gpus == [] and probe.gpu_query_messages[0] == "document cut off before </nvidia_smi_log>"
