"""The exit codes of every `hyperpod-nccl` command: the one place they are spelled (README's table).

0 and 1 keep the original skill's meaning; 2 is argparse's usage error. With both `--fail-on` a
priority and `--fail-on partial`, an issue at the priority wins (3): it says more than "partial".
"""

from __future__ import annotations

from collections.abc import Sequence

EXIT_OK = 0
# A prerequisite is missing or the cluster is unreachable (credentials, unknown cluster), an input
# could not be read (triage), a support bundle could not be written, a benchmark sweep failed.
EXIT_PREREQUISITE = 1
# Invalid arguments, or a scope that names nothing in the cluster (`--node` not one of its nodes).
EXIT_USAGE = 2
# `--fail-on P0|P1|P2`: a finding (diagnose) or an incident (incidents) at or above that priority.
EXIT_FAIL_ON = 3
# `--fail-on partial`: a source was not fully read (the verdict's "Partial:" line), so a check may
# have been SKIPped, and no issue at a `--fail-on` priority was found.
EXIT_PARTIAL = 4
# Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130
# The reader of stdout went away (`| head`): 128 + SIGPIPE, what a shell reports for a tool the
# signal stopped. Nothing is printed.
EXIT_BROKEN_PIPE = 141

# One line each, for every `--help` (README's table says more).
ONE_LINE_MEANINGS = {
    EXIT_OK: "completed; with --fail-on, nothing it asks about was found",
    EXIT_PREREQUISITE: "a prerequisite failed (credentials, unknown cluster, unreadable input, bundle not written)",
    EXIT_USAGE: "invalid arguments, or a scope that names nothing in the cluster",
    EXIT_FAIL_ON: "--fail-on P0|P1|P2: something at or above that priority was found",
    EXIT_PARTIAL: "--fail-on partial: a source was not fully read",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
    EXIT_BROKEN_PIPE: "the reader of stdout went away (| head); nothing more is printed",
}


def help_epilog(examples: Sequence[str]) -> str:
    """What every `--help` ends with: the command's examples, then the exit codes."""
    lines = ["examples:", *(f"  {example}" for example in examples), "", "exit codes:"]
    lines.extend(f"  {code:<4} {meaning}" for code, meaning in ONE_LINE_MEANINGS.items())
    return "\n".join(lines)


# How the codes of several diagnoses (`demo` over its scenarios) combine: the most severe, where
# "partial" counts below any other failure (3 stays above 4, as for one diagnosis).
_SEVERITY = {EXIT_OK: 0, EXIT_PARTIAL: 1, EXIT_PREREQUISITE: 2, EXIT_USAGE: 3, EXIT_FAIL_ON: 4}


def most_severe(codes: list[int]) -> int:
    """The exit code of several runs together (EXIT_OK for none)."""
    return max(codes, key=lambda code: _SEVERITY.get(code, len(_SEVERITY)), default=EXIT_OK)
