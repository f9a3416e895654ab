"""Slurm hostlist expressions (`ip-10-1-0-[5-7,9],login`), as squeue and sinfo print node lists.

Bounded: a range wider than any cluster is refused rather than expanded (cluster text is hostile).
"""

from __future__ import annotations

import re

_BRACKET = re.compile(r"^(?P<prefix>[^\[]*)\[(?P<ranges>[^\]]+)\](?P<suffix>.*)$")
# Far above any cluster; a larger range is not a real node list (and would exhaust memory).
MAX_HOSTLIST_RANGE = 100_000


def expand_hostlist(nodelist: str) -> list[str]:
    """Slurm hostlist expression → hosts: ``ip-10-1-0-[5-7,9],login`` → 4 + 1 names, in order.
    ValueError for a range that is not numeric or spans more than MAX_HOSTLIST_RANGE hosts."""
    hosts: list[str] = []
    depth, token = 0, ""
    for char in nodelist + ",":
        if char == "," and depth == 0:
            if token:
                hosts.extend(_expand_one(token))
            token = ""
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        token += char
    return hosts


def _expand_one(token: str) -> list[str]:
    match = _BRACKET.match(token)
    if not match:
        return [token]
    out: list[str] = []
    for part in match.group("ranges").split(","):
        low, _, high = part.partition("-")
        width = len(low)
        first, last = int(low), int(high or low)
        if last - first >= MAX_HOSTLIST_RANGE:
            raise ValueError(f"hostlist range {part!r} spans more than {MAX_HOSTLIST_RANGE} hosts")
        for number in range(first, last + 1):
            out.extend(_expand_one(f"{match.group('prefix')}{number:0{width}d}{match.group('suffix')}"))
    return out
