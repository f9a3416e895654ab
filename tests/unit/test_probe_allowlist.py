"""The probe scripts run only read-only tools, each external one under `timeout`."""

from __future__ import annotations

import re
import shlex

import pytest

from hyperpod_nccl.probe import SCRIPTS, script

# Read-only tools the probes may run. Dual-use tools are constrained by ARGUMENT_RULES below.
ALLOWED = {
    "uname",
    "hostname",
    "nvidia-smi",
    "grep",
    "head",
    "tail",
    "dmesg",
    "journalctl",
    "dcgmi",
    "ls",
    "lspci",
    "cat",
    "lsmod",
    "fi_info",
    "ip",
    "df",
    "ps",
    "iptables",
    "scontrol",
    "systemctl",
    "sinfo",
    "squeue",
    # Hang attribution: `nc` only as a client of the node-local NCCL RAS port (no listen/exec
    # options, see ARGUMENT_RULES); `find` only lists Flight Recorder dumps (no -delete/-exec);
    # `base64` encodes a dump to stdout; `tr` turns /proc/<pid>/environ's NULs into newlines.
    "nc",
    "find",
    "base64",
    "tr",
    # EFA latency (original probe 34): `fi_pingpong` only between a server and a client on the
    # node itself (loopback, see LOOPBACK_ONLY); it sends a few hundred small test messages and
    # changes no state. `sleep` gives the background server time to listen.
    "fi_pingpong",
    "sleep",
}
# Shell builtins and the script's own section markers (no process is started).
BUILTINS = {"export", "ulimit", "printf", "begin", "end", "timeout", "shopt", "read", "done", "[", "return"}
# The script's own one-line functions: their bodies are checked like any other line.
SCRIPT_FUNCTIONS = {"begin", "end", "pingpong"}
# Shell keywords that prefix a command in a one-line loop/conditional (`for ...; do cmd; done`).
KEYWORD_PREFIXES = {"do", "then", "else"}
# Arguments a dual-use tool must (or must not) carry to stay read-only.
ARGUMENT_RULES: dict[str, tuple[set[str], set[str]]] = {
    # tool: (at least one of these must appear, none of these may appear)
    "nvidia-smi": (set(), {"-r", "--gpu-reset", "-pm", "-e", "-c", "-ac", "-rac", "-pl", "-mig", "-lgc", "-rgc"}),
    "iptables": ({"-S", "-L"}, {"-A", "-D", "-I", "-F", "-X", "-P", "-N", "-R", "-Z"}),
    "systemctl": ({"is-active", "status", "show"}, set()),
    "scontrol": ({"ping", "show"}, set()),
    "dcgmi": ({"--check", "discovery"}, {"-s", "--set", "diag", "-r"}),
    "ip": ({"addr", "link"}, {"set", "add", "del", "delete", "flush"}),
    "journalctl": (set(), {"--vacuum-size", "--vacuum-time", "--rotate", "--flush"}),
    "dmesg": (set(), {"-c", "-C", "--clear", "-n"}),
    "nc": (set(), {"-l", "--listen", "-e", "--exec", "-c", "--sh-exec", "-k", "--keep-open", "-o", "--output"}),
    "find": (
        set(),
        {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"},
    ),
    "base64": (set(), {"-d", "--decode"}),
}
# Builtins that cannot hang and so need no timeout.
NO_TIMEOUT_NEEDED = {"export", "ulimit", "printf", "begin", "end", "shopt", "read", "done", "[", "return", "pingpong"}
# Traffic generators that may only talk to the node itself: options with a value, and the one
# server address they may be given.
LOOPBACK_ONLY = {"fi_pingpong": ({"-p", "-e", "-I", "-S", "-B", "-P", "-d", "-m", "-s"}, "127.0.0.1")}
# Stream filters that only read their stdin, so end when their producer (under timeout) ends.
STDIN_FILTERS = {"grep", "head", "tail", "tr"}


_SEPARATORS = {"|", "||", "&&", ";", "&"}


def _tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def commands(text: str) -> list[list[str]]:
    """Every simple command of the script (quote-aware split on pipes, `;`, `&&`, `||`), function
    bodies included, with redirections removed."""
    found = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        body = re.match(r"^\w+\(\) \{ (.*); \}$", line)
        if body:
            line = body.group(1)
        assert "$(" not in line and "`" not in line, f"command substitution hides commands: {line}"
        current: list[str] = []
        tokens = iter(_tokens(line))
        for token in tokens:
            if token in _SEPARATORS:
                if current:
                    found.append(current)
                current = []
            elif token.startswith((">", "<")) or token in (">&", "2>&"):
                next(tokens, None)  # the redirect target
            elif re.fullmatch(r"\d", token) and current and current[-1] == token:
                continue
            else:
                current.append(token)
        if current:
            found.append(current)
    # `2>&1` tokenises as "2", ">&", "1": drop the stray file-descriptor digits.
    cleaned = [[w for i, w in enumerate(c) if not (w.isdigit() and i == len(c) - 1 and len(w) == 1)] for c in found]
    # `do cmd` / `then cmd` run `cmd`; a `for name in words` header starts no process.
    cleaned = [c[1:] if c and c[0] in KEYWORD_PREFIXES else c for c in cleaned]
    return [c for c in cleaned if c and c[0] != "for"]


def _positional(args: list[str], with_value: set[str]) -> list[str]:
    """Arguments that are neither options nor option values."""
    positional, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg.startswith("-"):
            skip = arg in with_value
        else:
            positional.append(arg)
    return positional


def redirect_targets(text: str) -> list[str]:
    """Targets of output redirections in the script's commands (comments ignored)."""
    targets = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        tokens = _tokens(line)
        for index, token in enumerate(tokens):
            if token.startswith(">") and index + 1 < len(tokens):
                targets.append(token[1:] + tokens[index + 1] if token != ">" else tokens[index + 1])
    return targets


@pytest.mark.parametrize("role", sorted(SCRIPTS))
def test_scripts_use_only_allowlisted_read_only_commands(role: str) -> None:
    text = script(role)
    for words in commands(text):
        if "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
            continue  # plain assignment
        tool = words[0]
        if tool == "timeout":
            assert re.fullmatch(r"\d+", words[1]), words
            tool, args = words[2], words[3:]
        else:
            args = words[1:]
            assert tool in NO_TIMEOUT_NEEDED or tool in STDIN_FILTERS, f"{tool} runs without timeout"
        assert tool in ALLOWED | BUILTINS | SCRIPT_FUNCTIONS, f"{tool} is not on the read-only allowlist"
        if tool in LOOPBACK_ONLY:
            assert _positional(args, LOOPBACK_ONLY[tool][0]) in ([], [LOOPBACK_ONLY[tool][1]]), f"{tool} {args}"
        required, forbidden = ARGUMENT_RULES.get(tool, (set(), set()))
        assert not forbidden & set(args), f"{tool} {args} uses a state-changing option"
        if required:
            assert required & set(args), f"{tool} {args} lacks a read-only subcommand"


@pytest.mark.parametrize("role", sorted(SCRIPTS))
def test_scripts_never_write_files(role: str) -> None:
    assert redirect_targets(script(role))  # the scripts do redirect (stderr into stdout) ...
    for target in redirect_targets(script(role)):
        assert target in ("&1", "/dev/null"), f"redirect to {target!r}"  # ... but never into a file


def test_the_checker_rejects_a_state_changing_command() -> None:
    # Guard against a checker that accepts everything.
    bad = commands("timeout 5 nvidia-smi -r 2>&1 | grep 'a|b'\ntimeout 5 iptables -F\nreboot\n")
    assert [w[2] if w[0] == "timeout" else w[0] for w in bad] == ["nvidia-smi", "grep", "iptables", "reboot"]
    assert bad[0] == ["timeout", "5", "nvidia-smi", "-r"]
    assert redirect_targets("cat x > /etc/passwd\n") == ["/etc/passwd"]
    assert "reboot" not in ALLOWED | BUILTINS
    assert "-r" in ARGUMENT_RULES["nvidia-smi"][1] and "-F" in ARGUMENT_RULES["iptables"][1]
    # fi_pingpong may only be pointed at the node itself.
    assert _positional(["-p", "efa", "-I", "100", "10.1.0.7"], LOOPBACK_ONLY["fi_pingpong"][0]) == ["10.1.0.7"]
    assert _positional(["-p", "efa", "-e", "rdm", "127.0.0.1"], LOOPBACK_ONLY["fi_pingpong"][0]) == ["127.0.0.1"]
