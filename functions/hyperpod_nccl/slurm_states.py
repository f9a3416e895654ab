"""What each Slurm node state means for a job that needs the node, spelled once.

`sinfo -o %T` prints `node_state_string()` lower-cased (SchedMD/slurm `src/common/
slurm_protocol_defs.c` and `src/sinfo/print.c`, commit 284c3b95); `%t` and people's reports use
the compact forms (`node_state_string_compact()`: `drain`, `drng`, `alloc`, `mix` ...). A state is
a base name plus at most one flag character (sinfo(1), NODE STATE CODES). Every name either of
those functions prints is in `BASE_STATES`; `tests/unit/test_slurm_states.py` holds the table to
them, and a state outside it is reported as not understood, never counted as healthy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class SlurmCondition(StrEnum):
    """What a node state says about running a job there."""

    # From best to worst: a flag only ever makes a state worse (`read_state`).
    USABLE = "usable"  # jobs run or can be scheduled
    TRANSITION = "transition"  # rebooting, powering, being configured, in maintenance: wait and recheck
    UNDETERMINED = "undetermined"  # slurmctld has not heard from it yet
    DRAINED = "drained"  # taken out of service on purpose, no job left on it
    UNUSABLE = "unusable"  # down, failing, not responding, or registered with less than configured
    NOT_UNDERSTOOD = "not_understood"  # a state this table does not know


@dataclass(frozen=True)
class SlurmState:
    """A node state as sinfo printed it, read."""

    text: str
    base: str
    flag: str
    condition: SlurmCondition
    meaning: str


# Long names (node_state_string) and compact ones (node_state_string_compact), lower case.
BASE_STATES: dict[str, tuple[SlurmCondition, str]] = {
    **{
        name: (SlurmCondition.USABLE, meaning)
        for names, meaning in (
            (("idle",), "no job, available"),
            (("allocated", "alloc"), "running jobs"),
            (("mixed", "mix"), "running jobs on part of its CPUs"),
            (("completing", "comp"), "its jobs are finishing"),
            (("planned", "plnd"), "held by the backfill scheduler for a higher-priority job"),
            (("reserved", "resv"), "in an advanced reservation"),
            (("blocked", "block"), "blocked by an exclusive topology job"),
            (("resume", "resm"), "being returned to service"),
        )
        for name in names
    },
    **{
        name: (SlurmCondition.TRANSITION, meaning)
        for names, meaning in (
            (("maint",), "in a maintenance reservation"),
            (("reboot", "boot"), "a reboot is requested"),
            (("reboot_issued",), "a reboot was issued"),
            (("cancel_reboot", "canc_r"), "a reboot request is being cancelled"),
            (("power_down", "pow_dn"), "pending power down"),
            (("power_up", "pow_up"), "being powered up"),
            (("powering_down", "powring_dn"), "powering down"),
            (("powered_down", "powered_dn"), "powered down"),
            (("powering_up",), "powering up"),
            (("future", "futr"), "not yet configured"),
            (("dynamic_future", "dynamic_norm"), "a dynamic node being set up"),
            (("cloud",), "a cloud node not yet started"),
            (("external", "ext"), "managed outside Slurm"),
            (("undrain",), "being undrained"),
        )
        for name in names
    },
    "drained": (SlurmCondition.DRAINED, "drained: no new job will be placed on it"),
    "drain": (SlurmCondition.DRAINED, "drained (the short form): no new job will be placed on it"),
    **{
        name: (SlurmCondition.UNUSABLE, meaning)
        for names, meaning in (
            (("draining", "drng"), "draining: its running jobs finish, no new one starts"),
            (("down",), "down: unavailable"),
            (("fail",), "failing: taken out of service"),
            (("failing", "failg"), "failing while running jobs"),
            (("inval",), "registered with fewer resources than configured (slurmd must be restarted)"),
        )
        for name in names
    },
    "unknown": (SlurmCondition.UNDETERMINED, "slurmctld has not yet determined its state"),
    "unk": (SlurmCondition.UNDETERMINED, "slurmctld has not yet determined its state"),
}

# sinfo(1), NODE STATE CODES: the suffix characters.
FLAGS: dict[str, str] = {
    "*": "not responding",
    "~": "powered off",
    "#": "being powered up or configured",
    "!": "pending power down",
    "%": "being powered down",
    "$": "in a maintenance reservation",
    "@": "pending reboot",
    "^": "reboot issued",
    "-": "planned by the backfill scheduler",
    "+": "jobs completing",
}
# A flag that changes what the node can do now, whatever the base state says.
_FLAG_CONDITION = {
    "*": SlurmCondition.UNUSABLE,
    "~": SlurmCondition.TRANSITION,
    "#": SlurmCondition.TRANSITION,
    "!": SlurmCondition.TRANSITION,
    "%": SlurmCondition.TRANSITION,
    "@": SlurmCondition.TRANSITION,
    "^": SlurmCondition.TRANSITION,
}
_STATE = re.compile(r"(?P<base>[a-z_]{1,32})(?P<flag>[*~#!%$@^+-]?)")
_ORDER = list(SlurmCondition)

# slurmctld's reason when a node registers fewer GPUs than slurm.conf gives it
# (src/interfaces/gres.c: "%s count reported lower than configured (%"PRIu64" < %"PRIu64")").
MISSING_GPU_REASON = re.compile(
    r"\bgres/gpu(?::[\w.-]{1,32})? count reported lower than configured "
    r"\((?P<found>\d{1,4}) < (?P<configured>\d{1,4})\)"
)


def read_state(text: str) -> SlurmState:
    """`text` (a `%T` or `%t` value such as `down*` or `drained`) read against the table."""
    value = text.strip().lower()
    match = _STATE.fullmatch(value)
    if match is None or match.group("base") not in BASE_STATES:
        return SlurmState(text, value, "", SlurmCondition.NOT_UNDERSTOOD, "a state this tool does not know")
    base, flag = match.group("base"), match.group("flag")
    condition, meaning = BASE_STATES[base]
    flagged = _FLAG_CONDITION.get(flag)
    if flagged is not None and _ORDER.index(flagged) > _ORDER.index(condition):
        condition = flagged
    if flag:
        meaning = f"{meaning}; {FLAGS[flag]}"
    return SlurmState(text, base, flag, condition, meaning)
