"""Pod logs of training containers (and of the previous instance after a restart), scanned
with the failure classifier; findings name the pod, its node and the node's instance id."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._kubernetes import kube, pod_resources
from hyperpod_nccl.classifier import hits_to_findings, scan_lines
from hyperpod_nccl.models.findings import Finding, Priority
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.reads import K8S_POD_LOGS, K8S_PODS
from hyperpod_nccl.references import PAT_RUNTIME
from hyperpod_nccl.thresholds import K8S_LOG_MAX_BYTES, K8S_LOG_TAIL_LINES


@check(
    id="k8s.pod_logs",
    title="Failure signatures in training pod logs",
    priority=Priority.P1,
    reference=PAT_RUNTIME,
    source="kubernetes",
    orchestrators=("eks",),
    reads=(K8S_PODS, K8S_POD_LOGS),
)
def pod_logs(inv: Inventory) -> Iterator[Finding]:
    """Classify each container log tail; one finding per signature per container log."""
    k8s = kube(inv)
    if k8s.logs is None:
        return
    pods = {(p.namespace, p.name): p for p in k8s.pods or []}
    scanned = 0
    found = 0
    for log in k8s.logs:
        if not log.lines:
            continue
        scanned += 1
        pod = pods.get((log.namespace, log.pod))
        resources = pod_resources(k8s, pod) if pod else []
        which = f"{log.namespace}/{log.pod} [{log.container}{', previous' if log.previous else ''}]"
        result = scan_lines(log.lines)
        if result.success_markers:
            # The original's success markers: what this container says of itself, beside any failure.
            yield pod_logs.passed(
                f"{which}: printed {', '.join(repr(m) for m in result.success_markers)}",
                resources=resources,
                fields={"signature": f"success@{log.container}" + ("/previous" if log.previous else "")},
            )
        for settled in result.resolved:
            # Read and settled by a later line of the same log (a retry that connected): said, not reported.
            yield pod_logs.info(
                f"{which}: {settled.title}: {settled.count} line(s) settled by a later line",
                detail=settled.why,
                resources=resources,
                fields={"signature": f"settled:{settled.id}@{log.container}" + ("/previous" if log.previous else "")},
            )
        for finding in hits_to_findings(pod_logs, result.hits, resources):
            found += 1
            finding.title = f"{which}: {finding.title}"
            # One container's current and previous logs are separate findings of the same pod.
            finding.fields["signature"] = f"{finding.fields['signature']}@{log.container}" + (
                "/previous" if log.previous else ""
            )
            finding.fields["container"] = log.container
            finding.fields["previous"] = log.previous
            finding.fields["truncated"] = log.truncated
            yield finding
        if log.truncated:
            yield pod_logs.info(
                f"{which}: log tail cut at {K8S_LOG_MAX_BYTES // 1024} KiB",
                detail=(
                    f"the last {K8S_LOG_TAIL_LINES} lines went past the {K8S_LOG_MAX_BYTES}-byte read limit: "
                    "the newest lines were not read or classified (kubectl logs shows them)"
                ),
                resources=resources,
                fields={"signature": f"truncated@{log.container}" + ("/previous" if log.previous else "")},
            )
    if scanned and not found:
        cut = sum(1 for log in k8s.logs if log.lines and log.truncated)
        yield pod_logs.passed(
            f"no failure signature in {scanned} container log tail(s)"
            + (f" ({cut} cut at the byte limit)" if cut else "")
        )
