"""`squeue` as the simulated controller answers it: the queue of the scenario, filtered and
formatted by the options of the command the probe script runs (`-t` states, `-o` fields,
`head -n` limit), so that what the product reads follows from what it asks for.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from hyperpod_nccl_sim.node_behaviours import SlurmJobSpec

# What `squeue` lists without `-t`: every state but the finished ones (squeue(1)).
DEFAULT_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING"})
_SHORT_STATES = {"PD": "PENDING", "R": "RUNNING", "S": "SUSPENDED", "CG": "COMPLETING", "CF": "CONFIGURING"}
# A field of `-o`: its width (not applied: the probe's fields are `|`-separated) and its letter.
_FIELD = re.compile(r"%(\.?\d*)([A-Za-z])")


@dataclass(frozen=True)
class SqueueCommand:
    """The options of one `squeue` invocation that shape its output."""

    states: frozenset[str] = DEFAULT_STATES
    output_format: str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
    limit: int | None = None


def squeue_command(script_text: str) -> SqueueCommand:
    """The `squeue` command of a probe script; ValueError when the script runs none."""
    line = next((line for line in script_text.splitlines() if re.search(r"(^|\s)squeue\s", line)), None)
    if line is None:
        raise ValueError("the script runs no squeue")
    lexer = shlex.shlex(line[line.index("squeue") :], posix=True, punctuation_chars="|")
    lexer.whitespace_split = True
    tokens = list(lexer)
    # A `|` inside the quoted format is part of it; the first one outside starts the pipeline.
    end = tokens.index("|") if "|" in tokens else len(tokens)
    words, rest = tokens[:end], " ".join(tokens[end:])
    states, output_format = DEFAULT_STATES, SqueueCommand.output_format
    for option, value in zip(words, [*words[1:], ""], strict=True):
        if option in ("-t", "--states"):
            states = frozenset(_SHORT_STATES.get(s, s) for s in value.upper().split(","))
        elif option in ("-o", "--format"):
            output_format = value
    head = re.search(r"head -n (\d+)", rest)
    return SqueueCommand(states=states, output_format=output_format, limit=int(head.group(1)) if head else None)


def compress_hostlist(hosts: list[str]) -> str:
    """Hosts as Slurm prints a node list: `ip-10-1-0-[12-14,16]` (numeric suffixes grouped)."""
    groups: dict[str, list[str]] = {}
    for host in hosts:
        match = re.fullmatch(r"(.*?)(\d+)", host)
        prefix, number = (match.group(1), match.group(2)) if match else (host, "")
        groups.setdefault(prefix, []).append(number)
    parts = []
    for prefix, numbers in groups.items():
        if numbers == [""] or len(numbers) == 1:
            parts.append(prefix + numbers[0])
            continue
        values = sorted(set(numbers), key=int)
        ranges: list[list[str]] = []
        for value in values:
            if ranges and int(value) == int(ranges[-1][-1]) + 1:
                ranges[-1].append(value)
            else:
                ranges.append([value])
        spans = [r[0] if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in ranges]
        parts.append(f"{prefix}[{','.join(spans)}]")
    return ",".join(parts)


def squeue_rows(command: SqueueCommand, jobs: list[SlurmJobSpec], host_of: Callable[[str], str]) -> list[str]:
    """The lines `command` prints for the queue `jobs` (`host_of` maps a node key to its Slurm name)."""

    def nodelist(job: SlurmJobSpec) -> str:
        return compress_hostlist([host_of(key) for key in job.nodes])

    def field(job: SlurmJobSpec, code: str) -> str:
        # %R: why a pending job waits, else where the job runs.
        values = {
            "i": job.id,
            "j": job.name,
            "T": job.state,
            "t": next((short for short, long in _SHORT_STATES.items() if long == job.state), job.state),
            "P": job.partition,
            "N": nodelist(job),
            "D": str(len(job.nodes) or 1),
            "R": f"({job.reason})" if job.state == "PENDING" else nodelist(job),
        }
        if code not in values:
            raise ValueError(f"the simulated squeue cannot print %{code}")
        return values[code]

    def row(job: SlurmJobSpec) -> str:
        return _FIELD.sub(lambda m: field(job, m.group(2)), command.output_format)

    rows = [row(job) for job in jobs if job.state in command.states]
    return rows[: command.limit] if command.limit is not None else rows
