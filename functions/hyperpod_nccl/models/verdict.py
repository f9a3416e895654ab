"""The verdict of one diagnosis: its root causes, most urgent first, each with what it explains.

Built by `hyperpod_nccl.verdict.build_verdict` (pure) and carried by `SweepResult.verdict`.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from hyperpod_nccl.models.common import Priority, Resource
from hyperpod_nccl.references import Reference

# What a cause stops: the whole cluster's collectives, one job, or the jobs on one node.
BlastRadius = Literal["cluster", "job", "node"]
BLAST_RANK: dict[BlastRadius, int] = {"cluster": 0, "job": 1, "node": 2}
# The version of the JSON report's layout (`schema_version`); raised when a field changes meaning.
SCHEMA_VERSION = 2


class ExplainedSymptom(BaseModel):
    """A group of findings a root cause explains, and why (the rule's sentence)."""

    kind: str
    title: str
    why: str
    findings: list[str] = Field(default_factory=list, description="fingerprints of the symptom's findings")


PlanStage = Literal["watch", "investigate", "drain", "job", "reboot", "recheck", "replace", "resume", "fix"]


class PlanStep(BaseModel):
    """One step of a root cause's plan: what it does, the command a person runs (we never run it)
    and when it applies. `conditional` steps run only if the step before them says so (replace only
    if the recheck still fails). `language`, `yaml_path` and `session` as in `SuggestedCommand`."""

    stage: PlanStage
    description: str
    command: str | None = None
    language: Literal["shell", "yaml"] = "shell"
    yaml_path: str | None = Field(None, description="yaml: the nesting path of the workload spec it goes under")
    session: str | None = Field(None, description="shell on a node: the line that opens the node's shell")
    precondition: str | None = None
    conditional: bool = False


class RootCause(BaseModel):
    """One root cause: what is broken, where, how urgent, and which findings it explains."""

    id: str = Field(description="stable across sweeps: the cause's kind and where it is")
    kind: str = Field(description="a key of verdict.kinds.CAUSE_KINDS, or the check id of an unclassified finding")
    title: str
    priority: Priority
    scope: BlastRadius
    anchor: str = Field(description="the node, job or cluster the cause is about")
    resources: list[Resource] = Field(default_factory=list)
    reference: Reference
    why: str = Field(description="what the cause blocks, in one line")
    evidence: list[str] = Field(default_factory=list, description="fingerprints of its own findings")
    explains: list[ExplainedSymptom] = Field(default_factory=list)
    plan: list[PlanStep] = Field(default_factory=list, description="ordered steps, safest first")
    first_seen: datetime | None = None

    @staticmethod
    def make_id(kind: str, anchor: str) -> str:
        """`rc-` and 12 hex digits of the kind and anchor: the same cause next sweep has the same id."""
        return "rc-" + hashlib.sha256(f"{kind}|{anchor}".encode()).hexdigest()[:12]

    @property
    def fingerprints(self) -> list[str]:
        """Every finding the cause accounts for: its evidence and its symptoms'."""
        return [*self.evidence, *(f for s in self.explains for f in s.findings)]


class Verdict(BaseModel):
    """Root causes ordered by priority, then blast radius (cluster, job, node); every FAIL/WARN
    finding of the diagnosis belongs to exactly one of them."""

    root_causes: list[RootCause] = Field(default_factory=list)
    findings_folded: int = Field(0, description="FAIL/WARN findings the root causes account for")

    def cause_of(self, fingerprint: str) -> RootCause | None:
        """The root cause a finding belongs to, or None when it is not an issue."""
        return next((c for c in self.root_causes if fingerprint in c.fingerprints), None)
