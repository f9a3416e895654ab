"""FilterLogEvents of the emulated CloudWatch Logs, as strict as the service.

`install_filter_log_events` replaces moto's FilterLogEvents with one as strict as the service where
the service sets limits (`hyperpod_nccl.aws_limits`, which the product's scan reads too): pages of
at most 1 MB or 10,000 events (`limit` at most), `nextToken` until the last page and only then
none, `startFromHead`, `logStreamNames` (1 to 100, not with `logStreamNamePrefix`), filter patterns
of at most 1024 characters, and an empty `searchedLogStreams` (no longer supported since 2020). The
filter pattern syntax is moto's plus the any-term patterns of `aws.py`.

Events come back in one order across every matched stream, as the API reference says the service
returns them: "sorted by event timestamp, the timestamp when the event was ingested by CloudWatch
Logs, and the ID of the PutLogEvents request" (the FilterLogEvents documentation in botocore's
logs/2014-03-28 model), oldest first unless `startFromHead` is false. moto's event id, one counter
of every PutLogEvents event, stands in for the request id. Events of two streams are therefore
interleaved by time, and a query capped at N events keeps the N oldest (or newest) of the whole
group whatever the streams are named; `nextToken` holds the sort key of the last event returned,
so paging resumes exactly after it.

Its rate (5 per second per account and Region) is enforced in front of it, by `aws.AccountRateLimits`.

`aws.install_moto_extensions` installs it; it reads moto's log groups and nothing of the scenario.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from hyperpod_nccl.aws_limits import (
    FILTER_PAGE_MAX_BYTES,
    FILTER_PAGE_MAX_EVENTS,
    FILTER_PATTERN_MAX_CHARS,
    FILTER_STREAM_NAMES_MAX,
    LOG_EVENT_OVERHEAD_BYTES,
)

# Where an event sorts (see the module docstring): timestamp, ingestion time, event id.
SortKey = tuple[int, int, int]


def _token(group: str, forward: bool, key: SortKey) -> str:
    """An opaque nextToken: the group, the direction and the last event returned."""
    raw = json.dumps({"g": group, "f": forward, "k": list(key)}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _untoken(token: str, group: str) -> tuple[bool, SortKey]:
    from moto.logs.exceptions import InvalidParameterException

    try:
        state = json.loads(base64.urlsafe_b64decode(token.encode()))
        if state["g"] != group:
            raise ValueError(group)
        first, second, third = (int(part) for part in state["k"])
        return bool(state["f"]), (first, second, third)
    except (ValueError, KeyError, TypeError, IndexError, binascii.Error) as error:
        raise InvalidParameterException("The specified nextToken is invalid.") from error


def _filter_log_events(self: Any) -> str:
    """moto LogsResponse.filter_log_events, with the service's limits (see the module docstring)."""
    from moto.logs import models as logs_models
    from moto.logs.exceptions import InvalidParameterException, ResourceNotFoundException

    name = self._get_param("logGroupName")
    identifier = self._get_param("logGroupIdentifier")
    if bool(name) == bool(identifier):
        raise InvalidParameterException("You must specify exactly one of logGroupName or logGroupIdentifier.")
    name = name or str(identifier).split(":log-group:", 1)[-1].removesuffix(":*")
    names = self._get_param("logStreamNames")
    prefix = self._get_param("logStreamNamePrefix")
    if names is not None and prefix is not None:
        raise InvalidParameterException("Cannot specify both logStreamNames and logStreamNamePrefix.")
    if names is not None and not 1 <= len(names) <= FILTER_STREAM_NAMES_MAX:
        raise InvalidParameterException(
            constraint="Member must have length less than or equal to 100", parameter="logStreamNames", value=names
        )
    limit = self._get_param("limit")
    if limit is not None and not 1 <= int(limit) <= FILTER_PAGE_MAX_EVENTS:
        raise InvalidParameterException(
            constraint="Member must have value less than or equal to 10000", parameter="limit", value=limit
        )
    pattern = self._get_param("filterPattern") or ""
    if len(pattern) > FILTER_PATTERN_MAX_CHARS:
        raise InvalidParameterException(
            constraint="Member must have length less than or equal to 1024", parameter="filterPattern", value=pattern
        )
    group = self.logs_backend.groups.get(name)
    if group is None:
        raise ResourceNotFoundException()
    start, end = self._get_param("startTime"), self._get_param("endTime")
    token = self._get_param("nextToken")
    # The first request sets the direction; later ones follow their token's.
    forward, after = _untoken(token, name) if token else (self._get_param("startFromHead", True) is not False, None)
    matcher = logs_models.EventMessageFilter(pattern)
    selected = [
        (stream_name, stream)
        for stream_name, stream in group.streams.items()
        if (names is None or stream_name in names) and (prefix is None or stream_name.startswith(prefix))
    ]
    found = [
        ((int(event.timestamp), int(event.ingestion_time), int(event.event_id)), stream_name, event)
        for stream_name, stream in selected
        for event in list(stream.events)
        if (start is None or event.timestamp >= start)
        and (end is None or event.timestamp <= end)
        and matcher.matches(event.message)
    ]
    found.sort(key=lambda item: item[0], reverse=not forward)
    if after is not None:
        found = [item for item in found if (item[0] > after if forward else item[0] < after)]
    page: list[dict[str, Any]] = []
    size = 0
    last: SortKey = (0, 0, 0)
    most = int(limit or FILTER_PAGE_MAX_EVENTS)
    for key, stream_name, event in found:
        event_size = len(event.message.encode("utf-8")) + LOG_EVENT_OVERHEAD_BYTES
        if len(page) >= most or (page and size + event_size > FILTER_PAGE_MAX_BYTES):
            break
        size += event_size
        page.append({**event.to_filter_dict(), "logStreamName": stream_name})
        last = key
    body: dict[str, Any] = {"events": page, "searchedLogStreams": []}
    if len(page) < len(found):
        body["nextToken"] = _token(name, forward, last)
    return json.dumps(body)


def install_filter_log_events() -> None:
    """Serve FilterLogEvents with `_filter_log_events` (idempotent; patches moto's class)."""
    from moto.logs.responses import LogsResponse

    setattr(LogsResponse, "filter_log_events", _filter_log_events)  # noqa: B010 - patching a class
