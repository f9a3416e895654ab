"""The node grid (`hyperpod_nccl.verdict.grid`): which status each node x check-family cell shows,
and that every check belongs to exactly one family (issue 18, point 6)."""

from __future__ import annotations

import pkgutil
from datetime import UTC, datetime

import pytest

import hyperpod_nccl.checks as checks_package
from hyperpod_nccl import references
from hyperpod_nccl.checks import FAMILIES, discover, family_of_module
from hyperpod_nccl.models.findings import Finding, NodeRow, Resource, Status, SweepResult
from hyperpod_nccl.verdict.grid import node_grid

NOW = datetime(2026, 1, 1, tzinfo=UTC)
PROBED, UNREACHABLE, SKIPPED, OTHER = "i-0000000000000000a", "i-0000000000000000b", "i-0000000000000000c", "i-0d"


def finding(check_id: str, status: Status, *resources: Resource, title: str = "t") -> Finding:
    return Finding(
        check_id=check_id, status=status, title=title, resources=list(resources), reference=references.NODE_GPU
    )


def node(instance_id: str) -> Resource:
    return Resource(kind="node", id=instance_id)


def result(*findings: Finding, orchestrator: str = "eks") -> SweepResult:
    rows = [
        NodeRow(
            instance_id=PROBED,
            instance_group="worker",
            instance_type="ml.p5.48xlarge",
            status="Running",
            probe="probed",
        ),
        NodeRow(
            instance_id=UNREACHABLE,
            instance_group="worker",
            instance_type="ml.p5.48xlarge",
            status="Running",
            probe="unreachable",
        ),
        NodeRow(instance_id=SKIPPED, instance_group="a-group", instance_type="ml.p5.48xlarge", status="Running"),
    ]
    return SweepResult(
        cluster_name="c",
        region="us-west-2",
        orchestrator=orchestrator,  # type: ignore[arg-type]
        started_at=NOW,
        window_start=NOW,
        window_end=NOW,
        nodes=rows,
        findings=list(findings),
    )


def cells(grid_result: SweepResult) -> dict[str, dict[str, str]]:
    grid = node_grid(grid_result)
    return {
        row.node.instance_id: {family: cell.value for family, cell in zip(grid.families, row.cells, strict=True)}
        for group in grid.groups
        for row in group.rows
    }


def test_a_cell_no_finding_names_says_what_its_family_read() -> None:
    grid = cells(result())
    # Probe families: PASS only where the probe read the node.
    assert grid[PROBED]["GPU"] == "PASS"
    assert grid[UNREACHABLE]["GPU"] == "SKIP"
    assert grid[SKIPPED]["GPU"] == "not_probed"
    # ListClusterNodes read every listed node; logs and Kubernetes objects say nothing node by node.
    assert {grid[n]["HyperPod"] for n in grid} == {"PASS"}
    assert {grid[n]["Logs"] for n in grid} == {"unsaid"}


def test_a_cell_shows_the_most_serious_finding_naming_its_node() -> None:
    grid = cells(
        result(
            finding("node.gpu_xid", Status.WARN, node(PROBED), title="warned"),
            finding("node.gpu_ecc", Status.FAIL, node(PROBED), title="failed"),
            finding("node.gpu_inventory", Status.INFO, node(PROBED)),
            finding("node.memlock", Status.SKIP, node(PROBED)),
            finding("logs.signatures", Status.FAIL, Resource(kind="log_stream", id=f"{SKIPPED}/nccl")),
            finding("node.memlock", Status.FAIL, node(OTHER)),  # a node not listed: no row
        )
    )
    assert grid[PROBED]["GPU"] == "FAIL"
    assert grid[PROBED]["Limits & memory"] == "SKIP"
    assert grid[SKIPPED]["Logs"] == "FAIL"  # placed by the log stream's instance
    assert OTHER not in grid
    worker = next(
        g
        for g in node_grid(result(finding("node.gpu_ecc", Status.FAIL, node(PROBED)))).groups
        if g.instance_group == "worker"
    )
    assert [r.node.instance_id for r in worker.rows] == [PROBED, UNREACHABLE]  # the worst node first


def test_a_cell_names_its_findings_and_counts_the_rest() -> None:
    found = [finding("node.gpu_xid", Status.FAIL, node(PROBED), title=f"xid {n}") for n in range(5)]
    grid = node_grid(result(*found))
    row = next(r for g in grid.groups for r in g.rows if r.node.instance_id == PROBED)
    cell = row.cells[grid.families.index("GPU")]
    assert cell.titles == ("xid 0", "xid 1", "xid 2") and cell.more == 2


@pytest.mark.parametrize(("orchestrator", "absent"), [("eks", "Slurm"), ("slurm", "Kubernetes")])
def test_the_grid_has_no_column_for_the_other_orchestrator(orchestrator: str, absent: str) -> None:
    families = node_grid(result(orchestrator=orchestrator)).families
    assert absent not in families
    assert "GPU" in families


def test_groups_are_drawn_by_name() -> None:
    assert [g.instance_group for g in node_grid(result()).groups] == ["a-group", "worker"]


def test_every_check_module_belongs_to_exactly_one_family() -> None:
    modules = [m.name.rsplit(".", 1)[-1] for m in pkgutil.iter_modules(checks_package.__path__)]
    registering = {c.function.__module__.rsplit(".", 1)[-1] for c in discover().values()}
    listed = [module for family in FAMILIES for module in family.modules]
    assert len(listed) == len(set(listed)), "a module in two families"
    assert registering == set(listed), "every module with checks, and only those, has a family"
    assert set(listed) <= set(modules)
    assert len({family.title for family in FAMILIES}) == len(FAMILIES)
    with pytest.raises(ValueError, match="belongs to no family"):
        family_of_module("hyperpod_nccl.checks.not_a_module")
