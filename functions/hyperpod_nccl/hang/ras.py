"""NCCL RAS status (NCCL ≥ 2.24): parse the text and JSON answers of the RAS client port.

Every NCCL process runs a RAS thread; the threads watch each other over the bootstrap network
and answer clients on ``localhost:28028`` (``NCCL_RAS_ADDR`` overrides it). A client sends
``CLIENT PROTOCOL 2``, optionally ``SET FORMAT json``, then ``STATUS`` or ``VERBOSE STATUS``;
``ncclras`` does the same. The shapes parsed here come from NCCL's ``src/ras/client_support.cc``
and its RAS troubleshooting page (see tests/data/ras/README.md):

- text: a "Job summary", a communicators table (``Group Comms Nodes Ranks ... Status Errors``),
  an ``Errors`` section (``INCOMPLETE`` / ``DEAD`` / ``#<group>-<comm> (<hash>) INCOMPLETE``) and
  a ``Warnings`` section (``#<group>-<comm> (<hash>) MISMATCH`` with per-collective counts);
- JSON: ``communicators[]`` with ``ranks[]`` (``collective_counts``) and ``missing_ranks[]``
  (``status.unresponsive`` / ``status.considered_dead``).

Both become a `RasStatus`; `RasCommunicator.lagging_ranks` names ranks whose collective counts
trail the rest of their communicator. RAS alone can miss hangs (NCCL issue #1730), so its facts
are joined with Flight Recorder and node evidence, never used alone to clear a job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

from hyperpod_nccl import thresholds
from hyperpod_nccl.bounded import UnreadableData, loads_json

# Text output names outliers only; the majority's count is kept on this synthetic rank.
MAJORITY_RANK = -1


class RasParseError(ValueError):
    """The text is neither of NCCL RAS's status formats."""


class RasRank(BaseModel):
    """A rank that answered, with its per-collective operation counts (name → count)."""

    rank: int
    host: str | None = None
    pid: int | None = None
    cuda_dev: int | None = None
    collective_counts: dict[str, int] = Field(default_factory=dict)
    init_state: int | None = None
    async_error: int | None = None
    abort: bool = False


class RasMissingRank(BaseModel):
    """A rank that did not answer for the communicator."""

    rank: int
    host: str | None = None
    pid: int | None = None
    cuda_dev: int | None = None
    unresponsive: bool = True
    considered_dead: bool = False


class RasCommunicator(BaseModel):
    """One communicator as RAS reports it."""

    hash: str
    size: int | None = None
    ranks: list[RasRank] = Field(default_factory=list)
    missing_ranks: list[RasMissingRank] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)

    def lagging_ranks(self) -> dict[int, dict[str, tuple[int, int]]]:
        """rank → {collective: (its count, the communicator's highest count)} for trailing ranks."""
        lagging: dict[int, dict[str, tuple[int, int]]] = {}
        # One pass over the counts (not one per collective name over every rank: names and ranks
        # both come from the answer, and their product is quadratic in its size).
        by_name: dict[str, dict[int, int]] = {}
        for known in self.ranks:
            for name, count in known.collective_counts.items():
                by_name.setdefault(name, {})[known.rank] = count
        for name in sorted(by_name):
            counts = by_name[name]
            highest = max(counts.values())
            for rank, count in counts.items():
                if count < highest:
                    lagging.setdefault(rank, {})[name] = (count, highest)
        return lagging


class RasDeadProcess(BaseModel):
    """A process the RAS network considers dead (unreachable), job-wide."""

    pid: int | None = None
    host: str
    gpus: str = ""


class RasStatus(BaseModel):
    """One RAS status answer."""

    format: Literal["text", "json"]
    nccl_version: str | None = None
    communicators: list[RasCommunicator] = Field(default_factory=list)
    dead_processes: list[RasDeadProcess] = Field(default_factory=list)
    missing_processes: list[RasDeadProcess] = Field(default_factory=list)
    timeouts: int = 0

    @property
    def healthy(self) -> bool:
        """No missing rank, no dead process and no lagging rank anywhere."""
        return not (
            self.dead_processes
            or self.missing_processes
            or any(c.missing_ranks or c.lagging_ranks() for c in self.communicators)
        )


def parse_ras_status(text: str) -> RasStatus:
    """Parse a RAS status answer in either format (raises `RasParseError` when it is neither, or
    when it is malformed or past a bound: the answer comes from whatever listens on the port)."""
    if len(text) > thresholds.RAS_STATUS_MAX_BYTES:
        raise RasParseError(f"RAS answer of {len(text)} characters exceeds the cap")
    body = _strip_protocol(text)
    try:
        if body.lstrip().startswith("{"):
            return _parse_json(body)
        if "Communicators" in body or "Job summary" in body or "NCCL version" in body:
            return _parse_text(body)
    except ValueError as error:  # pydantic's ValidationError: a field of the wrong type
        if isinstance(error, RasParseError):
            raise
        raise RasParseError(f"malformed RAS answer: {str(error)[:200]}") from None
    raise RasParseError("not an NCCL RAS status answer")


def _strip_protocol(text: str) -> str:
    # A raw socket transcript starts with "SERVER PROTOCOL 2" and "OK" lines; ncclras prints none.
    # Counted, then sliced once: popping the head of the list per line is quadratic on a flood.
    lines = text.splitlines()
    start = 0
    while start < len(lines) and (lines[start].startswith("SERVER PROTOCOL") or lines[start].strip() == "OK"):
        start += 1
    return "\n".join(lines[start:])


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _parse_json(body: str) -> RasStatus:
    try:
        # Size was checked by the caller; nesting is bounded here (json raises RecursionError).
        document = loads_json(body, max_bytes=None)
    except UnreadableData as error:
        raise RasParseError(f"invalid RAS JSON: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("communicators", []), list):
        raise RasParseError("RAS JSON without a communicators list")
    communicators: list[RasCommunicator] = []
    for raw in document.get("communicators", []):
        if not isinstance(raw, dict):
            continue
        ranks = []
        for item in _list(raw.get("ranks")):
            if not isinstance(item, dict) or _opt_int(item.get("rank")) is None:
                continue
            status = _dict(item.get("status"))
            counts = _dict(item.get("collective_counts"))
            ranks.append(
                RasRank(
                    rank=item["rank"],
                    host=_opt_str(item.get("host")),
                    pid=_opt_int(item.get("pid")),
                    cuda_dev=_opt_int(item.get("cuda_dev")),
                    collective_counts={str(k): v for k, v in counts.items() if _opt_int(v) is not None},
                    init_state=_opt_int(status.get("init_state")),
                    async_error=_opt_int(status.get("async_error")),
                    abort=bool(status.get("abort_flag", False)),
                )
            )
        missing = []
        for item in _list(raw.get("missing_ranks")):
            if not isinstance(item, dict) or _opt_int(item.get("rank")) is None:
                continue
            status = _dict(item.get("status"))
            missing.append(
                RasMissingRank(
                    rank=item["rank"],
                    host=_opt_str(item.get("host")),
                    pid=_opt_int(item.get("pid")),
                    cuda_dev=_opt_int(item.get("cuda_dev")),
                    unresponsive=bool(status.get("unresponsive", True)),
                    considered_dead=bool(status.get("considered_dead", False)),
                )
            )
        communicators.append(
            RasCommunicator(
                hash=str(raw.get("hash", "?")), size=_opt_int(raw.get("size")), ranks=ranks, missing_ranks=missing
            )
        )
    ras = _dict(document.get("ras"))
    return RasStatus(
        format="json",
        nccl_version=_opt_str(document.get("nccl_version")),
        communicators=communicators,
        timeouts=_opt_int(ras.get("timeouts_count")) or 0,
    )


_VERSION = re.compile(r"^NCCL version (\S+)")
_COMM_HEADER = re.compile(r"^#(\d+)-(\d+) \((?P<hash>[0-9a-fA-F]+)\) (?P<kind>[A-Z,]+)\s*$")
_RANK_LINE = re.compile(
    r"^\s+Rank (?P<rank>\d+)(?: has (?:launched up to operation (?P<count>\d+)|not launched any operations))?"
    r"(?: has status \S+)?"
    r" -- (?:GPU (?P<gpu>\d+)(?: \(NVML \d+\))? managed by process (?P<pid>\d+) on node (?P<host>\S+)"
    r"|\[process information not found\])"
)
_GROUP_COUNT = re.compile(r"^\s+\d+ ranks have (?:launched up to operation (?P<count>\d+)|not launched any operations)")
_DIFFERENT_COUNTS = re.compile(r"^\s+Communicator ranks have different (?P<name>\w+) operation counts")
_PROCESS_LINE = re.compile(r"^\s+Process (?P<pid>\d+) on node (?P<host>\S+) managing GPUs? (?P<gpus>.*)$")
_TIMEOUT = re.compile(r"Encountered (\d+) communication timeout")
_JOB_WIDE_SECTIONS = ("INCOMPLETE", "DEAD")


def _parse_text(body: str) -> RasStatus:
    parser = _TextParser()
    for line in body.splitlines():
        parser.feed(line)
    return parser.finish()


@dataclass
class _TextParser:
    """One pass over a text answer, line by line: its state is the section being read."""

    status: RasStatus = field(default_factory=lambda: RasStatus(format="text"))
    comms: dict[str, RasCommunicator] = field(default_factory=dict)
    section: str | None = None  # "INCOMPLETE" / "DEAD" job-wide lists, or a communicator block
    current: RasCommunicator | None = None
    current_kind: str = ""
    counting: str | None = None  # collective whose counts are being listed
    group_count: int | None = None  # the count the preceding "N ranks have ..." line stated
    # Lookups by key, not by scanning lists: a verbose answer lists every rank of the job, and a
    # crafted one millions of them (linear scans per line would make the parse quadratic).
    known_ranks: dict[tuple[str, int], RasRank] = field(default_factory=dict)
    dead: set[tuple[str, str]] = field(default_factory=set)

    def feed(self, line: str) -> None:
        """Read one line of the answer."""
        if match := _VERSION.match(line):
            self.status.nccl_version = match.group(1)
            return
        if match := _TIMEOUT.search(line):
            self.status.timeouts = max(self.status.timeouts, int(match.group(1)))
        if self._section_line(line) or self.current is None:
            return
        self._communicator_line(self.current, line)

    def finish(self) -> RasStatus:
        """The status read so far."""
        self.status.communicators = list(self.comms.values())
        return self.status

    def _section_line(self, line: str) -> bool:
        """Section headers and ends, and the job-wide process lists; False for any other line."""
        stripped = line.strip()
        if stripped in _JOB_WIDE_SECTIONS:
            self.section, self.current, self.counting = stripped, None, None
            return True
        if match := _COMM_HEADER.match(line):
            self._open_communicator(match)
            return True
        if not stripped:
            self.section = None if self.section in _JOB_WIDE_SECTIONS else self.section
            return True
        if self.section in _JOB_WIDE_SECTIONS and (match := _PROCESS_LINE.match(line)):
            self._add_process(match)
            return True
        return False

    def _open_communicator(self, match: re.Match[str]) -> None:
        comm_hash = match.group("hash")
        self.current = self.comms.setdefault(comm_hash, RasCommunicator(hash=comm_hash))
        self.current_kind = match.group("kind")
        self.current.errors = sorted(set(self.current.errors) | set(self.current_kind.split(",")))
        self.section, self.counting, self.group_count = None, None, None

    def _add_process(self, match: re.Match[str]) -> None:
        process = RasDeadProcess(pid=int(match.group("pid")), host=match.group("host"), gpus=match.group("gpus"))
        (self.status.dead_processes if self.section == "DEAD" else self.status.missing_processes).append(process)
        if self.section == "DEAD":
            self.dead.add((process.host, str(process.pid)))

    def _communicator_line(self, current: RasCommunicator, line: str) -> None:
        """A line inside a communicator block: a count heading, a group count or a rank."""
        if match := _DIFFERENT_COUNTS.match(line):
            self.counting, self.group_count = match.group("name"), None
            return
        if self.counting is not None and (match := _GROUP_COUNT.match(line)):
            self.group_count = int(match.group("count") or 0)
            # Without "verbose", the majority is only summarised ("N ranks have launched up to
            # operation X"), never listed: keep X on a synthetic rank -1 so outliers compare to it.
            _count_of(current, MAJORITY_RANK, self.known_ranks).collective_counts[self.counting] = self.group_count
            return
        if match := _RANK_LINE.match(line):
            if "INCOMPLETE" in self.current_kind and self.counting is None:
                self._add_missing_rank(current, match)
            elif self.counting is not None:
                self._add_rank_count(current, self.counting, match, line)

    def _add_missing_rank(self, current: RasCommunicator, match: re.Match[str]) -> None:
        host, pid, gpu = match.group("host"), match.group("pid"), match.group("gpu")
        current.missing_ranks.append(
            RasMissingRank(
                rank=int(match.group("rank")),
                host=host,
                pid=int(pid) if pid else None,
                cuda_dev=int(gpu) if gpu else None,
                considered_dead=(host, pid) in self.dead,
            )
        )

    def _add_rank_count(self, current: RasCommunicator, counting: str, match: re.Match[str], line: str) -> None:
        count = int(match.group("count")) if match.group("count") else self.group_count
        if count is None and "not launched" in line:
            count = 0
        if count is None:
            return
        host, pid = match.group("host"), match.group("pid")
        known = _count_of(current, int(match.group("rank")), self.known_ranks)
        known.host, known.pid = host or known.host, int(pid) if pid else known.pid
        known.collective_counts[counting] = count


def _count_of(comm: RasCommunicator, rank: int, index: dict[tuple[str, int], RasRank]) -> RasRank:
    known = index.get((comm.hash, rank))
    if known is None:
        known = index[(comm.hash, rank)] = RasRank(rank=rank)
        comm.ranks.append(known)
    return known


def dead_or_missing_ranks(status: RasStatus) -> dict[int, RasMissingRank]:
    """Every rank some communicator reported missing, by rank (dead wins over unresponsive)."""
    found: dict[int, RasMissingRank] = {}
    for comm in status.communicators:
        for missing in comm.missing_ranks:
            if missing.rank not in found or missing.considered_dead:
                found[missing.rank] = missing
    return found


def lagging_ranks(status: RasStatus) -> dict[int, dict[str, tuple[int, int]]]:
    """Every real rank (not the synthetic majority) whose counts trail its communicator."""
    merged: dict[int, dict[str, tuple[int, int]]] = {}
    for comm in status.communicators:
        for rank, counts in comm.lagging_ranks().items():
            if rank != MAJORITY_RANK:
                merged.setdefault(rank, {}).update(counts)
    return merged
