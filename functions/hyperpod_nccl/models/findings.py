"""What a sweep reports: findings, degraded sources, coverage and the sweep result."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from hyperpod_nccl.models.common import Priority, Resource, ResourceKind, Status, parse_time
from hyperpod_nccl.models.verdict import Verdict
from hyperpod_nccl.references import Reference

__all__ = [
    "CommandEffect",
    "Coverage",
    "DegradedSource",
    "Finding",
    "NodeRow",
    "Priority",
    "ProbeOutcome",
    "Resource",
    "ResourceKind",
    "Scope",
    "Status",
    "SuggestedCommand",
    "SweepResult",
]


CommandEffect = Literal["read", "change", "reboot", "replace"]


class SuggestedCommand(BaseModel):
    """A state-changing (or deeper read) command the operator may run; we never run it.

    `language` says how to paste it: `shell` (one or more shell lines) or `yaml` (a Kubernetes change
    that goes under the nesting path `yaml_path` of the workload's spec). A shell command that runs on
    a node carries the `aws ssm start-session` line that opens that node's shell in `session`.
    `effect` says what it does to the cluster: reboots and replacements are only ever issued by the
    verdict's plan, in its safe order."""

    description: str
    command: str
    preconditions: str | None = None
    blast_radius: str | None = None
    language: Literal["shell", "yaml"] = "shell"
    yaml_path: str | None = None
    session: str | None = None
    effect: CommandEffect = "change"

    @property
    def text(self) -> str:
        """What a person pastes, whole: the session line first for an on-node command."""
        if self.session:
            return f"{self.session}\n# run inside the session, as root on the node:\n{self.command}"
        return self.command


class Finding(BaseModel):
    """One result of one check about one set of resources."""

    check_id: str
    status: Status
    priority: Priority | None = None
    title: str
    detail: str = ""
    evidence: list[str] = Field(default_factory=list)
    resources: list[Resource] = Field(default_factory=list)
    reference: Reference
    suggested_commands: list[SuggestedCommand] = Field(default_factory=list)
    fields: dict[str, str | int | float | bool | None] = Field(default_factory=dict)

    @property
    def is_issue(self) -> bool:
        """FAIL and WARN findings are issues: counted in "Issues Found" and listed by priority."""
        return self.status in (Status.FAIL, Status.WARN)

    @property
    def first_seen(self) -> datetime | None:
        """When the finding's evidence was first seen in the window (`fields["first_seen"]`), if known."""
        return parse_time(self.fields.get("first_seen"))

    @property
    def fingerprint(self) -> str:
        """Stable identity across sweeps: the check and the resources, not the wording. GPUs are
        left out: a node's finding whose faulty GPUs grow from one to two is the same finding,
        worse, not a resolved one and a new one."""
        parts = [self.check_id, *sorted(f"{r.kind}={r.id}" for r in self.resources if r.kind != "gpu")]
        discriminator = self.fields.get("signature")
        if discriminator is not None:
            parts.append(f"signature={discriminator}")
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


class DegradedSource(BaseModel):
    """A source that could not be read (fully), why, and what to do about it."""

    source: str
    reason: str
    fix: str
    # The IAM action (or RBAC grant) that was denied: what to grant. None for any other failure.
    missing_action: str | None = None
    reference: Reference | None = None
    partial: bool = False
    unread: list[str] = Field(
        default_factory=list,
        description="what was left unread, whatever the failure: AWS actions (`logs:FilterLogEvents`) or "
        "input names (`kubernetes:pods`); a check that reads one of them cannot pass (`CheckMeta.reads`)",
    )


class Coverage(BaseModel):
    """How much of the cluster a sweep actually looked at."""

    nodes_total: int = 0
    nodes_probed: int = 0
    nodes_unreachable: int = 0
    nodes_skipped: int = 0
    unreachable_node_ids: list[str] = Field(default_factory=list)
    # The SSM documents the node probes started sessions with, and what that implies when one of
    # them is the AWS managed document (free-text root commands), else None.
    probe_documents: list[str] = Field(default_factory=list)
    probe_access_note: str | None = None


# What the node probes did on a node: read it, tried and could not reach it, or did not try (it was
# not in the sample, or its status ruled a probe out).
ProbeOutcome = Literal["probed", "unreachable", "not_probed"]


class NodeRow(BaseModel):
    """One node of the cluster as ListClusterNodes listed it, and whether the probes read it: the
    rows of the report's node grid (`hyperpod_nccl.verdict.grid`)."""

    instance_id: str
    instance_group: str
    instance_type: str
    status: str = Field(description="the HyperPod node status (InstanceStatus.Status)")
    probe: ProbeOutcome = "not_probed"
    hostname: str | None = Field(None, description="the short private DNS name (what Slurm calls the node)")


class Scope(BaseModel):
    """What the operator asked to look at."""

    namespace: str | None = None
    job: str | None = None
    node: str | None = None
    sample_nodes: int | Literal["all"] = 3
    since_seconds: int = 7200


class SweepResult(BaseModel):
    """Everything one diagnosis (CLI run or monitor sweep) produced."""

    cluster_name: str
    cluster_arn: str | None = None
    region: str
    orchestrator: Literal["eks", "slurm", "unknown"] = "unknown"
    eks_cluster_name: str | None = None
    started_at: datetime
    finished_at: datetime | None = None
    window_start: datetime
    window_end: datetime
    scope: Scope = Field(default_factory=Scope)
    coverage: Coverage = Field(default_factory=Coverage)
    nodes: list[NodeRow] = Field(
        default_factory=list, description="every node ListClusterNodes returned, in its order (empty when not read)"
    )
    findings: list[Finding] = Field(default_factory=list)
    degraded_sources: list[DegradedSource] = Field(default_factory=list)
    verdict: Verdict = Field(
        default_factory=Verdict, description="the findings folded into root causes (hyperpod_nccl.verdict)"
    )
    read_only: bool = True

    @property
    def issues(self) -> list[Finding]:
        """The findings counted in "Issues Found", most urgent first."""
        found = [f for f in self.findings if f.is_issue]
        return sorted(found, key=lambda f: (f.priority.rank if f.priority else 3, f.check_id))

    def at_or_above(self, priority: Priority) -> list[Finding]:
        """Issues whose priority is `priority` or more urgent."""
        return [f for f in self.issues if f.priority is not None and f.priority.at_least(priority)]
