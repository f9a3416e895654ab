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
    # `date` only prints the time (never -s/--set, see ARGUMENT_RULES).
    "date",
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
    # `nft` only lists the ruleset (see ARGUMENT_RULES).
    "nft",
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
    # `dd` only reads one dump with O_NOFOLLOW (no of=, see DD_FORBIDDEN_PREFIXES); `sort` orders
    # the dump listing on stdin (no -o).
    "dd",
    "sort",
    # `uniq -c` counts the driver's fault lines per GPU and code (never with operands: its second
    # one is an output file, see NO_OPERANDS).
    "uniq",
    # EFA latency (original probe 34): `fi_pingpong` only between a server and a client on the
    # node itself (loopback, see LOOPBACK_ONLY); it sends a few hundred small test messages and
    # changes no state. `sleep` gives the background server time to listen.
    "fi_pingpong",
    "sleep",
    # Host info (original probe 1): `curl` only to the instance metadata service (IMDSv2: a token,
    # then a value), bounded in time, writing no file and following no redirect (see IMDS_ONLY).
    "curl",
}
# Shell builtins and the script's own section markers (no process is started).
SHELL_WORDS = {
    "export",
    "ulimit",
    "printf",
    "shopt",
    "read",
    "done",
    "fi",
    "[",
    "[[",
    "return",
    "continue",
    "break",
    "exit",
    "cd",
}
BUILTINS = SHELL_WORDS | {"begin", "end", "timeout"}
# The script's own functions: their bodies are checked like any other line.
SCRIPT_FUNCTIONS = {"begin", "end", "pingpong", "plain_path", "job_var", "fr_walk", "imds_show", "limits_job"}
# Shell keywords that prefix a command (`for ...; do cmd; done`, `if cmd; then`, `while cmd; do`).
KEYWORD_PREFIXES = {"do", "then", "else", "if", "elif", "while", "until", "!"}
# Arguments a dual-use tool must (or must not) carry to stay read-only.
ARGUMENT_RULES: dict[str, tuple[set[str], set[str]]] = {
    # tool: (at least one of these must appear, none of these may appear)
    "nvidia-smi": (set(), {"-r", "--gpu-reset", "-pm", "-e", "-c", "-ac", "-rac", "-pl", "-mig", "-lgc", "-rgc"}),
    "iptables": ({"-S", "-L"}, {"-A", "-D", "-I", "-F", "-X", "-P", "-N", "-R", "-Z"}),
    "nft": (
        {"list"},
        {"add", "delete", "flush", "insert", "replace", "create", "destroy", "reset", "-f", "--file", "-i"},
    ),
    "systemctl": ({"is-active", "status", "show"}, set()),
    "scontrol": ({"ping", "show"}, set()),
    "dcgmi": ({"--check", "discovery"}, {"-s", "--set", "diag", "-r"}),
    "ip": ({"addr", "link"}, {"set", "add", "del", "delete", "flush"}),
    "journalctl": (set(), {"--vacuum-size", "--vacuum-time", "--rotate", "--flush"}),
    "dmesg": (set(), {"-c", "-C", "--clear", "-n"}),
    # `--` ends nc's options, so no address word can be read as one.
    "nc": ({"--"}, {"-l", "--listen", "-e", "--exec", "-c", "--sh-exec", "-k", "--keep-open", "-o", "--output"}),
    "find": (
        set(),
        {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"},
    ),
    "base64": (set(), {"-d", "--decode"}),
    "dd": ({"iflag=nofollow,nonblock"}, set()),
    "sort": (set(), {"-o", "--output"}),
    "date": (set(), {"-s", "--set"}),
    "curl": (
        {"--max-time"},
        {
            "-o",
            "--output",
            "-O",
            "--remote-name",
            "-T",
            "--upload-file",
            "-d",
            "--data",
            "--data-binary",
            "--data-raw",
            "-F",
            "--form",
            "-K",
            "--config",
            "-x",
            "--proxy",
            "-L",
            "--location",
            "-u",
            "--user",
        },
    ),
}
# dd operands that would write.
DD_FORBIDDEN_PREFIXES = ("of=", "oflag=", "seek=", "conv=")
# Builtins that cannot hang and so need no timeout.
NO_TIMEOUT_NEEDED = SHELL_WORDS | SCRIPT_FUNCTIONS
# Traffic generators that may only talk to the node itself: options with a value, and the one
# server address they may be given.
LOOPBACK_ONLY = {"fi_pingpong": ({"-p", "-e", "-I", "-S", "-B", "-P", "-d", "-m", "-s"}, "127.0.0.1")}
# curl may only ask the instance metadata service (IMDSv2) of the node itself: options with a
# value, the URLs it may be given, and the one URL it may PUT to (the session token).
IMDS_ONLY = (
    {"-H", "-X", "--noproxy", "--connect-timeout", "--max-time"},
    "http://169.254.169.254/latest/",
    "http://169.254.169.254/latest/api/token",
)
# Stream filters that only read their stdin, so end when their producer (under timeout) ends.
STDIN_FILTERS = {"grep", "head", "tail", "tr", "sort", "uniq"}
# Filters that must read stdin alone: an operand would be an input file, or an output file to write.
NO_OPERANDS = {"uniq"}
# Options of these tools that take the next word as their value (a runtime value may follow them).
OPTION_VALUES = {"find": {"-name", "-uid", "-regex"}, "fi_pingpong": {"-p"}, "curl": {"-H"}}


_SEPARATORS = {"|", "||", "&&", ";", "&"}


def _tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # whole-line comments are skipped; a `#` inside a word (${x#y}) hides nothing
    return list(lexer)


def commands(text: str) -> list[list[str]]:
    """Every simple command of the script (quote-aware split on pipes, `;`, `&&`, `||`), function
    bodies included, with redirections removed."""
    found = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or re.fullmatch(r"\w+\(\) [({]|[)}]", line):
            continue  # the header and the end of a multi-line function: its body lines are checked
        body = re.match(r"^\w+\(\) \{ (.*); \}$", line)
        if body:
            line = body.group(1)
        # `$((...))` is arithmetic; `$(...)` and backquotes would hide commands from this check.
        assert not re.search(r"\$\((?!\()", line) and "`" not in line, f"command substitution hides commands: {line}"
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
    cleaned = [_without_keywords(c) for c in cleaned]
    return [c for c in cleaned if c and c[0] != "for"]


def _without_keywords(words: list[str]) -> list[str]:
    while words and words[0] in KEYWORD_PREFIXES:
        words = words[1:]
    return words


def _is_assignment(word: str) -> bool:
    return re.match(r"[A-Za-z_]\w*\+?=", word) is not None


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
        if _is_assignment(words[0]):
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
        if tool == "curl":
            with_value, prefix, token_url = IMDS_ONLY
            urls = _positional(args, with_value)
            assert len(urls) == 1 and urls[0].startswith(prefix), f"curl {args} asks beyond IMDS"
            assert "-X" not in args or (args[args.index("-X") + 1] == "PUT" and urls == [token_url]), f"curl {args}"
        required, forbidden = ARGUMENT_RULES.get(tool, (set(), set()))
        assert not forbidden & set(args), f"{tool} {args} uses a state-changing option"
        if required:
            assert required & set(args), f"{tool} {args} lacks a read-only subcommand"
        if tool == "dd":
            assert not [a for a in args if a.startswith(DD_FORBIDDEN_PREFIXES)], f"dd {args} writes"
        if tool in NO_OPERANDS:
            assert _positional(args, set()) == [], f"{tool} {args} names a file"


_EXPANSION = re.compile(r"\$[{A-Za-z_0-9(?@#]")  # `$name`, `${...}`, `$1`, `$((...))`; not a regex's `$`


def misplaced_runtime_values(text: str) -> list[list[str]]:
    """Commands where a word expanded at run time could be taken for an option: it must come
    after `--`, be the value of an option that takes one, or sit behind a fixed `if=./` (dd);
    printf's format is never one."""
    bad = []
    for words in commands(text):
        if _is_assignment(words[0]):
            continue
        tool, args = (words[2], words[3:]) if words[0] == "timeout" else (words[0], words[1:])
        if tool == "printf" and args and _EXPANSION.search(args[0]):
            bad.append(words)
        if tool in SHELL_WORDS | SCRIPT_FUNCTIONS | {"timeout"}:
            continue
        for index, arg in enumerate(args):
            if not _EXPANSION.search(arg):
                continue
            if tool == "dd":
                ok = arg.startswith("if=./")
            elif tool in OPTION_VALUES:
                ok = index > 0 and args[index - 1] in OPTION_VALUES[tool]
            else:
                ok = "--" in args[:index]
            if not ok:
                bad.append(words)
                break
    return bad


@pytest.mark.parametrize("role", sorted(SCRIPTS))
def test_runtime_values_never_stand_where_an_option_could(role: str) -> None:
    assert misplaced_runtime_values(script(role)) == []


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
    # uniq's second operand is a file it writes.
    assert "uniq" in NO_OPERANDS and _positional(["-c", "in", "out"], set()) == ["in", "out"]
    # fi_pingpong may only be pointed at the node itself.
    assert _positional(["-p", "efa", "-I", "100", "10.1.0.7"], LOOPBACK_ONLY["fi_pingpong"][0]) == ["10.1.0.7"]
    assert _positional(["-p", "efa", "-e", "rdm", "127.0.0.1"], LOOPBACK_ONLY["fi_pingpong"][0]) == ["127.0.0.1"]
    # curl may only be pointed at the instance metadata service.
    assert _positional(["-sf", "--max-time", "2", "-H", "a: b", "http://evil/"], IMDS_ONLY[0]) == ["http://evil/"]
    assert "-o" in ARGUMENT_RULES["curl"][1] and "--max-time" in ARGUMENT_RULES["curl"][0]
    # A `#` inside a word hides nothing, and arithmetic is not command substitution.
    assert [w[0] for w in commands("rest=${2#/}; reboot\nn=$((n + 1))\n")] == ["rest=${2#/}", "reboot", "n=$"]
    with pytest.raises(AssertionError, match="command substitution"):
        commands("x=$(reboot)\n")


def test_the_checker_rejects_a_runtime_value_where_an_option_could_be() -> None:
    bad = (
        'timeout 20 nc -w 15 "$host" "$port"\n'
        'timeout 5 grep -zs "^$1=" "$file"\n'
        'timeout 5 find -P "$dir" -maxdepth 0\n'
        'timeout 5 dd if="$name" iflag=nofollow\n'
        'printf "$value"\n'
    )
    assert len(misplaced_runtime_values(bad)) == 5
    good = 'timeout 20 nc -w 15 -- "$host" "$port"\ntimeout 5 find -P . -name "$part"\nprintf \'%s\\n\' "$v"\n'
    assert misplaced_runtime_values(good) == []
    assert ARGUMENT_RULES["nc"][0] == {"--"} and "of=" in DD_FORBIDDEN_PREFIXES
