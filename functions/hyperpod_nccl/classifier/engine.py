"""The scanner: one pass, constant memory, a cheap keyword prefilter, grouped hits per signature.

Speed comes from never running a regex on a line that cannot match: text is scanned in blocks,
the block is lower-cased once and searched for the catalog's keywords with `str.find` (C speed),
and only the lines around those positions are tried against the signatures that own the keyword.
Most NCCL INFO chatter contains none of the keywords and costs nothing but the search.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from pydantic import BaseModel, Field

from hyperpod_nccl import xid as xid_facts
from hyperpod_nccl.classifier.catalog import Catalog, Signature, group_fields, load_catalog
from hyperpod_nccl.models.findings import Priority
from hyperpod_nccl.models.logs import SignatureHit
from hyperpod_nccl.references import NODE_GPU, NODE_HARDWARE, NODE_ROW_REMAP, Reference

# Regexes only see the head of a line: evidence worth reading is at the start, and it bounds the
# work per line whatever a pathological line looks like.
MAX_MATCH_CHARS = 4096
EVIDENCE_LINES = 5
EVIDENCE_CHARS = 500
MAX_FIELD_VALUES = 16
MAX_SPLIT_GROUPS = 64
BLOCK_CHARS = 1 << 20

_INFO_LINE = re.compile(r"\bNCCL INFO\b")
_NCCL_PREFIX = re.compile(r"(?:^|\s)(?P<host>[A-Za-z][\w.-]{0,80}):(?P<pid>\d+):(?P<tid>\d+) \[(?P<device>\d+)\] NCCL ")
_RANK = re.compile(r"\[(?:PG [\w:]+ (?:\([^)]{0,80}\) )?)?[Rr]ank ?(?P<rank>\d+)\]")
_VERSION_BANNER = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+)(?:[+-][\w.]+)?")
_TIMESTAMPS = (
    # ISO 8601 / RFC 3339 (CloudWatch, kubectl --timestamps, Python logging, PyTorch "[2024-05-01 12:00:00,123]")
    re.compile(r"(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"),
    # dmesg -T: "[Wed May  1 12:34:56 2024]"
    re.compile(r"\[(?P<ts>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\]"),
    # syslog: "May  1 12:34:56"
    re.compile(r"^(?P<ts>(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} \d{2}:\d{2}:\d{2})"),
)


class ScanResult(BaseModel):
    """What one scan found: the hits (most urgent first) and how much was read."""

    hits: list[SignatureHit] = Field(default_factory=list)
    lines_scanned: int = 0
    bytes_scanned: int = 0
    # NCCL version banner → how many lines announced it (input to the cross-source drift check).
    nccl_versions: dict[str, int] = Field(default_factory=dict)

    def by_id(self, signature_id: str) -> list[SignatureHit]:
        """The hits of one signature (several when it is split, e.g. per Xid code)."""
        return [hit for hit in self.hits if hit.id == signature_id]


@dataclass
class _Group:
    signature: Signature
    count: int = 0
    evidence: deque[str] = field(default_factory=lambda: deque(maxlen=EVIDENCE_LINES))
    values: dict[str, list[str]] = field(default_factory=dict)
    first_seen: str | None = None
    last_seen: str | None = None

    def add(self, line: str, fields: dict[str, str], timestamp: str | None) -> None:
        self.count += 1
        self.evidence.append(line[:EVIDENCE_CHARS])
        for name, value in fields.items():
            bucket = self.values.setdefault(name, [])
            if value not in bucket and len(bucket) < MAX_FIELD_VALUES:
                bucket.append(value)
        if timestamp:
            self.first_seen = self.first_seen or timestamp
            self.last_seen = timestamp


def trigger_set(keywords: tuple[str, ...]) -> tuple[str, ...]:
    """The fewest keywords such that every keyword contains one of them ("fail" covers "failed to extend").

    The block prefilter pays one pass over the text per trigger, so fewer triggers is faster.
    """
    triggers: list[str] = []
    for keyword in sorted(keywords, key=len):
        if not any(trigger in keyword for trigger in triggers):
            triggers.append(keyword)
    return tuple(sorted(triggers))


def parse_timestamp(line: str) -> str | None:
    """The timestamp a log line starts with (or carries near its start), as written."""
    head = line[:120]
    for pattern in _TIMESTAMPS:
        match = pattern.search(head)
        if match:
            return match.group("ts")
    return None


class Scanner:
    """Incremental scanner; feed text with `feed_text`/`feed_line`, then call `finish()`.

    Memory is bounded by the catalog size (a few evidence lines and field values per signature),
    never by the input.
    """

    def __init__(self, catalog: Catalog | None = None) -> None:
        self.catalog = catalog or load_catalog()
        self._matchable = [s for s in self.catalog.signatures if not s.synthetic]
        by_keyword: dict[str, list[Signature]] = {}
        for signature in self._matchable:
            for keyword in signature.keywords:
                by_keyword.setdefault(keyword, []).append(signature)
        by_keyword.setdefault("nccl version", [])  # version banners feed the drift analysis
        self._by_keyword = by_keyword
        self._keywords = tuple(sorted(by_keyword))
        self._triggers = trigger_set(self._keywords)
        self._order = {s.id: i for i, s in enumerate(self.catalog.signatures)}
        self._groups: dict[tuple[str, str], _Group] = {}
        self._versions: dict[str, int] = {}
        self._version_lines: dict[str, str] = {}
        self._lines = 0
        self._chars = 0
        self._pending = ""

    # ------------------------------------------------------------------ input
    def feed_text(self, text: str) -> None:
        """Scan a block of text (any number of lines; a trailing partial line is carried over)."""
        if self._pending:
            text = self._pending + text
            self._pending = ""
        cut = text.rfind("\n")
        if cut < 0:
            self._pending = text
            return
        self._pending = text[cut + 1 :]
        self._scan_block(text[: cut + 1])

    def feed_line(self, line: str, timestamp: str | None = None) -> None:
        """Scan one line; `timestamp` overrides the one parsed from the text (CloudWatch events)."""
        self._lines += 1
        self._chars += len(line) + 1
        lowered = line[:MAX_MATCH_CHARS].lower()
        found = [k for k in self._keywords if k in lowered]
        if found:
            self._classify(line.rstrip("\r\n"), found, timestamp)

    def feed_lines(self, lines: Iterable[str]) -> None:
        """Scan lines, batching them into blocks so the keyword search runs at C speed."""
        batch: list[str] = []
        size = 0
        for line in lines:
            batch.append(line if line.endswith("\n") else line + "\n")
            size += len(line)
            if size >= BLOCK_CHARS:
                self.feed_text("".join(batch))
                batch, size = [], 0
        if batch:
            self.feed_text("".join(batch))

    def feed_binary(self, stream: BinaryIO, block_bytes: int = BLOCK_CHARS) -> None:
        """Scan a binary stream (a file) in blocks, decoding UTF-8 leniently."""
        while True:
            data = stream.read(block_bytes)
            if not data:
                break
            self.feed_text(data.decode("utf-8", errors="replace"))

    # ------------------------------------------------------------------ core
    def _scan_block(self, block: str) -> None:
        self._lines += block.count("\n")
        self._chars += len(block)
        lowered = block.lower()
        if len(lowered) != len(block):  # a few Unicode characters change length when lower-cased
            for line in block.splitlines():
                self._lines -= 1
                self._chars -= len(line) + 1
                self.feed_line(line)
            return
        # One str.find pass per trigger (a minimal set of substrings covering every keyword), then
        # the exact keywords only on the few candidate lines.
        starts: set[int] = set()
        for trigger in self._triggers:
            position = lowered.find(trigger)
            while position >= 0:
                starts.add(lowered.rfind("\n", 0, position) + 1)
                # One hit per line and trigger is enough: skip the rest of this line.
                position = lowered.find(trigger, lowered.find("\n", position))
        for start in sorted(starts):
            end = block.find("\n", start)
            head = lowered[start : min(end, start + MAX_MATCH_CHARS)]
            found = [k for k in self._keywords if k in head]
            if found:
                self._classify(block[start:end].rstrip("\r"), found, None)

    def _classify(self, line: str, keywords: list[str], timestamp: str | None) -> None:
        head = line[:MAX_MATCH_CHARS]
        if "nccl version" in keywords:
            self._record_version(head)
        signatures: dict[str, Signature] = {}
        for keyword in keywords:
            for signature in self._by_keyword[keyword]:
                signatures.setdefault(signature.id, signature)
        if not signatures:
            return
        is_info: bool | None = None
        matched: list[tuple[Signature, dict[str, str]]] = []
        generic: list[tuple[Signature, dict[str, str]]] = []
        for signature in signatures.values():
            match = signature.compiled.search(head)
            if match is None:
                continue
            if not signature.allow_info:
                if is_info is None:
                    is_info = _INFO_LINE.search(head) is not None
                if is_info:
                    continue
            exclude = signature.compiled_exclude
            if exclude is not None and exclude.search(head):
                continue
            (generic if signature.generic else matched).append((signature, group_fields(match)))
        for signature, fields in matched or generic:
            self._record(signature, head, fields, timestamp)

    def _record(self, signature: Signature, line: str, fields: dict[str, str], timestamp: str | None) -> None:
        values = dict(signature.fields)
        prefix = _NCCL_PREFIX.search(line)
        if prefix:
            values["host"] = prefix.group("host")
        rank = _RANK.search(line)
        if rank:
            values["rank"] = rank.group("rank")
        for extractor in signature.compiled_extract:
            found = extractor.search(line)
            if found:
                for name, value in found.groupdict().items():
                    if value:
                        values.setdefault(name, value)
        values.update(fields)
        split = values.get(signature.split_by, "") if signature.split_by else ""
        key = (signature.id, split)
        group = self._groups.get(key)
        if group is None:
            if split and sum(1 for k in self._groups if k[0] == signature.id) >= MAX_SPLIT_GROUPS:
                key = (signature.id, "")  # bound memory: fold further split values together
                group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = _Group(signature)
        group.add(line, values, timestamp or parse_timestamp(line))

    def _record_version(self, line: str) -> None:
        match = _VERSION_BANNER.search(line)
        if match:
            version = match.group("version")
            self._versions[version] = self._versions.get(version, 0) + 1
            self._version_lines.setdefault(version, line[:EVIDENCE_CHARS])

    # ------------------------------------------------------------------ output
    def finish(self) -> ScanResult:
        """Flush the carried-over partial line and return the grouped result."""
        if self._pending:
            pending, self._pending = self._pending, ""
            self._scan_block(pending + "\n")
        hits = [_to_hit(group) for group in self._groups.values()]
        drift = version_drift_hit(self._versions, list(self._version_lines.values()), self.catalog)
        if drift is not None:
            hits.append(drift)
        hits.sort(key=lambda h: (h.priority.rank, self._order.get(h.id, 0), -h.count))
        return ScanResult(
            hits=hits, lines_scanned=self._lines, bytes_scanned=self._chars, nccl_versions=dict(self._versions)
        )


def _to_hit(group: _Group) -> SignatureHit:
    signature = group.signature
    fields: dict[str, str | int | float | bool | None] = {
        name: values[0] if len(values) == 1 else ",".join(values) for name, values in group.values.items()
    }
    priority, reference = signature.priority, signature.ref
    if signature.split_by == "xid" and "xid" in group.values:
        priority, reference = _enrich_xid(fields, group.values["xid"])
    return SignatureHit(
        id=signature.id,
        cls=signature.cls,
        title=f"{signature.title} {fields['xid']}"
        if signature.split_by == "xid" and "xid" in fields
        else signature.title,
        priority=priority,
        reference=reference,
        count=group.count,
        evidence=list(group.evidence),
        fields=fields,
        first_seen=group.first_seen,
        last_seen=group.last_seen,
    )


def _enrich_xid(fields: dict[str, str | int | float | bool | None], codes: list[str]) -> tuple[Priority, Reference]:
    """Xid code → app vs hardware and the action (reboot vs replace), from `hyperpod_nccl.xid`."""
    numbers = [int(code) for code in codes if code.isdigit()]
    infos = [xid_facts.xid_info(code) for code in numbers]
    if not infos:
        return Priority.P0, NODE_GPU
    fields["xid_name"] = "; ".join(info.name for info in infos)
    fields["xid_category"] = ",".join(sorted({info.category for info in infos}))
    fields["action"] = xid_facts.most_severe_action(numbers)
    if any(info.code in (63, 64) for info in infos):
        return Priority.P0, NODE_ROW_REMAP
    if any(info.is_hardware or info.category == "unknown" for info in infos):
        return Priority.P0, NODE_HARDWARE if fields["action"] == "replace" else NODE_GPU
    # Application Xids: fix the workload before touching hardware.
    return Priority.P1, NODE_GPU


def version_drift_hit(
    versions: dict[str, int], examples: list[str], catalog: Catalog | None = None
) -> SignatureHit | None:
    """A hit when more than one NCCL version was announced in one scope (ranks disagree)."""
    if len(versions) < 2:
        return None
    signature = (catalog or load_catalog()).by_id("nccl_version_drift")
    ordered = sorted(versions, key=lambda v: tuple(int(p) for p in v.split(".")))
    return SignatureHit(
        id=signature.id,
        cls=signature.cls,
        title=signature.title,
        priority=signature.priority,
        reference=signature.ref,
        count=sum(versions.values()),
        evidence=examples[:EVIDENCE_LINES],
        fields={"nccl_versions": ",".join(ordered), **{f"lines_{v}": versions[v] for v in ordered}},
    )


def scan_lines(lines: Iterable[str], catalog: Catalog | None = None) -> ScanResult:
    """Classify every line of `lines` and return the grouped hits."""
    scanner = Scanner(catalog)
    scanner.feed_lines(lines)
    return scanner.finish()


def scan_text(text: str, catalog: Catalog | None = None) -> ScanResult:
    """Classify a whole text (a pasted error string, a log excerpt)."""
    scanner = Scanner(catalog)
    scanner.feed_text(text)
    return scanner.finish()


def scan_stream(stream: BinaryIO, catalog: Catalog | None = None) -> ScanResult:
    """Classify a binary stream (a log file) block by block in constant memory."""
    scanner = Scanner(catalog)
    scanner.feed_binary(stream)
    return scanner.finish()


def iter_signatures(catalog: Catalog | None = None) -> Iterator[Signature]:
    """Every signature of the catalog (the shipped one by default)."""
    yield from (catalog or load_catalog()).signatures
