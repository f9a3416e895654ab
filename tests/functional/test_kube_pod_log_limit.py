"""Pod logs are read with a byte limit: a training container printing megabytes of long lines
(through an API server that ignores limitBytes) costs the diagnosis at most K8S_LOG_MAX_BYTES per
log, and the Kubernetes log check says the log was cut instead of reading as complete."""

from __future__ import annotations

from hyperpod_nccl.checks import discover
from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.collectors.control_plane import collect_control_plane
from hyperpod_nccl.collectors.kubernetes import collect_kubernetes
from hyperpod_nccl.models.findings import Status
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.thresholds import K8S_LOG_MAX_BYTES, K8S_LOG_TAIL_LINES
from hyperpod_nccl_sim.scenario import PodVariation, Scenario


def test_an_oversized_pod_log_is_cut_and_the_check_says_so(simulate) -> None:  # type: ignore[no-untyped-def]
    watchdog = "[rank3]:[E ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)"
    # 500 lines of 8 KB (4 MB) after a real failure line: the tail starts with the failure, and
    # the byte limit cuts it long before its end.
    long_lines = [watchdog, *(f"{i:04d} " + "y" * 8000 for i in range(K8S_LOG_TAIL_LINES - 1))]

    def edit(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.ignore_limit_bytes = True
        job = scenario.kubernetes.jobs[0]
        job.pods = [p for p in job.pods if p.index != 0]
        job.pods.append(PodVariation(index=0, log=long_lines))

    sim = simulate("healthy-eks", edit=edit)
    request = DiagnoseRequest(cluster=sim.scenario.cluster.name, region=sim.scenario.region)
    ctx = CollectionContext(request=request, aws=sim.clients(), now=sim.now)
    kubernetes = collect_kubernetes(ctx, collect_control_plane(ctx))
    assert kubernetes is not None and kubernetes.logs is not None
    [container] = [log for log in kubernetes.logs if log.pod.endswith("worker-0") and not log.previous]
    assert container.truncated and len("\n".join(container.lines)) <= K8S_LOG_MAX_BYTES

    inventory = Inventory(
        cluster_name=sim.scenario.cluster.name,
        region=sim.scenario.region,
        orchestrator="eks",
        collected_at=sim.now,
        window_start=sim.now,
        window_end=sim.now,
        kubernetes=kubernetes,
    )
    logs = discover()["k8s.pod_logs"].run(inventory)
    [cut] = [f for f in logs if f.status is Status.INFO]
    assert f"cut at {K8S_LOG_MAX_BYTES // 1024} KiB" in cut.title and "newest lines were not read" in (cut.detail or "")
    [timeout] = [f for f in logs if f.status is Status.FAIL]
    assert timeout.fields["truncated"] is True and "worker-0" in timeout.title
