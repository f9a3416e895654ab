"""State ProbeNode (one per node, in the probe Map): probe the node over SSM and store its result
under the sweep, bounded; `load_probe_results` reads them back for Aggregate."""

from __future__ import annotations

from typing import Literal

from pydantic import ValidationError

from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.collectors.node_probes import probe_node
from hyperpod_nccl.models.findings import DegradedSource
from hyperpod_nccl.models.node_probe import NodeProbeResult
from hyperpod_nccl.monitor.payloads import ProbeItem, ProbeOutput, SweepRef
from hyperpod_nccl.monitor.settings import PROBE_NODE_OUTPUT_MAX_BYTES
from hyperpod_nccl.monitor.shared_pacer import AccountPace
from hyperpod_nccl.monitor.states.shared import context_for, load_ref, store_degraded
from hyperpod_nccl.monitor.store import Store

# At most this much of one node's probe result is stored (JSON bytes, before compression): the
# storage's own bound, whatever the collector read (ProbeNode reads at most
# settings.PROBE_NODE_OUTPUT_MAX_BYTES of a node; raw Flight Recorder dumps past this are dropped).
PROBE_RESULT_MAX_BYTES = 6 << 20


def run_probe_node(
    item: ProbeItem,
    store: Store,
    aws: AwsClients,
    coverage: int | Literal["all"],
    probe_documents: dict[str, str] | None = None,
    pace: AccountPace | None = None,
) -> ProbeOutput:
    """One node's state: probe it (never raises) and store the result under the sweep.

    `probe_documents` are the stack's Session documents by probe role (settings.PROBE_DOCUMENTS_ENV);
    a role without one uses the AWS managed document (the function's role may not allow it). The
    session starts at the account's StartSession `pace`, shared with every other ProbeNode sandbox
    through the table (default: thresholds.py's rate), no sooner than the node's turn when its batch
    is one of the probe Map's first round (`ProbeItem.first_round_start`)."""
    ref = load_ref(store, item.sweep_id)
    target = store.probe_target(item.sweep_id, item.instance_id)
    if target is None:
        result = NodeProbeResult(
            instance_id=item.instance_id, reachable=False, error="node was not in the sweep's plan"
        )
    else:
        ctx = context_for(ref, aws, coverage)
        ctx.probe_output_max_bytes = PROBE_NODE_OUTPUT_MAX_BYTES
        ctx.probe_documents = dict(probe_documents or {})
        pacer = (pace or AccountPace()).start_sessions(store, ref.region)
        pacer.not_before = item.first_round_start(pacer.interval)
        ctx.start_pacer = pacer
        result = probe_node(ctx, target)
        if pacer.unshared is not None:
            ctx.degraded.append(pacer.unshared)
        if ctx.degraded:
            store_degraded(store, ref, f"probe#{item.instance_id}", ctx.degraded)
    store_probe_result(store, ref, result)
    return ProbeOutput(instance_id=item.instance_id, reachable=result.reachable)


def bounded_probe_result(result: NodeProbeResult, max_bytes: int = PROBE_RESULT_MAX_BYTES) -> NodeProbeResult:
    """`result` with at most `max_bytes` of JSON. Only raw Flight Recorder dumps are ever dropped,
    oldest first, each one marked (`not_stored`, shown with the hang evidence); every parsed
    section the checks read is kept."""
    if result.probe is None or len(result.model_dump_json().encode()) <= max_bytes:
        return result
    dumps = [d.model_copy() for d in result.probe.flight_recorder_dumps]
    probe = result.probe.model_copy(update={"flight_recorder_dumps": dumps})
    bounded = result.model_copy(update={"probe": probe})
    size = len(bounded.model_dump_json().encode())
    for dump in sorted(dumps, key=lambda d: d.modified_epoch or 0.0):
        if size <= max_bytes:
            break
        size -= len(dump.data_base64)
        dump.not_stored = (
            f"flight recorder dump truncated: {dump.size_bytes} bytes not stored (the monitor keeps at most "
            f"{max_bytes // (1 << 20)} MiB of one node's probe result); read it on the node"
        )
        dump.data_base64 = ""
    return bounded


def store_probe_result(store: Store, ref: SweepRef, result: NodeProbeResult) -> None:
    """A node's result as a compressed blob in chunks under the item limit (a node with real Flight
    Recorder dumps returns megabytes); what did not fit the bound is named as a degraded source."""
    bounded = bounded_probe_result(result)
    dropped = [d for d in (bounded.probe.flight_recorder_dumps if bounded.probe else []) if d.not_stored]
    if dropped:
        why = DegradedSource(
            source=f"node probe {result.instance_id}",
            reason=f"flight recorder dump truncated: {len(dropped)} dump(s) over the per-node storage bound not stored",
            fix="read the dumps on the node (TORCH_NCCL_DEBUG_INFO_TEMP_FILE) or run the CLI's diagnose on it",
            partial=True,
        )
        store_degraded(store, ref, f"store#{result.instance_id}", [why])
    store.put_probe_result(ref, result.instance_id, bounded.model_dump_json())


def load_probe_results(store: Store, sweep_id: str) -> dict[str, NodeProbeResult]:
    """The stored node results of a sweep by instance id, read with one query (blobs, and the plain
    JSON items of a sweep started before probe results were chunked)."""
    results: dict[str, NodeProbeResult] = {}
    for raw in store.unchunked_probe_results(sweep_id):
        result = NodeProbeResult.model_validate(raw)
        results[result.instance_id] = result
    for text in store.probe_result_texts(sweep_id):
        try:
            result = NodeProbeResult.model_validate_json(text)
        except ValidationError:
            continue  # unreadable: the node counts as not stored, like a probe that never finished
        results[result.instance_id] = result
    return results


# --- aggregate -------------------------------------------------------------------------------
