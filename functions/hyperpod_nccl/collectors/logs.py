"""CloudWatch scan: the cluster's log group, candidate lines filtered server-side, classified.

Group `/aws/sagemaker/Clusters/<name>/<cluster-id>`, window `ctx.window_start..ctx.now`. The
catalog's quoted terms (`cloudwatch_terms`) are packed into "match any" filter patterns
(`?"NCCL WARN" ?"Xid" ...`, each within the API's 1024-character limit), so a sweep makes a couple of
paginated FilterLogEvents calls over the whole group (every stream, every page) instead of one per
term: FilterLogEvents has a low account-wide request rate (the scan paces itself under it and stops
at a call budget).

Any job can print a line carrying every term, as often as it likes, so a query that hits the event
cap is not trusted to have reached the rest of the window. The streams with the most events in it
are flooding streams: the other streams are read again without them (`logStreamNames`, in batches,
split further while a batch still overflows), and each flooding stream is read on its own from its
newest end and for the pattern's terms its flood lines lack. Whatever could not be read is named in
the inventory (stream, lines it printed at least), and the check reports the scan incomplete.
Events are deduplicated by eventId (and a flooding stream's identical lines are classified once);
then each stream's candidate events are classified with the same catalog as `triage` and the
pod-log check.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from hyperpod_nccl import reads
from hyperpod_nccl.aws_errors import AWS_CALL_ERRORS, error_code, is_access_denied, is_throttled
from hyperpod_nccl.aws_limits import FILTER_PATTERN_MAX_CHARS, FILTER_STREAM_NAMES_MAX
from hyperpod_nccl.classifier import Scanner, load_catalog
from hyperpod_nccl.collectors.aws import degraded_from_error
from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.models.cluster import ControlPlaneInventory
from hyperpod_nccl.models.logs import FloodedStream, HmaDetection, LogInventory, StreamScan, stream_identity
from hyperpod_nccl.redaction import scrub
from hyperpod_nccl.references import OPS_CLOUDWATCH
from hyperpod_nccl.thresholds import (
    LOG_EVENTS_PER_STREAM,
    LOG_EVENTS_PER_TERM,
    LOG_FILTER_MAX_CALLS,
    LOG_FILTER_PAGE_LIMIT,
    LOG_FLOOD_TERM_SHARE,
)

AwsError = AWS_CALL_ERRORS
SOURCE = "CloudWatch logs"
HMA_MARKER = "HealthMonitoringAgentDetectionEvent"
HMA_SIGNATURE = "hma_detection"
# HyperPod's GPU node conditions end in the action the agent takes.
_ACTION_BY_CONDITION_SUFFIX = {"Reboot": "Reboot", "Terminate": "Replace"}
# Flooding streams named in the truncation reason before "and N more".
_NAMED_FLOODS = 3

# stream → eventId → (timestamp ms, message)
Events = dict[str, dict[str, tuple[int, str]]]


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


def list_streams(ctx: CollectionContext, log_group: str) -> list[str]:
    """Streams with events in the window (DescribeLogStreams, newest first, all relevant pages)."""
    start = _millis(ctx.window_start)
    names: list[str] = []
    paginator = ctx.aws.client("logs").get_paginator("describe_log_streams")
    for page in paginator.paginate(logGroupName=log_group, orderBy="LastEventTime", descending=True):
        streams = page.get("logStreams", [])
        recent = [s for s in streams if s.get("lastEventTimestamp", s.get("creationTime", 0)) >= start]
        names.extend(str(s["logStreamName"]) for s in recent if s.get("logStreamName"))
        if len(recent) < len(streams):  # ordered by last event: the rest are older than the window
            break
    return names


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


class _BudgetSpent(Exception):
    """The scan made LOG_FILTER_MAX_CALLS FilterLogEvents calls; `read` is the query it stopped."""

    def __init__(self, read: _Read) -> None:
        super().__init__("FilterLogEvents call budget spent")
        self.read = read


@dataclass
class _Read:
    """What one capped query returned: matching events and messages per stream, and whether the
    cap stopped it with pages left."""

    counts: Counter[str] = field(default_factory=Counter)
    messages: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    overflow: bool = False


def _occurrences(messages: Counter[str], term: str) -> int:
    """Events of `messages` (message → count) that carry `term`."""
    return sum(n for message, n in messages.items() if term in message)


def flood_terms(messages: Counter[str], terms: list[str]) -> list[str]:
    """The `terms` carried by at least LOG_FLOOD_TERM_SHARE of `messages` (message → count)."""
    total = sum(messages.values())
    return [t for t in terms if _occurrences(messages, t) >= LOG_FLOOD_TERM_SHARE * total]


def _batches(streams: list[str]) -> list[list[str]]:
    """`streams` in batches of the most `logStreamNames` FilterLogEvents accepts."""
    return [streams[i : i + FILTER_STREAM_NAMES_MAX] for i in range(0, len(streams), FILTER_STREAM_NAMES_MAX)]


def _halves(streams: list[str]) -> list[list[str]]:
    """`streams` in batches; two halves when one batch would hold them all (a batch read again
    whole would overflow again)."""
    if len(streams) > FILTER_STREAM_NAMES_MAX:
        return _batches(streams)
    middle = (len(streams) + 1) // 2
    return [streams[:middle], streams[middle:]] if len(streams) > 1 else [streams]


@dataclass
class _Scan:
    """One scan's queries, call count and flooding streams; events are added as pages arrive, so
    an error part-way keeps what was read."""

    ctx: CollectionContext
    log_group: str
    events: Events
    # Streams active in the window (DescribeLogStreams); empty when it could not be read.
    streams: list[str]
    calls: int = 0
    floods: dict[str, FloodedStream] = field(default_factory=dict)
    # Flooding streams whose newest-first read stopped at its cap: their middle was not read.
    unread: set[str] = field(default_factory=set)

    def read(self, pattern: str, streams: list[str] | None, cap: int, newest_first: bool = False) -> _Read:
        """Every event matching `pattern` (in `streams`, or the whole group) until `cap` events."""
        client = self.ctx.aws.client("logs")
        result = _Read()
        kept = 0
        token: str | None = None
        while True:
            if self.calls >= LOG_FILTER_MAX_CALLS:
                raise _BudgetSpent(result)
            kwargs: dict[str, Any] = {
                "logGroupName": self.log_group,
                "startTime": _millis(self.ctx.window_start),
                "endTime": _millis(self.ctx.now),
                "filterPattern": pattern,
                "limit": LOG_FILTER_PAGE_LIMIT,
            }
            if streams is not None:
                kwargs["logStreamNames"] = streams
            if token:
                kwargs["nextToken"] = token
            elif newest_first:
                kwargs["startFromHead"] = False
            # The quota is per account and Region, not per scan: the context's pacer is shared by
            # every scan of the run (the monitor's, by every CollectLogs sandbox of the account).
            self.ctx.filter_pacer.acquire()
            self.calls += 1
            try:
                page = client.filter_log_events(**kwargs)
            except ClientError as error:
                if is_throttled(error):
                    self.ctx.filter_pacer.throttled()  # then handled as before: botocore retried it already
                raise
            for event in page.get("events", []):
                stream = event.get("logStreamName", "?")
                message = event.get("message", "")
                event_id = event.get("eventId") or f"{stream}/{event.get('timestamp')}/{hash(message)}"
                self.events[stream].setdefault(event_id, (int(event.get("timestamp", 0)), message))
                result.counts[stream] += 1
                result.messages[stream][message] += 1
                kept += 1
            previous, token = token, page.get("nextToken")
            if not token or token == previous:
                return result
            if kept >= cap:
                result.overflow = True
                return result

    def scan(self, pattern: str, members: list[str], streams: list[str] | None = None) -> None:
        """Read `pattern` in `streams`; when the cap cuts it short, treat its flooding streams on
        their own and read the others again without them."""
        result = self.read(pattern, streams, LOG_EVENTS_PER_TERM)
        if not result.overflow:
            return
        new = [s for s, n in result.counts.most_common() if n >= LOG_EVENTS_PER_STREAM]
        if not new and streams is not None and len(streams) == 1:
            new = list(streams)  # one stream alone overflowed: it floods, whatever its share
        for stream in new:
            self.flooding(pattern, members, stream, result)
        base = streams if streams is not None else sorted({*self.streams, *self.events, *result.counts})
        rest = [s for s in base if s not in new]
        # With a flooding stream set aside the rest usually fits in one read per batch; with none
        # (broad volume over many streams) halving makes progress until one stream stands out.
        parts = _batches(rest) if new else _halves(rest)
        for part in parts:
            if part:
                self.scan(pattern, members, part)

    def flood(self, stream: str, matched: int) -> FloodedStream:
        """The record of a flooding stream, with `matched` events seen in one read."""
        flood = self.floods.setdefault(stream, FloodedStream(stream=stream, instance_id=stream_identity(stream)[2]))
        flood.matched_at_least = max(flood.matched_at_least, matched)
        return flood

    def flooding(self, pattern: str, members: list[str], stream: str, head: _Read) -> None:
        """A stream that flooded `pattern`: read from its newest end, then for the pattern's terms
        its flood lines lack (the rare lines the flood would hide), each read capped."""
        flood = self.flood(stream, head.counts[stream])
        tail = self.read(pattern, [stream], LOG_EVENTS_PER_STREAM, newest_first=True)
        sample = head.messages[stream] + tail.messages[stream]
        flooded = flood_terms(sample, members)
        flood.note_terms(flooded)
        if not tail.overflow:
            # Newest-first reached the oldest lines: the whole stream was read for this pattern.
            flood.complete = stream not in self.unread
            return
        self.unread.add(stream)
        flood.complete = False
        terms = [t for t in members if t not in flooded]
        while terms:
            rare = self.read(any_term_patterns(terms)[0][0], [stream], LOG_EVENTS_PER_STREAM)
            if not rare.overflow:
                return
            # Another flood of the remaining terms: drop its terms (at least the most frequent).
            messages = rare.messages[stream]
            again = flood_terms(messages, terms) or [max(terms, key=lambda t: _occurrences(messages, t))]
            terms = [t for t in terms if t not in again]


def _flood_reason(floods: list[FloodedStream]) -> str:
    """The truncation reason naming the flooding streams and what each printed (at least)."""
    named = []
    for flood in floods[:_NAMED_FLOODS]:
        terms = ", ".join(repr(t) for t in flood.flood_terms[:3]) + (" …" if len(flood.flood_terms) > 3 else "")
        named.append(
            f"stream {flood.stream} printed at least {flood.matched_at_least} matching lines in the window"
            + (f" ({terms})" if terms else "")
        )
    more = f"; and {len(floods) - _NAMED_FLOODS} more flooding stream(s)" if len(floods) > _NAMED_FLOODS else ""
    return f"the evidence may be incomplete: {'; '.join(named)}{more}"


def filter_candidates(
    ctx: CollectionContext,
    log_group: str,
    terms: list[str],
    inventory: LogInventory,
    events: Events,
    streams: list[str] | None = None,
) -> None:
    """Fill `events` (stream → eventId → (timestamp ms, message)) with every event matching one of
    `terms`, as far as floods and the call budget allow; `inventory` gets the flooding streams, the
    call count and, when something could not be read, `truncated` and its reason."""
    scan = _Scan(ctx, log_group, events, list(streams or []))
    reasons: list[str] = []
    try:
        for pattern, members in any_term_patterns(terms):
            scan.scan(pattern, members)
    except _BudgetSpent as spent:
        # The query it stopped may already show who flooded it.
        for stream, count in spent.read.counts.items():
            if count >= LOG_EVENTS_PER_STREAM:
                flood = scan.flood(stream, count)
                flood.complete = False
                flood.note_terms(flood_terms(spent.read.messages[stream], terms))
        inventory.budget_spent = True
        reasons.append(f"stopped after {scan.calls} FilterLogEvents calls (the scan's budget)")
    finally:
        inventory.filter_calls += scan.calls
        inventory.flooded_streams = sorted(scan.floods.values(), key=lambda f: (-f.matched_at_least, f.stream))
        unread = [f for f in inventory.flooded_streams if not f.complete]
        if unread:
            reasons.insert(0, _flood_reason(unread))
        if reasons:
            inventory.truncated = True
            inventory.truncation_reason = "; ".join(reasons)


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
    """Classify each stream's candidate events; record HMA detections and NCCL versions.

    A flooding stream's identical lines are classified once: the incomplete-scan finding names the
    flood, and classifying thousands of copies of one crafted line would only spend the time."""
    catalog = load_catalog()
    flooding = {f.stream for f in inventory.flooded_streams}
    for stream in sorted(events):
        ordered = sorted(events[stream].values())
        if stream in flooding:
            ordered = list({message: (timestamp, message) for timestamp, message in reversed(ordered)}.values())[::-1]
        kind, group, instance_id = stream_identity(stream)
        scanner = Scanner(catalog)
        for timestamp, raw in ordered:
            message = scrub(raw)  # where an event becomes evidence: no secret reaches a model
            for line in message.splitlines() or [""]:
                scanner.feed_line(line, timestamp=_iso(timestamp))
            if HMA_MARKER in message:
                inventory.hma_detections.append(parse_hma(stream, timestamp, message))
        result = scanner.finish()
        inventory.events_matched += len(events[stream])
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
                events_scanned=len(events[stream]),
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
        _degrade(ctx, reads.DESCRIBE_LOG_GROUPS, error, partial=False)
        return None
    if not inventory.group_exists:
        return inventory  # the check reports "CloudWatch not enabled" (operations.md § 4)
    streams: list[str] = []
    try:
        streams = list_streams(ctx, log_group)
        inventory.streams_listed = len(streams)
    except AwsError as error:
        # The filter below covers every stream anyway; without the list, a flood only sets aside
        # the streams its own reads met.
        _degrade(ctx, reads.DESCRIBE_LOG_STREAMS, error, partial=True)
    terms = load_catalog().cloudwatch_terms
    inventory.filter_terms = list(terms)
    events: Events = defaultdict(dict)
    try:
        filter_candidates(ctx, log_group, terms, inventory, events, streams)
    except AwsError as error:
        inventory.truncated = True
        stopped = f"FilterLogEvents stopped: {error_code(error) or type(error).__name__}"
        inventory.truncation_reason = "; ".join(filter(None, [inventory.truncation_reason, stopped]))
        # Throttled or denied part-way: classify what arrived; the degraded source says what is missing.
        _degrade(ctx, reads.FILTER_LOG_EVENTS, error, partial=bool(events))
    classify_streams(inventory, events)
    return inventory
