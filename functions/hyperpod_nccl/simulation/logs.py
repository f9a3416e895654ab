"""CloudWatch log streams of the simulated cluster (implemented by the log-intelligence work)."""

from __future__ import annotations

from datetime import datetime

from hyperpod_nccl.simulation.aws import EmulatedAws
from hyperpod_nccl.simulation.scenario import Scenario


def seed_logs(scenario: Scenario, emulation: EmulatedAws, cluster_arn: str, now: datetime) -> None:
    """Create the cluster's log group and streams with the scenario's lines."""
    return None
