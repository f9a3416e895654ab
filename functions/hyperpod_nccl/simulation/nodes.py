"""Simulated SSM agents for the scenario's nodes (implemented by the node-probe work)."""

from __future__ import annotations

from hyperpod_nccl.simulation.aws import EmulatedAws
from hyperpod_nccl.simulation.scenario import Scenario


class NodeAgents:
    """Handle on the running simulated agents."""

    def stop(self) -> None:
        """Stop every agent."""
        return None


def start_node_agents(scenario: Scenario, emulation: EmulatedAws, cluster_arn: str) -> NodeAgents:
    """Start the agents and route ssm:StartSession to them."""
    return NodeAgents()
