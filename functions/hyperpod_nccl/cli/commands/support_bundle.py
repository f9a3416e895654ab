"""`hyperpod-nccl support-bundle`: write, locally, what an AWS Support case needs (skill.md).

The bundle holds the cluster's identity (name, ARN, region, orchestrator, EKS cluster or Slurm
controller), the failure window in UTC, the verbatim NCCL/libfabric error lines, the affected
instances / nodes / pods / job, the full diagnosis (JSON and text, larger node sample), the
NCCL-relevant environment in effect (`nccl_env`) with secret-looking values redacted, the
incident timeline, and which of the five escalation situations apply. Nothing is uploaded: the
operator attaches the directory (or an S3 URI they create) to the case.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

from hyperpod_nccl import nccl_env
from hyperpod_nccl.cli import validate
from hyperpod_nccl.cli.commands.diagnose import add_scope_arguments
from hyperpod_nccl.cli.commands.incidents import add_history_argument, incident_run
from hyperpod_nccl.cli.exit_codes import EXIT_OK, EXIT_PREREQUISITE, EXIT_USAGE
from hyperpod_nccl.cli.render import TextReport, render_json
from hyperpod_nccl.cli.target import add_target_arguments
from hyperpod_nccl.incidents.report import IncidentRun, incidents_json, write_escalations, write_incident
from hyperpod_nccl.models.findings import SweepResult
from hyperpod_nccl.redaction import REDACTED, count_redacted, redact_value, scrub
from hyperpod_nccl.sanitize import for_terminal, one_line

NAME = "support-bundle"
HELP = "Write a local bundle with everything an AWS Support case needs (read-only)."
EXAMPLES = (
    "hyperpod-nccl support-bundle --cluster my-cluster --region us-west-2",
    "hyperpod-nccl support-bundle --cluster my-cluster --output-dir case-1234",
)
# skill.md: "a full diagnostic with a bigger sample (--sample-nodes 10)".
BUNDLE_SAMPLE_NODES = 10
ERROR_LINE = re.compile(r"(?i)(nccl|libfabric|net/ofi|\bofi\b|\bfi_|efa|watchdog|c10d|xid|rendezvous)")


def configure(parser: argparse.ArgumentParser) -> None:
    """Declare the flags: those of diagnose (with a larger default sample), plus --output-dir and --force."""
    add_target_arguments(parser)
    parser.add_argument(
        "--output-dir", type=Path, metavar="DIR", help="bundle directory (default: ./support-<cluster>-<UTC>)"
    )
    parser.add_argument(
        "--force", action="store_true", help="write into an --output-dir that already holds files (never by default)"
    )
    add_history_argument(parser)
    add_scope_arguments(parser)
    parser.set_defaults(sample_nodes=BUNDLE_SAMPLE_NODES)


def redact(name: str, value: str | None) -> str:
    """The value as it may appear in a support case: secret-looking names or values redacted."""
    if value is None:
        return "<from reference>"
    return redact_value(name, value)


def nccl_environment(run_: IncidentRun) -> list[str]:
    """`NAME=value` lines of the NCCL-relevant variables (`nccl_env`) in effect, per source, redacted."""
    lines: list[str] = []
    kube = run_.inventory.kubernetes
    for pod in kube.training_pods() if kube else []:
        for container in pod.containers:
            for var in container.env:
                if nccl_env.is_nccl_variable(var.name):
                    value = redact(var.name, var.value) if var.value_from is None else f"<{var.value_from}>"
                    lines.append(f"pod {pod.namespace}/{pod.name} [{container.name}]: {var.name}={value}")
    for config_map in kube.config_maps if kube else []:
        for key, value in config_map.data.items():
            if nccl_env.is_nccl_variable(key):
                lines.append(f"configmap {config_map.namespace}/{config_map.name}: {key}={redact(key, value)}")
    probes = run_.inventory.node_probes
    for result in probes.results if probes else []:
        for line in result.slurm.nccl_env if result.slurm else []:
            name, _, value = line.partition("=")
            shown = f"{name}={redact(name.strip().removeprefix('export '), value)}" if value else line
            lines.append(f"slurm controller {result.instance_id}: {shown}")
    return lines


def error_lines(run_: IncidentRun) -> list[str]:
    """Verbatim NCCL / libfabric / watchdog / Xid lines from the findings and incidents."""
    seen: dict[str, None] = {}
    for finding in run_.result.issues:
        for line in finding.evidence:
            if ERROR_LINE.search(line):
                seen.setdefault(line)
    for incident in run_.incidents:
        for line in incident.evidence:
            if ERROR_LINE.search(line):
                seen.setdefault(line)
    return list(seen)


def failure_window(run_: IncidentRun) -> tuple[datetime, datetime]:
    """First and last incident timestamps; the sweep window when no incident has a time."""
    times = [t for i in run_.incidents for t in (i.first_seen, i.last_seen) if t]
    if not times:
        return run_.result.window_start, run_.result.window_end
    return min(times), max(times)


def _controller(run_: IncidentRun) -> str:
    cluster = run_.inventory.control_plane.cluster
    if cluster is None:
        return "unknown"
    if run_.result.orchestrator == "eks":
        return f"EKS cluster {cluster.eks_cluster_name or 'unknown'}"
    groups = [g.name for g in cluster.instance_groups if (g.slurm_node_type or "").lower() == "controller"]
    nodes = [n.instance_id for n in run_.inventory.control_plane.nodes or [] if n.instance_group in groups]
    return f"Slurm controller group {', '.join(groups) or 'unknown'}" + (f" ({', '.join(nodes)})" if nodes else "")


def _fenced(text: str) -> str:
    """`text` as a Markdown code block that no line of it can close: CommonMark closes a fence
    only with a run of backticks at least as long as the opening one, so the fence is one longer
    than the longest run in the (cluster-written) text."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}\n"


def case_summary(run_: IncidentRun, files: list[str], redacted: dict[str, int] | None = None) -> str:
    """case.md: the text to paste into the AWS Support case; `redacted` counts the secret-looking
    values replaced in each file (listed with the files)."""
    result: SweepResult = run_.result
    start, end = failure_window(run_)
    out = io.StringIO()
    w = out.write
    w("# AWS Support case — HyperPod NCCL failure\n\n")
    w(f"- Cluster: {result.cluster_name}\n- ARN: {result.cluster_arn or 'unknown'}\n- Region: {result.region}\n")
    w(f"- Orchestrator: {result.orchestrator}; {_controller(run_)}\n")
    w(f"- Failure window (UTC): {start:%Y-%m-%d %H:%M:%S} → {end:%Y-%m-%d %H:%M:%S}\n")
    w(f"- Diagnosis window (UTC): {result.window_start:%Y-%m-%d %H:%M:%S} → {result.window_end:%Y-%m-%d %H:%M:%S}\n")
    coverage = result.coverage
    w(f"- Issues Found: {len(result.issues)}; nodes probed {coverage.nodes_probed}/{coverage.nodes_total}\n")
    instances = sorted({i for inc in run_.incidents for i in inc.affected.instance_ids})
    pods = sorted({p for inc in run_.incidents for p in inc.affected.pods})
    jobs = sorted({j for inc in run_.incidents for j in inc.affected.jobs})
    scope = result.scope
    w(f"- Affected instance ids: {', '.join(instances) or 'none identified'}\n")
    w(f"- Affected pods: {', '.join(pods) or 'none identified'}\n")
    w(f"- Namespace / job: {scope.namespace or '-'} / {', '.join(jobs) or scope.job or '-'}\n\n")
    w("## Escalation\n\n")
    write_escalations(out, run_.escalations)
    applicable = [e.number for e in run_.escalations if e.verdict == "applies"]
    w(
        f"\nSituation(s) that apply: {', '.join(map(str, applicable))}\n"
        if applicable
        else "\nNo escalation situation applies on this evidence alone (see CONFIRM lines).\n"
    )
    w("\n## Verbatim NCCL / libfabric error lines\n\n")
    w(_fenced("\n".join(error_lines(run_)) or "(none found in the window)"))
    w("\n## Incidents\n\n")
    incidents = io.StringIO()
    for incident in run_.incidents:
        write_incident(incidents, incident)
    w(_fenced(incidents.getvalue().removesuffix("\n") or "(no incident in the window)"))
    w("\n## NCCL-relevant environment in effect (secrets redacted)\n\n")
    w(
        _fenced(
            "\n".join(nccl_environment(run_))
            or f"(not readable from outside the job: run `printenv | grep -E '{nccl_env.grep_pattern()}'` in one pod)"
        )
    )
    w("\n## Files in this bundle\n\n")
    for name in files:
        count = (redacted or {}).get(name, 0)
        w(f"- {name}" + (f" ({count} secret-looking value(s) redacted)" if count else "") + "\n")
    if redacted is not None:
        w(f"\nSecret-looking values redacted in this bundle: {sum(redacted.values())} (keys, tokens, passwords, ")
        w("URL credentials), each replaced where it was read, before anything was stored.\n")
    w("\nUpload the directory to S3 and put the S3 URI in the case (this tool never uploads).\n")
    return out.getvalue()


def write_bundle(run_: IncidentRun, directory: Path) -> list[Path]:
    """Write every bundle file into `directory`; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    text = io.StringIO()
    TextReport(text, colour=False).render(run_.result)
    cluster = run_.inventory.control_plane.cluster
    files: dict[str, str] = {
        "nccl-diag.txt": text.getvalue(),
        "nccl-diag.json": render_json(run_.result) + "\n",
        "incidents.json": json.dumps(incidents_json(run_), indent=2) + "\n",
        "describe-cluster.json": json.dumps(cluster.model_dump(mode="json") if cluster else {}, indent=2) + "\n",
        "nccl-env.txt": "\n".join(nccl_environment(run_)) + "\n",
        "error-lines.txt": "\n".join(error_lines(run_)) + "\n",
    }
    # Everything was redacted where it entered; this directory leaves the account, so one last
    # pass here, and the count of what is redacted goes into case.md (and to the terminal).
    files = {name: scrub(content) for name, content in files.items()}
    redacted = {name: count_redacted(content) for name, content in files.items()}
    names = [*files, "case.md"]
    redacted["case.md"] = count_redacted(scrub(case_summary(run_, names)))  # the count lines hold none
    files["case.md"] = scrub(case_summary(run_, names, redacted))
    written = []
    for name, content in files.items():
        path = directory / name
        if name.endswith((".md", ".txt")):
            # Files meant for people quote evidence, env values and names verbatim: escape their
            # control characters here, once for all (JSON files are escaped by json.dumps).
            content = for_terminal(content)
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written


def default_directory(cluster_name: str, requested: str) -> Path | None:
    """`support-<cluster>-<UTC>` in the current directory, named after the cluster's name when it
    has a HyperPod name's shape, else after the cluster the operator named (a name, or an ARN's
    cluster id); None when neither can be a directory name (a path separator, `..`, control
    characters: the name comes from an API response)."""
    slug = validate.cluster_slug(cluster_name) or validate.cluster_slug(requested)
    if slug is None:
        return None
    return Path(f"support-{slug}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}")


def output_dir_problem(directory: Path, force: bool) -> str | None:
    """Why the bundle cannot go to `directory`, told before a diagnosis that can take minutes:
    it is a file, it already holds files (unless `force`), or the nearest existing directory
    above it cannot be written. None when it can."""
    if directory.exists() and not directory.is_dir():
        return f"--output-dir {directory} is not a directory"
    if directory.is_dir() and any(directory.iterdir()) and not force:
        return f"--output-dir {directory} already holds files: choose another or pass --force"
    existing = directory if directory.is_dir() else next((p for p in directory.parents if p.is_dir()), Path())
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"--output-dir {directory}: {existing} is not writable"
    return None


def run(args: argparse.Namespace) -> int:
    """Check where the bundle goes, diagnose with a larger sample, build incidents, write the bundle."""
    if args.output_dir is not None:
        problem = output_dir_problem(args.output_dir, args.force)
        if problem is not None:
            sys.stderr.write(f"hyperpod-nccl {NAME}: error: {one_line(problem)}\n")
            return EXIT_USAGE
    outcome = incident_run(args, NAME)
    if isinstance(outcome, int):
        return outcome
    directory = args.output_dir or default_directory(outcome.result.cluster_name, args.cluster)
    if directory is None:
        name = one_line(outcome.result.cluster_name)
        sys.stderr.write(
            f'hyperpod-nccl {NAME}: error: cluster name "{name}" cannot name a directory: pass --output-dir DIR\n'
        )
        return EXIT_USAGE
    shown = one_line(str(directory))
    try:
        written = write_bundle(outcome, directory)
    except OSError as error:
        sys.stderr.write(f"hyperpod-nccl {NAME}: error: cannot write {shown}: {one_line(str(error))}\n")
        return EXIT_PREREQUISITE
    sys.stdout.write(f"Support bundle written to {shown}/ (nothing was uploaded)\n")
    total = 0
    for path in written:
        count = count_redacted(path.read_text(encoding="utf-8"))
        total += count
        sys.stdout.write(f"  {path.name}" + (f" ({count} redacted)" if count else "") + "\n")
    sys.stdout.write(f"{total} secret-looking value(s) redacted, shown as {REDACTED}\n")
    applicable = [e for e in outcome.escalations if e.verdict != "no"]
    if applicable:
        sys.stdout.write("\n")
        write_escalations(sys.stdout, applicable)
    else:
        sys.stdout.write("\nNone of the five escalation situations applies on this evidence.\n")
    return EXIT_OK
