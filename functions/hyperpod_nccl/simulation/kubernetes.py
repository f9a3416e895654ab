"""The simulated Kubernetes API of an EKS scenario (implemented by the EKS work)."""

from __future__ import annotations

from hyperpod_nccl.simulation.aws import EmulatedAws
from hyperpod_nccl.simulation.scenario import Scenario


class KubernetesApi:
    """Handle on the running API emulation."""

    def stop(self) -> None:
        """Stop the server."""
        return None


def start_kubernetes_api(scenario: Scenario, emulation: EmulatedAws) -> KubernetesApi:
    """Serve the scenario's Kubernetes objects and point the EKS cluster's endpoint at them."""
    return KubernetesApi()
