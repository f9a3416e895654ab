"""PyTorch Flight Recorder dumps: a restricted loader, the dump model and a divergence analyzer.

Flight Recorder (``TORCH_NCCL_TRACE_BUFFER_SIZE`` > 0, ``TORCH_NCCL_DUMP_ON_TIMEOUT=1``) writes one
file per rank, ``<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>`` (default prefix ``/tmp/nccl_trace_rank_``),
when the NCCL watchdog fires. The file is a pickle of plain data (PyTorch's FlightRecorder.hpp
builds it from generic IValue dicts, lists, tuples, strings and numbers); newer versions can
also write JSON. Field names follow PyTorch's ``FlightRecorder.hpp`` key constants and the
Flight Recorder tutorial (see tests/data/flight_recorder/README.md).

A pickle can name any importable callable and make the loader call it, so a dump is never
given to ``pickle.load``: `load_dump` uses an unpickler whose ``find_class`` refuses every global
and whose ``persistent_load`` refuses every id. With no way to obtain a callable, the REDUCE,
NEWOBJ, INST, OBJ and EXT opcodes have nothing to call; what remains builds dicts, lists,
tuples, sets, strings, bytes and numbers, which are then checked again, iteratively, before use.

A dump is also bounded before and after decoding (`thresholds.FLIGHT_RECORDER_MAX_*`): its bytes;
the elements it can create, counted in the opcode stream (or, for JSON, from its separators)
before anything is built when the file is large enough to exceed the cap; its nesting depth and
visited elements after. Anything past a bound or malformed becomes one `HostileDumpError`
("unreadable dump: <why>"), which `load_dumps` reports per file instead of raising.
"""

from __future__ import annotations

import io
import json
import math
import pickle
import pickletools
import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, Field

from hyperpod_nccl import thresholds
from hyperpod_nccl.bounded import UnreadableData, check_plain

DEFAULT_DUMP_PREFIX = "/tmp/nccl_trace_rank_"  # PyTorch's documented default
# Opcodes that build nothing new (framing, memo, stack and container-filling operations) or push
# a shared singleton; every other opcode creates at most one object.
_NON_CREATING_OPCODES = frozenset(
    {"PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP", "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"}
    | {"GET", "BINGET", "LONG_BINGET", "APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS"}
    | {"NONE", "NEWTRUE", "NEWFALSE"}
)
EntryState = Literal["scheduled", "started", "completed"]


class HostileDumpError(ValueError):
    """The bytes are not a Flight Recorder dump we can read safely: malformed, past a bound, or
    carrying code ("unreadable dump: <why>")."""

    def __init__(self, reason: str, source: str = "") -> None:
        where = f" {source}" if source else ""
        super().__init__(f"unreadable dump{where}: {reason}")
        self.reason = reason
        self.source = source


class _PlainDataUnpickler(pickle.Unpickler):
    """An unpickler that can only build plain data: it resolves no global and no persistent id."""

    def find_class(self, module: str, name: str) -> Any:
        # Every code-execution path of pickle (REDUCE, NEWOBJ, INST, OBJ, EXT*) needs a callable,
        # and globals are the only way to get one. Refusing them all is the whole defence.
        raise pickle.UnpicklingError(f"refused global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused persistent id")


def _count_created(data: bytes, limit: int) -> None:
    """Refuse a pickle whose opcodes would create more than `limit` objects, before loading it.

    Only needed for files longer than `limit` bytes (an opcode is at least one byte and creates at
    most one object), so a real dump of a few MiB never pays for this pure-Python pass."""
    if len(data) <= limit:
        return
    created = 0
    for opcode, _arg, _pos in pickletools.genops(data):
        if opcode.name not in _NON_CREATING_OPCODES:
            created += 1
            if created > limit:
                raise UnreadableData(f"more than {limit} elements")


def load_dump_data(
    data: bytes, *, source: str = "", max_bytes: int = thresholds.FLIGHT_RECORDER_MAX_BYTES
) -> dict[str, Any]:
    """Decode one dump (pickle or JSON) into plain data, refusing anything else.

    Raises `HostileDumpError` for oversized, truncated, code-carrying, too deeply nested, too
    large or non-dict input; the dump's code is never executed.
    """
    if len(data) > max_bytes:
        raise HostileDumpError(f"{len(data)} bytes exceeds the {max_bytes}-byte cap", source)
    if not data.strip():
        raise HostileDumpError("empty file", source)
    stripped = data.lstrip()
    limit = thresholds.FLIGHT_RECORDER_MAX_OBJECTS
    try:
        if stripped[:1] in (b"{", b"["):
            # Every JSON element but the first follows a separator or opens a container: an
            # upper bound on what json.loads would build, at C speed, before it builds it.
            if sum(stripped.count(char) for char in (b",", b"[", b"{")) >= limit:
                raise UnreadableData(f"more than {limit} elements")
            loaded = json.loads(stripped.decode("utf-8"))
        else:
            _count_created(data, limit)
            loaded = _PlainDataUnpickler(io.BytesIO(data)).load()
        check_plain(loaded, max_depth=thresholds.FLIGHT_RECORDER_MAX_DEPTH, max_items=limit)
    except (pickle.UnpicklingError, EOFError) as error:
        raise HostileDumpError(str(error) or type(error).__name__, source) from None
    except RecursionError:
        raise HostileDumpError(f"nested deeper than {thresholds.FLIGHT_RECORDER_MAX_DEPTH} levels", source) from None
    except UnreadableData as error:
        raise HostileDumpError(str(error), source) from None
    except (ValueError, TypeError, AttributeError, IndexError, KeyError, OverflowError, MemoryError) as error:
        # Malformed opcode arguments surface as these from the C unpickler and from genops.
        raise HostileDumpError(f"{type(error).__name__}: {error}", source) from None
    if not isinstance(loaded, dict):
        raise HostileDumpError(f"top level is {type(loaded).__name__}, not a dict", source)
    return loaded


class ProcessGroupConfig(BaseModel):
    """``pg_config[<pg>]``: the group's name, description and member ranks."""

    name: str
    desc: str = ""
    ranks: list[int] = Field(default_factory=list)


class ProcessGroupStatus(BaseModel):
    """``pg_status[<pg>]``: the last collective sequence ids this rank enqueued/started/completed."""

    last_enqueued_collective: int = -1
    last_started_collective: int = -1
    last_completed_collective: int = -1


class FlightRecorderEntry(BaseModel):
    """One ``entries[]`` record: a collective or p2p op as this rank saw it."""

    record_id: int
    pg_id: int = 0
    pg_name: str = ""
    pg_desc: str = ""
    collective_seq_id: int = 0
    p2p_seq_id: int = 0
    op_id: int = 0
    profiling_name: str = ""
    time_created_ns: int | None = None
    input_sizes: list[Any] = Field(default_factory=list)
    output_sizes: list[Any] = Field(default_factory=list)
    state: EntryState = "scheduled"
    time_discovered_started_ns: int | None = None
    time_discovered_completed_ns: int | None = None
    retired: bool = False
    timeout_ms: int | None = None
    is_p2p: bool = False
    frames: list[str] = Field(default_factory=list)

    @property
    def op(self) -> str:
        """``nccl:all_reduce`` → ``ALLREDUCE`` (the way runbooks and logs name collectives)."""
        name = self.profiling_name.split(":", 1)[-1]
        return name.replace("_", "").upper() or "UNKNOWN"


class FlightRecorderDump(BaseModel):
    """One rank's dump."""

    rank: int
    source: str = ""
    version: str | None = None
    comm_lib_version: str | None = None
    pg_config: dict[str, ProcessGroupConfig] = Field(default_factory=dict)
    pg_status: dict[str, ProcessGroupStatus] = Field(default_factory=dict)
    entries: list[FlightRecorderEntry] = Field(default_factory=list)

    def group_key(self, pg_id: str) -> str:
        """Process groups are matched across ranks by name (pg_id is a per-process ordinal)."""
        config = self.pg_config.get(pg_id)
        return config.name if config else pg_id


# The look-behind starts the digits at their first one only: without it a long digit run not at
# the end retries from every position (quadratic on a crafted file name). A rank has at most 9
# digits (int() refuses strings of thousands).
_RANK_SUFFIX = re.compile(r"(?<!\d)(\d{1,9})(?:\.json|\.pkl|\.pickle)?$")


def rank_from_filename(name: str) -> int | None:
    """``/tmp/nccl_trace_rank_37`` → 37: PyTorch appends the global rank to the prefix."""
    match = _RANK_SUFFIX.search(name.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


_INT64 = range(-(2**63), 2**63)


def _int(value: object, default: int | None = None) -> int | None:
    # What PyTorch writes is int64; anything else is refused here, since a pickled integer of
    # thousands of digits cannot even be printed (str() refuses over 4300 digits).
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if value in _INT64 else default
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and int(value) in _INT64 else default
    # ASCII digits only: str.isdigit() also admits "²", which int() rejects.
    if isinstance(value, str) and (digits := value.strip().removeprefix("-")).isascii() and digits.isdigit():
        return int(value) if len(digits) <= 19 and int(value) in _INT64 else default
    return default


def _int_or(value: object, default: int) -> int:
    found = _int(value)
    return default if found is None else found


def _ranks(value: object) -> list[int]:
    # pg_config "ranks" is the string form of a list ("[0, 1]") in the pickle, a list in some JSON.
    # The string is split, not evaluated: ast.literal_eval recurses on crafted text ("-" * 5000)
    # and raises RecursionError.
    if isinstance(value, str):
        text = value.strip()
        if text[:1] + text[-1:] in ("[]", "()"):
            text = text[1:-1]
        if text.count(",") >= thresholds.FLIGHT_RECORDER_MAX_OBJECTS:
            return []
        value = [part.strip().strip("'\"") for part in text.split(",") if part.strip()]
    if isinstance(value, list | tuple):
        return [r for r in (_int(v) for v in value) if r is not None]
    return []


def _mapping(value: object) -> dict[Any, Any]:
    # Keys are whatever the dump holds (callers str() them), values are plain data of any shape.
    return value if isinstance(value, dict) else {}


def _sequence(value: object) -> list[Any] | tuple[Any, ...]:
    return value if isinstance(value, list | tuple) else []


def _sizes(value: object) -> list[Any]:
    """``[[4096, 4096], []]``: one shape (a list of int64 dimensions, or one) per tensor, nothing else."""
    sizes: list[Any] = []
    for shape in _sequence(value):
        if isinstance(shape, list | tuple):
            sizes.append([d for d in map(_int, shape) if d is not None])
        elif (number := _int(shape)) is not None:
            sizes.append(number)
    return sizes


def _frames(value: object, limit: int = 4) -> list[str]:
    if not isinstance(value, list):
        return []
    out: list[str] = []
    for frame in value[:limit]:
        if isinstance(frame, dict):
            out.append(f"{frame.get('name', '?')} at {frame.get('filename', '?')}:{frame.get('line', '?')}")
    return out


def _entry(raw: dict[str, Any]) -> FlightRecorderEntry:
    group = raw.get("process_group")
    pg_name, pg_desc = "", ""
    if isinstance(group, list | tuple) and group:
        pg_name = str(group[0])
        pg_desc = str(group[1]) if len(group) > 1 else ""
    elif isinstance(group, str):
        pg_name = group
    state = raw.get("state")
    return FlightRecorderEntry(
        record_id=_int_or(raw.get("record_id"), 0),
        pg_id=_int_or(raw.get("pg_id"), 0),
        pg_name=pg_name or str(raw.get("pg_id", "")),
        pg_desc=pg_desc,
        collective_seq_id=_int_or(raw.get("collective_seq_id"), 0),
        p2p_seq_id=_int_or(raw.get("p2p_seq_id"), 0),
        op_id=_int_or(raw.get("op_id"), 0),
        profiling_name=str(raw.get("profiling_name") or ""),
        time_created_ns=_int(raw.get("time_created_ns")),
        input_sizes=_sizes(raw.get("input_sizes")),
        output_sizes=_sizes(raw.get("output_sizes")),
        state=state if state in ("scheduled", "started", "completed") else "scheduled",
        time_discovered_started_ns=_int(raw.get("time_discovered_started_ns")),
        time_discovered_completed_ns=_int(raw.get("time_discovered_completed_ns")),
        retired=bool(raw.get("retired", False)),
        timeout_ms=_int(raw.get("timeout_ms")),
        is_p2p=bool(raw.get("is_p2p", False)),
        frames=_frames(raw.get("frames")),
    )


def parse_dump(data: bytes, *, source: str = "", rank: int | None = None) -> FlightRecorderDump:
    """Load and normalise one rank's dump. The rank comes from `rank`, the dump, or the file name."""
    raw = load_dump_data(data, source=source)
    if "entries" not in raw and "pg_config" not in raw:
        raise HostileDumpError("no 'entries' or 'pg_config' key: not a Flight Recorder dump", source)
    resolved = rank if rank is not None else _int(raw.get("rank"))
    if resolved is None:
        resolved = rank_from_filename(source)
    if resolved is None:
        raise HostileDumpError("cannot tell the rank (no 'rank' key and no rank suffix in the file name)", source)
    try:
        return _normalise(raw, source, resolved)
    except (ValueError, TypeError, AttributeError, OverflowError) as error:
        # Plain data of the wrong shape (pydantic's ValidationError is a ValueError): the dump
        # is unreadable, and says so, rather than stopping whoever asked for the analysis.
        raise HostileDumpError(f"malformed dump: {type(error).__name__}: {str(error)[:200]}", source) from None


def _normalise(raw: dict[str, Any], source: str, resolved: int) -> FlightRecorderDump:
    pg_config: dict[str, ProcessGroupConfig] = {}
    for key, value in _mapping(raw.get("pg_config")).items():
        if isinstance(value, dict):
            pg_config[str(key)] = ProcessGroupConfig(
                name=str(value.get("name", key)), desc=str(value.get("desc", "")), ranks=_ranks(value.get("ranks"))
            )
    pg_status: dict[str, ProcessGroupStatus] = {}
    for key, value in _mapping(raw.get("pg_status")).items():
        if isinstance(value, dict):
            pg_status[str(key)] = ProcessGroupStatus(
                last_enqueued_collective=_int_or(value.get("last_enqueued_collective"), -1),
                last_started_collective=_int_or(value.get("last_started_collective"), -1),
                last_completed_collective=_int_or(value.get("last_completed_collective"), -1),
            )
    entries = [_entry(e) for e in _sequence(raw.get("entries")) if isinstance(e, dict)]
    version = raw.get("version")
    comm_version = raw.get("comm_lib_version") or raw.get("nccl_version")
    return FlightRecorderDump(
        rank=resolved,
        source=source,
        version=str(version) if version is not None else None,
        comm_lib_version=str(comm_version) if comm_version is not None else None,
        pg_config=pg_config,
        pg_status=pg_status,
        entries=entries,
    )


class GroupDivergence(BaseModel):
    """Where the ranks of one process group stop agreeing."""

    pg_name: str
    pg_desc: str = ""
    member_ranks: list[int] = Field(default_factory=list)
    divergent_seq: int
    op: str = "UNKNOWN"
    profiling_name: str = ""
    input_sizes: list[Any] = Field(default_factory=list)
    timeout_ms: int | None = None
    first_created_ns: int | None = None
    # Ranks without a dump cannot say what they did: reported apart from the ones that did say.
    ranks_without_dump: list[int] = Field(default_factory=list)
    never_entered: list[int] = Field(default_factory=list)
    entered_not_started: list[int] = Field(default_factory=list)
    started_not_completed: list[int] = Field(default_factory=list)
    completed: list[int] = Field(default_factory=list)
    # Ranks whose op at the divergent sequence number differs from the majority (desync bug).
    mismatched_ops: dict[int, str] = Field(default_factory=dict)
    last_seq_by_rank: dict[int, int] = Field(default_factory=dict)

    @property
    def culprits(self) -> list[int]:
        """The ranks most likely at fault: those that never entered; else those that never completed
        while others did; else (all stuck inside) the ones whose kernel never started."""
        if self.never_entered:
            return self.never_entered
        if self.completed and self.started_not_completed:
            return self.started_not_completed
        return self.entered_not_started

    @property
    def verdict(self) -> str:
        """``never_entered`` / ``never_completed`` / ``desync`` / ``stuck_inside``."""
        if self.mismatched_ops:
            return "desync"
        if self.never_entered:
            return "never_entered"
        if self.completed and self.started_not_completed:
            return "never_completed"
        return "stuck_inside"


class HangAnalysis(BaseModel):
    """What a set of dumps says about a hang."""

    ranks_with_dump: list[int] = Field(default_factory=list)
    refused: dict[str, str] = Field(default_factory=dict)
    divergences: list[GroupDivergence] = Field(default_factory=list)


def _last_seq(dump: FlightRecorderDump, pg_name: str, entries: list[FlightRecorderEntry]) -> tuple[int, int]:
    """(last enqueued, last completed) collective sequence ids of `dump` in the group."""
    enqueued = max((e.collective_seq_id for e in entries), default=-1)
    completed = max((e.collective_seq_id for e in entries if e.state == "completed"), default=-1)
    for pg_id, status in dump.pg_status.items():
        if dump.group_key(pg_id) == pg_name:
            enqueued = max(enqueued, status.last_enqueued_collective)
            completed = max(completed, status.last_completed_collective)
    return enqueued, completed


def analyze(dumps: Iterable[FlightRecorderDump], refused: dict[str, str] | None = None) -> HangAnalysis:
    """Per process group, find the first collective sequence number not completed by every member,
    and sort the members by what they did with it."""
    by_rank = {d.rank: d for d in dumps}
    groups: dict[str, tuple[str, set[int]]] = {}
    for dump in by_rank.values():
        for config in dump.pg_config.values():
            desc, members = groups.get(config.name, (config.desc, set()))
            groups[config.name] = (desc or config.desc, members | set(config.ranks))
        for entry in dump.entries:
            if entry.pg_name not in groups:
                groups[entry.pg_name] = (entry.pg_desc, set())
    analysis = HangAnalysis(ranks_with_dump=sorted(by_rank), refused=dict(refused or {}))
    for pg_name, (desc, members) in sorted(groups.items()):
        divergence = _diverge(pg_name, desc, members, by_rank)
        if divergence is not None:
            analysis.divergences.append(divergence)
    return analysis


def _diverge(
    pg_name: str, desc: str, members: set[int], by_rank: dict[int, FlightRecorderDump]
) -> GroupDivergence | None:
    collective: dict[int, dict[int, FlightRecorderEntry]] = {}
    seqs: dict[int, tuple[int, int]] = {}
    dumped = [r for r in by_rank if not members or r in members]
    for rank in dumped:
        entries = [e for e in by_rank[rank].entries if e.pg_name == pg_name and not e.is_p2p]
        collective[rank] = {e.collective_seq_id: e for e in entries}
        seqs[rank] = _last_seq(by_rank[rank], pg_name, entries)
    if not seqs:
        return None
    lowest_completed = min(done for _, done in seqs.values())
    highest_enqueued = max(enq for enq, _ in seqs.values())
    target = lowest_completed + 1
    if highest_enqueued < target:
        return None  # every dumped rank completed everything it enqueued
    sample = next((collective[r][target] for r in dumped if target in collective[r]), None)
    ops = {r: collective[r][target].profiling_name for r in dumped if target in collective[r]}
    majority = max(set(ops.values()), key=list(ops.values()).count) if ops else ""
    result = GroupDivergence(
        pg_name=pg_name,
        pg_desc=desc,
        member_ranks=sorted(members or set(dumped)),
        divergent_seq=target,
        op=sample.op if sample else "UNKNOWN",
        profiling_name=sample.profiling_name if sample else "",
        input_sizes=sample.input_sizes if sample else [],
        timeout_ms=sample.timeout_ms if sample else None,
        first_created_ns=min(
            (t for r in ops if (t := collective[r][target].time_created_ns) is not None), default=None
        ),
        ranks_without_dump=sorted(members - set(by_rank)),
        mismatched_ops={r: name for r, name in ops.items() if name != majority},
        last_seq_by_rank={r: seqs[r][0] for r in sorted(seqs)},
    )
    for rank in sorted(dumped):
        enqueued, completed = seqs[rank]
        entry = collective[rank].get(target)
        if completed >= target or (entry is not None and entry.state == "completed"):
            result.completed.append(rank)
        elif enqueued < target:
            result.never_entered.append(rank)
        elif entry is not None and entry.state == "started":
            result.started_not_completed.append(rank)
        else:
            result.entered_not_started.append(rank)
    return result


def load_dumps(files: Iterable[tuple[str, bytes]]) -> tuple[list[FlightRecorderDump], dict[str, str]]:
    """Parse many ``(name, bytes)`` dumps; refused ones are returned with ``unreadable dump: <why>``,
    never raised."""
    dumps: list[FlightRecorderDump] = []
    refused: dict[str, str] = {}
    for name, data in files:
        try:
            dumps.append(parse_dump(data, source=name))
        except HostileDumpError as error:
            refused[name] = f"unreadable dump: {error.reason}"
    return dumps, refused
