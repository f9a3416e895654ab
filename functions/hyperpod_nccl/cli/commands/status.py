"""`hyperpod-nccl status`: what the deployed monitor knows now, read from its table: each watched
cluster's last sweep (when, status, coverage) and its open root causes (first and last seen, how
many sweeps saw them, the first safe step). Read-only."""

from __future__ import annotations

import argparse
import json
import sys

from hyperpod_nccl.cli.exit_codes import EXIT_OK
from hyperpod_nccl.cli.monitor_table import add_table_arguments, read_monitor
from hyperpod_nccl.monitor.read_side import ClusterStatus, LastSweep, cluster_status
from hyperpod_nccl.sanitize import one_line

NAME = "status"
HELP = "Show the deployed monitor's last sweep and open root causes per watched cluster (read-only)."
EXAMPLES = (
    "hyperpod-nccl status --region us-west-2",
    "hyperpod-nccl status --region us-west-2 --cluster my-cluster --format json",
    "hyperpod-nccl status --region us-west-2 --table HyperPodNcclMonitor-FindingsTable1A2B3C",
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Declare the flags: where the monitor is, which clusters, the output format."""
    add_table_arguments(parser, clusters=True)
    parser.add_argument("--format", choices=("text", "json"), default="text")


def _sweep_line(sweep: LastSweep | None) -> str:
    if sweep is None:
        return "no sweep recorded yet"
    coverage = sweep.coverage
    parts = [f"last sweep {sweep.finished_at or sweep.started_at}: {sweep.status}"]
    if coverage.nodes_total:
        parts.append(f"{coverage.nodes_probed}/{coverage.nodes_total} nodes probed")
    if coverage.nodes_unreachable:
        parts.append(f"{coverage.nodes_unreachable} unreachable")
    if sweep.degraded_sources:
        parts.append(f"not fully read: {', '.join(sweep.degraded_sources)}")
    if sweep.failure:
        parts.append(f"failed: {sweep.failure}")
    return one_line(", ".join(parts))


def render_text(table: str, statuses: list[ClusterStatus]) -> str:
    """The status as a person reads it; every stored value escaped for the terminal."""
    lines = [f"Monitor table: {one_line(table)}"]
    for status in statuses:
        lines.append("")
        where = f"{one_line(status.cluster)} ({one_line(status.region)})"
        lines.append(f"Cluster {where}: {_sweep_line(status.last_sweep)}")
        causes = status.open_root_causes
        lines.append(f"  {len(causes)} open root cause{'' if len(causes) == 1 else 's'}" + (":" if causes else ""))
        for cause in causes:
            seen = one_line(f"first seen {cause.first_seen or '?'}, last seen {cause.last_seen or '?'}")
            sweeps = f"{cause.occurrences} sweep{'' if cause.occurrences == 1 else 's'}"
            folds = f"{cause.findings_folded} finding{'' if cause.findings_folded == 1 else 's'}"
            lines.append(f"  [{cause.priority}] {one_line(cause.title)}")
            lines.append(f"        {seen}; seen in {sweeps}; folds {folds}")
            if cause.first_step:
                lines.append(f"        next: {one_line(cause.first_step)}")
        for problem in status.unreadable:
            lines.append(f"  unreadable: {one_line(problem)}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Locate the table, read each cluster's status, print it."""
    outcome = read_monitor(
        args,
        NAME,
        clusters=True,
        read=lambda table: [cluster_status(table.store, region, cluster) for cluster, region in table.clusters],
    )
    if isinstance(outcome, int):
        return outcome
    table, statuses = outcome
    if args.format == "json":
        document = {"table": table.name, "clusters": [s.model_dump(mode="json") for s in statuses]}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write(render_text(table.name, statuses))
    return EXIT_OK
