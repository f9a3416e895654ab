"""DynamoDB single-table store of the monitor, designed from its access patterns.

Keys (pk / sk; `C` = `<region>#<cluster name>`), one line per access pattern:

- per-cluster sweep lock with folded triggers: `CLUSTER#C` / `LOCK`
- IAM actions the last sweep was denied (alert once when one appears): `CLUSTER#C` / `PERMISSION_GAPS`
- a trigger seen (idempotency per event id): `CLUSTER#C` / `TRIGGER#<trigger id>`
- sweeps of a cluster with coverage and duration (TTL): `CLUSTER#C` / `SWEEP#<started ISO>#<sweep id>`
- a finding's state and history summary (first/last seen, occurrences, resolved at):
  `CLUSTER#C` / `FINDING#<fingerprint>`
- open findings of a cluster: GSI `gsi1` `OPEN#C` / `<priority>#<fingerprint>` (sparse: removed on resolve)
- a finding's occurrences: `FINDING#C#<fingerprint>` / `OCC#<started ISO>#<sweep id>`
- a finding too long for its item (thousands of resources), whole, per sweep that saw it (TTL):
  `FINDING#C#<fingerprint>` / blob `BODY#<sweep id>#<chunk>`, named by the item's `finding_body`
- per-node fault history (survives replacement): `NODE#<instance id>` / `FAULT#<ISO>#<sweep id>#<fingerprint>`
- per-GPU fault history (serial/UUID): `GPU#<serial or uuid>` / `FAULT#<ISO>#<sweep id>#<fingerprint>`
- an incident (status open/resolved, first/last seen, timeline; monitor/incidents.py): `CLUSTER#C` / `INCIDENT#<id>`
- an incident too long for its item (thousands of nodes), whole, per sweep that stored it (TTL):
  `INCIDENT#C#<id>` / blob `BODY#<sweep id>#<chunk>`, named by the item's `incident_body`
- alerts a failed Notify left unpublished, sent by the next sweep (TTL): `CLUSTER#C` / `ALERT_PENDING#<sweep id>`
- a pending alert SNS refused for good, dropped so it blocks nothing (TTL): `CLUSTER#C` / `ALERT_DROPPED#<sweep id>`
- one sweep's scratch (collector outputs, TTL): `SWEEP#<sweep id>` / `REQUEST`, `TARGET#<id>`,
  `DEGRADED#<step>`, `NOTIFIED`, `NOTIFIED#INCIDENT#<id>` and blobs `<NAME>#<chunk>` (CONTROL_PLANE, PLAN, LOGS,
  KUBERNETES, RESULT, DIFF, INCIDENTS, `PROBE#<id>`: one per node)

Node and GPU history are keyed by the hardware, not by cluster membership, so a node replaced
by HyperPod keeps its record and a GPU UUID that reappears is recognised.

Idempotency: every write that a retried Lambda may repeat is either an overwrite of the same
value (scratch items, fault history keyed by the sweep id, finding bodies) or conditional on the
sweep id (occurrences, finding counters, the stored diff), so a retry never duplicates a finding
or an occurrence.

Size: no item may pass DynamoDB's 400 KB (DYNAMODB_ITEM_MAX_BYTES). Collector outputs, probe
results and diffs are compressed blobs in chunks; a finding naming thousands of resources keeps a
shortened copy in its item and its whole text in a blob, which `open_findings` reads back.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError

from hyperpod_nccl.aws_errors import is_conditional_failure
from hyperpod_nccl.models.findings import Finding
from hyperpod_nccl.monitor.settings import GSI1, SCRATCH_RETENTION_SECONDS

# DynamoDB's item limit: 400 KB, attribute names and values together (UTF-8 and binary bytes).
DYNAMODB_ITEM_MAX_BYTES = 400 * 1024
# Blobs are compressed and split well below the item limit (the key and attributes add a little).
BLOB_CHUNK_BYTES = 300_000
# A finding's JSON kept in its FINDING item; a longer one (a finding naming thousands of nodes) is
# stored whole as a blob and the item keeps a shortened copy (`Store.put_finding_body`).
FINDING_INLINE_MAX_BYTES = 64 * 1024

# Blobs of one sweep's scratch, under `SWEEP#<sweep id>`: what each state stored for Aggregate.
CONTROL_PLANE = "CONTROL_PLANE"
PLAN = "PLAN"
LOGS = "LOGS"
KUBERNETES = "KUBERNETES"
RESULT = "RESULT"
DIFF = "DIFF"
# A node's probe result: blob `PROBE#<instance id>#<chunk>` under the sweep.
PROBE = "PROBE#"
# Alerts a failed Notify left unpublished: `CLUSTER#C / ALERT_PENDING#<sweep id>`.
ALERT_PENDING = "ALERT_PENDING#"
# A pending alert SNS refused permanently (even as a short stand-in): `CLUSTER#C / ALERT_DROPPED#<sweep id>`.
ALERT_DROPPED = "ALERT_DROPPED#"
LOCK = "LOCK"
# The IAM actions the last sweep was denied: `CLUSTER#C / PERMISSION_GAPS` (a new one alerts once).
PERMISSION_GAPS = "PERMISSION_GAPS"


def cluster_key(region: str, cluster: str) -> str:
    """The partition of everything about one cluster."""
    return f"CLUSTER#{region}#{cluster}"


def open_index_key(region: str, cluster: str) -> str:
    """The sparse GSI partition holding a cluster's open findings."""
    return f"OPEN#{region}#{cluster}"


def sweep_key(sweep_id: str) -> str:
    """The partition of one sweep's scratch data."""
    return f"SWEEP#{sweep_id}"


def finding_history_key(region: str, cluster: str, fingerprint: str) -> str:
    """The partition of one finding's occurrences."""
    return f"FINDING#{region}#{cluster}#{fingerprint}"


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


def _chunk(item: dict[str, Any]) -> bytes:
    """A blob chunk's bytes (boto3 returns Binary attributes wrapped)."""
    data = item["data"]
    return bytes(data.value if hasattr(data, "value") else data)


class Store:
    """Typed access to the monitor's table. `table` is a boto3 `dynamodb.Table` resource."""

    def __init__(self, table: Any) -> None:
        self.table = table

    @classmethod
    def connect(cls, table_name: str, region: str | None = None, config: Any = None) -> Store:
        """Open the table with boto3's default credentials and endpoint (AWS_ENDPOINT_URL honoured);
        `config` is an optional botocore `Config` (timeouts, retries)."""
        import boto3

        return cls(boto3.resource("dynamodb", region_name=region, config=config).Table(table_name))

    # --- plain items ------------------------------------------------------------------------
    def get(self, pk: str, sk: str) -> dict[str, Any] | None:
        """One item, read consistently (a step reads what the previous step wrote)."""
        item: dict[str, Any] | None = self.table.get_item(Key={"pk": pk, "sk": sk}, ConsistentRead=True).get("Item")
        return item

    def put(self, item: dict[str, Any]) -> None:
        """Overwrite one item (used where a retry writes the same value again)."""
        self.table.put_item(Item=item)

    def put_new(self, item: dict[str, Any]) -> bool:
        """Create an item only if its key is unused. False when it already existed."""
        return self.put_if(item, ConditionExpression=Attr("pk").not_exists())

    def put_if(self, item: dict[str, Any], **condition: Any) -> bool:
        """PutItem under `condition` (ConditionExpression and its values). False when the
        condition did not hold: another writer got there first, which callers treat as done."""
        try:
            self.table.put_item(Item=item, **condition)
        except ClientError as error:
            if is_conditional_failure(error):
                return False
            raise
        return True

    def query(self, pk: str, prefix: str = "", *, index: str | None = None) -> Iterator[dict[str, Any]]:
        """All items of a partition whose sort key starts with `prefix`, ascending."""
        partition, sort = ("gsi1pk", "gsi1sk") if index else ("pk", "sk")
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

    def put_many(self, items: list[dict[str, Any]]) -> None:
        """Overwrite many items in batches."""
        with self.table.batch_writer(overwrite_by_pkeys=["pk", "sk"]) as batch:
            for item in items:
                batch.put_item(Item=item)

    def update(self, pk: str, sk: str, **kwargs: Any) -> dict[str, Any]:
        """UpdateItem passthrough returning the new attributes."""
        response = self.table.update_item(Key={"pk": pk, "sk": sk}, ReturnValues="ALL_NEW", **kwargs)
        attributes: dict[str, Any] = response.get("Attributes", {})
        return attributes

    def update_if(self, pk: str, sk: str, **kwargs: Any) -> dict[str, Any] | None:
        """Conditional UpdateItem: the new attributes, or None when its condition did not hold."""
        try:
            return self.update(pk, sk, **kwargs)
        except ClientError as error:
            if is_conditional_failure(error):
                return None
            raise

    def delete(self, pk: str, sk: str, **kwargs: Any) -> None:
        """DeleteItem passthrough."""
        self.table.delete_item(Key={"pk": pk, "sk": sk}, **kwargs)

    def delete_if(self, pk: str, sk: str, **kwargs: Any) -> bool:
        """Conditional DeleteItem. False when its condition did not hold."""
        try:
            self.delete(pk, sk, **kwargs)
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
            self.put({"pk": pk, "sk": f"{name}#{index:04d}", "data": chunks[index], "expires_at": expires_at})
        head = {"pk": pk, "sk": f"{name}#0000", "data": chunks[0], "chunks": len(chunks), "expires_at": expires_at}
        if only_if_new:
            return self.put_new(head)
        self.put(head)
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
            name, _, index = str(item["sk"]).rpartition("#")
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

    # --- sweep scratch ------------------------------------------------------------------------
    def put_scratch(self, sweep_id: str, sk: str, payload: Any, *, now: datetime) -> None:
        """A small JSON value of one sweep (overwritten identically on retry)."""
        self.put(
            {
                "pk": sweep_key(sweep_id),
                "sk": sk,
                "json": json.dumps(payload, default=str),
                "expires_at": epoch(now) + SCRATCH_RETENTION_SECONDS,
            }
        )

    def get_scratch(self, sweep_id: str, sk: str) -> Any:
        """A value written by `put_scratch`, or None."""
        item = self.get(sweep_key(sweep_id), sk)
        return None if item is None else json.loads(item["json"])

    def scratch_items(self, sweep_id: str, prefix: str) -> list[Any]:
        """Every JSON value of one sweep under `prefix` (e.g. all PROBE# results)."""
        return [json.loads(item["json"]) for item in self.query(sweep_key(sweep_id), prefix) if "json" in item]

    def open_findings(self, region: str, cluster: str) -> list[dict[str, Any]]:
        """The open findings of a cluster, read from the sparse index, with their stored state.

        The index is eventually consistent, so each hit is re-read from the table: a finding
        resolved a moment ago must not be reported open again. `finding` is the whole finding's
        JSON, read from its body blob when the item holds a shortened copy."""
        result = []
        for hit in self.query(open_index_key(region, cluster), index=GSI1):
            item = self.get(hit["pk"], hit["sk"])
            if item is not None and item.get("state") == "open":
                body = str(item.get("finding_body") or "")
                if body:
                    fingerprint = str(item["sk"]).split("#", 1)[1]
                    # An expired body (a finding kept open, unseen, past the history) leaves the copy.
                    whole = self.get_blob(finding_history_key(region, cluster, fingerprint), body)
                    item["finding"] = whole if whole is not None else item["finding"]
                result.append(item)
        return result

    def put_finding_body(
        self, region: str, cluster: str, fingerprint: str, finding: Finding, sweep_id: str, expires_at: int
    ) -> tuple[str, str]:
        """What a FINDING item stores of `finding`: (its JSON, "") when it fits the item, else (a
        shortened copy, the name of the blob now holding it whole). The blob is written first, so
        an item never names a body that is not there."""
        text = finding.model_dump_json()
        if len(text.encode()) <= FINDING_INLINE_MAX_BYTES:
            return text, ""
        name = f"BODY#{sweep_id}"
        self.put_blob(finding_history_key(region, cluster, fingerprint), name, text, expires_at=expires_at)
        return shortened_finding(finding, FINDING_INLINE_MAX_BYTES), name
