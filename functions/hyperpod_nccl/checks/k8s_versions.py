"""NCCL version consistency within a job: image digests and the `NCCL version` banner lines."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._kubernetes import kube, main_container, training_jobs
from hyperpod_nccl.models.findings import Finding, Priority, Resource
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.reads import K8S_POD_LOGS, K8S_PODS
from hyperpod_nccl.references import DBG_VERSION_MISMATCH

_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")


@check(
    id="k8s.image_digest_mismatch",
    title="Same container image across a job's pods",
    priority=Priority.P1,
    reference=DBG_VERSION_MISMATCH,
    source="kubernetes",
    orchestrators=("eks",),
    reads=(K8S_PODS,),
)
def image_digest_mismatch(inv: Inventory) -> Iterator[Finding]:
    """Different image digests within one job usually mean different NCCL/CUDA builds per rank
    (a mutable tag pulled at different times)."""
    k8s = kube(inv)
    for job in training_jobs(k8s):
        digests: dict[str, list[str]] = {}
        for pod in job.pods:
            container = main_container(pod)
            status = pod.status_of(container.name) if container else None
            digest = status.digest if status else None
            if digest:
                digests.setdefault(digest, []).append(pod.name)
        if len(digests) > 1:
            majority = max(digests, key=lambda d: len(digests[d]))
            odd = [name for digest, names in digests.items() if digest != majority for name in names]
            yield image_digest_mismatch.fail(
                f"{job.ref}: pods run {len(digests)} different image digests",
                detail="ranks built from different images can carry different NCCL, aws-ofi-nccl or CUDA "
                "versions; pin the image by digest (image: repo@sha256:…) and restart the job",
                evidence=[f"{d[:19]}…: {', '.join(names[:6])}" for d, names in digests.items()],
                resources=[*job.resources(), *(Resource(kind="pod", id=f"{job.namespace}/{n}") for n in odd[:8])],
                fields={"digests": len(digests)},
            )
        elif digests:
            yield image_digest_mismatch.passed(
                f"{job.ref}: all {sum(len(n) for n in digests.values())} pods run one image digest",
                resources=job.resources(),
            )


@check(
    id="k8s.nccl_version_logs",
    title="Same NCCL version in a job's logs",
    priority=Priority.P1,
    reference=DBG_VERSION_MISMATCH,
    source="kubernetes",
    orchestrators=("eks",),
    reads=(K8S_PODS, K8S_POD_LOGS),
)
def nccl_version_logs(inv: Inventory) -> Iterator[Finding]:
    """Compare the `NCCL version x.y.z` banner each rank printed (current container logs)."""
    k8s = kube(inv)
    if k8s.logs is None:
        return
    for job in training_jobs(k8s):
        names = {p.name for p in job.pods}
        versions: dict[str, set[str]] = {}
        for log in k8s.logs:
            if log.namespace != job.namespace or log.pod not in names or log.previous:
                continue
            for line in log.lines:
                match = _NCCL_VERSION.search(line)
                if match:
                    versions.setdefault(match.group(1), set()).add(log.pod)
        if len(versions) > 1:
            yield nccl_version_logs.fail(
                f"{job.ref}: ranks report NCCL versions {', '.join(sorted(versions))}",
                detail="mixed NCCL versions in one communicator hang or fail at init; rebuild or re-pin the image "
                "so every rank loads the same libnccl",
                evidence=[f"NCCL {v}: {', '.join(sorted(pods)[:6])}" for v, pods in sorted(versions.items())],
                resources=[
                    *job.resources(),
                    *(
                        Resource(kind="pod", id=f"{job.namespace}/{p}")
                        for v in versions
                        for p in sorted(versions[v])[:4]
                    ),
                ],
                fields={"versions": ",".join(sorted(versions))},
            )
        elif versions:
            yield nccl_version_logs.passed(
                f"{job.ref}: every rank logged NCCL {next(iter(versions))}", resources=job.resources()
            )
