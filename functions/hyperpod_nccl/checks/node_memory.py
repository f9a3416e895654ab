"""Host memory layout of GPU/EFA nodes: huge pages (original probe 19) and NUMA (probe 28)."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_nccl import instance_types, suggested
from hyperpod_nccl.checks import check
from hyperpod_nccl.checks._node import node_label, node_resource, probed_nodes, ssm_target
from hyperpod_nccl.models.findings import Finding, Priority
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.references import OPS_NCCL_ENV, PERF_EFA_SETTINGS

# /proc/meminfo's Hugepagesize of the two x86 huge page sizes, in KiB.
_HUGEPAGE_2M_KIB = 2048


@check(id="node.hugepages", title="Huge pages", priority=Priority.P2, reference=PERF_EFA_SETTINGS, source="node_probes")
def hugepages(inv: Inventory) -> Iterator[Finding]:
    """EFA nodes: 2 MiB pages all in use warns (libfabric's registrations and fork() fail with
    ENOMEM); none reserved is reported for information with the sysctl that reserves them."""
    ok = 0
    for result, probe in probed_nodes(inv):
        if probe.hugepages_total is None or not instance_types.expects_efa_for_nccl(result.instance_type or ""):
            continue
        evidence = [
            f"HugePages_Total: {probe.hugepages_total}",
            f"HugePages_Free: {probe.hugepages_free}",
            f"Hugepagesize: {probe.hugepage_size_kib} kB",
        ]
        target = ssm_target(inv, result)
        if probe.hugepages_total == 0:
            yield hugepages.info(
                f"no huge pages reserved on {node_label(result)}",
                detail="libfabric's EFA provider backs its buffers with huge pages when there are some; "
                "vm.nr_hugepages=512 reserves 1 GiB of 2 MiB pages",
                evidence=evidence,
                resources=[node_resource(result)],
                suggested_commands=[suggested.node_hugepages(inv.region, target)],
            )
        elif probe.hugepage_size_kib == _HUGEPAGE_2M_KIB and probe.hugepages_free == 0:
            yield hugepages.warn(
                f"all {probe.hugepages_total} huge pages in use on {node_label(result)}",
                detail="new EFA memory registrations and forked dataloader workers can fail with "
                "'Cannot allocate memory'; reserve more pages or set FI_EFA_USE_HUGE_PAGE=0 in the job",
                evidence=evidence,
                resources=[node_resource(result)],
                suggested_commands=[suggested.node_hugepages(inv.region, target, pages=2 * probe.hugepages_total)],
                fields={"hugepages_total": probe.hugepages_total, "hugepages_free": 0},
            )
        else:
            ok += 1
    if ok:
        yield hugepages.passed(f"huge pages available on {ok} node(s)")


@check(
    id="node.numa", title="NUMA topology visible", priority=Priority.P2, reference=OPS_NCCL_ENV, source="node_probes"
)
def numa(inv: Inventory) -> Iterator[Finding]:
    """GPU nodes that show no NUMA node: NCCL cannot place host buffers (cuMem host allocations)
    or pick the NIC/CPU closest to each GPU."""
    for result, probe in probed_nodes(inv):
        if probe.numa_nodes == 0 and probe.gpu_present:
            yield numa.warn(
                f"no NUMA node visible on {node_label(result)}",
                detail="/sys/devices/system/node has no node*: NCCL's cuMem host allocations and its "
                "GPU/NIC/CPU affinity need the NUMA topology (is the sysfs view restricted?)",
                evidence=["ls /sys/devices/system/node/ | grep -c '^node[0-9]' -> 0"],
                resources=[node_resource(result)],
            )
