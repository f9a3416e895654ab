"""The scanner: one pass over lines, cheap prefilter, grouped hits per signature."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field

from hyperpod_nccl.models.findings import Priority
from hyperpod_nccl.references import Reference


class SignatureHit(BaseModel):
    """All lines of one input that matched one signature, grouped."""

    id: str
    cls: str
    title: str
    priority: Priority
    reference: Reference
    count: int = 0
    evidence: list[str] = Field(default_factory=list)
    fields: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    first_seen: str | None = None
    last_seen: str | None = None


class ScanResult(BaseModel):
    """What one scan found: the hits (most urgent first) and how much was read."""

    hits: list[SignatureHit] = Field(default_factory=list)
    lines_scanned: int = 0
    bytes_scanned: int = 0


class Scanner:
    """Incremental scanner (skeleton: the catalog-backed implementation follows)."""

    def __init__(self) -> None:
        self.result = ScanResult()

    def feed(self, line: str) -> None:
        """Scan one line."""
        self.result.lines_scanned += 1
        self.result.bytes_scanned += len(line)

    def finish(self) -> ScanResult:
        """The grouped result."""
        return self.result


def scan_lines(lines: Iterable[str]) -> ScanResult:
    """Classify every line of `lines` and return the grouped hits."""
    scanner = Scanner()
    for line in lines:
        scanner.feed(line)
    return scanner.finish()
