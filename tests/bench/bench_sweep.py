"""Sweep scale: wall time of a full sweep (every node probed) of 16 to 4,096 synthetic nodes with
2 s and 20 s probes, through the CLI and through the state machine, against the strict emulation's
account-wide rates (StartSession 3/s burst 3, FilterLogEvents 5/s) and the lower bound.

The sweeps run unscaled by default, at AWS's rates and full probe times. `BENCH_SWEEP_SCALE=k` runs
them time-scaled (see `hyperpod_nccl_sim.synthetic.measure_sweep`): every rate k times AWS's, every
probe k times shorter, the bound in the same scaled seconds; what is not scaled (Lambda dispatch, the
emulation, DynamoDB) then weighs k times more than on AWS. At 3/s a 4,096-node sweep takes 23 minutes
unscaled, so 1,024 and 4,096 nodes run only when `BENCH_SWEEP_SIZES` names them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hyperpod_nccl import thresholds
from hyperpod_nccl.monitor.settings import DEFAULT_MAP_MAX_CONCURRENCY, EXPECTED_PROBE_SECONDS
from hyperpod_nccl.pacing import THROTTLE_COOLDOWN_STARTS, THROTTLE_RECUR_STARTS
from hyperpod_nccl_sim.runtime import restore_environment, set_environment
from hyperpod_nccl_sim.synthetic import CLUSTER_SERVICES, SweepMeasurement, measure_sweep

TITLE = "Sweep scale: wall time and AWS calls vs cluster size"
# The sizes and probe times (issue 15, point 2); those run by default (unscaled, the section
# takes about 20 minutes; with 1,024 nodes about an hour more). `BENCH_SWEEP_SIZES=16,64,256,1024`
# names others; `BENCH_SWEEP_SCALE=2` runs time-scaled by k = 2.
SIZES = (16, 64, 256, 1024, 4096)
DEFAULT_SIZES = (16, 64, 256)
PROBE_SECONDS = (2.0, 20.0)
# k: the whole section (both paths, both probe times, a warm-up sweep per state-machine run) takes
# about sum(N) x (2 + 4) / (3 k) s of starts plus the CLI's 20 s probes, 16 at a time. At k = 5
# (15 StartSession per second, each a Lambda sandbox and a streamed session) 2 shared cores fell
# behind on the state-machine path and its throttles came from that.
TIME_SCALE = float(os.environ.get("BENCH_SWEEP_SCALE", "1"))
TARGET_RATIO = 1.2
TARGET_THROTTLED = 0.05
PLOT = Path(__file__).resolve().parents[2] / "docs" / "sweep-scale.png"


def sizes() -> list[int]:
    """The sizes to run: DEFAULT_SIZES, or those `BENCH_SWEEP_SIZES` names."""
    wanted = os.environ.get("BENCH_SWEEP_SIZES", "").strip()
    return [int(n) for n in wanted.split(",")] if wanted else list(DEFAULT_SIZES)


@contextmanager
def _quiet_handlers() -> Iterator[None]:
    """The handlers' JSON logs and metrics off while sweeping (another benchmark may have set them
    on); the previous values back afterwards."""
    saved = set_environment({"POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_DISABLED": "true"})
    try:
        yield
    finally:
        restore_environment(saved)


def _plot(runs: dict[tuple[int, float], tuple[SweepMeasurement, SweepMeasurement]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(PROBE_SECONDS), figsize=(11, 4.5), dpi=120, squeeze=False)
    for axis, probe in zip(axes[0], PROBE_SECONDS, strict=True):
        measured = sorted((n, c, m) for (n, p), (c, m) in runs.items() if p == probe)
        if not measured:
            continue
        nodes = [n for n, _, _ in measured]
        axis.plot(nodes, [c.wall_s for _, c, _ in measured], "o-", color="tab:blue", label="CLI")
        axis.plot(nodes, [c.bound_s for _, c, _ in measured], ":", color="tab:blue", label="CLI bound (16 at once)")
        axis.plot(nodes, [m.wall_s for _, _, m in measured], "^-", color="tab:green", label="state machine")
        axis.plot(nodes, [m.bound_s for _, _, m in measured], ":", color="tab:green", label="state machine bound")
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xticks(nodes, [str(n) for n in nodes])
        axis.set_xlabel("nodes")
        axis.set_ylabel(
            "sweep wall time (s)" if TIME_SCALE == 1 else f"sweep wall time (s, scaled by k = {TIME_SCALE:g})"
        )
        axis.set_title(f"probes of {probe:g} s, StartSession 3/s" + ("" if TIME_SCALE == 1 else " (both / k)"))
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(PLOT)
    plt.close(figure)


def _calls(measured: SweepMeasurement) -> str:
    cluster = measured.cluster_calls()
    listing = cluster.get("sagemaker:ListClusterNodes", 0)
    sessions = cluster.get("ssm:StartSession", 0)
    other = sum(cluster.values()) - listing - sessions
    return f"{listing} | {sessions} | {other}"


def _wall(measured: SweepMeasurement) -> str:
    return f"{measured.wall_s:.1f} s / {measured.bound_s:.1f} s (**{measured.ratio_to_bound:.2f}x**)"


def _phase(measured: SweepMeasurement) -> str:
    if measured.probe_phase_s is None:
        return "-"
    return f"{measured.probe_phase_s:.1f} s ({measured.probe_phase_s / measured.bound_s:.2f}x)"


def _throttled(measured: SweepMeasurement) -> str:
    total = measured.start_session_accepted + measured.start_session_throttled
    return f"{measured.start_session_throttled}/{total} ({measured.throttled_share:.1%})"


def _measure(nodes: int, probe: float) -> tuple[SweepMeasurement, SweepMeasurement]:
    print(f"  {nodes} nodes, {probe:g} s probes ...", flush=True)
    cli = measure_sweep(nodes, probe, path="cli", time_scale=TIME_SCALE)
    machine = measure_sweep(nodes, probe, path="state-machine", time_scale=TIME_SCALE, warm_up=True)
    # Each size as soon as it is measured: the whole section takes the better part of an hour, and
    # a run stopped half way keeps what it measured in its log.
    print(f"    CLI {_wall(cli)}, state machine {_wall(machine)}, throttled {_throttled(cli)} / {_throttled(machine)}")
    return cli, machine


def run() -> str:
    """Measure every size and probe time on both paths, plot, and report."""
    with _quiet_handlers():
        runs = {(n, p): _measure(n, p) for p in PROBE_SECONDS for n in sizes()}
    _plot(runs)
    rows = []
    for (n, probe), (c, m) in runs.items():
        first = f"{m.warm_up_wall_s:.1f} s ({m.warm_up_probes_at_once} at once)" if m.warm_up_wall_s else "-"
        rows.append(
            f"| {n} | {probe:g} s | {_wall(c)} | {_wall(m)} | {_phase(m)} | {m.probes_at_once} | {first} "
            f"| {_throttled(c)} / {_throttled(m)} | {c.probe_throttles}, {c.probe_retries} / "
            f"{m.probe_throttles}, {m.probe_retries} | {c.nodes_probed}/{m.nodes_probed} "
            f"| {c.nodes_unreachable}/{m.nodes_unreachable} | {c.nodes_skipped}/{m.nodes_skipped} |"
        )
    calls = []
    for (nodes, probe), (c, m) in runs.items():
        if probe != PROBE_SECONDS[0]:
            continue
        own = {
            op: count for op, count in m.api_calls_by_operation.items() if op.split(":", 1)[0] not in CLUSTER_SERVICES
        }
        calls.append(
            f"| {nodes} | {_calls(c)} | {c.api_calls} | {_calls(m)} | {sum(own.values())} "
            f"({', '.join(f'{op} {n}' for op, n in own.items())}) |"
        )
    measured = [x for pair in runs.values() for x in pair]
    worst_cli = max(c.ratio_to_bound for c, _ in runs.values())
    worst_machine = max(m.ratio_to_bound for _, m in runs.values())
    worst_throttled = max(x.throttled_share for x in measured)
    unreachable = sum(x.nodes_unreachable for x in measured)
    skipped = sum(x.nodes_skipped for x in measured)
    met = (
        max(worst_cli, worst_machine) <= TARGET_RATIO
        and worst_throttled < TARGET_THROTTLED
        and unreachable == 0
        and skipped == 0
        and set(sizes()) == set(SIZES)
    )
    ran = ", ".join(f"{n:,}" for n in sizes())
    k = TIME_SCALE
    return (
        f"Synthetic healthy EKS clusters of ml.p5.48xlarge nodes ({ran} nodes), every probe taking 2 s or 20 s "
        "(`hyperpod-nccl bench sweep --nodes N --probe-latency S [--path state-machine]` runs one, unscaled), "
        "against the strict emulation: StartSession 3/s with a burst of 3 and FilterLogEvents 5/s per account "
        "(ThrottlingException past them), every Lambda invocation in a sandbox process of its own, Express "
        "children stopped at 5 minutes. CLI: `diagnose --sample-nodes all` in its own process, "
        f"{thresholds.SSM_PROBE_WORKERS} probes at once, paced by its in-process pacer at `--start-session-rate`; "
        "state machine: the deployed definition executed by the emulation's Step Functions, every ProbeNode "
        "pacing through the table-backed shared pacer, from the schedule tick to the end of the execution "
        "(Notify included). Both run the real SSM client against the protocol-faithful simulated agent (each "
        "session streams the full p5 probe output).\n\n"
        + _scaling(k)
        + "Bound: max(N / rate + one probe, ceil(N / probes at once) x one probe) (the issue's max(N / rate, "
        "N x probe / probes at once) + one probe counts the last probe twice where the concurrency binds, so it "
        "is above what a sweep can reach: 16 nodes of 20 s probes, 16 at once, take one probe, not two), with the "
        "concurrency each path had: the "
        f"CLI's {thresholds.SSM_PROBE_WORKERS} workers; for the state machine what Discover chose "
        "(`batches_at_once` x the nodes a child probes at once, from the execution's Discover output), sized "
        "from the previous sweep's p90 probe time plus the slots a batch leaves idle (`BATCH_IDLE_SLOTS`), or "
        "all at once where one round of the rate covers the cluster (`runs_in_one_round`). "
        "SM probe Map alone: the probe Map state's own time in the execution's history; the rest of the "
        "state machine's wall is its fixed stages (the trigger, Discover, Aggregate, Notify), which neither "
        "the pace nor the concurrency shortens and which weigh most on small clusters. "
        "Each state-machine run is the cluster's second sweep: the "
        f"first (shown, sized from `EXPECTED_PROBE_SECONDS` = {EXPECTED_PROBE_SECONDS:g} s, unscaled, capped at "
        f"mapMaxConcurrency {DEFAULT_MAP_MAX_CONCURRENCY}) warms it up, then the shared pace's cooldown is waited "
        "out if that sweep was throttled (a scheduled sweep comes a cadence later). Throttled: the emulation's "
        "own counts of StartSession calls its rate refused, of all it received; throttles and retries: what "
        "the probes recorded (`NodeProbeResult.throttles`, `retries`).\n\n"
        f"![sweep wall time vs nodes](docs/{PLOT.name})\n\n"
        "| nodes | probe | CLI wall / bound | state machine wall / bound | SM probe Map alone / bound "
        "| SM probes at once | SM first sweep "
        "| StartSession throttled CLI / SM | throttles, retries CLI / SM | probed CLI/SM | unreachable CLI/SM "
        "| not probed CLI/SM |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        + "\n".join(rows)
        + f"\n\nTargets (within {TARGET_RATIO}x of the bound on both paths at {', '.join(f'{n:,}' for n in SIZES)} "
        f"nodes with 2 s and 20 s probes, under {TARGET_THROTTLED:.0%} of StartSession calls throttled, no healthy "
        f"node unreachable or not probed): **{'met' if met else 'MISSED'}** (worst: CLI {worst_cli:.2f}x, state "
        f"machine {worst_machine:.2f}x, throttled {worst_throttled:.1%}, {unreachable} unreachable, {skipped} not "
        f"probed{'' if set(sizes()) == set(SIZES) else f'; sizes run: {ran} only'}). The original serial design "
        f"would take N x S (a 1,024-node sweep of 2 s probes: {1024 * 2 / 60:.0f} minutes unscaled; at the 180 s "
        f"budget per node, {1024 * thresholds.SSM_NODE_BUDGET_SECONDS / 3600:.0f} hours).\n\n"
        "### AWS calls per sweep (2 s probes)\n\n"
        "| nodes | CLI: ListClusterNodes pages | CLI: StartSession | CLI: other control plane | CLI total "
        "| state machine: ListClusterNodes pages | state machine: StartSession | state machine: other control plane "
        "| state machine: the monitor's own calls |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
        + "\n".join(calls)
        + "\n\nListing is one `ListClusterNodes` page per 100 nodes; the rest of the control plane (DescribeCluster, "
        "ListClusterEvents, DescribeSecurityGroups, EKS DescribeCluster, STS, the log group lookup) is a constant "
        "handful per sweep. The only per-node AWS call is `ssm:StartSession`, one per node plus one per throttled "
        "call retried, which is the probe itself. The monitor's own calls grow with N by design: per node it "
        "reserves its start in the table's shared pace (one conditional UpdateItem, more when contended or slowed), "
        "reads the sweep's request and the node's target and writes its result; Lambda invocations made by Step "
        "Functions do not pass through the emulation's HTTP front and are counted in the cost section instead."
    )


def _scaling(k: float) -> str:
    """What the section's time scale means for its figures."""
    if k == 1:
        return (
            "**Unscaled**: AWS's own rates (StartSession 3/s, FilterLogEvents 5/s; the product's pace "
            f"{thresholds.SSM_START_SESSION_PER_SECOND:g}/s and {thresholds.LOG_FILTER_CALLS_PER_SECOND:g}/s), "
            "every probe its full S seconds, every time below in AWS seconds. What the emulation adds that AWS "
            "would not (its Lambda dispatch and sandbox start, moto's Step Functions and DynamoDB on the same two "
            "cores as every Lambda sandbox and simulated agent) weighs as it would at scale on AWS, not more. "
            "The earlier runs at k = 2 (rates doubled, probes halved) weighed those fixed costs twice and put the "
            "state machine at 1.2-1.55x where unscaled runs of the same sizes stay under 1.2x. Unscaled, a "
            "4,096-node sweep takes 23 minutes at 3/s (the CLI's 16 workers with 20 s probes 85 minutes), so "
            "1,024 and 4,096 nodes run only when `BENCH_SWEEP_SIZES` names them. The pacer's throttle rules are "
            f"counted in start intervals ({THROTTLE_RECUR_STARTS} to recur, {THROTTLE_COOLDOWN_STARTS} at half the "
            "pace).\n\n"
        )
    return (
        f"**Time-scaled by k = {k:g}**: the emulation's rates and the product's paces are {k:g}x AWS's "
        f"(StartSession {3 * k:g}/s, FilterLogEvents {5 * k:g}/s; the product's pace "
        f"{thresholds.SSM_START_SESSION_PER_SECOND * k:g}/s and {thresholds.LOG_FILTER_CALLS_PER_SECOND * k:g}/s; "
        f"bursts are counts and stay), each probe takes S / {k:g}, and every time below is in those scaled "
        f"seconds (x {k:g} for AWS time). At k = 5 two shared cores fell behind on the state-machine path (one "
        "process serves the emulation, moto, Step Functions, DynamoDB and the throttling bucket, to every Lambda "
        "sandbox and simulated agent: it reached 5-8 starts/s of 15), and its throttles came from requests "
        "reaching the bucket late and bunched, not from the product's pace. What is not scaled weighs k times "
        "more than on AWS, so each ratio is pessimistic: Lambda dispatch and sandbox start, the emulation's and "
        "DynamoDB's latency, the collectors and Aggregate (a few seconds per sweep), the network jitter the "
        f"account's bucket of 3 absorbs (2 intervals: {2 / (3 * k) * 1000:.0f} ms scaled, 667 ms on AWS). The "
        f"pacer's throttle rules are counted in start intervals ({THROTTLE_RECUR_STARTS} to recur, "
        f"{THROTTLE_COOLDOWN_STARTS} at half the pace), so they scale with the rate.\n\n"
    )
