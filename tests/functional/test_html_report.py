"""The HTML report rendered by a real browser (issue 18, point 6): `--format html` writes one
self-contained page whose node grid, read back from headless Chromium (the cells as laid out, with
their computed colours), matches the JSON report of the same diagnosis, cell by cell.

Two sizes: the eks-p5 scenario diagnosed through the CLI (16 accelerator nodes and 2 system
nodes, full of faults), and 1,024 nodes: that scenario's collected inventory (its real probe
outputs and Kubernetes objects) with the nodes cloned under new ids into more instance groups,
some clones unreachable and some not probed, evaluated by the real checks.

The grid's expected cells are computed here from the JSON document alone (a finding is placed on the
nodes its resources name: a node, or the instance of a log stream), not with the product's grid code.

Regenerate the screenshot in docs/ with `python -m tests.functional.test_html_report docs/html-report.png`.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hyperpod_nccl.checks import FAMILIES, discover
from hyperpod_nccl.cli.render import report_document
from hyperpod_nccl.cli.render_html import render_html
from hyperpod_nccl.collectors import collect
from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.engine import build_result
from hyperpod_nccl.models.cluster import ClusterNode
from hyperpod_nccl.models.findings import Scope
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.references import REFERENCES_URL
from tests.conftest import CliRun, SimulateFactory
from tests.headless_chromium import HeadlessChromium

# The page's colours, as the browser computes them, by cell value.
COLOURS = {
    "FAIL": "rgb(198, 40, 40)",
    "WARN": "rgb(239, 143, 0)",
    "INFO": "rgb(30, 136, 229)",
    "PASS": "rgb(46, 125, 50)",
    "not_probed": "rgb(230, 233, 236)",
    "unsaid": "rgb(247, 248, 249)",
}
SERIOUSNESS = ["FAIL", "WARN", "SKIP", "INFO", "PASS"]
INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")
# Every grid cell as laid out: node, its group, and each square's family, status and colour.
READ_GRID = """[...document.querySelectorAll('.row[data-node]')].map(row => ({
  node: row.dataset.node,
  group: row.closest('.group').dataset.group,
  visible: row.getBoundingClientRect().width > 0,
  cells: [...row.querySelectorAll('.c')].map(c => ({
    family: c.dataset.family, status: c.dataset.status, colour: getComputedStyle(c).backgroundColor,
    width: c.getBoundingClientRect().width}))
}))"""


def expected_grid(document: dict[str, Any], families: list[str]) -> dict[str, dict[str, str]]:
    """Each node's cell per family, from the JSON report: the most serious status of the findings
    naming the node, else what the family's silence means."""
    registry = discover()
    silence = {family.title: family.silence for family in FAMILIES}
    statuses: dict[tuple[str, str], list[str]] = {}
    for finding in document["findings"]:
        check = registry.get(finding["check_id"])
        if check is None:
            continue
        named = {r["id"] for r in finding["resources"] if r["kind"] == "node"}
        named |= {
            part
            for r in finding["resources"]
            if r["kind"] == "log_stream"
            for part in r["id"].split("/")
            if INSTANCE_ID.match(part)
        }
        for node in named:
            statuses.setdefault((node, check.meta.family), []).append(finding["status"])
    grid: dict[str, dict[str, str]] = {}
    for node in document["nodes"]:
        row = grid.setdefault(node["instance_id"], {})
        for family in families:
            found = statuses.get((node["instance_id"], family))
            if found:
                row[family] = min(found, key=SERIOUSNESS.index)
            elif silence[family] == "listed":
                row[family] = "PASS"
            elif silence[family] == "unsaid":
                row[family] = "unsaid"
            else:
                row[family] = {"probed": "PASS", "unreachable": "SKIP"}.get(node["probe"], "not_probed")
    return grid


def check_page(browser: HeadlessChromium, page: Path, document: dict[str, Any]) -> list[dict[str, Any]]:
    """Load the page and hold it against the JSON document; the grid rows as read."""
    browser.load(page)
    # Self-contained: nothing was fetched, and the policy forbids fetching anything.
    assert browser.evaluate("performance.getEntriesByType('resource').length") == 0
    assert "default-src 'none'" in browser.evaluate(
        "document.querySelector('meta[http-equiv=\"Content-Security-Policy\"]').content"
    )
    assert browser.evaluate("document.scripts.length") == 0
    # The verdict first, its causes in the JSON's order.
    assert browser.evaluate("document.querySelector('section.report h2').textContent") == "Verdict"
    causes = browser.evaluate("[...document.querySelectorAll('.cause')].map(c => c.dataset.cause)")
    assert causes == [cause["id"] for cause in document["verdict"]["root_causes"]]
    # Every runbook section is linked, to the published runbooks.
    hrefs = browser.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))")
    assert hrefs and all(href.startswith(REFERENCES_URL) for href in hrefs)
    linked = browser.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.textContent)")
    pointers = {cause["reference"]["pointer"] for cause in document["verdict"]["root_causes"]}
    assert pointers <= {text.split(" — ")[0] for text in linked}

    # Each root cause whose data has a time has a track, its marks inside the window.
    timed = browser.evaluate(
        "[...document.querySelectorAll('.tl')].map(t => ({cause: t.dataset.cause, marks: [...t.querySelectorAll("
        "'.mark')].map(m => [parseFloat(m.style.left), parseFloat(m.style.width)])}))"
    )
    for track in timed:
        assert track["cause"] in causes and track["marks"]
        assert all(left >= 0 and left + width <= 100.01 for left, width in track["marks"])
    untimed = int(browser.evaluate("document.querySelector('[data-untimed]')?.dataset.untimed ?? '0'"))
    assert len(timed) + untimed == len(causes)

    rows = browser.evaluate(READ_GRID)
    families = [cell["family"] for cell in rows[0]["cells"]]
    assert families == [f.title for f in FAMILIES if f.title in families]
    expected = expected_grid(document, families)
    assert [row["node"] for row in rows if row["node"] in expected] == [row["node"] for row in rows]
    assert sorted(row["node"] for row in rows) == sorted(expected), "each listed node exactly once"
    groups = {node["instance_id"]: node["instance_group"] for node in document["nodes"]}
    for row in rows:
        assert row["visible"] and row["group"] == groups[row["node"]]
        shown = {cell["family"]: cell["status"] for cell in row["cells"]}
        assert shown == expected[row["node"]], row["node"]
        for cell in row["cells"]:
            assert cell["width"] > 0
            if cell["status"] in COLOURS:
                assert cell["colour"] == COLOURS[cell["status"]], (row["node"], cell)
    return list(rows)


@pytest.fixture
def browser() -> Any:
    with HeadlessChromium() as started:
        yield started


def test_the_page_of_a_diagnosis_draws_the_json_reports_grid(
    simulate: SimulateFactory, cli: Callable[..., CliRun], browser: HeadlessChromium, tmp_path: Path
) -> None:
    simulation = simulate("eks-p5")
    scenario = simulation.scenario
    argv = ("diagnose", "--cluster", scenario.cluster.name, "--region", scenario.region, "--sample-nodes", "all")
    as_json = cli(*argv, "--format", "json")
    as_html = cli(*argv, "--format", "html")
    assert as_html.code == as_json.code
    document = json.loads(as_json.stdout)
    page = tmp_path / "report.html"
    page.write_text(as_html.stdout, encoding="utf-8")
    rows = check_page(browser, page, document)
    assert len(rows) == len(document["nodes"]) == 18
    assert {row["group"] for row in rows} == {"system", "worker"}
    statuses = {cell["status"] for row in rows for cell in row["cells"]}
    assert {"FAIL", "WARN", "SKIP", "PASS"} <= statuses  # the scenario's faults are drawn
    # The worst node of a group comes first.
    worker = [row for row in rows if row["group"] == "worker"]
    assert sum(c["status"] == "FAIL" for c in worker[0]["cells"]) >= max(
        sum(c["status"] == "FAIL" for c in row["cells"]) for row in worker
    )


def scaled(inventory: Inventory, total: int) -> Inventory:
    """The inventory with its nodes cloned under new ids up to `total` nodes, four clone groups;
    every 50th clone unreachable and every 7th not probed."""
    nodes = list(inventory.control_plane.nodes or [])
    probes = inventory.node_probes
    assert probes is not None
    results = {r.instance_id: r for r in probes.results}
    reached = [n for n in nodes if n.instance_id in probes.probed_instance_ids]
    clones: list[ClusterNode] = []
    probed = list(probes.probed_instance_ids)
    unreachable = list(probes.unreachable_instance_ids)
    cloned_results = list(probes.results)
    for index in range(total - len(nodes)):
        source = reached[index % len(reached)]
        instance_id = f"i-{0x0C000000000000000 + index:017x}"
        clones.append(source.model_copy(update={"instance_id": instance_id, "instance_group": f"worker-{index % 4}"}))
        if index % 50 == 49:
            unreachable.append(instance_id)
        elif index % 7 != 6:
            probed.append(instance_id)
            cloned_results.append(results[source.instance_id].model_copy(update={"instance_id": instance_id}))
    return inventory.model_copy(
        update={
            "control_plane": inventory.control_plane.model_copy(update={"nodes": nodes + clones}),
            "node_probes": probes.model_copy(
                update={
                    "probed_instance_ids": probed,
                    "unreachable_instance_ids": unreachable,
                    "results": cloned_results,
                }
            ),
        }
    )


def test_a_1024_node_grid_is_drawn_cell_for_cell(
    simulate: SimulateFactory, browser: HeadlessChromium, tmp_path: Path
) -> None:
    simulation = simulate("eks-p5")
    request = DiagnoseRequest(
        cluster=simulation.scenario.cluster.name, region=simulation.scenario.region, scope=Scope(sample_nodes="all")
    )
    context = CollectionContext(request=request, aws=simulation.clients())
    inventory = scaled(collect(context), 1024)
    result = build_result(inventory, context.degraded, datetime.now(UTC))
    document = report_document(result)
    page = tmp_path / "report.html"
    page.write_text(render_html([result]), encoding="utf-8")
    rows = check_page(browser, page, document)
    assert len(rows) == 1024
    assert {row["group"] for row in rows} == {"system", "worker", "worker-0", "worker-1", "worker-2", "worker-3"}
    by_node = {row["node"]: {c["family"]: c["status"] for c in row["cells"]} for row in rows}
    assert by_node[f"i-{0x0C000000000000000 + 49:017x}"]["GPU"] == "SKIP"  # unreachable clone
    assert by_node[f"i-{0x0C000000000000000 + 6:017x}"]["GPU"] == "not_probed"
    # Readable at this size: the page stays a few screens wide, and the squares stay squares.
    assert browser.evaluate("document.documentElement.scrollWidth") <= 1400
    assert page.stat().st_size < 3_000_000


def _screenshot(target: Path) -> None:
    """Render the demo's eks-p5 page and keep a picture of its verdict and node grid."""
    from hyperpod_nccl.engine import diagnose
    from hyperpod_nccl_sim.runtime import SimulatedCluster
    from hyperpod_nccl_sim.scenario import load_scenario

    with SimulatedCluster(load_scenario("eks-p5")) as simulation:
        request = DiagnoseRequest(
            cluster=simulation.scenario.cluster.name, region=simulation.scenario.region, scope=Scope(sample_nodes="all")
        )
        result = diagnose(request, simulation.clients())
    page = target.with_suffix(".html")
    page.write_text(render_html([result]), encoding="utf-8")
    with HeadlessChromium(width=1400, height=900) as shooting:
        shooting.load(page)
        shooting.screenshot(target, "section.report", max_height=1500)
        shooting.screenshot(target.with_name(target.stem + "-grid.png"), "#nodes", max_height=1500)
    page.unlink()


if __name__ == "__main__":
    _screenshot(Path(sys.argv[1]))
