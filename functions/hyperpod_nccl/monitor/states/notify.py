"""State Notify: this sweep's alert and incident messages, each published once (per-sweep markers
in the table), after the alerts earlier sweeps left pending.

Alert formatting is `hyperpod_nccl.monitor.notify`; this module publishes."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from hyperpod_nccl.aws_errors import error_message
from hyperpod_nccl.monitor.diff import SweepDiff
from hyperpod_nccl.monitor.incidents import load_incident_sweep
from hyperpod_nccl.monitor.notify import (
    PERMANENT_PUBLISH_ERRORS,
    Alert,
    build_alert,
    build_incident_alert,
    sns_message,
    undeliverable_alert,
)
from hyperpod_nccl.monitor.payloads import NotifyOutput, SweepRef, SweepState, aggregate_failure_text
from hyperpod_nccl.monitor.store import ALERT_DROPPED, ALERT_PENDING, DIFF, Store, cluster_key, epoch, sweep_key

_log = logging.getLogger(__name__)

# Alerts a failed Notify left unpublished (`store.ALERT_PENDING`) are kept a week.
PENDING_ALERT_SECONDS = 7 * 24 * 3600


def run_notify(state: SweepState, store: Store, sns: Any, *, topic_arn: str, base_url: str) -> NotifyOutput:
    """Notify: publish the stored diff once (a retried Notify does not publish twice).

    An alert still unpublished when this attempt fails (an SNS outage outlasting the task's
    retries fails the execution) is kept as pending under the cluster; the next sweep's Notify
    publishes it, once (the same per-sweep markers), so no alert is lost.

    Order and isolation: earlier pending alerts go first, oldest first, then this sweep's. None
    blocks another. An earlier alert that fails again stays pending when the failure may pass
    (outage, throttling, a permission to fix) and is dropped with a record when it cannot (SNS
    refuses that very message): either way this sweep's alert is still published. A message SNS
    refuses outright is replaced by a short stand-in saying so (`_publish`), so a refusal reaches
    the channel instead of retrying for a week."""
    ref = state.sweep
    failure = aggregate_failure_text(state.aggregate_error) if state.aggregate_error else None
    ck = cluster_key(ref.region, ref.cluster)
    own = f"{ALERT_PENDING}{ref.sweep_id}"
    pending = _pending_alerts(store, ck)
    earlier = dropped = 0
    for item in sorted((i for i in pending if i["sk"] != own), key=_pending_order):
        sent, gone = _publish_pending(item, store, sns, topic_arn=topic_arn, base_url=base_url)
        earlier, dropped = earlier + sent, dropped + gone
    try:
        output = _publish_sweep(ref, _diff_to_notify(store, ref, failure), store, sns, topic_arn, base_url)
    except Exception:
        _keep_pending(store, ref, failure)
        raise
    if any(item["sk"] == own for item in pending):
        store.delete(ck, own)  # an earlier attempt of this Notify had left it
    return output.model_copy(update={"earlier_alerts": earlier, "dropped_alerts": dropped})


def _pending_order(item: dict[str, Any]) -> str:
    """Oldest sweep first; an unreadable item sorts first and is dropped there."""
    try:
        return SweepRef.model_validate_json(item["ref"]).started_at.isoformat()
    except (ValidationError, KeyError, TypeError):
        return ""


def _permanent(error: BaseException) -> bool:
    """A publish failure that every retry of the same message gets again: SNS refused the message
    itself (too long, an invalid parameter), or the pending item cannot be read."""
    if isinstance(error, ClientError):
        return error.response.get("Error", {}).get("Code") in PERMANENT_PUBLISH_ERRORS
    return isinstance(error, ValidationError | KeyError)


def _publish(sns: Any, topic_arn: str, alert: Alert) -> dict[str, Any]:
    """Publish `alert` (fitted to SNS's limits by `sns_message`); when SNS still refuses that
    message permanently, publish its short stand-in instead (`undeliverable_alert`)."""
    try:
        response: dict[str, Any] = sns.publish(TopicArn=topic_arn, **sns_message(alert))
    except ClientError as error:
        if not _permanent(error):
            raise
        reason = error_message(error)
        _log.warning("SNS refused an alert; publishing its stand-in", extra={"reason": reason})
        response = sns.publish(TopicArn=topic_arn, **sns_message(undeliverable_alert(alert, reason)))
    return response


def _diff_to_notify(store: Store, ref: SweepRef, failure: str | None) -> SweepDiff:
    text = store.get_blob(sweep_key(ref.sweep_id), DIFF)
    if text is not None:
        stored = SweepDiff.model_validate_json(text)
        # A diff stored by an Aggregate that was then stopped does not know it failed.
        return stored if failure is None or stored.failure else stored.model_copy(update={"failure": failure})
    return SweepDiff(
        sweep_id=ref.sweep_id, cluster=ref.cluster, region=ref.region, started_at=ref.started_at,
        failure=failure or "Aggregate failed: no diff stored",
    )  # fmt: skip


def _keep_pending(store: Store, ref: SweepRef, failure: str | None) -> None:
    """Remember that this sweep's alerts may be unpublished (best effort: when the table is what
    fails, the execution's failure and its alarm are what remains)."""
    with contextlib.suppress(Exception):  # the publish error is the one to report
        store.put(
            {
                "pk": cluster_key(ref.region, ref.cluster),
                "sk": f"{ALERT_PENDING}{ref.sweep_id}",
                "ref": ref.model_dump_json(),
                "failure": failure or "",
                "expires_at": epoch(ref.started_at) + PENDING_ALERT_SECONDS,
            }
        )


def _publish_pending(item: dict[str, Any], store: Store, sns: Any, *, topic_arn: str, base_url: str) -> tuple[int, int]:
    """Publish what an earlier sweep could not (each message once), then forget it: (messages
    sent, alerts dropped). Never raises, so that no earlier alert blocks a later one: a failure
    that may pass leaves it pending for the next sweep; a permanent one drops it, with a record
    under the cluster (`ALERT_DROPPED#<sweep id>`) and a warning in the function's log."""
    try:
        ref = SweepRef.model_validate_json(item["ref"])
        diff = _diff_to_notify(store, ref, item.get("failure") or None).model_copy(update={"delivered_late": True})
        output = _publish_sweep(ref, diff, store, sns, topic_arn, base_url)
    except Exception as error:  # noqa: BLE001 - kept or dropped below, never raised
        reason = error_message(error)
        if not _permanent(error):
            _log.warning("an earlier alert is still unpublished; kept for the next sweep", extra={"reason": reason})
            return 0, 0
        _log.error("an earlier alert can never be published; dropped", extra={"reason": reason, "key": item["sk"]})
        with contextlib.suppress(ClientError, BotoCoreError):  # the log line above remains
            store.put(
                {
                    "pk": item["pk"],
                    "sk": ALERT_DROPPED + str(item["sk"]).removeprefix(ALERT_PENDING),
                    "reason": reason[:1000],
                    "ref": str(item.get("ref", ""))[:10_000],
                    "expires_at": int(item.get("expires_at") or 0),
                }
            )
            store.delete(item["pk"], item["sk"])
        return 0, 1
    store.delete(item["pk"], item["sk"])
    return output.incident_messages + (1 if output.message_id else 0), 0


def _pending_alerts(store: Store, ck: str) -> list[dict[str, Any]]:
    """Alerts earlier Notify attempts left unpublished; none when the table cannot be read (they
    stay stored for the next sweep: reading them must not cost this sweep its own alert)."""
    try:
        return list(store.query(ck, ALERT_PENDING))
    except (ClientError, BotoCoreError):
        return []


def alerts_pending(store: Store, ref: SweepRef) -> bool:
    """An earlier sweep of the cluster left alerts unpublished (Notify must run)."""
    return bool(_pending_alerts(store, cluster_key(ref.region, ref.cluster)))


def _publish_sweep(
    ref: SweepRef, diff: SweepDiff, store: Store, sns: Any, topic_arn: str, base_url: str
) -> NotifyOutput:
    incident_messages = _publish_incidents(ref, store, sns, topic_arn=topic_arn, base_url=base_url)
    if not diff.worth_notifying:
        reason = f"{incident_messages} incident messages" if incident_messages else "nothing changed"
        return NotifyOutput(published=incident_messages > 0, reason=reason, incident_messages=incident_messages)
    marker: dict[str, Any] = {
        "pk": sweep_key(ref.sweep_id),
        "sk": "NOTIFIED",
        "expires_at": epoch(ref.started_at) + 7 * 24 * 3600,
    }
    if not store.put_new(marker):
        return NotifyOutput(
            published=incident_messages > 0,
            reason="already published for this sweep",
            incident_messages=incident_messages,
        )
    try:
        response = _publish(sns, topic_arn, build_alert(diff, base_url))
    except Exception:
        store.delete(marker["pk"], marker["sk"])  # let the Retry publish it
        raise
    return NotifyOutput(
        published=True,
        message_id=response.get("MessageId"),
        reason=f"{len(diff.changes)} changes",
        incident_messages=incident_messages,
    )


def _publish_incidents(ref: SweepRef, store: Store, sns: Any, *, topic_arn: str, base_url: str) -> int:
    """One message per new, changed or resolved incident, each at most once per sweep (a marker
    per incident: a Retry after a failed publish sends only what was not sent)."""
    sweep = load_incident_sweep(store, ref.sweep_id)
    if sweep is None:
        return 0
    published = 0
    for change in sorted(sweep.changes, key=lambda c: (c.incident.priority.rank, c.incident.id)):
        marker: dict[str, Any] = {
            "pk": sweep_key(ref.sweep_id),
            "sk": f"NOTIFIED#INCIDENT#{change.incident.id}",
            "expires_at": epoch(ref.started_at) + 7 * 24 * 3600,
        }
        if not store.put_new(marker):
            continue
        try:
            _publish(sns, topic_arn, build_incident_alert(sweep, change, base_url))
        except Exception:
            store.delete(marker["pk"], marker["sk"])
            raise
        published += 1
    return published
