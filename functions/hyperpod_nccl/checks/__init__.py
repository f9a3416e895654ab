"""The check catalog.

A check is a pure function of the `Inventory` registered with `@check(...)` metadata. Modules in
this package are discovered by convention (`discover()` imports every one of them), so adding a
check is adding a decorated function. A module is named after the prefix of its check ids
(`node_memory.py` holds `node.*` checks); the contract tests enforce that, validate every
registered check's metadata against `references/` and require a test that names its id.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from hyperpod_nccl.models.findings import (
    Finding,
    Priority,
    Resource,
    Status,
    SuggestedCommand,
)
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.reads import (
    ALL_READS,
    CONTROL_PLANE_READS,
    DESCRIBE_CLUSTER,
    DESCRIBE_EKS_CLUSTER,
    DESCRIBE_LOG_GROUPS,
    FILTER_LOG_EVENTS,
    KUBERNETES_READS,
    LIST_CLUSTER_NODES,
)
from hyperpod_nccl.references import Reference

Source = Literal["control_plane", "logs", "node_probes", "kubernetes"]
OrchestratorName = Literal["eks", "slurm"]
CheckFunction = Callable[[Inventory], Iterable[Finding]]

# Each source as the report titles its section, in the report's order.
SOURCE_TITLES: dict[Source, str] = {
    "control_plane": "HyperPod control plane",
    "logs": "CloudWatch logs",
    "node_probes": "Node probes (SSM)",
    "kubernetes": "Kubernetes",
}
# What a check of each source reads unless it says otherwise (`@check(reads=...)`): when one of
# them is a degraded source's `unread`, its PASS becomes a SKIP. Wide where a source has several
# reads (a check that declares nothing is never more certain than its source), so each
# control-plane check names the one API it reads. Node probes read no collector-level source: a
# node that was not reached is a coverage gap and a `node.reachability` finding, and the node
# checks pass only for the nodes whose data they read.
DEFAULT_READS: dict[Source, frozenset[str]] = {
    "control_plane": CONTROL_PLANE_READS,
    "logs": frozenset({DESCRIBE_LOG_GROUPS, FILTER_LOG_EVENTS}),
    "node_probes": frozenset(),
    "kubernetes": KUBERNETES_READS,
}
# What each source's collector needs before it can collect anything: when it is None, the
# degraded sources that left one of these unread say why its checks did not run.
COLLECTED_FROM: dict[Source, frozenset[str]] = {
    "control_plane": frozenset(),
    "logs": frozenset({DESCRIBE_CLUSTER, DESCRIBE_LOG_GROUPS}),
    "node_probes": frozenset({DESCRIBE_CLUSTER, LIST_CLUSTER_NODES}),
    "kubernetes": frozenset({DESCRIBE_CLUSTER, DESCRIBE_EKS_CLUSTER}) | KUBERNETES_READS,
}

# What a node that no finding of a family names has shown, by what the family's checks read:
# "probe": its SSM probe output, so PASS where the probe read the node (SKIP where it could not reach
# it); "listed": the node's ListClusterNodes record, read for every listed node, so PASS; "unsaid":
# nothing read node by node (logs, Kubernetes objects, fleet comparisons), so silence is no result.
Silence = Literal["probe", "listed", "unsaid"]


@dataclass(frozen=True)
class CheckFamily:
    """A column of the report's node grid (`hyperpod_nccl.verdict.grid`): the checks of some
    modules of this package, and what a node none of their findings names has shown (`Silence`)."""

    title: str
    modules: frozenset[str]
    silence: Silence


# In the grid's order. Every module that registers a check is in exactly one family (`register`
# refuses any other; a contract test holds the modules disjoint).
FAMILIES: tuple[CheckFamily, ...] = (
    CheckFamily("HyperPod", frozenset({"cluster", "cluster_events"}), "listed"),
    CheckFamily("Kubernetes", frozenset({"k8s_nodes", "k8s_pods", "k8s_versions", "k8s_network_policy"}), "unsaid"),
    CheckFamily("Slurm", frozenset({"slurm_controller"}), "unsaid"),
    CheckFamily("Logs", frozenset({"logs", "k8s_logs"}), "unsaid"),
    CheckFamily("GPU", frozenset({"node_gpu"}), "probe"),
    CheckFamily(
        "EFA & network", frozenset({"node_network", "node_latency", "network_security_groups", "k8s_efa"}), "probe"
    ),
    CheckFamily("Limits & memory", frozenset({"node_limits", "node_memory"}), "probe"),
    CheckFamily("NCCL env", frozenset({"node_env", "node_job_env", "k8s_env"}), "probe"),
    CheckFamily("Fleet", frozenset({"fleet_outliers"}), "unsaid"),
    CheckFamily("Probe", frozenset({"node_reachability", "node_clock", "node_host", "hang_attribution"}), "probe"),
)


def family_of_module(module: str) -> CheckFamily:
    """The family of the checks defined in `module` (a dotted name or its last part)."""
    name = module.rsplit(".", 1)[-1]
    for family in FAMILIES:
        if name in family.modules:
            return family
    raise ValueError(f"check module {name!r} belongs to no family: add it to checks.FAMILIES")


REGISTRY: dict[str, Check] = {}


@dataclass(frozen=True)
class CheckMeta:
    """What the catalog knows about a check without running it."""

    id: str
    title: str
    priority: Priority
    reference: Reference
    source: Source
    orchestrators: frozenset[OrchestratorName] = frozenset({"eks", "slurm"})
    # The AWS actions and input names (`hyperpod_nccl.reads`) without which a PASS is unknowable.
    reads: frozenset[str] = frozenset()
    # The title of its `CheckFamily`: the node grid's column its findings fall in.
    family: str = ""


@dataclass(frozen=True)
class Check:
    """A registered check: its metadata plus the pure evaluation function."""

    meta: CheckMeta
    function: CheckFunction = field(repr=False)

    def applies_to(self, inventory: Inventory) -> bool:
        """Whether the check's source was collected and its orchestrator matches."""
        if getattr(inventory, self.meta.source) is None:
            return False
        return self.fits_orchestrator(inventory)

    def fits_orchestrator(self, inventory: Inventory) -> bool:
        """Whether the check is meant for the inventory's orchestrator (any, when unknown)."""
        return inventory.orchestrator == "unknown" or inventory.orchestrator in self.meta.orchestrators

    def run(self, inventory: Inventory) -> list[Finding]:
        """Evaluate the check."""
        return list(self.function(inventory))

    def finding(
        self,
        status: Status,
        title: str,
        *,
        detail: str = "",
        priority: Priority | None = None,
        reference: Reference | None = None,
        evidence: Iterable[str] = (),
        resources: Iterable[Resource] = (),
        suggested_commands: Iterable[SuggestedCommand] = (),
        fields: dict[str, str | int | float | bool | None] | None = None,
    ) -> Finding:
        """Build a finding with this check's defaults (issues get the default priority)."""
        if priority is None and status in (Status.FAIL, Status.WARN):
            priority = self.meta.priority
        return Finding(
            check_id=self.meta.id,
            status=status,
            priority=priority,
            title=title,
            detail=detail,
            evidence=list(evidence),
            resources=list(resources),
            reference=reference or self.meta.reference,
            suggested_commands=list(suggested_commands),
            fields=dict(fields or {}),
        )

    def fail(self, title: str, **kwargs: object) -> Finding:
        """A FAIL finding (see `finding`)."""
        return self.finding(Status.FAIL, title, **kwargs)  # type: ignore[arg-type]

    def warn(self, title: str, **kwargs: object) -> Finding:
        """A WARN finding (see `finding`)."""
        return self.finding(Status.WARN, title, **kwargs)  # type: ignore[arg-type]

    def info(self, title: str, **kwargs: object) -> Finding:
        """An INFO finding (see `finding`)."""
        return self.finding(Status.INFO, title, **kwargs)  # type: ignore[arg-type]

    def passed(self, title: str, **kwargs: object) -> Finding:
        """A PASS finding (see `finding`)."""
        return self.finding(Status.PASS, title, **kwargs)  # type: ignore[arg-type]


def check(
    *,
    id: str,
    title: str,
    priority: Priority,
    reference: Reference,
    source: Source,
    orchestrators: Iterable[OrchestratorName] = ("eks", "slurm"),
    reads: Iterable[str] | None = None,
) -> Callable[[CheckFunction], Check]:
    """Register a check function under `id` with its metadata. `reads` defaults to its source's
    `DEFAULT_READS`; every name must be one of `hyperpod_nccl.reads`."""
    declared = DEFAULT_READS[source] if reads is None else frozenset(reads)
    if unknown := declared - ALL_READS:
        raise ValueError(f"check {id!r} reads unknown inputs {sorted(unknown)}: name them in hyperpod_nccl.reads")

    def register(function: CheckFunction) -> Check:
        if id in REGISTRY:
            raise ValueError(f"duplicate check id {id!r}")
        registered = Check(
            meta=CheckMeta(
                id=id,
                title=title,
                priority=priority,
                reference=reference,
                source=source,
                orchestrators=frozenset(orchestrators),
                reads=declared,
                family=family_of_module(function.__module__).title,
            ),
            function=function,
        )
        REGISTRY[id] = registered
        return registered

    return register


def discover() -> dict[str, Check]:
    """Import every module of this package so their checks register; return the registry."""
    for module in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
        importlib.import_module(module.name)
    return REGISTRY
