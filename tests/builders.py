"""Builders the unit tests share: the envelope of an `Inventory` (cluster, region, times) is the
same in every test that hand-builds one; only the sources it carries differ."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from hyperpod_nccl.models.inventory import ControlPlaneInventory, Inventory
from hyperpod_nccl.models.node_probe import NodeProbeData, NodeProbeInventory, NodeProbeResult

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def inventory(
    *,
    cluster: str = "c1",
    region: str = "us-west-2",
    at: datetime = NOW,
    window: timedelta = timedelta(0),
    control_plane: ControlPlaneInventory | None = None,
    **sources: Any,
) -> Inventory:
    """An inventory collected `at`, over the `window` before it, with an empty control plane unless
    given and whatever other `sources` (node_probes, kubernetes, logs, ...) the test names."""
    return Inventory(
        cluster_name=cluster,
        region=region,
        collected_at=at,
        window_start=at - window,
        window_end=at,
        control_plane=control_plane or ControlPlaneInventory(nodes=[]),
        **sources,
    )


def probed(results: Iterable[NodeProbeResult]) -> NodeProbeInventory:
    """The node-probe source of a sweep that probed exactly the nodes of `results`."""
    results = list(results)
    return NodeProbeInventory(probed_instance_ids=[r.instance_id for r in results], results=results)


def probed_node(
    probe: NodeProbeData, *, instance_type: str | None = "ml.p5.48xlarge", orchestrator: str = "unknown", **result: Any
) -> Inventory:
    """An inventory holding one probed worker node (i-0f1e2d3c4b5a69788) that answered `probe`;
    `result` sets other NodeProbeResult fields (started_at, exit_code ...)."""
    node = NodeProbeResult(
        instance_id="i-0f1e2d3c4b5a69788",
        reachable=True,
        instance_group="worker",
        instance_type=instance_type,
        probe=probe,
        **result,
    )
    return inventory(node_probes=probed([node])).model_copy(update={"orchestrator": orchestrator})


class FakeClock:
    """A clock for pacing and retry logic without waiting: `sleep` moves `now` and keeps each wait."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
