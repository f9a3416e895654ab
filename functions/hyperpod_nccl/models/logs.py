"""CloudWatch log inventory and the classifier's hit model (owned by the log-intelligence work).

`SignatureHit` lives here, not in the classifier, so that the inventory (pure data) does not depend
on the scanner; `hyperpod_nccl.classifier` re-exports it.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from hyperpod_nccl.models.findings import Priority
from hyperpod_nccl.references import Reference

StreamKind = Literal["health_agent", "lifecycle", "deep_health_check", "nccl", "training", "other"]
_INSTANCE_ID = re.compile(r"\bi-[0-9a-f]{8,17}\b")


def stream_identity(stream: str) -> tuple[StreamKind, str | None, str | None]:
    """(kind, instance group, instance id) of a HyperPod log stream name: the health agent's and
    the lifecycle scripts' streams are `<kind>/<group>/<instance>`, a node's NCCL and training
    output `<instance>/nccl` and `<instance>/training`."""
    parts = stream.split("/")
    instance = _INSTANCE_ID.search(stream)
    instance_id = instance.group(0) if instance else None
    if parts[0] == "SagemakerHealthMonitoringAgent":
        return "health_agent", parts[1] if len(parts) > 2 else None, instance_id
    if parts[0] == "LifecycleConfig":
        return "lifecycle", parts[1] if len(parts) > 2 else None, instance_id
    if parts[0] == "DeepHealthCheckResults":
        return "deep_health_check", None, instance_id
    if parts[-1] in ("nccl", "training"):
        kind: StreamKind = "nccl" if parts[-1] == "nccl" else "training"
        return kind, None, instance_id
    return "other", None, instance_id


# Flood terms a FloodedStream keeps.
FLOOD_TERMS_KEPT = 10


class FoldedHit(BaseModel):
    """A generic error (an NCCL result code, a bare warning) folded under the hit that names its cause."""

    id: str
    cls: str
    title: str
    count: int = 0
    evidence: list[str] = Field(default_factory=list)


class SignatureHit(BaseModel):
    """All lines of one input that matched one failure signature, grouped."""

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
    # The generic errors of the same input that this hit explains (`classifier.fold_generic_hits`).
    folded: list[FoldedHit] = Field(default_factory=list)


class HmaDetection(BaseModel):
    """One `HealthMonitoringAgentDetectionEvent` record of the HyperPod health-monitoring agent."""

    stream: str
    instance_id: str | None = None
    instance_group: str | None = None
    time: datetime
    reason: str | None = None
    condition: str | None = None
    action: str | None = None
    message: str


class StreamScan(BaseModel):
    """The classified candidate lines of one log stream."""

    stream: str
    kind: StreamKind = "other"
    instance_id: str | None = None
    instance_group: str | None = None
    events_scanned: int = 0
    hits: list[SignatureHit] = Field(default_factory=list)


class FloodedStream(BaseModel):
    """A log stream whose matching lines overflowed a scan query (one job can print any line)."""

    stream: str
    instance_id: str | None = None
    # Matching events of this stream in its largest overflowing read: a lower bound of what it
    # printed in the window.
    matched_at_least: int = 0
    # Terms carried by many of its flooding lines (the first few, in catalog order).
    flood_terms: list[str] = Field(default_factory=list)
    # True when its newest-first reads reached its oldest lines too: nothing of it was skipped.
    complete: bool = False

    def note_terms(self, terms: list[str]) -> None:
        """Remember flood terms, the first FLOOD_TERMS_KEPT of them (they are for people to read)."""
        self.flood_terms += [t for t in terms if t not in self.flood_terms][
            : max(0, FLOOD_TERMS_KEPT - len(self.flood_terms))
        ]


class LogInventory(BaseModel):
    """What the CloudWatch scan found. Extended by the log-intelligence collector."""

    log_group: str | None = None
    group_exists: bool = False
    window_start: datetime | None = None
    window_end: datetime | None = None
    # Streams that had events in the window (DescribeLogStreams), and those with candidate lines.
    streams_listed: int = 0
    streams_scanned: list[str] = Field(default_factory=list)
    filter_terms: list[str] = Field(default_factory=list)
    events_matched: int = 0
    scans: list[StreamScan] = Field(default_factory=list)
    hma_detections: list[HmaDetection] = Field(default_factory=list)
    # NCCL version → streams that announced it (cluster-wide drift analysis).
    nccl_versions: dict[str, list[str]] = Field(default_factory=dict)
    # True when a cap stopped the scan early (a flooding stream, the call budget) or a page failed.
    truncated: bool = False
    truncation_reason: str | None = None
    # Streams that flooded a query, and the FilterLogEvents calls the scan made.
    flooded_streams: list[FloodedStream] = Field(default_factory=list)
    filter_calls: int = 0
    # True when the scan stopped at its FilterLogEvents call budget (LOG_FILTER_MAX_CALLS).
    budget_spent: bool = False
