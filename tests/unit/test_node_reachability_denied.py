"""node.reachability names the IAM action a denied probe lacked: StartSession, or the session's
data channel (ssmmessages:OpenDataChannel) when the session started but its channel was refused."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hyperpod_nccl import reads
from hyperpod_nccl.checks import discover
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import NodeProbeResult
from tests.builders import inventory, probed

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _denied(*errors: str) -> Inventory:
    results = [
        NodeProbeResult(instance_id=f"i-{n:017x}", reachable=False, error=error, error_kind="access_denied")
        for n, error in enumerate(errors)
    ]
    return inventory(cluster="ml", at=NOW, node_probes=probed(results))


CHANNEL_REFUSED = f"{reads.OPEN_DATA_CHANNEL} denied: the service refused the data channel (HTTP 403)"
START_REFUSED = "User: arn:aws:sts::1:assumed-role/probe is not authorized to perform: ssm:StartSession"


@pytest.mark.parametrize(
    ("errors", "action"),
    [
        ((CHANNEL_REFUSED, CHANNEL_REFUSED), reads.OPEN_DATA_CHANNEL),
        ((START_REFUSED, START_REFUSED), reads.START_SESSION),
        # Some sessions were refused at the start: StartSession is (also) missing.
        ((CHANNEL_REFUSED, START_REFUSED), reads.START_SESSION),
    ],
)
def test_a_denied_probe_names_the_missing_action(errors: tuple[str, ...], action: str) -> None:
    [finding] = list(discover()["node.reachability"].run(_denied(*errors)))
    assert finding.title == f"{len(errors)} node(s) not probed: {action} denied"
    assert action in (finding.detail or "")
