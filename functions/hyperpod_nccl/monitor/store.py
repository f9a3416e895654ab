"""DynamoDB single-table store of the monitor, designed from its access patterns.

This module is the only one that spells the table: its keys, the attributes of each item and every
condition and update expression (tests/unit/test_store_owns_table.py). The rest of the monitor calls
one `Store` method per step, named by what the step means; a new access pattern is a new method.

Keys (pk / sk; `C` = `<region>#<cluster name>`), one line per access pattern, with its methods:

- per-cluster sweep lock with folded triggers: `CLUSTER#C` / `LOCK` (`lock`, `take_lock`, `take_over_lock`,
  `fold_trigger_into_lock`, `hand_over_lock`, `release_lock`, `release_lock_if_idle`)
- IAM actions the last sweep was denied (alert once when one appears): `CLUSTER#C` / `PERMISSION_GAPS`
  (`permission_gaps`, `record_permission_gaps`)
- a trigger seen (idempotency per event id): `CLUSTER#C` / `TRIGGER#<trigger id>` (`trigger_seen`,
  `record_trigger_seen`)
- sweeps of a cluster with coverage, duration and probe time (TTL): `CLUSTER#C` / `SWEEP#<started ISO>#<sweep id>`
  (`record_sweep`; `has_earlier_full_sweep`: is this sweep the cluster's baseline;
  `last_full_sweep_probe_seconds`: what the next sweep's probe concurrency is sized from)
- a finding's state and history summary (first/last seen, occurrences, resolved at):
  `CLUSTER#C` / `FINDING#<fingerprint>` (`record_finding_seen`, `mark_finding_resolved`)
- open findings of a cluster: GSI `gsi1` `OPEN#C` / `<priority>#<fingerprint>` (sparse: removed on resolve;
  `open_findings`)
- a finding's occurrences: `FINDING#C#<fingerprint>` / `OCC#<started ISO>#<sweep id>` (`add_occurrence`)
- a finding too long for its item (thousands of resources), whole, per sweep that saw it (TTL):
  `FINDING#C#<fingerprint>` / blob `BODY#<sweep id>#<chunk>`, named by the item's `finding_body`
- per-node fault history (survives replacement): `NODE#<instance id>` / `FAULT#<ISO>#<sweep id>#<fingerprint>`
- per-GPU fault history (serial/UUID): `GPU#<serial or uuid>` / `FAULT#<ISO>#<sweep id>#<fingerprint>`
  (both `add_fault_history`)
- an incident (status open/resolved, first/last seen, timeline; monitor/incident_tracking.py):
  `CLUSTER#C` / `INCIDENT#<id>`
  (`stored_incidents`, `record_incident_seen`, `mark_incident_resolved`)
- an incident too long for its item (thousands of nodes), whole, per sweep that stored it (TTL):
  `INCIDENT#C#<id>` / blob `BODY#<sweep id>#<chunk>`, named by the item's `incident_body`
- alerts a failed Notify left unpublished, sent by the next sweep (TTL): `CLUSTER#C` / `ALERT_PENDING#<sweep id>`
  (`put_pending_alert`, `pending_alerts`, `drop_pending_alert`)
- a pending alert SNS refused for good, dropped so it blocks nothing (TTL): `CLUSTER#C` / `ALERT_DROPPED#<sweep id>`
  (`record_dropped_alert`)
- one sweep's scratch (collector outputs, TTL): `SWEEP#<sweep id>` / `REQUEST` (`put_sweep_request`,
  `sweep_request`), `ABORTED` (`record_discovery_aborted`), `TARGET#<id>` (`put_probe_targets`, `probe_target`),
  `DEGRADED#<step>` (`record_degraded`, `degraded_sources`), `NOTIFIED` and `NOTIFIED#INCIDENT#<id>`
  (`claim_notification`, `release_notification_claim`) and blobs `<NAME>#<chunk>` (`put_sweep_blob`,
  `sweep_blob`: CONTROL_PLANE, PLAN, LOGS, KUBERNETES, RESULT, DIFF, INCIDENTS; `PROBE#<id>`, one per node:
  `put_probe_result`, `probe_result_texts`)

- the pace of an account-wide API shared by every Lambda sandbox (`monitor/shared_pacer.py`, TTL):
  `PACE#<API>#<account>#<region>` / `BUCKET`, holding `tat` (the bucket's theoretical arrival time, epoch
  seconds), `last_throttle`, and the slowdown `slow_until` / `slow_level` / `slow_step` (`reserve_start`,
  `note_throttle`, `push_back_start`, `escalate_slowdown`)

Node and GPU history are keyed by the hardware, not by cluster membership, so a node replaced
by HyperPod keeps its record and a GPU UUID that reappears is recognised.

Idempotency: every write that a retried Lambda may repeat is either an overwrite of the same
value (scratch items, fault history keyed by the sweep id, finding bodies) or conditional on the
sweep id (occurrences, finding and incident updates, the stored diff), so a retry never duplicates
a finding or an occurrence.

Size: no item may pass DynamoDB's 400 KB (DYNAMODB_ITEM_MAX_BYTES). Collector outputs, probe
results and diffs are compressed blobs in chunks; a finding naming thousands of resources keeps a
shortened copy in its item and its whole text in a blob, which `open_findings` reads back (an
incident likewise, read back by `stored_incidents`).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError

from hyperpod_nccl.aws_errors import is_conditional_failure
from hyperpod_nccl.models.findings import DegradedSource, Finding
from hyperpod_nccl.models.node_probe import ProbeTarget
from hyperpod_nccl.monitor.settings import (
    GSI1,
    GSI1_PARTITION_KEY,
    GSI1_SORT_KEY,
    PARTITION_KEY,
    SCRATCH_RETENTION_SECONDS,
    SORT_KEY,
    TTL_ATTRIBUTE,
)
from hyperpod_nccl.pacing import escalated_level

if TYPE_CHECKING:
    from botocore.config import Config
    from mypy_boto3_dynamodb.service_resource import Table

    from hyperpod_nccl.incidents.models import Incident
    from hyperpod_nccl.monitor.diff import SweepDiff
    from hyperpod_nccl.monitor.events import TriggerRequest
    from hyperpod_nccl.monitor.payloads import SweepRef

# DynamoDB's item limit: 400 KB, attribute names and values together (UTF-8 and binary bytes).
DYNAMODB_ITEM_MAX_BYTES = 400 * 1024
# Blobs are compressed and split well below the item limit (the key and attributes add a little).
BLOB_CHUNK_BYTES = 300_000
# A finding's JSON kept in its FINDING item; a longer one (a finding naming thousands of nodes) is
# stored whole as a blob and the item keeps a shortened copy (`Store.record_finding_seen`).
FINDING_INLINE_MAX_BYTES = 64 * 1024
# An incident's JSON kept in its item, as for a finding (the other attributes are small); a longer
# one is stored whole in a blob and the item keeps a shortened copy (`Store.record_incident_seen`).
INCIDENT_INLINE_MAX_BYTES = FINDING_INLINE_MAX_BYTES

# The table's vocabulary: every key is built from these (tests/unit/test_store_owns_table.py
# refuses them anywhere else). Partitions:
CLUSTER = "CLUSTER#"  # everything about one cluster
OPEN = "OPEN#"  # the sparse index of a cluster's open findings
SWEEP = "SWEEP#"  # one sweep's scratch; under a cluster, its sweep records
FINDING = "FINDING#"  # a finding's occurrences and bodies; under a cluster, its state
INCIDENT = "INCIDENT#"  # an incident's bodies; under a cluster, its state
NODE = "NODE#"  # a node's fault history
GPU = "GPU#"  # a GPU's fault history
# Under a cluster:
LOCK = "LOCK"
# The IAM actions the last sweep was denied (a new one alerts once).
PERMISSION_GAPS = "PERMISSION_GAPS"
TRIGGER = "TRIGGER#"
# Alerts a failed Notify left unpublished.
ALERT_PENDING = "ALERT_PENDING#"
# A pending alert SNS refused permanently (even as a short stand-in).
ALERT_DROPPED = "ALERT_DROPPED#"
# Under a finding's or a node's or GPU's history:
OCC = "OCC#"
FAULT = "FAULT#"
# A record stored whole when its item keeps a shortened copy: blob `BODY#<sweep id>`.
BODY = "BODY#"
# Under a sweep: its SweepRef, why Discover gave up, the nodes to probe, what each step could not
# read, the publish markers.
REQUEST = "REQUEST"
ABORTED = "ABORTED"
TARGET = "TARGET#"
DEGRADED = "DEGRADED#"
NOTIFIED = "NOTIFIED"
# Blobs of one sweep's scratch: what each state stored for the next ones.
CONTROL_PLANE = "CONTROL_PLANE"
PLAN = "PLAN"
LOGS = "LOGS"
KUBERNETES = "KUBERNETES"
RESULT = "RESULT"
DIFF = "DIFF"
# The incident changes Aggregate computed, once per sweep (monitor/incident_tracking.py).
INCIDENTS = "INCIDENTS"
# A node's probe result: blob `PROBE#<instance id>#<chunk>` under the sweep.
PROBE = "PROBE#"
# The pace of an account-wide API (`PACE#<API>#<account>#<region>`) and its one item.
PACE = "PACE#"
BUCKET = "BUCKET"
# Conditional writes one reservation tries before giving up on a bucket that keeps changing under
# it (each failure means another sandbox reserved meanwhile: two in a row are already rare).
PACE_RESERVE_TRIES = 8


def cluster_key(region: str, cluster: str) -> str:
    """The partition of everything about one cluster."""
    return f"{CLUSTER}{region}#{cluster}"


def open_index_key(region: str, cluster: str) -> str:
    """The sparse GSI partition holding a cluster's open findings."""
    return f"{OPEN}{region}#{cluster}"


def sweep_key(sweep_id: str) -> str:
    """The partition of one sweep's scratch data."""
    return f"{SWEEP}{sweep_id}"


def finding_history_key(region: str, cluster: str, fingerprint: str) -> str:
    """The partition of one finding's occurrences."""
    return f"{FINDING}{region}#{cluster}#{fingerprint}"


def incident_sk(incident_id: str) -> str:
    """The sort key of an incident's item in its cluster's partition."""
    return f"{INCIDENT}{incident_id}"


def incident_history_key(region: str, cluster: str, incident_id: str) -> str:
    """The partition of an incident's whole bodies (one blob per sweep that stored it too long)."""
    return f"{INCIDENT}{region}#{cluster}#{incident_id}"


def fingerprint_of(item: Mapping[str, Any]) -> str:
    """The fingerprint of a FINDING item read back (`Store.open_findings`)."""
    return str(item[SORT_KEY]).removeprefix(FINDING)


class PaceContended(Exception):
    """`Store.reserve_start` (or `escalate_slowdown`) lost PACE_RESERVE_TRIES conditional writes in a
    row to other sandboxes."""


# A pace item's condition for "not slowed at :now" (`_PaceState.slowed` as DynamoDB reads it): an
# item slowed without a step, written before steps were kept, paces at the configured rate.
_PACE_NOT_SLOWED = "(attribute_not_exists(slow_until) OR slow_until <= :now OR attribute_not_exists(slow_step))"


@dataclass(frozen=True)
class _PaceState:
    """A pace item as read: `tat` (None: never used), and the slowdown a recurring throttle set
    (`slow_until` 0: never; `slow_step` None: not kept, an item from before steps were)."""

    tat: float | None
    slow_until: float = 0.0
    slow_level: int = 0
    slow_step: float | None = None

    def slowed(self, now: float) -> bool:
        """Whether reservations at `now` step `slow_step`."""
        return self.slow_until > now and self.slow_step is not None


def pace_key(api: str, account: str, region: str) -> str:
    """The partition of one account-wide API's pace in one Region (`api` as reads.py spells it)."""
    return f"{PACE}{api}#{account}#{region}"


def _decimal(seconds: float) -> Decimal:
    """Epoch seconds as the table stores them (boto3 refuses floats): microseconds are enough."""
    return Decimal(f"{seconds:.6f}")


def epoch(moment: datetime) -> int:
    """Seconds since the epoch (the TTL attribute's format)."""
    return int(moment.timestamp())


def halve_until_fits(render: Callable[[int], str], longest: int, max_bytes: int) -> tuple[str, bool]:
    """`render(keep)` for keep = `longest`, then halved down to 0, until its UTF-8 fits `max_bytes`:
    the text and whether it fit (at keep 0 it is returned either way). For the shortened copy an
    item keeps when the whole record is in a blob (findings, incidents)."""
    keep = longest
    while True:
        text = render(keep)
        if len(text.encode()) <= max_bytes:
            return text, True
        if not keep:
            return text, False
        keep //= 2


def shortened_finding(finding: Finding, max_bytes: int) -> str:
    """`finding` as JSON of at most `max_bytes`: its lists (resources, evidence) cut to their first
    entries, then its detail, never its check, status, priority or title. For the copy kept in a
    FINDING item when the whole finding is in a blob."""

    def render(keep: int, detail: str = finding.detail) -> str:
        update = {"resources": finding.resources[:keep], "evidence": finding.evidence[:keep], "detail": detail}
        return finding.model_copy(update=update).model_dump_json()

    text, fits = halve_until_fits(render, max(len(finding.resources), len(finding.evidence)), max_bytes)
    detail = finding.detail
    while not fits and detail:
        detail = detail[: len(detail) // 2]
        text = render(0, detail)
        fits = len(text.encode()) <= max_bytes
    return text  # without lists and detail: check, title and commands, bounded by the checks that write them


def shortened_incident(incident: Incident, max_bytes: int) -> str:
    """`incident` as JSON of at most `max_bytes`: its timeline, evidence, affected lists and
    finding fingerprints cut to their first entries (halving), never its id, title, priority or
    root cause. The copy an item keeps when the whole incident is in a blob."""
    affected = incident.affected
    lists = {name: getattr(affected, name) for name in type(affected).model_fields}

    def render(keep: int) -> str:
        update = {
            "timeline": incident.timeline[:keep],
            "evidence": incident.evidence[:keep],
            "finding_fingerprints": incident.finding_fingerprints[:keep],
            "affected": affected.model_copy(update={name: values[:keep] for name, values in lists.items()}),
        }
        return incident.model_copy(update=update).model_dump_json()

    longest = max(
        len(incident.timeline), len(incident.evidence), len(incident.finding_fingerprints), *map(len, lists.values())
    )
    # With every list empty: the title and root cause, bounded by their sources.
    return halve_until_fits(render, longest, max_bytes)[0]


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {PARTITION_KEY: pk, SORT_KEY: sk}


def _chunk(item: dict[str, Any]) -> bytes:
    """A blob chunk's bytes (boto3 returns Binary attributes wrapped)."""
    data = item["data"]
    return bytes(data.value if hasattr(data, "value") else data)


def _priority_label(finding: Finding) -> str:
    """A finding's priority as its items store it (and its open-index sort key starts with)."""
    return finding.priority.value if finding.priority else "none"


def _notified(incident_id: str | None) -> str:
    """The marker of a sweep's alert, or of one incident's message of it."""
    return NOTIFIED if incident_id is None else f"{NOTIFIED}#{INCIDENT}{incident_id}"


@dataclass(frozen=True)
class PendingAlert:
    """An alert a failed Notify left unpublished, as `Store.pending_alerts` reads it back. `ref` is
    the SweepRef JSON `put_pending_alert` stored, unvalidated: an item that does not parse is the
    reader's to drop."""

    region: str
    cluster: str
    sweep_id: str
    ref: str
    failure: str
    expires_at: int


class Store:
    """Typed access to the monitor's table: one method per step of an access pattern (the module
    docstring lists them), each owning its key, item and condition. `get`, `query` and the blob
    reads stay generic for readers that inspect the table (the local monitor, tests)."""

    def __init__(self, table: Table) -> None:
        self.table = table

    @classmethod
    def connect(cls, table_name: str, region: str | None = None, config: Config | None = None) -> Store:
        """Open the table with boto3's default credentials and endpoint (AWS_ENDPOINT_URL honoured);
        `config` is an optional botocore `Config` (timeouts, retries)."""
        import boto3

        return cls(boto3.resource("dynamodb", region_name=region, config=config).Table(table_name))

    # --- generic reads ------------------------------------------------------------------------
    def get(self, pk: str, sk: str) -> dict[str, Any] | None:
        """One item, read consistently (a step reads what the previous step wrote)."""
        item: dict[str, Any] | None = self.table.get_item(Key=_key(pk, sk), ConsistentRead=True).get("Item")
        return item

    def query(self, pk: str, prefix: str = "", *, index: str | None = None) -> Iterator[dict[str, Any]]:
        """All items of a partition whose sort key starts with `prefix`, ascending."""
        partition, sort = (GSI1_PARTITION_KEY, GSI1_SORT_KEY) if index else (PARTITION_KEY, SORT_KEY)
        condition: Any = Key(partition).eq(pk)
        if prefix:
            condition = condition & Key(sort).begins_with(prefix)
        kwargs: dict[str, Any] = {"KeyConditionExpression": condition}
        if index:
            kwargs["IndexName"] = index
        else:
            kwargs["ConsistentRead"] = True
        while True:
            page = self.table.query(**kwargs)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # --- the writes every method below is made of (callers never pass a condition) --------------
    def _put(self, item: dict[str, Any]) -> None:
        """Overwrite one item (where a retry writes the same value again)."""
        self.table.put_item(Item=item)

    def _put_if(self, item: dict[str, Any], **condition: Any) -> bool:
        """PutItem under `condition` (ConditionExpression and its values). False when the
        condition did not hold: another writer got there first, which callers treat as done."""
        try:
            self.table.put_item(Item=item, **condition)
        except ClientError as error:
            if is_conditional_failure(error):
                return False
            raise
        return True

    def _put_new(self, item: dict[str, Any]) -> bool:
        """Create an item only if its key is unused. False when it already existed."""
        return self._put_if(item, ConditionExpression=Attr(PARTITION_KEY).not_exists())

    def _put_many(self, items: list[dict[str, Any]]) -> None:
        """Overwrite many items in batches."""
        with self.table.batch_writer(overwrite_by_pkeys=[PARTITION_KEY, SORT_KEY]) as batch:
            for item in items:
                batch.put_item(Item=item)

    def _update_if(self, pk: str, sk: str, **expression: Any) -> dict[str, Any] | None:
        """Conditional UpdateItem: the new attributes, or None when its condition did not hold."""
        try:
            response = self.table.update_item(Key=_key(pk, sk), ReturnValues="ALL_NEW", **expression)
        except ClientError as error:
            if is_conditional_failure(error):
                return None
            raise
        attributes: dict[str, Any] = response.get("Attributes", {})
        return attributes

    def _delete(self, pk: str, sk: str) -> None:
        self.table.delete_item(Key=_key(pk, sk))

    def _delete_if(self, pk: str, sk: str, **condition: Any) -> bool:
        """Conditional DeleteItem. False when its condition did not hold."""
        try:
            self.table.delete_item(Key=_key(pk, sk), **condition)
        except ClientError as error:
            if is_conditional_failure(error):
                return False
            raise
        return True

    # --- blobs (JSON too large for one item or for the state payload) --------------------------
    def put_blob(self, pk: str, name: str, text: str, *, expires_at: int, only_if_new: bool = False) -> bool:
        """Store `text` compressed under `<name>#<chunk>`. Chunk 0 is written last, so a reader
        that finds it finds every chunk. With `only_if_new`, an existing blob wins (returns False)."""
        data = zlib.compress(text.encode(), 6)
        chunks = [data[i : i + BLOB_CHUNK_BYTES] for i in range(0, len(data), BLOB_CHUNK_BYTES)] or [b""]
        for index in range(len(chunks) - 1, 0, -1):
            self._put(
                {PARTITION_KEY: pk, SORT_KEY: f"{name}#{index:04d}", "data": chunks[index], TTL_ATTRIBUTE: expires_at}
            )
        head = {
            PARTITION_KEY: pk,
            SORT_KEY: f"{name}#0000",
            "data": chunks[0],
            "chunks": len(chunks),
            TTL_ATTRIBUTE: expires_at,
        }
        if only_if_new:
            return self._put_new(head)
        self._put(head)
        return True

    def get_blob(self, pk: str, name: str) -> str | None:
        """The text stored by `put_blob`, or None when it was never (completely) written."""
        head = self.get(pk, f"{name}#0000")
        if head is None:
            return None
        parts = [_chunk(head)]
        for index in range(1, int(head.get("chunks", 1))):
            item = self.get(pk, f"{name}#{index:04d}")
            if item is None:
                return None
            parts.append(_chunk(item))
        return zlib.decompress(b"".join(parts)).decode()

    def blobs(self, pk: str, prefix: str) -> dict[str, str]:
        """Every complete blob of a partition whose name starts with `prefix`, read with one query
        (name -> text). A blob missing a chunk, or whose chunks do not decode (two writers
        interleaved), is left out: to the reader it was never stored."""
        chunks: dict[str, dict[int, dict[str, Any]]] = {}
        for item in self.query(pk, prefix):
            name, _, index = str(item[SORT_KEY]).rpartition("#")
            if "data" in item and index.isdigit():
                chunks.setdefault(name, {})[int(index)] = item
        found: dict[str, str] = {}
        for name, parts in chunks.items():
            count = int(parts.get(0, {}).get("chunks", 0))
            if count == 0 or any(i not in parts for i in range(count)):
                continue
            try:
                found[name] = zlib.decompress(b"".join(_chunk(parts[i]) for i in range(count))).decode()
            except (zlib.error, UnicodeDecodeError):
                continue
        return found

    def _put_body(
        self, pk: str, sweep_id: str, text: str, shortened: Callable[[int], str], max_bytes: int, expires_at: int
    ) -> tuple[str, str]:
        """What an item stores of a record whose JSON is `text`: (`text`, "") when it fits
        `max_bytes`, else (`shortened(max_bytes)`, the name of the blob `BODY#<sweep id>` under `pk`
        now holding it whole). The blob is written first, so an item never names a body that is not
        there (a retry rewrites the same text under the same name)."""
        if len(text.encode()) <= max_bytes:
            return text, ""
        name = f"{BODY}{sweep_id}"
        self.put_blob(pk, name, text, expires_at=expires_at)
        return shortened(max_bytes), name

    # --- one sweep's scratch ------------------------------------------------------------------
    def put_sweep_blob(
        self, sweep_id: str, name: str, text: str, *, expires_at: int, only_if_new: bool = False
    ) -> bool:
        """A blob of the sweep's scratch (`CONTROL_PLANE`, `PLAN`, ...; `put_blob`). With
        `only_if_new` the first attempt's blob wins: False when it already existed (the DIFF and
        INCIDENTS a retried Aggregate reuses)."""
        return self.put_blob(sweep_key(sweep_id), name, text, expires_at=expires_at, only_if_new=only_if_new)

    def sweep_blob(self, sweep_id: str, name: str) -> str | None:
        """A blob `put_sweep_blob` stored, or None."""
        return self.get_blob(sweep_key(sweep_id), name)

    def _put_scratch(self, sweep_id: str, sk: str, payload: Any, *, now: datetime) -> None:
        """A small JSON value of one sweep (overwritten identically on retry)."""
        self._put(
            {
                PARTITION_KEY: sweep_key(sweep_id),
                SORT_KEY: sk,
                "json": json.dumps(payload, default=str),
                TTL_ATTRIBUTE: epoch(now) + SCRATCH_RETENTION_SECONDS,
            }
        )

    def _get_scratch(self, sweep_id: str, sk: str) -> Any:
        item = self.get(sweep_key(sweep_id), sk)
        return None if item is None else json.loads(item["json"])

    def _scratch_items(self, sweep_id: str, prefix: str) -> list[Any]:
        return [json.loads(item["json"]) for item in self.query(sweep_key(sweep_id), prefix) if "json" in item]

    def put_sweep_request(self, ref: SweepRef) -> None:
        """The sweep Discover started (its SweepRef), for the states that are given only its id."""
        self._put_scratch(ref.sweep_id, REQUEST, ref.model_dump(mode="json"), now=ref.started_at)

    def sweep_request(self, sweep_id: str) -> Any:
        """The SweepRef (as JSON values) `put_sweep_request` stored, or None: Discover did not run."""
        return self._get_scratch(sweep_id, REQUEST)

    def record_discovery_aborted(self, ref: SweepRef, reason: str) -> None:
        """Why Discover could not read the cluster (kept with the sweep's scratch, for the record)."""
        self._put_scratch(ref.sweep_id, ABORTED, {"reason": reason}, now=ref.started_at)

    def put_probe_targets(self, sweep_id: str, targets: Iterable[ProbeTarget], *, expires_at: int) -> None:
        """The nodes the sweep probes, one item each (in batches), for `probe_target`."""
        pk = sweep_key(sweep_id)
        self._put_many(
            [
                {
                    PARTITION_KEY: pk,
                    SORT_KEY: f"{TARGET}{target.instance_id}",
                    "json": target.model_dump_json(),
                    TTL_ATTRIBUTE: expires_at,
                }
                for target in targets
            ]
        )

    def probe_target(self, sweep_id: str, instance_id: str) -> ProbeTarget | None:
        """A node's probe target in the sweep's plan, or None when the plan does not name it."""
        item = self.get(sweep_key(sweep_id), f"{TARGET}{instance_id}")
        return None if item is None else ProbeTarget.model_validate_json(item["json"])

    def record_degraded(self, ref: SweepRef, step: str, degraded: list[DegradedSource]) -> None:
        """What `step` of the sweep could not read (overwritten identically on retry)."""
        payload = [d.model_dump(mode="json") for d in degraded]
        self._put_scratch(ref.sweep_id, f"{DEGRADED}{step}", payload, now=ref.started_at)

    def degraded_sources(self, sweep_id: str) -> list[DegradedSource]:
        """Every degraded source the sweep's steps recorded, read with one query."""
        return [DegradedSource.model_validate(d) for batch in self._scratch_items(sweep_id, DEGRADED) for d in batch]

    def put_probe_result(self, ref: SweepRef, instance_id: str, text: str) -> None:
        """A node's probe result (JSON) as a compressed blob in chunks under the item limit."""
        expires_at = epoch(ref.started_at) + SCRATCH_RETENTION_SECONDS
        self.put_sweep_blob(ref.sweep_id, f"{PROBE}{instance_id}", text, expires_at=expires_at)

    def probe_result_texts(self, sweep_id: str) -> list[str]:
        """The complete probe results of a sweep (JSON), read with one query (`blobs`)."""
        return list(self.blobs(sweep_key(sweep_id), PROBE).values())

    def unchunked_probe_results(self, sweep_id: str) -> list[Any]:
        """The probe results of a sweep started before they were stored as blobs (JSON values)."""
        return self._scratch_items(sweep_id, PROBE)

    def claim_notification(self, sweep_id: str, *, expires_at: int, incident_id: str | None = None) -> bool:
        """Claim the publishing of a sweep's alert (or, with `incident_id`, of one incident's message):
        True for the one caller that created its marker, False when the marker already existed (an
        earlier attempt published it)."""
        return self._put_new(
            {PARTITION_KEY: sweep_key(sweep_id), SORT_KEY: _notified(incident_id), TTL_ATTRIBUTE: expires_at}
        )

    def release_notification_claim(self, sweep_id: str, *, incident_id: str | None = None) -> None:
        """Give a claim back after its publish failed, so that the retry publishes it."""
        self._delete(sweep_key(sweep_id), _notified(incident_id))

    # --- the per-cluster sweep lock (the protocol: monitor/lock.py) -----------------------------
    def lock(self, region: str, cluster: str) -> dict[str, Any] | None:
        """The cluster's lock: `sweep_id` holding it, its `ref` (SweepRef JSON), `lease_expires_at`
        (epoch seconds) and `pending` (the TriggerRequest JSON of each trigger folded in); None when
        no sweep holds it."""
        return self.get(cluster_key(region, cluster), LOCK)

    def _lock_item(self, ref: SweepRef, lease_expires_at: int, pending: list[Any]) -> dict[str, Any]:
        return {
            PARTITION_KEY: cluster_key(ref.region, ref.cluster),
            SORT_KEY: LOCK,
            "sweep_id": ref.sweep_id,
            "ref": ref.model_dump_json(),
            "lease_expires_at": lease_expires_at,
            "pending": pending,
        }

    def take_lock(self, ref: SweepRef, *, now: datetime, lease_expires_at: int) -> bool:
        """Hold the cluster's lock for `ref`'s sweep, nothing folded in: only when no sweep holds it,
        its lease ran out before `now`, or `ref`'s sweep holds it already (a retried trigger). False
        when another sweep holds it."""
        return self._put_if(
            self._lock_item(ref, lease_expires_at, pending=[]),
            ConditionExpression=f"attribute_not_exists({PARTITION_KEY}) OR lease_expires_at < :now OR sweep_id = :me",
            ExpressionAttributeValues={":now": epoch(now), ":me": ref.sweep_id},
        )

    def take_over_lock(self, ref: SweepRef, *, holder: str, pending: list[Any], lease_expires_at: int) -> bool:
        """Hold the lock for `ref`'s sweep in place of the sweep `holder` (whose execution can no
        longer release it), keeping the triggers `pending` in it. False when the lock changed since it
        was read (`holder` no longer holds it)."""
        return self._put_if(
            self._lock_item(ref, lease_expires_at, pending=pending),
            ConditionExpression="sweep_id = :holder",
            ExpressionAttributeValues={":holder": holder},
        )

    def fold_trigger_into_lock(self, trigger: TriggerRequest, *, now: datetime) -> dict[str, Any] | None:
        """Append `trigger` to the pending triggers of its cluster's lock while the lease runs at
        `now`: the lock as it is now, or None when no sweep holds it (released or expired meanwhile)."""
        return self._update_if(
            cluster_key(trigger.region, trigger.cluster),
            LOCK,
            UpdateExpression="SET pending = list_append(if_not_exists(pending, :empty), :trigger)",
            ConditionExpression=f"attribute_exists({PARTITION_KEY}) AND lease_expires_at >= :now",
            ExpressionAttributeValues={":empty": [], ":trigger": [trigger.model_dump_json()], ":now": epoch(now)},
        )

    def hand_over_lock(self, holder: str, follow_up: SweepRef, *, folded: int, lease_expires_at: int) -> bool:
        """Pass the lock from the sweep `holder` to `follow_up`, the sweep of the `folded` triggers
        pending in it, emptying the list. False when `holder` no longer holds it or the list is no
        longer `folded` long (a trigger folded itself in meanwhile: read the lock again)."""
        handed_over = self._update_if(
            cluster_key(follow_up.region, follow_up.cluster),
            LOCK,
            UpdateExpression="SET sweep_id = :next, #ref = :ref, lease_expires_at = :lease, pending = :empty",
            ConditionExpression="sweep_id = :me AND size(pending) = :count",
            ExpressionAttributeNames={"#ref": "ref"},
            ExpressionAttributeValues={
                ":next": follow_up.sweep_id,
                ":ref": follow_up.model_dump_json(),
                ":lease": lease_expires_at,
                ":empty": [],
                ":me": holder,
                ":count": folded,
            },
        )
        return handed_over is not None

    def release_lock(self, region: str, cluster: str, sweep_id: str) -> bool:
        """Delete the cluster's lock if the sweep `sweep_id` holds it (False otherwise)."""
        return self._delete_if(
            cluster_key(region, cluster),
            LOCK,
            ConditionExpression="sweep_id = :me",
            ExpressionAttributeValues={":me": sweep_id},
        )

    def release_lock_if_idle(self, region: str, cluster: str, sweep_id: str) -> bool:
        """Delete the cluster's lock if the sweep `sweep_id` holds it and no trigger is folded into
        it. False otherwise (a trigger folded itself in meanwhile: hand the lock over instead)."""
        return self._delete_if(
            cluster_key(region, cluster),
            LOCK,
            ConditionExpression="sweep_id = :me AND (attribute_not_exists(pending) OR size(pending) = :zero)",
            ExpressionAttributeValues={":me": sweep_id, ":zero": 0},
        )

    # --- triggers -----------------------------------------------------------------------------
    def trigger_seen(self, region: str, cluster: str, trigger_id: str) -> dict[str, Any] | None:
        """What `record_trigger_seen` stored of a trigger (its `status` and `sweep_id`), or None."""
        return self.get(cluster_key(region, cluster), f"{TRIGGER}{trigger_id}")

    def record_trigger_seen(self, trigger: TriggerRequest, *, status: str, sweep_id: str, expires_at: int) -> None:
        """A trigger handled: `status` "started" or "folded" into the sweep `sweep_id` (a replayed
        event finds it and is dropped as a duplicate)."""
        self._put(
            {
                PARTITION_KEY: cluster_key(trigger.region, trigger.cluster),
                SORT_KEY: f"{TRIGGER}{trigger.trigger_id}",
                "status": status,
                "sweep_id": sweep_id,
                "kind": trigger.kind,
                "reason": trigger.reason[:1000],
                "node": trigger.node or "",
                "received_at": trigger.received_at.isoformat(),
                TTL_ATTRIBUTE: expires_at,
            }
        )

    # --- a cluster's sweeps and permission gaps --------------------------------------------------
    def record_sweep(
        self, ref: SweepRef, *, status: str, diff: SweepDiff, finished_at: datetime, duration_seconds: float,
        expires_at: int, code_version: str = "", probe_seconds: float | None = None,
    ) -> None:  # fmt: skip
        """The record of one sweep under its cluster (overwritten when a retry or the failure
        recorder records it again), with the version of the code that ran it (`code_version.py`) and
        the high percentile of its probe times (`probe_seconds`, pacing.probe_seconds_percentile;
        None: no node probed), which sizes the next sweep's concurrency (`last_full_sweep_probe_seconds`)."""
        timing = {} if probe_seconds is None else {"probe_seconds": str(round(probe_seconds, 3))}
        self._put(
            {
                **timing,
                PARTITION_KEY: cluster_key(ref.region, ref.cluster),
                SORT_KEY: f"{SWEEP}{ref.started_at.isoformat()}#{ref.sweep_id}",
                "sweep_id": ref.sweep_id,
                "execution": ref.execution,
                "status": status,
                "started_at": ref.started_at.isoformat(),
                "finished_at": finished_at.isoformat(),
                "duration_seconds": str(round(duration_seconds, 3)),
                "coverage": diff.coverage.model_dump_json(),
                "open_by_priority": json.dumps(diff.open_by_priority),
                "changes": len(diff.changes),
                "degraded_sources": json.dumps([d.model_dump(mode="json") for d in diff.degraded_sources]),
                "triggers": ref.triggers,
                "node": ref.node or "",
                "failure": diff.failure or "",
                "code_version": code_version,
                TTL_ATTRIBUTE: expires_at,
            }
        )

    def has_earlier_full_sweep(
        self, region: str, cluster: str, *, started_at: datetime, sweep_id: str, code_version: str
    ) -> bool:
        """Whether a cluster-wide sweep of the cluster started before this one (`started_at`,
        `sweep_id`), ran the same code (`code_version`: the first sweep after a deployment that
        changed it is a baseline again) and evaluated it (recorded complete or partial, not
        failed): the monitor has told this cluster's state before. Records expire with the history (TTL), so a monitor
        silent for longer than that starts again from a baseline. Newest first, stopping at the
        first match: usually one page."""
        projection: dict[str, Any] = {
            "ProjectionExpression": "#sweep, #status, #node, #code",
            "ExpressionAttributeNames": {
                "#sweep": "sweep_id", "#status": "status", "#node": "node", "#code": "code_version",
            },
        }  # fmt: skip
        until = f"{SWEEP}{started_at.isoformat()}#{sweep_id}"
        for item in self._sweeps_newest_first(region, cluster, until=until, **projection):
            evaluated = item.get("status") in ("complete", "partial") and not item.get("node")
            evaluated = evaluated and item.get("code_version") == code_version
            if evaluated and item.get("sweep_id") != sweep_id:
                return True
        return False

    def _sweeps_newest_first(
        self, region: str, cluster: str, *, until: str | None = None, **query: Any
    ) -> Iterator[dict[str, Any]]:
        """A cluster's sweep records, newest first, page by page as they are read: all of them, or
        those whose sort key is at most `until`; `query`: more Query parameters (a projection, a
        page size)."""
        sweeps = Key(SORT_KEY).begins_with(SWEEP) if until is None else Key(SORT_KEY).between(SWEEP, until)
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": Key(PARTITION_KEY).eq(cluster_key(region, cluster)) & sweeps,
            "ScanIndexForward": False,
            "ConsistentRead": True,
            **query,
        }
        while True:
            page = self.table.query(**kwargs)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def last_sweep(self, region: str, cluster: str) -> dict[str, Any] | None:
        """The record of a cluster's newest sweep (`record_sweep`), None before its first."""
        newest = next(self._sweeps_newest_first(region, cluster, Limit=1), None)
        return dict(newest) if newest is not None else None

    def fault_history(self, kind: str, resource_id: str) -> list[dict[str, Any]]:
        """Every fault the monitor recorded on one node (`kind` "node", its instance id) or one GPU
        ("gpu", its serial), oldest first, whichever cluster it was in (`add_fault_history`), each
        with the `seen_at` (the sweep's start, ISO) and `sweep_id` its key holds."""
        partition = NODE if kind == "node" else GPU
        faults = []
        for item in self.query(f"{partition}{resource_id}", FAULT):
            seen_at, sweep_id, _ = [*str(item[SORT_KEY]).removeprefix(FAULT).split("#", 2), "", ""][:3]
            faults.append({**item, "seen_at": seen_at, "sweep_id": sweep_id})
        return faults

    def last_full_sweep_probe_seconds(self, region: str, cluster: str) -> float | None:
        """The probe time (seconds, a high percentile) the newest cluster-wide evaluated sweep
        (complete or partial) of the cluster recorded; None when there is no such sweep (a first
        sweep, or history expired) or it probed no node. A single-node sweep is skipped: one probe
        is no percentile of the cluster's. Newest first, stopping at the first cluster-wide sweep:
        usually one page."""
        projection: dict[str, Any] = {
            "ProjectionExpression": "#status, #node, #probe",
            "ExpressionAttributeNames": {"#status": "status", "#node": "node", "#probe": "probe_seconds"},
        }
        for item in self._sweeps_newest_first(region, cluster, **projection):
            if item.get("status") in ("complete", "partial") and not item.get("node"):
                return float(str(item["probe_seconds"])) if item.get("probe_seconds") else None
        return None

    def permission_gaps(self, region: str, cluster: str) -> set[str]:
        """The IAM actions the cluster's last sweep was denied (none recorded: empty)."""
        item = self.get(cluster_key(region, cluster), PERMISSION_GAPS)
        return set(json.loads(item["actions"])) if item else set()

    def record_permission_gaps(self, region: str, cluster: str, actions: Iterable[str]) -> None:
        """The IAM actions denied now, for the next sweep to tell which are new."""
        self._put(
            {
                PARTITION_KEY: cluster_key(region, cluster),
                SORT_KEY: PERMISSION_GAPS,
                "actions": json.dumps(sorted(actions)),
            }
        )

    # --- findings -----------------------------------------------------------------------------
    def open_findings(self, region: str, cluster: str) -> list[dict[str, Any]]:
        """The open findings of a cluster, read from the sparse index, with their stored state.

        The index is eventually consistent, so each hit is re-read from the table: a finding
        resolved a moment ago must not be reported open again. `finding` is the whole finding's
        JSON, read from its body blob when the item holds a shortened copy (`fingerprint_of` names
        the finding of an item)."""
        result = []
        for hit in self.query(open_index_key(region, cluster), index=GSI1):
            item = self.get(hit[PARTITION_KEY], hit[SORT_KEY])
            if item is not None and item.get("state") == "open":
                body = str(item.get("finding_body") or "")
                if body:
                    # An expired body (a finding kept open, unseen, past the history) leaves the copy.
                    whole = self.get_blob(finding_history_key(region, cluster, fingerprint_of(item)), body)
                    item["finding"] = whole if whole is not None else item["finding"]
                result.append(item)
        return result

    def record_finding_seen(
        self, ref: SweepRef, fingerprint: str, finding: Finding, *, seen_at: str, expires_at: int
    ) -> bool:
        """`finding` (whose fingerprint is `fingerprint`) seen by `ref`'s sweep at `seen_at` (ISO):
        its cluster's FINDING item opened or updated (the finding's JSON, whole or a shortened copy
        with the whole in a body blob; last seen; one more occurrence; first seen kept) and put in the
        open-findings index. Once per sweep: False, and nothing counted, when the item already names
        this sweep (a retried Aggregate)."""
        priority = _priority_label(finding)
        inline, body = self._put_body(
            finding_history_key(ref.region, ref.cluster, fingerprint), ref.sweep_id, finding.model_dump_json(),
            lambda max_bytes: shortened_finding(finding, max_bytes), FINDING_INLINE_MAX_BYTES, expires_at,
        )  # fmt: skip
        updated = self._update_if(
            cluster_key(ref.region, ref.cluster),
            f"{FINDING}{fingerprint}",
            UpdateExpression=(
                "SET finding = :finding, finding_body = :body, check_id = :check, priority = :priority, "
                "title = :title, #state = :open, last_seen = :now, last_sweep_id = :sweep, "
                f"{GSI1_PARTITION_KEY} = :openpk, {GSI1_SORT_KEY} = :opensk, "
                "first_seen = if_not_exists(first_seen, :now) ADD occurrences :one REMOVE resolved_at"
            ),
            ConditionExpression="attribute_not_exists(last_sweep_id) OR last_sweep_id <> :sweep",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={
                ":finding": inline,
                ":body": body,
                ":check": finding.check_id,
                ":priority": priority,
                ":title": finding.title,
                ":open": "open",
                ":now": seen_at,
                ":sweep": ref.sweep_id,
                ":openpk": open_index_key(ref.region, ref.cluster),
                ":opensk": f"{priority}#{fingerprint}",
                ":one": 1,
            },
        )
        return updated is not None

    def mark_finding_resolved(self, ref: SweepRef, fingerprint: str, *, resolved_at: str) -> bool:
        """The open finding `fingerprint` resolved by `ref`'s sweep at `resolved_at` (ISO) and taken
        out of the open-findings index. False when it is not open (already resolved)."""
        resolved = self._update_if(
            cluster_key(ref.region, ref.cluster),
            f"{FINDING}{fingerprint}",
            UpdateExpression=(
                "SET #state = :resolved, resolved_at = :now, resolved_sweep_id = :sweep "
                f"REMOVE {GSI1_PARTITION_KEY}, {GSI1_SORT_KEY}"
            ),
            ConditionExpression="#state = :open",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={
                ":resolved": "resolved",
                ":open": "open",
                ":now": resolved_at,
                ":sweep": ref.sweep_id,
            },
        )
        return resolved is not None

    def add_occurrence(self, ref: SweepRef, fingerprint: str, finding: Finding, *, expires_at: int) -> bool:
        """One occurrence of the finding `fingerprint` in `ref`'s sweep, in the finding's history.
        Once per sweep: False when this sweep's occurrence is already there."""
        return self._put_new(
            {
                PARTITION_KEY: finding_history_key(ref.region, ref.cluster, fingerprint),
                SORT_KEY: f"{OCC}{ref.started_at.isoformat()}#{ref.sweep_id}",
                "priority": _priority_label(finding),
                "status": finding.status.value,
                TTL_ATTRIBUTE: expires_at,
            }
        )

    def add_fault_history(self, ref: SweepRef, findings: Mapping[str, Finding], *, expires_at: int) -> None:
        """The fault history of every node and GPU the findings (by fingerprint) name: one item per
        resource (10,000 for a finding naming every node), written in batches. Each key names the
        sweep and the finding, so a retry rewrites the same items."""
        stamp = ref.started_at.isoformat()
        faults = [
            {
                PARTITION_KEY: f"{NODE if resource.kind == 'node' else GPU}{resource.id}",
                SORT_KEY: f"{FAULT}{stamp}#{ref.sweep_id}#{fingerprint}",
                "check_id": finding.check_id,
                "priority": _priority_label(finding),
                "title": finding.title,
                "cluster": ref.cluster,
                "region": ref.region,
                TTL_ATTRIBUTE: expires_at,
            }
            for fingerprint, finding in findings.items()
            for resource in finding.resources
            if resource.kind in ("node", "gpu")
        ]
        if faults:
            self._put_many(faults)

    # --- incidents (monitor/incident_tracking.py) ---------------------------------------------------------
    def stored_incidents(self, region: str, cluster: str) -> list[dict[str, Any]]:
        """Every incident item of a cluster, open and resolved, with `incident` the whole incident's
        JSON: read from its body blob when the item holds a shortened copy (the copy when that blob
        expired)."""
        found = []
        for item in self.query(cluster_key(region, cluster), INCIDENT):
            if body := str(item.get("incident_body") or ""):
                incident_id = str(item[SORT_KEY]).removeprefix(INCIDENT)
                whole = self.get_blob(incident_history_key(region, cluster, incident_id), body)
                item["incident"] = whole or str(item["incident"])
            found.append(item)
        return found

    def record_incident_seen(
        self, region: str, cluster: str, incident: Incident, *, digest: str, sweep_id: str, expires_at: int
    ) -> bool:
        """`incident` as the sweep `sweep_id` stores it, open: its JSON (whole, or a shortened copy with
        the whole in a body blob), `digest`, priority, title, first/last seen, first sweep kept. Once
        per sweep: False, and nothing written, when the item already names this sweep."""
        text, body = self._put_body(
            incident_history_key(region, cluster, incident.id), sweep_id, incident.model_dump_json(),
            lambda max_bytes: shortened_incident(incident, max_bytes), INCIDENT_INLINE_MAX_BYTES, expires_at,
        )  # fmt: skip
        updated = self._update_if(
            cluster_key(region, cluster),
            incident_sk(incident.id),
            UpdateExpression=(
                "SET incident = :incident, #status = :open, digest = :digest, priority = :priority, "
                "title = :title, first_seen = :first, last_seen = :last, last_sweep_id = :sweep, "
                f"first_sweep_id = if_not_exists(first_sweep_id, :sweep), {TTL_ATTRIBUTE} = :expires"
                + (", incident_body = :body REMOVE resolved_at" if body else " REMOVE resolved_at, incident_body")
            ),
            ConditionExpression="attribute_not_exists(last_sweep_id) OR last_sweep_id <> :sweep",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":incident": text,
                **({":body": body} if body else {}),
                ":open": "open",
                ":digest": digest,
                ":priority": incident.priority.value,
                ":title": incident.title,
                ":first": incident.first_seen.isoformat() if incident.first_seen else "",
                ":last": incident.last_seen.isoformat() if incident.last_seen else "",
                ":sweep": sweep_id,
                ":expires": expires_at,
            },
        )
        return updated is not None

    def mark_incident_resolved(self, region: str, cluster: str, incident_id: str, *, sweep_id: str) -> bool:
        """The open incident `incident_id` resolved by the sweep `sweep_id`. False when it is not open."""
        resolved = self._update_if(
            cluster_key(region, cluster),
            incident_sk(incident_id),
            UpdateExpression="SET #status = :resolved, resolved_sweep_id = :sweep",
            ConditionExpression="#status = :open",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":resolved": "resolved", ":open": "open", ":sweep": sweep_id},
        )
        return resolved is not None

    # --- alerts left unpublished ------------------------------------------------------------------
    def put_pending_alert(self, ref: SweepRef, failure: str | None, *, expires_at: int) -> None:
        """Remember that `ref`'s sweep's alerts may be unpublished (`failure`: why the sweep failed),
        for the next sweep's Notify (`pending_alerts`)."""
        self._put(
            {
                PARTITION_KEY: cluster_key(ref.region, ref.cluster),
                SORT_KEY: f"{ALERT_PENDING}{ref.sweep_id}",
                "ref": ref.model_dump_json(),
                "failure": failure or "",
                TTL_ATTRIBUTE: expires_at,
            }
        )

    def pending_alerts(self, region: str, cluster: str) -> list[PendingAlert]:
        """The alerts of the cluster's sweeps still unpublished, read with one query."""
        return [
            PendingAlert(
                region=region,
                cluster=cluster,
                sweep_id=str(item[SORT_KEY]).removeprefix(ALERT_PENDING),
                ref=str(item.get("ref", "")),
                failure=str(item.get("failure") or ""),
                expires_at=int(item.get(TTL_ATTRIBUTE) or 0),
            )
            for item in self.query(cluster_key(region, cluster), ALERT_PENDING)
        ]

    def drop_pending_alert(self, region: str, cluster: str, sweep_id: str) -> None:
        """Forget the pending alert of the sweep `sweep_id` (published, or recorded as dropped)."""
        self._delete(cluster_key(region, cluster), f"{ALERT_PENDING}{sweep_id}")

    def record_dropped_alert(self, alert: PendingAlert, reason: str) -> None:
        """The record of a pending alert SNS refused for good (`reason`), kept as long as the alert
        would have been."""
        self._put(
            {
                PARTITION_KEY: cluster_key(alert.region, alert.cluster),
                SORT_KEY: f"{ALERT_DROPPED}{alert.sweep_id}",
                "reason": reason[:1000],
                "ref": alert.ref[:10_000],
                TTL_ATTRIBUTE: alert.expires_at,
            }
        )

    # --- the pace of an account-wide API, shared by every sandbox (monitor/shared_pacer.py) --------
    def _pace_state(self, pk: str) -> _PaceState:
        """The bucket as it is, read consistently."""
        item = self.get(pk, BUCKET) or {}
        tat, step = item.get("tat"), item.get("slow_step")
        return _PaceState(
            tat=None if tat is None else float(tat),
            slow_until=float(item.get("slow_until") or 0),
            slow_level=int(item.get("slow_level") or 0),
            slow_step=None if step is None else float(step),
        )

    def reserve_start(
        self, api: str, account: str, region: str, *, now: float, latest_start: float, interval: float,
        tolerance: float, expires_at: int,
    ) -> float | None:  # fmt: skip
        """Reserve the next start of `api`'s pace (the generic cell rate algorithm over one item):
        the epoch second it may start at, never before `now`; None, reserving nothing, when it
        would come after `latest_start`.

        Each attempt is one conditional UpdateItem, so two sandboxes never take the same start: a
        busy bucket (`tat >= now`) moves `tat` one step on and starts at `tat - tolerance`
        (`tolerance` = (burst - 1) x interval), under the condition that this start is no later than
        `latest_start`; an idle one (`tat < now`, or none yet) restarts at `now + step` and starts
        now. The step is `interval`, or the item's own `slow_step` until its `slow_until`
        (`escalate_slowdown`), read by the update itself. A failed condition (another sandbox moved
        the bucket, or the guess of busy and not slowed was wrong) reads the item and tries the
        branch it shows: a bucket whose next start is already past `latest_start` refuses without
        writing, which is final because `tat` never decreases.
        """
        pk = pace_key(api, account, region)
        state: _PaceState | None = None  # unknown: guess busy, not slowed (the usual case)
        for _ in range(PACE_RESERVE_TRIES):
            current = state if state is not None else _PaceState(tat=now)
            values: dict[str, Any] = {":now": _decimal(now), ":ttl": expires_at}
            if current.slowed(now):
                step, pace = "slow_step", "slow_until > :now AND attribute_exists(slow_step)"
            else:
                values[":step"] = _decimal(interval)
                step, pace = ":step", _PACE_NOT_SLOWED
            tat = current.tat
            if tat is not None and tat >= now:
                if tat - tolerance > latest_start:
                    return None
                values[":latest"] = _decimal(latest_start + tolerance)
                moved = self._update_if(
                    pk,
                    BUCKET,
                    UpdateExpression=f"SET tat = tat + {step}, {TTL_ATTRIBUTE} = :ttl",
                    ConditionExpression=f"tat >= :now AND tat <= :latest AND {pace}",
                    ExpressionAttributeValues=values,
                )
                if moved is not None:
                    taken = moved["slow_step"] if step == "slow_step" else values[":step"]
                    return max(now, float(moved["tat"] - taken) - tolerance)
            else:
                started = self._update_if(
                    pk,
                    BUCKET,
                    UpdateExpression=f"SET tat = :now + {step}, {TTL_ATTRIBUTE} = :ttl",
                    ConditionExpression=f"(attribute_not_exists(tat) OR tat < :now) AND {pace}",
                    ExpressionAttributeValues=values,
                )
                if started is not None:
                    return now
            state = self._pace_state(pk)
        raise PaceContended(f"the pace of {api} changed under {PACE_RESERVE_TRIES} reservations in a row")

    def note_throttle(self, api: str, account: str, region: str, *, now: float, expires_at: int) -> float | None:
        """AWS throttled `api` anyway at `now`: keep it as the pace's `last_throttle` and return the
        previous one (None: the first), by which the caller judges whether throttles recur."""
        response = self.table.update_item(
            Key=_key(pace_key(api, account, region), BUCKET),
            UpdateExpression=f"SET last_throttle = :now, {TTL_ATTRIBUTE} = :ttl",
            ExpressionAttributeValues={":now": _decimal(now), ":ttl": expires_at},
            ReturnValues="UPDATED_OLD",
        )
        previous: Any = response.get("Attributes", {}).get("last_throttle")
        return None if previous is None else float(previous)

    def push_back_start(self, api: str, account: str, region: str, *, next_tat: float, expires_at: int) -> None:
        """After a throttle, no start of `api` before `next_tat`: the bucket's `tat` moves there
        (a `tat` already further stays: it never moves back)."""
        self._update_if(
            pace_key(api, account, region),
            BUCKET,
            UpdateExpression=f"SET tat = :tat, {TTL_ATTRIBUTE} = :ttl",
            ConditionExpression="attribute_not_exists(tat) OR tat < :tat",
            ExpressionAttributeValues={":tat": _decimal(next_tat), ":ttl": expires_at},
        )

    def escalate_slowdown(
        self, api: str, account: str, region: str, *, now: float, until: float, step_at: Callable[[int], float],
        expires_at: int,
    ) -> float:  # fmt: skip
        """A recurring throttle at `now`: `api`'s slowdown goes up a level (from none when the last
        cooldown has ended) and lasts until at least `until`; every sandbox's reservation then steps
        `step_at(level)` seconds. Returns that step. Optimistic like `reserve_start`: each attempt
        writes only if the item is still as read, so concurrent recurrences each count once and
        neither `slow_until` nor the level moves back."""
        pk = pace_key(api, account, region)
        for _ in range(PACE_RESERVE_TRIES):
            current = self._pace_state(pk)
            slowed = current.slowed(now)
            level = escalated_level(current.slow_level, slowed)
            step = step_at(level)
            values: dict[str, Any] = {
                ":level": level,
                ":step": _decimal(step),
                ":until": _decimal(max(until, current.slow_until) if slowed else until),
                ":ttl": expires_at,
            }
            if slowed:
                values.update({":was_level": current.slow_level, ":was_until": _decimal(current.slow_until)})
                unchanged = "slow_until = :was_until AND slow_level = :was_level"
            else:
                values[":now"] = _decimal(now)
                unchanged = _PACE_NOT_SLOWED
            written = self._update_if(
                pk,
                BUCKET,
                UpdateExpression="SET slow_level = :level, slow_step = :step, slow_until = :until, "
                f"{TTL_ATTRIBUTE} = :ttl",
                ConditionExpression=unchanged,
                ExpressionAttributeValues=values,
            )
            if written is not None:
                return step
        raise PaceContended(f"the slowdown of {api} changed under {PACE_RESERVE_TRIES} writes in a row")
