"""CloudWatch log streams of the simulated cluster, seeded from the scenario's `logs` sidecar.

Streams are named as HyperPod names them (operations.md § 4): the health-monitoring agent's
`SagemakerHealthMonitoringAgent/<group>/<instance>`, `LifecycleConfig/<group>/<instance>`, and
the agent-shipped `<instance>/nccl` and `<instance>/training`. Lines are templates with
`{host}`, `{ip}`, `{instance_id}`, `{pid}`, `{rank}` and `{node}` filled per node, and `{ts}` (the
line's own time, ISO 8601 UTC, as the health-monitoring agent writes it in its records).
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from hyperpod_nccl_sim.scenario import ChatterSpec, LogsSpec, Scenario, SimStreamKind

if TYPE_CHECKING:
    from hyperpod_nccl_sim.aws import EmulatedAws

PUT_BATCH = 500
_PLACEHOLDER = re.compile(r"\{(host|ip|instance_id|pid|rank|node|ts)\}")


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
