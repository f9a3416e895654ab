"""`k8s.pod_status` on Failed and Unknown pods (issue 17, point 7: a FAIL path without a test).

The Failed pod is the evicted one of kubernetes/kubernetes issue #122932 (2024-01-22): its
`kubectl describe pod` shows `Status: Failed`, `Reason: Evicted` and the kubelet's message, copied
here as its fields. The Unknown pod carries the node lifecycle controller's reason and message for
a pod on a node that stopped answering (`NodeLost`, "Node %v which was running pod %v is
unresponsive", kubernetes pkg/controller), filled in for a HyperPod node name of ours.
"""

from __future__ import annotations

import pytest

from hyperpod_nccl.checks import discover
from hyperpod_nccl.models.findings import Priority, Status
from hyperpod_nccl.models.kubernetes import ContainerState, ContainerStatus, K8sNode, KubernetesInventory, Pod
from tests.builders import inventory

CHECKS = discover()
NODE = "hyperpod-i-0f1e2d3c4b5a69788"
EVICTED = Pod(
    namespace="admin",
    name="postgres-keycloak-6d8858f5b-4khf2",
    node_name=NODE,
    phase="Failed",
    reason="Evicted",
    message="The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 777784Ki.",
    container_statuses=[
        ContainerStatus(
            name="postgres-keycloak-container",
            state=ContainerState(state="terminated", reason="ContainerStatusUnknown", exit_code=137),
        )
    ],
)
LOST = Pod(
    namespace="ml",
    name="train-worker-1",
    node_name=NODE,
    phase="Unknown",
    reason="NodeLost",
    message=f"Node {NODE} which was running pod train-worker-1 is unresponsive",
)


@pytest.mark.parametrize("pod", [EVICTED, LOST], ids=["failed-evicted", "unknown-node-lost"])
def test_a_failed_or_unknown_pod_fails_naming_its_node_and_why(pod: Pod) -> None:
    k8s = KubernetesInventory(
        nodes=[K8sNode(name=NODE, instance_id="i-0f1e2d3c4b5a69788")],
        pods=[pod],
    )
    findings = CHECKS["k8s.pod_status"].run(inventory(kubernetes=k8s).model_copy(update={"orchestrator": "eks"}))
    [failed] = [f for f in findings if f.status is Status.FAIL]
    assert failed.priority is Priority.P1
    assert failed.title == f"pod {pod.namespace}/{pod.name} is {pod.phase} (on {NODE} (i-0f1e2d3c4b5a69788))"
    assert failed.detail == pod.message and failed.fields == {"phase": pod.phase}
    assert "i-0f1e2d3c4b5a69788" in {r.id for r in failed.resources}
    assert failed.evidence == [
        f"{s.name}: {s.state.state} {s.state.reason} exit {s.state.exit_code}"
        for s in pod.container_statuses
        if s.state
    ]
