"""State Notify: this sweep's summary and root-cause messages, each published once (per-sweep
markers in the table), after the alerts earlier sweeps left pending.

What a sweep sends: one message per root-cause change told in the cause's own thread (P0/P1
causes: `alert_messages.told_in_its_thread`), then the summary in the cluster's thread when one
is due (`alert_messages.summary_due`). A baseline sweep (the cluster's first evaluated one,
`IncidentSweep.baseline`) sends the summary alone, listing every open cause: a deployment on a
cluster with twenty open causes sends one message, not twenty threads.

Alert formatting is `hyperpod_nccl.monitor.alert_messages`; this module publishes."""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from hyperpod_nccl.aws_errors import error_message
from hyperpod_nccl.monitor.alert_messages import (
    PERMANENT_PUBLISH_ERRORS,
    Alert,
    build_alert,
    build_incident_alert,
    sns_message,
    summary_due,
    told_in_its_thread,
    undeliverable_alert,
    verdict_order,
)
from hyperpod_nccl.monitor.diff import SweepDiff
from hyperpod_nccl.monitor.incident_tracking import IncidentSweep, load_incident_sweep
from hyperpod_nccl.monitor.payloads import NotifyOutput, SweepRef, SweepState, aggregate_failure_text
from hyperpod_nccl.monitor.settings import ALERT_RETENTION_SECONDS
from hyperpod_nccl.monitor.store import DIFF, PendingAlert, Store, epoch

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sns.type_defs import PublishResponseTypeDef

_log = logging.getLogger(__name__)


def run_notify(state: SweepState, store: Store, sns: SNSClient, *, topic_arn: str, base_url: str) -> NotifyOutput:
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
    pending = _pending_alerts(store, ref)
    earlier = dropped = 0
    for alert in sorted((a for a in pending if a.sweep_id != ref.sweep_id), key=_pending_order):
        sent, gone = _publish_pending(alert, store, sns, topic_arn=topic_arn, base_url=base_url)
        earlier, dropped = earlier + sent, dropped + gone
    try:
        output = _publish_sweep(ref, _diff_to_notify(store, ref, failure), store, sns, topic_arn, base_url)
    except Exception:
        _keep_pending(store, ref, failure)
        raise
    if any(alert.sweep_id == ref.sweep_id for alert in pending):  # an earlier attempt of this Notify had left it
        store.drop_pending_alert(ref.region, ref.cluster, ref.sweep_id)
    return output.model_copy(update={"earlier_alerts": earlier, "dropped_alerts": dropped})


def _pending_order(alert: PendingAlert) -> str:
    """Oldest sweep first; an unreadable one sorts first and is dropped there."""
    try:
        return SweepRef.model_validate_json(alert.ref).started_at.isoformat()
    except ValidationError:
        return ""


def _permanent(error: BaseException) -> bool:
    """A publish failure that every retry of the same message gets again: SNS refused the message
    itself (too long, an invalid parameter), or the pending item cannot be read."""
    if isinstance(error, ClientError):
        return error.response.get("Error", {}).get("Code") in PERMANENT_PUBLISH_ERRORS
    return isinstance(error, ValidationError | KeyError)


def _publish(sns: SNSClient, topic_arn: str, alert: Alert) -> PublishResponseTypeDef:
    """Publish `alert` (fitted to SNS's limits by `sns_message`); when SNS still refuses that
    message permanently, publish its short stand-in instead (`undeliverable_alert`)."""
    try:
        response = sns.publish(TopicArn=topic_arn, **sns_message(alert))
    except ClientError as error:
        if not _permanent(error):
            raise
        reason = error_message(error)
        _log.warning("SNS refused an alert; publishing its stand-in", extra={"reason": reason})
        response = sns.publish(TopicArn=topic_arn, **sns_message(undeliverable_alert(alert, reason)))
    return response


def _diff_to_notify(store: Store, ref: SweepRef, failure: str | None) -> SweepDiff:
    text = store.sweep_blob(ref.sweep_id, DIFF)
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
        store.put_pending_alert(ref, failure, expires_at=_alert_expiry(ref))


def _publish_pending(
    alert: PendingAlert, store: Store, sns: SNSClient, *, topic_arn: str, base_url: str
) -> tuple[int, int]:
    """Publish what an earlier sweep could not (each message once), then forget it: (messages
    sent, alerts dropped). Never raises, so that no earlier alert blocks a later one: a failure
    that may pass leaves it pending for the next sweep; a permanent one drops it, with a record
    under the cluster (`Store.record_dropped_alert`) and a warning in the function's log."""
    try:
        ref = SweepRef.model_validate_json(alert.ref)
        diff = _diff_to_notify(store, ref, alert.failure or None).model_copy(update={"delivered_late": True})
        output = _publish_sweep(ref, diff, store, sns, topic_arn, base_url)
    except Exception as error:  # noqa: BLE001 - kept or dropped below, never raised
        reason = error_message(error)
        if not _permanent(error):
            _log.warning("an earlier alert is still unpublished; kept for the next sweep", extra={"reason": reason})
            return 0, 0
        _log.error(
            "an earlier alert can never be published; dropped", extra={"reason": reason, "sweep": alert.sweep_id}
        )
        with contextlib.suppress(ClientError, BotoCoreError):  # the log line above remains
            store.record_dropped_alert(alert, reason)
            store.drop_pending_alert(alert.region, alert.cluster, alert.sweep_id)
        return 0, 1
    store.drop_pending_alert(alert.region, alert.cluster, alert.sweep_id)
    return output.incident_messages + (1 if output.message_id else 0), 0


def _pending_alerts(store: Store, ref: SweepRef) -> list[PendingAlert]:
    """Alerts earlier Notify attempts left unpublished; none when the table cannot be read (they
    stay stored for the next sweep: reading them must not cost this sweep its own alert)."""
    try:
        return store.pending_alerts(ref.region, ref.cluster)
    except (ClientError, BotoCoreError):
        return []


def alerts_pending(store: Store, ref: SweepRef) -> bool:
    """An earlier sweep of the cluster left alerts unpublished (Notify must run)."""
    return bool(_pending_alerts(store, ref))


def _alert_expiry(ref: SweepRef) -> int:
    """The TTL of what keeps a sweep's alerts deliverable: its pending alert and publish markers."""
    return epoch(ref.started_at) + ALERT_RETENTION_SECONDS


def _publish_sweep(
    ref: SweepRef, diff: SweepDiff, store: Store, sns: SNSClient, topic_arn: str, base_url: str
) -> NotifyOutput:
    incidents = load_incident_sweep(store, ref.sweep_id)
    incident_messages = _publish_incidents(ref, incidents, store, sns, topic_arn=topic_arn, base_url=base_url)
    if not summary_due(diff, incidents):
        reason = f"{incident_messages} incident messages" if incident_messages else "nothing changed"
        return NotifyOutput(published=incident_messages > 0, reason=reason, incident_messages=incident_messages)
    if not store.claim_notification(ref.sweep_id, expires_at=_alert_expiry(ref)):
        return NotifyOutput(
            published=incident_messages > 0,
            reason="already published for this sweep",
            incident_messages=incident_messages,
        )
    try:
        response = _publish(sns, topic_arn, build_alert(diff, base_url, incidents))
    except Exception:
        store.release_notification_claim(ref.sweep_id)  # let the Retry publish it
        raise
    reason = f"{len(diff.changes)} changes"
    if incidents is not None and incidents.baseline:
        reason = f"baseline: {len(incidents.incidents)} root causes open"
    return NotifyOutput(
        published=True, message_id=response.get("MessageId"), reason=reason, incident_messages=incident_messages
    )


def _publish_incidents(
    ref: SweepRef, sweep: IncidentSweep | None, store: Store, sns: SNSClient, *, topic_arn: str, base_url: str
) -> int:
    """One message per root-cause change told in its own thread (`told_in_its_thread`), in verdict
    order, each at most once per sweep (a marker per cause: a Retry after a failed publish sends
    only what was not sent). None for a baseline sweep: its summary lists every open cause."""
    if sweep is None or sweep.baseline:
        return 0
    published = 0
    for change in sorted(filter(told_in_its_thread, sweep.changes), key=lambda c: verdict_order(c.incident)):
        incident_id = change.incident.id
        if not store.claim_notification(ref.sweep_id, expires_at=_alert_expiry(ref), incident_id=incident_id):
            continue
        try:
            _publish(sns, topic_arn, build_incident_alert(sweep, change, base_url))
        except Exception:
            store.release_notification_claim(ref.sweep_id, incident_id=incident_id)
            raise
        published += 1
    return published
