"""The account-wide API rates the AWS emulation enforces, as AWS does (issue 15, point 1), and the
order FilterLogEvents returns events in: one test per rule.

- ssm:StartSession: a token bucket per account and Region (default 3/s, burst 3); past it, HTTP 400
  ThrottlingException with the members of SSM's modeled shape, no session opened, the call counted
  as throttled; calls succeed again once the bucket refilled; the rule can be turned off.
- logs:FilterLogEvents: 5/s per account and Region, answered ThrottlingException as CloudWatch
  Logs does.
- FilterLogEvents pages: events of every matched stream in one order (timestamp, then ingestion),
  whatever the streams are named, with `nextToken` resuming exactly after the last event.

The default rates are checked exactly on a virtual clock (the bucket itself); the answers over
HTTP with a slower rate, so that a loaded machine cannot make a burst look like a steady pace.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from hyperpod_nccl import reads
from hyperpod_nccl.aws_limits import FILTER_LOG_EVENTS_PER_SECOND
from hyperpod_nccl.thresholds import SSM_START_SESSION_PER_SECOND
from hyperpod_nccl_sim.aws import (
    THROTTLED_MESSAGE,
    AccountRateLimits,
    EmulatedAws,
    EmulatedLimits,
    RateUsage,
    register_start_session_handler,
    started_sessions,
)

ACCOUNT_REGION = "123456789012/us-west-2"
DOCUMENT = "AWS-StartNonInteractiveCommand"


@pytest.fixture
def fresh(emulation: EmulatedAws) -> Iterator[EmulatedAws]:
    """The shared emulation reset (default limits, full buckets, zero counts), and reset again after."""
    emulation.reset()
    yield emulation
    emulation.reset()


def _client(emulation: EmulatedAws, service: str) -> Any:
    """A client that never retries: each call the test makes is one request the emulation sees."""
    return emulation.session().client(
        service, endpoint_url=emulation.endpoint_url, config=Config(retries={"total_max_attempts": 1})
    )


@pytest.fixture
def ssm(fresh: EmulatedAws) -> Iterator[tuple[Any, list[str]]]:
    """An SSM client and the targets whose StartSession reached the (recording) session handler."""
    reached: list[str] = []

    def handler(target: str, document: str, command: str) -> dict[str, Any]:
        reached.append(target)
        return {"SessionId": f"s-{len(reached)}", "StreamUrl": "wss://127.0.0.1/unused", "TokenValue": "token"}

    register_start_session_handler(ACCOUNT_REGION, handler)
    yield _client(fresh, "ssm"), reached


def _start(client: Any, target: str) -> dict[str, Any]:
    return dict(client.start_session(Target=target, DocumentName=DOCUMENT, Parameters={"command": ["true"]}))


# --- the bucket, on a virtual clock --------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _answered(app: AccountRateLimits, service: str, operation: str, region: str = "us-west-2") -> str:
    """The status line `app` answers a signed JSON request of `service`:`operation` with."""
    environ = {
        "HTTP_AUTHORIZATION": f"AWS4-HMAC-SHA256 Credential=AKID/20260101/{region}/{service}/aws4_request, ...",
        "HTTP_X_AMZ_TARGET": f"Service.{operation}",
        "HTTP_X_MOTO_ACCOUNT_ID": "123456789012",
    }
    status: list[str] = []
    app(environ, lambda line, headers: status.append(line))
    return status[0]


def _behind(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [])
    return [b"{}"]


@pytest.mark.parametrize(
    ("service", "operation", "rate"),
    [("ssm", "StartSession", SSM_START_SESSION_PER_SECOND), ("logs", "FilterLogEvents", FILTER_LOG_EVENTS_PER_SECOND)],
)
def test_the_default_rate_is_enforced_per_account_and_region(service: str, operation: str, rate: float) -> None:
    clock = _Clock()
    app = AccountRateLimits(_behind, EmulatedLimits(), clock=clock)
    burst = int(rate)
    # A burst of `rate` calls at once, and not one more.
    assert [_answered(app, service, operation) for _ in range(burst + 1)] == ["200 OK"] * burst + ["400 Bad Request"]
    # Another Region of the account has its own bucket.
    assert _answered(app, service, operation, region="us-east-1") == "200 OK"
    # One call per 1/rate seconds after it.
    clock.now += 1 / rate
    assert [_answered(app, service, operation) for _ in range(2)] == ["200 OK", "400 Bad Request"]
    # Idle time refills the bucket up to the burst only.
    clock.now += 60
    assert [_answered(app, service, operation) for _ in range(burst + 1)] == ["200 OK"] * burst + ["400 Bad Request"]
    assert app.usage(f"{service}:{operation}")[ACCOUNT_REGION] == RateUsage(accepted=2 * burst + 1, throttled=3)
    # Operations without an account-wide rule pass whatever the pace.
    assert {_answered(app, service, "DescribeSomething") for _ in range(50)} == {"200 OK"}


def test_the_defaults_are_the_published_rates(fresh: EmulatedAws) -> None:
    limits = fresh.limits
    assert (limits.start_session_per_second, limits.start_session_burst) == (3.0, 3)
    assert (limits.filter_log_events_per_second, limits.filter_log_events_burst) == (5, 5)
    assert limits.enforce


# --- StartSession over HTTP --------------------------------------------------------------------


def test_start_session_past_the_rate_is_throttled_as_ssm_answers(ssm, fresh: EmulatedAws) -> None:  # type: ignore[no-untyped-def]
    client, reached = ssm
    # Slower than the default so that no refill can happen while the burst is sent.
    fresh.set_limits(EmulatedLimits(start_session_per_second=0.5, start_session_burst=3))
    for index in range(3):
        _start(client, f"node-{index}")
    with pytest.raises(ClientError) as raised:
        _start(client, "node-3")
    response = raised.value.response
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert response["Error"] == {"Code": "ThrottlingException", "Message": THROTTLED_MESSAGE}
    # SSM's ThrottlingException shape: Message (required), QuotaCode and ServiceCode; AWS documents
    # no quota code for this rate, so the emulation sends none.
    assert response["Message"] == THROTTLED_MESSAGE
    assert "QuotaCode" not in response and "ServiceCode" not in response
    assert isinstance(raised.value, client.exceptions.ThrottlingException)
    # The throttled call opened no session and reached no agent.
    assert reached == ["node-0", "node-1", "node-2"]
    assert [target for target, _ in started_sessions()] == reached
    assert fresh.rate_usage(reads.START_SESSION) == {ACCOUNT_REGION: RateUsage(accepted=3, throttled=1)}
    # Once a token is back, calls succeed again.
    time.sleep(1 / 0.5 + 0.05)
    assert _start(client, "node-3")["SessionId"] == "s-4"
    assert fresh.rate_usage(reads.START_SESSION) == {ACCOUNT_REGION: RateUsage(accepted=4, throttled=1)}


@pytest.mark.parametrize(
    "limits",
    [EmulatedLimits(start_session_per_second=None), EmulatedLimits(enforce=False)],
    ids=["rule-off", "all-off"],
)
def test_turning_the_start_session_rule_off_lets_every_call_through(ssm, fresh, limits) -> None:  # type: ignore[no-untyped-def]
    client, reached = ssm
    fresh.set_limits(limits)
    for index in range(12):
        _start(client, f"node-{index}")
    assert len(reached) == 12
    assert fresh.rate_usage(reads.START_SESSION) == {ACCOUNT_REGION: RateUsage(accepted=12, throttled=0)}


def test_reset_restores_the_default_limits(ssm, fresh: EmulatedAws) -> None:  # type: ignore[no-untyped-def]
    fresh.set_limits(EmulatedLimits(enforce=False))
    fresh.reset()
    assert fresh.limits == EmulatedLimits()
    assert fresh.rate_usage(reads.START_SESSION) == {}


# --- FilterLogEvents over HTTP -----------------------------------------------------------------


def _seed_group(emulation: EmulatedAws, streams: dict[str, list[int]], group: str = "/emulation/limits") -> str:
    """Create `group` with each stream's events (timestamps in ms ago), put stream by stream in the
    order given."""
    logs = emulation.client("logs")
    logs.create_log_group(logGroupName=group)
    now = int(time.time() * 1000)
    for stream, ages in streams.items():
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
        events = [{"timestamp": now - age, "message": f"{stream} {age}"} for age in sorted(ages, reverse=True)]
        logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=events)
    return group


def test_filter_log_events_past_its_rate_is_throttled_as_cloudwatch_logs_answers(fresh: EmulatedAws) -> None:
    group = _seed_group(fresh, {"only": [1000]})
    logs = _client(fresh, "logs")
    fresh.set_limits(EmulatedLimits(filter_log_events_per_second=0.5, filter_log_events_burst=5))
    for _ in range(5):
        assert len(logs.filter_log_events(logGroupName=group)["events"]) == 1
    with pytest.raises(ClientError) as raised:
        logs.filter_log_events(logGroupName=group)
    response = raised.value.response
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert response["Error"] == {"Code": "ThrottlingException", "Message": THROTTLED_MESSAGE}
    assert isinstance(raised.value, logs.exceptions.ThrottlingException)
    assert fresh.rate_usage(reads.FILTER_LOG_EVENTS) == {ACCOUNT_REGION: RateUsage(accepted=5, throttled=1)}


def test_filter_log_events_pages_interleave_the_streams_by_time(fresh: EmulatedAws) -> None:
    # Stream "b" holds the oldest events and sorts after "a": a reader that went stream by stream
    # (moto's order) would start with a's newer events.
    group = _seed_group(fresh, {"b": [9000, 7000, 5000, 500], "a": [8000, 6000, 4000]})
    logs = _client(fresh, "logs")
    pages: list[list[str]] = []
    token: dict[str, str] = {}
    while True:
        answer = logs.filter_log_events(logGroupName=group, limit=3, **token)
        pages.append([event["message"] for event in answer["events"]])
        if "nextToken" not in answer:
            break
        token = {"nextToken": answer["nextToken"]}
    assert pages == [["b 9000", "a 8000", "b 7000"], ["a 6000", "b 5000", "a 4000"], ["b 500"]]
    newest_first = logs.filter_log_events(logGroupName=group, limit=2, startFromHead=False)
    assert [event["message"] for event in newest_first["events"]] == ["b 500", "a 4000"]


def test_events_of_one_timestamp_come_in_ingestion_order(fresh: EmulatedAws) -> None:
    # Same timestamp in both streams: "z" was ingested first, so it comes first although "a" sorts first.
    logs = fresh.client("logs")
    group = "/emulation/ties"
    logs.create_log_group(logGroupName=group)
    moment = int(time.time() * 1000) - 1000
    for stream in ("z", "a"):
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
        logs.put_log_events(
            logGroupName=group, logStreamName=stream, logEvents=[{"timestamp": moment, "message": stream}]
        )
    events = _client(fresh, "logs").filter_log_events(logGroupName=group)["events"]
    assert [(event["logStreamName"], event["timestamp"]) for event in events] == [("z", moment), ("a", moment)]
    ingested = [event["ingestionTime"] for event in events]
    assert ingested == sorted(ingested)
