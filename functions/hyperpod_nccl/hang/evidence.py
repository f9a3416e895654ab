"""Hang attribution from what the node probes brought back (pure: no I/O).

Joins the probes' NCCL RAS answers and Flight Recorder dumps with the rank layout: the pods'
environments and hostnames (EKS) or the cluster's hosts, overlaid with what each probe saw on
its own node (the ranks in its processes' environments and in its dump file names), which is
the most direct evidence of where a rank ran. Shared by the `hang.attribution` check and by
`incidents.report.attributions_of`.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from hyperpod_nccl.hang.attribution import (
    AttributionFact,
    RankLocation,
    RankMap,
    _host_key,
    attribute,
    rank_map_from_hosts,
    rank_map_from_pods,
)
from hyperpod_nccl.hang.flight_recorder import HangAnalysis, analyze, load_dumps
from hyperpod_nccl.hang.ras import RasParseError, RasStatus, parse_ras_status
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.node_probe import FlightRecorderFile, NcclJobChoice, NodeProbeResult


@dataclass
class HangEvidence:
    """The parsed RAS status, the Flight Recorder analysis, the rank map and the facts."""

    ras: RasStatus | None = None
    ras_node: str | None = None
    analysis: HangAnalysis | None = None
    mapping: RankMap = field(default_factory=RankMap)
    facts: list[AttributionFact] = field(default_factory=list)
    dump_nodes: dict[int, str] = field(default_factory=dict)
    # instance id -> the process the probe took for the job there: whose dumps and RAS port were read
    jobs: dict[str, NcclJobChoice] = field(default_factory=dict)


def _probed(inventory: Inventory) -> list[NodeProbeResult]:
    return [r for r in inventory.node_probes.probed("node") if r.probe] if inventory.node_probes else []


def _rank_map(inventory: Inventory, results: list[NodeProbeResult]) -> RankMap:
    cluster_nodes = inventory.control_plane.nodes or []
    k8s = inventory.kubernetes
    if k8s is not None and k8s.pods:
        mapping = rank_map_from_pods(k8s.pods, k8s.nodes or [], cluster_nodes)
        mapping.hosts.update(
            {k: v for k, v in rank_map_from_hosts(cluster_nodes).hosts.items() if k not in mapping.hosts}
        )
    else:
        mapping = rank_map_from_hosts(cluster_nodes)
    # What a probe saw on its own node beats a layout inferred from pod env (a torchrun pod's
    # RANK is its node rank, not the rank of each of its processes).
    for result in results:
        assert result.probe is not None
        ranks = {job.rank for job in result.probe.nccl_jobs if job.rank is not None}
        ranks |= {d.rank for d in result.probe.flight_recorder_dumps if d.rank is not None}
        host = result.probe.hostname or result.hostname
        on_host = mapping.hosts.get(_host_key(host)) if host else None
        for rank in ranks:
            local = next((j.local_rank for j in result.probe.nccl_jobs if j.rank == rank), None)
            mapping.ranks[rank] = RankLocation(
                rank=rank,
                pod=on_host.pod if on_host else None,
                namespace=on_host.namespace if on_host else None,
                job=on_host.job if on_host else None,
                node_name=on_host.node_name if on_host and on_host.node_name else host,
                hostname=result.hostname or host,
                instance_id=result.instance_id,
                instance_group=result.instance_group,
                local_rank=local,
            )
    return mapping


def _recent_dumps(inventory: Inventory, results: list[NodeProbeResult]) -> list[tuple[str, FlightRecorderFile]]:
    """Newest dump per rank written inside the sweep window (older ones belong to past hangs)."""
    since = inventory.window_start.timestamp()
    newest: dict[object, tuple[str, FlightRecorderFile]] = {}
    for result in results:
        assert result.probe is not None
        for dump in result.probe.flight_recorder_dumps:
            if dump.modified_epoch is not None and dump.modified_epoch < since:
                continue
            key = dump.rank if dump.rank is not None else f"{result.instance_id}:{dump.path}"
            if key not in newest or (dump.modified_epoch or 0) > (newest[key][1].modified_epoch or 0):
                newest[key] = (result.instance_id, dump)
    return list(newest.values())


def hang_evidence(inventory: Inventory) -> HangEvidence:
    """Parse and join every node's RAS answer and Flight Recorder dumps into attribution facts."""
    results = _probed(inventory)
    evidence = HangEvidence(jobs={r.instance_id: r.probe.nccl_job for r in results if r.probe and r.probe.nccl_job})
    for result in results:
        assert result.probe is not None
        if result.probe.ras_status and evidence.ras is None:
            try:
                evidence.ras = parse_ras_status(result.probe.ras_status)
                evidence.ras_node = result.instance_id
            except RasParseError:
                continue
    files: list[tuple[str, bytes]] = []
    not_stored: dict[str, str] = {}
    for instance_id, dump in _recent_dumps(inventory, results):
        if dump.not_stored:  # the monitor kept the node's parsed sections, not this raw dump
            not_stored[f"{instance_id}:{dump.path}"] = dump.not_stored
            continue
        try:
            files.append((f"{instance_id}:{dump.path}", base64.b64decode(dump.data_base64, validate=True)))
        except (binascii.Error, ValueError):
            continue
        if dump.rank is not None:
            evidence.dump_nodes[dump.rank] = instance_id
    if files or not_stored:
        # The restricted loader (plain data only); refused dumps are kept with the reason.
        dumps, refused = load_dumps(files)
        evidence.analysis = analyze(dumps, {**not_stored, **refused})
    if evidence.ras is None and evidence.analysis is None:
        return evidence
    evidence.mapping = _rank_map(inventory, results)
    evidence.facts = attribute(evidence.analysis, evidence.ras, evidence.mapping)
    return evidence
