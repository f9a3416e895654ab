"""CloudWatch log streams of the simulated cluster, seeded from the scenario's `logs` sidecar.

Streams are named as HyperPod names them (operations.md § 4): the health-monitoring agent's
`SagemakerHealthMonitoringAgent/<group>/<instance>`, `LifecycleConfig/<group>/<instance>`, and
the agent-shipped `<instance>/nccl` and `<instance>/training`. Lines are templates with
`{host}`, `{ip}`, `{instance_id}`, `{pid}`, `{rank}` and `{node}` filled per node, and `{ts}` (the
line's own time, ISO 8601 UTC, as the health-monitoring agent writes it in its records).

`install_filter_log_events` replaces moto's FilterLogEvents with one as strict as the service where
the service sets limits (the API reference and model): pages of at most 1 MB or 10,000 events
(`limit` at most), `nextToken` until the last page and only then none, `startFromHead`,
`logStreamNames` (1 to 100, not with `logStreamNamePrefix`), and an empty `searchedLogStreams` (no
longer supported since 2020). The filter pattern syntax is moto's plus the any-term patterns of
`simulation.aws`.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:  # scenario.py imports LogsSpec from here
    from hyperpod_nccl.simulation.aws import EmulatedAws
    from hyperpod_nccl.simulation.scenario import Scenario

SimStreamKind = Literal["health_agent", "lifecycle", "nccl", "training"]
PUT_BATCH = 500
_PLACEHOLDER = re.compile(r"\{(host|ip|instance_id|pid|rank|node|ts)\}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LogLineSpec(_Strict):
    """One line (repeated `repeat` times, `every_seconds` apart) at `minutes_ago`."""

    minutes_ago: float
    message: str
    repeat: int = Field(default=1, ge=1, le=10000)
    every_seconds: float = 1.0


class LogStreamSpec(_Strict):
    """The lines of one node's stream."""

    node: str
    kind: SimStreamKind
    lines: list[LogLineSpec]


class ChatterSpec(_Strict):
    """Lines every selected node writes (healthy NCCL INFO chatter), a second apart per line."""

    nodes: list[str] | Literal["all"] = "all"
    groups: list[str] | None = None
    except_nodes: list[str] = Field(default_factory=list)
    kind: SimStreamKind = "nccl"
    minutes_ago: float = 100
    lines: list[str]


class LogsSpec(_Strict):
    """The `logs` section of a scenario. `enabled: false` leaves the log group uncreated."""

    enabled: bool = True
    chatter: list[ChatterSpec] = Field(default_factory=list)
    streams: list[LogStreamSpec] = Field(default_factory=list)


def stream_name(scenario: Scenario, node: str, kind: SimStreamKind) -> str:
    """The CloudWatch stream a node writes `kind` lines to."""
    group = node.split(":", 1)[0]
    instance_id = scenario.instance_id(node)
    return {
        "health_agent": f"SagemakerHealthMonitoringAgent/{group}/{instance_id}",
        "lifecycle": f"LifecycleConfig/{group}/{instance_id}",
        "nccl": f"{instance_id}/nccl",
        "training": f"{instance_id}/training",
    }[kind]


def _render(template: str, scenario: Scenario, node: str, when: datetime) -> str:
    keys = scenario.node_keys()
    index = keys.index(node)
    host = scenario.hostname(node)
    values = {
        "host": host.split(".", 1)[0],
        "ip": host.split(".", 1)[0].removeprefix("ip-").replace("-", "."),
        "instance_id": scenario.instance_id(node),
        "pid": str(4000 + index),
        "rank": str(index * 8),
        "node": node,
        "ts": when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    # Only the known placeholders: lines may be JSON, whose braces str.format would choke on.
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def _selected(scenario: Scenario, chatter: ChatterSpec) -> list[str]:
    nodes = scenario.node_keys() if chatter.nodes == "all" else list(chatter.nodes)
    if chatter.groups is not None:
        nodes = [n for n in nodes if n.split(":", 1)[0] in chatter.groups]
    return [n for n in nodes if n not in chatter.except_nodes]


def seed_logs(scenario: Scenario, emulation: EmulatedAws, cluster_arn: str, now: datetime) -> None:
    """Create the cluster's log group and streams with the scenario's lines."""
    spec: LogsSpec | None = scenario.logs
    if spec is None or not spec.enabled:
        return
    log_group = f"/aws/sagemaker/Clusters/{scenario.cluster.name}/{cluster_arn.rsplit('/', 1)[-1]}"
    client: Any = emulation.client("logs", scenario.region)
    client.create_log_group(logGroupName=log_group)
    events: dict[str, list[tuple[int, str]]] = defaultdict(list)

    def add(node: str, kind: SimStreamKind, when: datetime, template: str) -> None:
        events[stream_name(scenario, node, kind)].append(
            (int(when.timestamp() * 1000), _render(template, scenario, node, when))
        )

    for chatter in spec.chatter:
        for node in _selected(scenario, chatter):
            start = now - timedelta(minutes=chatter.minutes_ago)
            for offset, template in enumerate(chatter.lines):
                add(node, chatter.kind, start + timedelta(seconds=offset), template)
    for stream in spec.streams:
        for line in stream.lines:
            start = now - timedelta(minutes=line.minutes_ago)
            for repeat in range(line.repeat):
                add(stream.node, stream.kind, start + timedelta(seconds=repeat * line.every_seconds), line.message)
    for name, stream_events in sorted(events.items()):
        client.create_log_stream(logGroupName=log_group, logStreamName=name)
        ordered = sorted(stream_events)
        for first in range(0, len(ordered), PUT_BATCH):
            batch = ordered[first : first + PUT_BATCH]
            client.put_log_events(
                logGroupName=log_group,
                logStreamName=name,
                logEvents=[{"timestamp": ts, "message": message} for ts, message in batch],
            )


# FilterLogEvents' page limits (API reference: "up to 1 MB of log events or up to 10,000 log
# events"); an event counts its UTF-8 message plus the 26 bytes PutLogEvents charges per event.
FILTER_PAGE_MAX_EVENTS = 10_000
FILTER_PAGE_MAX_BYTES = 1_048_576
EVENT_OVERHEAD_BYTES = 26
FILTER_STREAM_NAMES_MAX = 100
FILTER_PATTERN_MAX_CHARS = 1024


def _token(group: str, forward: bool, key: tuple[int, int]) -> str:
    """An opaque nextToken: the group, the direction and the last event returned."""
    raw = json.dumps({"g": group, "f": forward, "k": list(key)}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _untoken(token: str, group: str) -> tuple[bool, tuple[int, int]]:
    from moto.logs.exceptions import InvalidParameterException

    try:
        state = json.loads(base64.urlsafe_b64decode(token.encode()))
        if state["g"] != group:
            raise ValueError(group)
        return bool(state["f"]), (int(state["k"][0]), int(state["k"][1]))
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
        ((event.timestamp, int(event.event_id)), stream_name, event)
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
    last = (0, 0)
    most = int(limit or FILTER_PAGE_MAX_EVENTS)
    for key, stream_name, event in found:
        event_size = len(event.message.encode("utf-8")) + EVENT_OVERHEAD_BYTES
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
