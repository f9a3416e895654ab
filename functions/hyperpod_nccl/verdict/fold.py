"""Fold a diagnosis's findings into root causes. Pure: findings and the inventory in, a verdict out.

1. Each FAIL/WARN finding is classified (`kinds.classify`) and grouped with the findings of the
   same kind about the same place: the node for node causes, the job for job causes, the cluster
   for cluster-wide ones. A finding no entry classifies is a group of its own check.
2. Each group looks for the group that explains it (`rules.EXPLAINS`): the closest relation first
   (the same node or pod, then the same job, then the job's peers, then anywhere: evidence on the
   spot beats a cluster-wide suspicion), then the most urgent (priority, blast radius), then rule
   order. The graph of kinds is acyclic, so following "explained by" ends at a root cause.
3. Every root cause carries its own findings as evidence and the groups it explains as symptoms,
   each with the rule's sentence; its priority is its kind's, raised to its worst symptom's (a
   cause is as urgent as what it breaks).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property

from hyperpod_nccl.models.findings import Finding, Priority, Resource, Status
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.logs import stream_identity
from hyperpod_nccl.models.verdict import BLAST_RANK, BlastRadius, ExplainedSymptom, RootCause, Verdict
from hyperpod_nccl.verdict.kinds import CAUSE_KINDS, CauseKind, classify
from hyperpod_nccl.verdict.plan import PlanContext, plan_for
from hyperpod_nccl.verdict.rules import EXPLAINS, RELATION_RANK, Explains

# Resource kinds a root cause lists: where to act, not where the evidence was read.
_LISTED_RESOURCES = frozenset(
    {
        "cluster",
        "instance_group",
        "node",
        "k8s_node",
        "slurm_node",
        "pod",
        "job",
        "namespace",
        "security_group",
        "network_policy",
        "service",
        "gpu",
        "rank",
    }
)
_ON_THE_SPOT = frozenset({"same_node", "same_pod"})
UNATTRIBUTED_JOB = "(job not identified)"
CAUSE_NOT_FOUND = "cause not found in the data read"


@dataclass(frozen=True)
class Topology:
    """Where things run, from the inventory: which instance a Kubernetes node is, which job a pod
    belongs to, which jobs have pods on an instance. Empty when the inventory is not at hand."""

    instance_of_k8s_node: dict[str, str] = field(default_factory=dict)
    job_of_pod: dict[str, str] = field(default_factory=dict)
    jobs_on_instance: dict[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, inventory: Inventory | None) -> Topology:
        """The topology the inventory knows (Kubernetes pods and nodes)."""
        kubernetes = inventory.kubernetes if inventory else None
        if kubernetes is None:
            return cls()
        instances = {n.name: n.instance_id for n in kubernetes.nodes or [] if n.instance_id}
        job_of_pod: dict[str, str] = {}
        jobs_on: dict[str, set[str]] = defaultdict(set)
        for pod in kubernetes.pods or []:
            if pod.job_name is None:
                continue
            job = f"{pod.namespace}/{pod.job_name}"
            job_of_pod[f"{pod.namespace}/{pod.name}"] = job
            instance = instances.get(pod.node_name or "")
            if instance:
                jobs_on[instance].add(job)
        return cls(instances, job_of_pod, {k: frozenset(v) for k, v in jobs_on.items()})


@dataclass
class _Group:
    """Findings of one kind about one place, and the group that explains them, if any."""

    kind: str
    anchor: str
    scope: BlastRadius
    title: str
    findings: list[Finding] = field(default_factory=list)
    nodes: set[str] = field(default_factory=set)
    pods: set[str] = field(default_factory=set)
    jobs: set[str] = field(default_factory=set)
    cause: CauseKind | None = None
    explained_by: _Group | None = None
    rule: Explains | None = None

    @cached_property  # read once the grouping is done, many times while explaining
    def priority(self) -> Priority:
        any_fail = any(f.status == Status.FAIL for f in self.findings)
        if self.cause is not None:
            return self.cause.priority_for(any_fail)
        return min((f.priority or Priority.P2 for f in self.findings), key=lambda p: p.rank)

    @cached_property
    def first_seen(self) -> datetime | None:
        times = [t for f in self.findings if (t := f.first_seen) is not None]
        return min(times) if times else None

    def urgency(self) -> tuple[int, int]:
        return (self.priority.rank, BLAST_RANK[self.scope])


def named_instances(finding: Finding) -> list[str]:
    """The instances a finding names, in order: its nodes, and the node whose log stream it was
    read from (`i-0abc…/nccl`), when the finding does not name it."""
    found = [r.id for r in finding.resources if r.kind == "node"]
    found += [i for r in finding.resources if r.kind == "log_stream" and (i := stream_identity(r.id)[2])]
    return list(dict.fromkeys(found))


def places(finding: Finding, topology: Topology) -> tuple[set[str], set[str], set[str]]:
    """The instances, pods and jobs a finding is about: those it names, the instance of each
    Kubernetes node it names and the job of each pod (`topology`)."""
    nodes = set(named_instances(finding))
    nodes |= {i for r in finding.resources if r.kind == "k8s_node" and (i := topology.instance_of_k8s_node.get(r.id))}
    pods = {r.id for r in finding.resources if r.kind == "pod"}
    jobs = {r.id for r in finding.resources if r.kind == "job"}
    jobs |= {j for pod in pods if (j := topology.job_of_pod.get(pod))}
    return nodes, pods, jobs


def _anchor(
    cause: CauseKind | None, scope: BlastRadius, nodes: set[str], jobs: set[str], finding: Finding, topology: Topology
) -> str:
    if scope == "cluster":
        return "cluster"
    if scope == "node":
        return min(nodes) if nodes else (finding.resources[0].id if finding.resources else "cluster")
    if jobs:
        return min(jobs)
    # A log line names the node that wrote it: its job is the one job with pods there, if any.
    candidates = {j for n in nodes for j in topology.jobs_on_instance.get(n, ())}
    if len(candidates) == 1:
        return min(candidates)
    # A job's setting seen on a node whose job is unknown (a Slurm environment file, a node's NCCL
    # log) is acted on where it was seen; only symptoms (timeouts, fallbacks) gather under the
    # unidentified job, to be explained together.
    if nodes and not (cause is not None and cause.symptom):
        return min(nodes)
    return UNATTRIBUTED_JOB


def _scope_of_unclassified(nodes: set[str], pods: set[str], jobs: set[str]) -> BlastRadius:
    if jobs or pods:
        return "job"
    return "node" if nodes else "cluster"


def _group(findings: Iterable[Finding], topology: Topology) -> list[_Group]:
    groups: dict[tuple[str, str], _Group] = {}
    for finding in findings:
        nodes, pods, jobs = places(finding, topology)
        kind_id = classify(finding)
        cause = CAUSE_KINDS.get(kind_id) if kind_id else None
        scope = cause.scope if cause else _scope_of_unclassified(nodes, pods, jobs)
        anchor = _anchor(cause, scope, nodes, jobs, finding, topology)
        key = (kind_id or finding.check_id, anchor)
        group = groups.get(key)
        if group is None:
            title = _title(cause.title if cause else finding.title, scope, anchor, cause is not None, nodes)
            group = groups[key] = _Group(key[0], anchor, scope, title, cause=cause)
        group.findings.append(finding)
        group.nodes |= nodes
        group.pods |= pods
        job_anchor = scope == "job" and anchor != UNATTRIBUTED_JOB and anchor not in nodes
        group.jobs |= jobs if jobs else ({anchor} if job_anchor else set())
    return list(groups.values())


def _title(base: str, scope: BlastRadius, anchor: str, classified: bool, nodes: set[str]) -> str:
    if not classified or scope == "cluster" or anchor == UNATTRIBUTED_JOB:
        return base
    return f"{base} on {anchor}" if scope == "node" or anchor in nodes else f"{base} in {anchor}"


def _close_in_time(cause: _Group, symptom: _Group, within: int | None) -> bool:
    if within is None or cause.first_seen is None or symptom.first_seen is None:
        return True
    return abs((symptom.first_seen - cause.first_seen).total_seconds()) <= within


def _related(rule: Explains, cause: _Group, symptom: _Group, topology: Topology, sole: bool) -> bool:
    if rule.relation == "anywhere":
        return True
    if rule.relation == "same_node":
        return bool(cause.nodes & symptom.nodes)
    if rule.relation == "same_pod":
        return bool(cause.pods & symptom.pods)
    if rule.relation == "same_job":
        return bool(cause.jobs & symptom.jobs)
    # peers: the symptom's job ran on the cause's node, the symptom was seen there, or the sweep
    # cannot tell the symptom's job and this is the only cause of its kind.
    jobs_there = {j for n in cause.nodes for j in topology.jobs_on_instance.get(n, ())}
    if symptom.jobs & jobs_there or cause.nodes & symptom.nodes:
        return True
    return not symptom.jobs and sole


class _Candidates:
    """The groups a rule could relate to a symptom, found by kind and place rather than by
    comparing every pair (a fault on each of 10,000 nodes beside 10,000 node states)."""

    def __init__(self, groups: list[_Group], topology: Topology) -> None:
        self.by_kind: dict[str, list[_Group]] = defaultdict(list)
        self.at_node: dict[tuple[str, str], list[_Group]] = defaultdict(list)
        self.with_pod: dict[tuple[str, str], list[_Group]] = defaultdict(list)
        self.in_job: dict[tuple[str, str], list[_Group]] = defaultdict(list)
        self.instances_of_job: dict[str, set[str]] = defaultdict(set)
        for instance, jobs in topology.jobs_on_instance.items():
            for job in jobs:
                self.instances_of_job[job].add(instance)
        for group in groups:
            self.by_kind[group.kind].append(group)
            for node in group.nodes:
                self.at_node[group.kind, node].append(group)
            for pod in group.pods:
                self.with_pod[group.kind, pod].append(group)
            for job in group.jobs:
                self.in_job[group.kind, job].append(group)

    def sole(self, kind: str) -> bool:
        """Whether the sweep has exactly one group of `kind`."""
        return len(self.by_kind.get(kind, ())) == 1

    def of(self, rule: Explains, symptom: _Group) -> list[_Group]:
        """Groups of the rule's cause kind that may stand in the rule's relation to `symptom`
        (a superset: `_related` decides)."""
        kind = rule.cause
        if rule.relation == "anywhere":
            return self.by_kind.get(kind, [])
        found: dict[int, _Group] = {}
        if rule.relation in ("same_node", "peers"):
            nodes = set(symptom.nodes)
            if rule.relation == "peers":
                nodes |= {i for job in symptom.jobs for i in self.instances_of_job.get(job, ())}
            found.update((id(g), g) for node in nodes for g in self.at_node.get((kind, node), ()))
            if rule.relation == "peers" and not symptom.jobs and self.sole(kind):
                found.update((id(g), g) for g in self.by_kind[kind])
        elif rule.relation == "same_pod":
            found.update((id(g), g) for pod in symptom.pods for g in self.with_pod.get((kind, pod), ()))
        else:
            found.update((id(g), g) for job in symptom.jobs for g in self.in_job.get((kind, job), ()))
        return list(found.values())


def _explain(groups: list[_Group], topology: Topology) -> None:
    """Set each group's `explained_by` to the group a rule says explains it: the closest relation,
    then the most urgent cause, then the first rule."""
    candidates = _Candidates(groups, topology)
    rules_for: dict[str, list[tuple[int, Explains]]] = defaultdict(list)
    for order, rule in enumerate(EXPLAINS):
        rules_for[rule.symptom].append((order, rule))
    for symptom in groups:
        best: tuple[tuple[int, int, int, int], _Group, Explains] | None = None
        for order, rule in rules_for.get(symptom.kind, []):
            for cause in candidates.of(rule, symptom):
                if not _related(rule, cause, symptom, topology, sole=candidates.sole(rule.cause)):
                    continue
                if not _close_in_time(cause, symptom, rule.within_seconds):
                    continue
                rank = (RELATION_RANK[rule.relation], *cause.urgency(), order)
                if best is None or rank < best[0]:
                    best = (rank, cause, rule)
        if best is not None:
            symptom.explained_by, symptom.rule = best[1], best[2]


def _root(group: _Group) -> _Group:
    while group.explained_by is not None:
        group = group.explained_by
    return group


def _resources(findings: Iterable[Finding]) -> list[Resource]:
    seen: dict[tuple[str, str], Resource] = {}
    for finding in findings:
        for resource in finding.resources:
            if resource.kind in _LISTED_RESOURCES:
                seen.setdefault((resource.kind, resource.id), resource)
    return list(seen.values())


def _root_cause(root: _Group, symptoms: list[_Group]) -> RootCause:
    worst = min([root, *symptoms], key=lambda g: g.priority.rank).priority
    lead = min(root.findings, key=lambda f: (f.priority.rank if f.priority else 3, f.status != Status.FAIL))
    unexplained = root.cause is not None and root.cause.symptom
    return RootCause(
        id=RootCause.make_id(root.kind, root.anchor),
        kind=root.kind,
        title=f"{root.title}: {CAUSE_NOT_FOUND}" if unexplained else root.title,
        priority=worst,
        scope=root.scope,
        anchor=root.anchor,
        # Where to act: the cause's own resources, and the other names of the same machine or pod
        # that symptoms found there carry (its Kubernetes or Slurm node name, the stopped rank's pod).
        resources=_resources(
            [*root.findings, *(f for s in symptoms if s.rule and s.rule.relation in _ON_THE_SPOT for f in s.findings)]
        ),
        reference=root.cause.reference if root.cause else lead.reference,
        why=root.cause.blocks if root.cause else lead.title,
        evidence=[f.fingerprint for f in root.findings],
        explains=[
            ExplainedSymptom(
                kind=s.kind,
                title=s.title,
                why=s.rule.why if s.rule else "",
                findings=[f.fingerprint for f in s.findings],
            )
            for s in symptoms
        ],
        first_seen=root.first_seen,
    )


def build_verdict(
    findings: Iterable[Finding], inventory: Inventory | None = None, *, context: PlanContext | None = None
) -> Verdict:
    """The root causes of a diagnosis: every FAIL/WARN finding in exactly one of them, each with its
    plan when the cluster's name and region are known (from `inventory`, or `context`)."""
    issues = [f for f in findings if f.is_issue]
    topology = Topology.of(inventory)
    if context is None and inventory is not None:
        context = PlanContext.of(inventory)
    groups = _group(issues, topology)
    _explain(groups, topology)
    symptoms_of: dict[int, list[_Group]] = defaultdict(list)
    roots: list[_Group] = []
    for group in groups:
        root = _root(group)
        if root is group:
            roots.append(group)
        else:
            symptoms_of[id(root)].append(group)
    causes = [_root_cause(root, symptoms_of[id(root)]) for root in roots]
    if context is not None:
        evidence = {id(root): root.findings for root in roots}
        for cause, root in zip(causes, roots, strict=True):
            cause.plan = plan_for(cause, evidence[id(root)], context)
    latest = datetime.max.replace(tzinfo=UTC)
    causes.sort(key=lambda c: (c.priority.rank, BLAST_RANK[c.scope], c.first_seen or latest, c.title))
    return Verdict(root_causes=causes, findings_folded=len(issues))
