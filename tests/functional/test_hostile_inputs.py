"""Hostile or broken data from the systems we read: the diagnosis reports it and completes."""

from __future__ import annotations

from hyperpod_nccl.engine import diagnose
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.simulation.scenario import Scenario


def test_malformed_kubernetes_object_degrades_only_its_resource(simulate) -> None:  # type: ignore[no-untyped-def]
    def edit(scenario: Scenario) -> None:
        broken = {"kind": "Service", "metadata": {"name": "evil", "namespace": "training"}, "spec": "garbage"}
        scenario.kubernetes.objects.append(broken)

    sim = simulate("eks-p5", edit=edit)
    result = diagnose(DiagnoseRequest(cluster=sim.scenario.cluster.name, region=sim.scenario.region), sim.clients())
    kube = [d for d in result.degraded_sources if d.source == "kubernetes"]
    assert kube and "services: malformed object" in kube[0].reason and kube[0].partial
    # Everything else Kubernetes said is still evaluated.
    assert any(f.check_id == "k8s.network_policies" and f.is_issue for f in result.findings)
    assert any(f.check_id == "k8s.container_exit_codes" and f.is_issue for f in result.findings)
