"""CloudWatch scan: the cluster's log group, candidate lines filtered server-side, classified.

Group `/aws/sagemaker/Clusters/<name>/<cluster-id>`, window `ctx.window_start..ctx.now`. The
catalog's quoted terms (`cloudwatch_terms`) are packed into "match any" filter patterns
(`?"NCCL WARN" ?"Xid" ...`, each within the API's 1024-character limit), so a sweep makes a couple of
paginated FilterLogEvents calls over the whole group (every stream, every page) instead of one per
term: FilterLogEvents has a low account-wide request rate. A pattern that hits the event cap (a
noisy group, where one broad term could crowd out rarer ones) is read again one term at a time.
Events are deduplicated by eventId; then each stream's candidate events are classified with the same
catalog as `triage` and the pod-log check.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hyperpod_nccl.classifier import Scanner, load_catalog
from hyperpod_nccl.collectors.aws import degraded_from_error, error_code, is_access_denied
from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.models.cluster import ControlPlaneInventory
from hyperpod_nccl.models.logs import HmaDetection, LogInventory, StreamKind, StreamScan
from hyperpod_nccl.references import OPS_CLOUDWATCH
from hyperpod_nccl.thresholds import FILTER_PATTERN_MAX_CHARS, LOG_EVENTS_PER_TERM, LOG_FILTER_PAGE_LIMIT

AwsError = (ClientError, BotoCoreError)
SOURCE = "CloudWatch logs"
HMA_MARKER = "HealthMonitoringAgentDetectionEvent"
_INSTANCE_ID = re.compile(r"\bi-[0-9a-f]{8,17}\b")
HMA_SIGNATURE = "hma_detection"
# HyperPod's GPU node conditions end in the action the agent takes.
_ACTION_BY_CONDITION_SUFFIX = {"Reboot": "Reboot", "Terminate": "Replace"}


def stream_identity(stream: str) -> tuple[StreamKind, str | None, str | None]:
    """(kind, instance group, instance id) of a HyperPod log stream name."""
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


def _millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _iso(millis: int) -> str:
    return datetime.fromtimestamp(millis / 1000, UTC).isoformat().replace("+00:00", "Z")


def group_exists(ctx: CollectionContext, log_group: str) -> bool:
    """DescribeLogGroups with the group as prefix (all pages); True when the exact name exists."""
    paginator = ctx.aws.client("logs").get_paginator("describe_log_groups")
    for page in paginator.paginate(logGroupNamePrefix=log_group):
        if any(g.get("logGroupName") == log_group for g in page.get("logGroups", [])):
            return True
    return False


def count_streams(ctx: CollectionContext, log_group: str) -> int:
    """Streams with events in the window (DescribeLogStreams, newest first, all relevant pages)."""
    start = _millis(ctx.window_start)
    total = 0
    paginator = ctx.aws.client("logs").get_paginator("describe_log_streams")
    for page in paginator.paginate(logGroupName=log_group, orderBy="LastEventTime", descending=True):
        streams = page.get("logStreams", [])
        recent = [s for s in streams if s.get("lastEventTimestamp", s.get("creationTime", 0)) >= start]
        total += len(recent)
        if len(recent) < len(streams):  # ordered by last event: the rest are older than the window
            break
    return total


def any_term_patterns(terms: list[str]) -> list[tuple[str, list[str]]]:
    """`terms` packed, in order, into `?"a" ?"b"` patterns of at most FILTER_PATTERN_MAX_CHARS,
    each with the terms it holds."""
    patterns: list[tuple[str, list[str]]] = []
    parts: list[str] = []
    members: list[str] = []
    for term in terms:
        part = "?" + json.dumps(term)  # quoted: an exact, case-sensitive substring
        if parts and len(" ".join([*parts, part])) > FILTER_PATTERN_MAX_CHARS:
            patterns.append((" ".join(parts), members))
            parts, members = [], []
        parts.append(part)
        members.append(term)
    if parts:
        patterns.append((" ".join(parts), members))
    return patterns


def _read_pattern(
    ctx: CollectionContext, log_group: str, pattern: str, events: dict[str, dict[str, tuple[int, str]]]
) -> bool:
    """Add every event matching `pattern` to `events`; True when LOG_EVENTS_PER_TERM cut it short."""
    client = ctx.aws.client("logs")
    kept = 0
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {
            "logGroupName": log_group,
            "startTime": _millis(ctx.window_start),
            "endTime": _millis(ctx.now),
            "filterPattern": pattern,
            "limit": LOG_FILTER_PAGE_LIMIT,
        }
        if token:
            kwargs["nextToken"] = token
        page = client.filter_log_events(**kwargs)
        for event in page.get("events", []):
            stream = event.get("logStreamName", "?")
            event_id = event.get("eventId") or f"{stream}/{event.get('timestamp')}/{hash(event.get('message'))}"
            events[stream].setdefault(event_id, (int(event.get("timestamp", 0)), event.get("message", "")))
            kept += 1
        previous, token = token, page.get("nextToken")
        if not token or token == previous:
            return False
        if kept >= LOG_EVENTS_PER_TERM:
            return True


def filter_candidates(
    ctx: CollectionContext,
    log_group: str,
    terms: list[str],
    inventory: LogInventory,
    events: dict[str, dict[str, tuple[int, str]]],
) -> None:
    """Fill `events` (stream → eventId → (timestamp ms, message)) with every event matching one of
    `terms`. Filled as pages arrive, so an error part-way keeps what was read."""
    for pattern, members in any_term_patterns(terms):
        if not _read_pattern(ctx, log_group, pattern, events):
            continue
        for term in members:
            if _read_pattern(ctx, log_group, json.dumps(term), events):
                inventory.truncated = True
                inventory.truncation_reason = f"more than {LOG_EVENTS_PER_TERM} events matched {term!r}"


def parse_hma(stream: str, timestamp: int, message: str) -> HmaDetection:
    """One HMA detection record: reason, node condition and action, read by the catalog's
    `hma_detection` extractors (one source for the record's shapes). Records naming only the node
    condition get the action its suffix stands for (NvidiaErrorReboot, NvidiaErrorTerminate)."""
    _, group, instance_id = stream_identity(stream)
    fields = load_catalog().by_id(HMA_SIGNATURE).extract_fields(message)
    condition = fields.get("hma_condition")
    action = fields.get("hma_action")
    if action is None and condition:
        action = next((a for suffix, a in _ACTION_BY_CONDITION_SUFFIX.items() if condition.endswith(suffix)), None)
    return HmaDetection(
        stream=stream,
        instance_id=instance_id,
        instance_group=group,
        time=datetime.fromtimestamp(timestamp / 1000, UTC),
        reason=fields.get("hma_reason"),
        condition=condition,
        action=action,
        message=message[:500],
    )


def classify_streams(inventory: LogInventory, events: dict[str, dict[str, tuple[int, str]]]) -> None:
    """Classify each stream's candidate events; record HMA detections and NCCL versions."""
    catalog = load_catalog()
    for stream in sorted(events):
        ordered = sorted(events[stream].values())
        kind, group, instance_id = stream_identity(stream)
        scanner = Scanner(catalog)
        for timestamp, message in ordered:
            for line in message.splitlines() or [""]:
                scanner.feed_line(line, timestamp=_iso(timestamp))
            if HMA_MARKER in message:
                inventory.hma_detections.append(parse_hma(stream, timestamp, message))
        result = scanner.finish()
        inventory.events_matched += len(ordered)
        for version in result.nccl_versions:
            streams = inventory.nccl_versions.setdefault(version, [])
            if len(streams) < 20:
                streams.append(stream)
        inventory.streams_scanned.append(stream)
        inventory.scans.append(
            StreamScan(
                stream=stream,
                kind=kind,
                instance_id=instance_id,
                instance_group=group,
                events_scanned=len(ordered),
                hits=result.hits,
            )
        )


def _degrade(ctx: CollectionContext, action: str, error: BaseException, partial: bool) -> None:
    ctx.degrade(
        degraded_from_error(
            SOURCE, action, error, partial=partial, reference=None if is_access_denied(error) else OPS_CLOUDWATCH
        )
    )


def collect_logs(ctx: CollectionContext, control_plane: ControlPlaneInventory) -> LogInventory | None:
    """Scan the cluster's CloudWatch log group. Returns None when nothing could be scanned."""
    cluster = control_plane.cluster
    if cluster is None:
        return None
    log_group = cluster.log_group_name
    inventory = LogInventory(log_group=log_group, window_start=ctx.window_start, window_end=ctx.now)
    ctx.progress(f"scanning CloudWatch {log_group}")
    try:
        inventory.group_exists = group_exists(ctx, log_group)
    except AwsError as error:
        _degrade(ctx, "logs:DescribeLogGroups", error, partial=False)
        return None
    if not inventory.group_exists:
        return inventory  # the check reports "CloudWatch not enabled" (operations.md § 4)
    try:
        inventory.streams_listed = count_streams(ctx, log_group)
    except AwsError as error:
        # The stream count is informative only: the filter below covers every stream anyway.
        _degrade(ctx, "logs:DescribeLogStreams", error, partial=True)
    terms = load_catalog().cloudwatch_terms
    inventory.filter_terms = list(terms)
    events: dict[str, dict[str, tuple[int, str]]] = defaultdict(dict)
    try:
        filter_candidates(ctx, log_group, terms, inventory, events)
    except AwsError as error:
        inventory.truncated = True
        inventory.truncation_reason = f"FilterLogEvents stopped: {error_code(error) or type(error).__name__}"
        # Throttled or denied part-way: classify what arrived; the degraded source says what is missing.
        _degrade(ctx, "logs:FilterLogEvents", error, partial=bool(events))
    classify_streams(inventory, events)
    return inventory
