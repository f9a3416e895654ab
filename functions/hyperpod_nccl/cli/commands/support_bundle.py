"""`hyperpod-nccl support-bundle`: write, locally, what an AWS Support case needs (skill.md).

The bundle holds the cluster's identity (name, ARN, region, orchestrator, EKS cluster or Slurm
controller), the failure window in UTC, the verbatim NCCL/libfabric error lines, the affected
instances / nodes / pods / job, the full diagnosis (JSON and text, larger node sample), the
NCCL-relevant environment in effect (`nccl_env`) with secret-looking values redacted, the
incident timeline, and which of the five escalation situations apply. It is one archive,
`support-<cluster>-<UTC>.tar.gz`, under BUNDLE_MAX_BYTES, with a manifest (each file's size, hash
and redaction count). Nothing is uploaded: the operator attaches the archive to the case.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import sys
import tarfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from hyperpod_nccl import __version__, nccl_env
from hyperpod_nccl.cli import validate
from hyperpod_nccl.cli.commands.diagnose import add_scope_arguments
from hyperpod_nccl.cli.commands.incidents import add_history_argument, incident_run
from hyperpod_nccl.cli.errors import say
from hyperpod_nccl.cli.exit_codes import EXIT_OK, EXIT_PREREQUISITE, EXIT_USAGE
from hyperpod_nccl.cli.render import TextReport, render_json
from hyperpod_nccl.cli.target import add_target_arguments
from hyperpod_nccl.incidents.report import IncidentRun, incidents_json, write_escalations, write_incident
from hyperpod_nccl.models.findings import SweepResult
from hyperpod_nccl.redaction import REDACTED, count_redacted, redact_value, scrub
from hyperpod_nccl.sanitize import for_terminal, one_line
from hyperpod_nccl.verdict.fold import Topology, places

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
        "--output-dir",
        type=Path,
        metavar="DIR",
        help="where the archive support-<cluster>-<UTC>.tar.gz goes (default: the current directory; created)",
    )
    parser.add_argument("--force", action="store_true", help="replace an archive of the same name (never by default)")
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


# The columns of node-versions.txt: what AWS Support asks first of a NCCL case (Versions' fields).
VERSION_COLUMNS = ("driver", "cuda", "nccl", "ofi_nccl", "libfabric", "efa_installer", "efa_module", "kernel")


def node_versions(run_: IncidentRun) -> list[str]:
    """One tab-separated line per node the diagnosis tried to probe: its id, group and type, then
    each version its probe read (`-` where the probe could not tell), or why it was not read."""
    lines = ["\t".join(("instance", "group", "type", *VERSION_COLUMNS))]
    probes = run_.inventory.node_probes
    for result in probes.results if probes else []:
        if result.role != "node":
            continue
        where = [result.instance_id, result.instance_group or "-", result.instance_type or "-"]
        if result.probe is None:
            lines.append("\t".join([*where, f"not read: {result.error or 'unreachable'}"]))
            continue
        versions = result.probe.versions.model_dump()
        lines.append("\t".join([*where, *(str(versions.get(column) or "-") for column in VERSION_COLUMNS)]))
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


def affected(run_: IncidentRun) -> tuple[list[str], list[str], list[str]]:
    """The instance ids, pods and jobs the case is about: those of the incidents and those every
    issue of the diagnosis is about as the verdict places it (`verdict.fold.places`: an issue
    outside any incident, a crash-looping pod for one, still affects the cluster), each once,
    sorted, on one line."""
    instances = {i for inc in run_.incidents for i in inc.affected.instance_ids}
    pods = {p for inc in run_.incidents for p in inc.affected.pods}
    jobs = {j for inc in run_.incidents for j in inc.affected.jobs}
    topology = Topology.of(run_.inventory)
    for finding in run_.result.issues:
        nodes, named_pods, named_jobs = places(finding, topology)
        instances |= nodes
        pods |= named_pods
        jobs |= named_jobs
    return _listed(instances), _listed(pods), _listed(jobs)


def _listed(names: set[str]) -> list[str]:
    return sorted({one_line(name) for name in names})


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
    instances, pods, jobs = affected(run_)
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
    w("\nAttach the archive to the case (this tool never uploads).\n")
    return out.getvalue()


# AWS Support takes attachments of a few megabytes each: the whole bundle stays under this.
BUNDLE_MAX_BYTES = 5 * 1024 * 1024
MANIFEST = "manifest.json"
# The files that give way, largest first, when the archive would pass BUNDLE_MAX_BYTES (the case
# summary, the incidents and the cluster description are always whole).
_TRIMMABLE = ("nccl-diag.json", "nccl-diag.txt", "error-lines.txt", "nccl-env.txt", "node-versions.txt")


def bundle_files(run_: IncidentRun) -> dict[str, str]:
    """Every file of the bundle by name, scrubbed once more and, for the files meant for people,
    escaped (JSON files are escaped by json.dumps)."""
    text = io.StringIO()
    TextReport(text, colour=False).render(run_.result)
    cluster = run_.inventory.control_plane.cluster
    files: dict[str, str] = {
        "nccl-diag.txt": text.getvalue(),
        "nccl-diag.json": render_json(run_.result) + "\n",
        "incidents.json": json.dumps(incidents_json(run_), indent=2) + "\n",
        "describe-cluster.json": json.dumps(cluster.model_dump(mode="json") if cluster else {}, indent=2) + "\n",
        "nccl-env.txt": "\n".join(nccl_environment(run_)) + "\n",
        "node-versions.txt": "\n".join(node_versions(run_)) + "\n",
        "error-lines.txt": "\n".join(error_lines(run_)) + "\n",
    }
    # Everything was redacted where it entered; this bundle leaves the account, so one last pass
    # here, and the count of what is redacted goes into case.md (and to the terminal).
    files = {name: scrub(content) for name, content in files.items()}
    redacted = {name: count_redacted(content) for name, content in files.items()}
    names = [*files, "case.md", MANIFEST]
    redacted["case.md"] = count_redacted(scrub(case_summary(run_, names)))  # the count lines hold none
    files["case.md"] = scrub(case_summary(run_, names, redacted))
    # Files meant for people quote evidence, env values and names verbatim: their control
    # characters are escaped here, once for all.
    return {name: for_terminal(c) if name.endswith((".md", ".txt")) else c for name, c in files.items()}


def _manifest(run_: IncidentRun, files: dict[str, bytes], trimmed: dict[str, int]) -> bytes:
    result = run_.result
    document = {
        "tool": f"hyperpod-nccl-monitor {__version__}",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "cluster": result.cluster_name,
        "cluster_arn": result.cluster_arn,
        "region": result.region,
        "files": [
            {
                "name": name,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "redacted": count_redacted(data.decode("utf-8")),
                **({"trimmed_bytes": trimmed[name]} if name in trimmed else {}),
            }
            for name, data in files.items()
        ],
    }
    return (json.dumps(document, indent=2) + "\n").encode()


def _tar_gz(folder: str, files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    now = int(datetime.now(UTC).timestamp())
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            member = tarfile.TarInfo(f"{folder}/{name}")
            member.size, member.mtime, member.mode = len(data), now, 0o644
            archive.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


@dataclass(frozen=True)
class PackedBundle:
    """The archive's bytes, each member's content in archive order (the manifest last), and the
    bytes left out of each trimmed file."""

    data: bytes
    members: dict[str, bytes]
    trimmed: dict[str, int]


def pack_bundle(run_: IncidentRun, folder: str, limit: int = BUNDLE_MAX_BYTES) -> PackedBundle:
    """The bundle as one .tar.gz (every file under `folder/`, with its manifest) of at most
    `limit` bytes. A file that gives way keeps its beginning and says, at its end, what was left
    out and how to get it whole."""
    files = {name: content.encode("utf-8") for name, content in bundle_files(run_).items()}
    trimmed: dict[str, int] = {}
    while True:
        members = {**files, MANIFEST: _manifest(run_, files, trimmed)}
        data = _tar_gz(folder, members)
        if len(data) <= limit:
            return PackedBundle(data, members, trimmed)
        candidates = [name for name in _TRIMMABLE if len(files[name]) > 1024]
        if not candidates:
            raise OSError(f"the bundle is {len(data)} bytes even with its large files cut short")
        largest = max(candidates, key=lambda name: len(files[name]))
        keep = len(files[largest]) // 2
        trimmed[largest] = trimmed.get(largest, 0) + len(files[largest]) - keep
        note = (
            f"\n[{trimmed[largest]} bytes left out to keep the bundle under {limit // (1024 * 1024)} MB: "
            f"`hyperpod-nccl diagnose --cluster {validate.cluster_slug(run_.result.cluster_name) or '<cluster>'} "
            "--format json` writes the whole report]\n"
        )
        files[largest] = files[largest][:keep] + note.encode()


def default_name(cluster_name: str, requested: str) -> str | None:
    """`support-<cluster>-<UTC>`, named after the cluster's name when it has a HyperPod name's
    shape, else after the cluster the operator named (a name, or an ARN's cluster id); None when
    neither can name a file (a path separator, `..`, control characters: the name comes from an
    API response)."""
    slug = validate.cluster_slug(cluster_name) or validate.cluster_slug(requested)
    if slug is None:
        return None
    return f"support-{slug}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}"


def output_dir_problem(directory: Path) -> str | None:
    """Why the bundle cannot go to `directory`, told before a diagnosis that can take minutes: it
    is a file, or the nearest existing directory above it cannot be written. None when it can."""
    if directory.exists() and not directory.is_dir():
        return f"--output-dir {directory} is not a directory"
    existing = directory if directory.is_dir() else next((p for p in directory.parents if p.exists()), Path())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        return f"--output-dir {directory}: {existing} is not a writable directory"
    return None


def run(args: argparse.Namespace) -> int:
    """Check where the bundle goes, diagnose with a larger sample, build incidents, write the one
    archive (never over an existing file without --force)."""
    directory: Path = args.output_dir or Path()
    problem = output_dir_problem(directory)
    if problem is not None:
        say(NAME, problem)
        return EXIT_USAGE
    outcome = incident_run(args, NAME)
    if isinstance(outcome, int):
        return outcome
    name = default_name(outcome.result.cluster_name, args.cluster)
    if name is None:
        cluster = one_line(outcome.result.cluster_name)
        say(NAME, f'cluster name "{cluster}" cannot name a file')
        return EXIT_USAGE
    archive = directory / f"{name}.tar.gz"
    shown = one_line(str(archive))
    try:
        packed = pack_bundle(outcome, name)
        directory.mkdir(parents=True, exist_ok=True)
        with archive.open("wb" if args.force else "xb") as handle:
            handle.write(packed.data)
    except FileExistsError:
        say(NAME, f"{shown} exists: pass --force to replace it")
        return EXIT_USAGE
    except OSError as error:
        say(NAME, f"cannot write {shown}: {error}")
        return EXIT_PREREQUISITE
    sys.stdout.write(f"Support bundle written to {shown} ({len(packed.data)} bytes; nothing was uploaded)\n")
    total = 0
    for member, content in packed.members.items():
        count = count_redacted(content.decode("utf-8"))
        total += count
        cut = f", cut short by {packed.trimmed[member]} bytes" if member in packed.trimmed else ""
        sys.stdout.write(f"  {member}" + (f" ({count} redacted{cut})" if count or cut else "") + "\n")
    sys.stdout.write(f"{total} secret-looking value(s) redacted, shown as {REDACTED}\n")
    applicable = [e for e in outcome.escalations if e.verdict != "no"]
    if applicable:
        sys.stdout.write("\n")
        write_escalations(sys.stdout, applicable)
    else:
        sys.stdout.write("\nNone of the five escalation situations applies on this evidence.\n")
    return EXIT_OK
