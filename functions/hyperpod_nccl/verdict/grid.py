"""The node grid of a diagnosis: every listed node by check family (`checks.FAMILIES`).

A cell is the most serious status any finding of the family gives the node (a finding is placed on
the nodes it names, `fold.named_instances`). A cell no finding names shows what the family's
silence means: PASS where its checks read the node (the probe reached it, or ListClusterNodes
listed it), SKIP where the probe could not reach it, and no result where nothing of the family was
read node by node or the node was not probed. Pure: a function of the sweep result alone, so the
HTML page and any reader of the JSON report draw the same grid.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Literal

from hyperpod_nccl.checks import FAMILIES, REGISTRY, CheckFamily, discover
from hyperpod_nccl.models.findings import Finding, NodeRow, Status, SweepResult
from hyperpod_nccl.verdict.fold import named_instances

# A cell's value: a finding's status, or why there is none ("not_probed": the family reads the
# probe and the node was not probed; "unsaid": nothing of the family was read node by node).
CellValue = Literal["FAIL", "WARN", "SKIP", "INFO", "PASS", "not_probed", "unsaid"]
# Most serious first: the status a cell shows when several findings name the node.
_SERIOUSNESS: dict[Status, int] = {Status.FAIL: 0, Status.WARN: 1, Status.SKIP: 2, Status.INFO: 3, Status.PASS: 4}
# A cell's tooltip names this many of its findings, then counts the rest.
MAX_CELL_TITLES = 3


@dataclass(frozen=True)
class Cell:
    """One node's result in one family, and the titles of the findings that set it."""

    value: CellValue
    titles: tuple[str, ...] = ()
    more: int = 0


@dataclass(frozen=True)
class GridRow:
    """One node and its cells, one per family in `NodeGrid.families` order."""

    node: NodeRow
    cells: tuple[Cell, ...]

    @property
    def seriousness(self) -> tuple[int, ...]:
        """How many FAIL, WARN and SKIP cells the row has, negated: sorting by it puts the worst first."""
        return tuple(-sum(1 for c in self.cells if c.value == value) for value in ("FAIL", "WARN", "SKIP"))


@dataclass(frozen=True)
class GroupGrid:
    """The rows of one instance group, worst node first."""

    instance_group: str
    rows: tuple[GridRow, ...]

    def count(self, value: CellValue) -> int:
        """How many of the group's nodes have at least one cell of `value`."""
        return sum(1 for row in self.rows if any(c.value == value for c in row.cells))


@dataclass(frozen=True)
class NodeGrid:
    """The grid of a sweep result: the family titles (columns) and each instance group's rows."""

    families: tuple[str, ...]
    groups: tuple[GroupGrid, ...]


def family_of(finding: Finding) -> str | None:
    """The family title of a finding's check; None for a finding no registered check made (a
    source's not-collected SKIP). The catalog must be discovered (`checks.discover`)."""
    registered = REGISTRY.get(finding.check_id)
    return registered.meta.family if registered is not None else None


def _silent_cell(family: CheckFamily, node: NodeRow) -> Cell:
    if family.silence == "listed":
        return Cell("PASS")
    if family.silence == "unsaid":
        return Cell("unsaid")
    if node.probe == "probed":
        return Cell("PASS")
    return Cell("SKIP", ("the probe could not reach this node",)) if node.probe == "unreachable" else Cell("not_probed")


def _cell(findings: list[Finding]) -> Cell:
    ordered = sorted(findings, key=lambda f: _SERIOUSNESS[f.status])
    worst = ordered[0].status
    titles = tuple(dict.fromkeys(f.title for f in ordered if f.status is worst))
    return Cell(worst.value, titles[:MAX_CELL_TITLES], max(0, len(titles) - MAX_CELL_TITLES))


def node_grid(result: SweepResult) -> NodeGrid:
    """The grid of every node `result.nodes` lists, by instance group (groups by name)."""
    discover()
    listed = {node.instance_id for node in result.nodes}
    placed: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for finding in result.findings:
        family = family_of(finding)
        if family is None:
            continue
        for instance_id in named_instances(finding):
            if instance_id in listed:
                placed[(instance_id, family)].append(finding)
    families = applicable_families(result.orchestrator)
    by_group: dict[str, list[GridRow]] = defaultdict(list)
    for node in result.nodes:
        cells = tuple(
            _cell(found) if (found := placed.get((node.instance_id, family.title))) else _silent_cell(family, node)
            for family in families
        )
        by_group[node.instance_group].append(GridRow(node, cells))
    groups = tuple(
        GroupGrid(name, tuple(sorted(rows, key=lambda r: (r.seriousness, r.node.instance_id))))
        for name, rows in sorted(by_group.items())
    )
    return NodeGrid(tuple(family.title for family in families), groups)


def applicable_families(orchestrator: str) -> tuple[CheckFamily, ...]:
    """The families with a check for the orchestrator (every family when it is unknown): an EKS
    cluster's grid has no Slurm column, a Slurm cluster's no Kubernetes column."""
    checks = discover().values()
    return tuple(
        family
        for family in FAMILIES
        if orchestrator not in ("eks", "slurm")
        or any(c.meta.family == family.title and orchestrator in c.meta.orchestrators for c in checks)
    )
