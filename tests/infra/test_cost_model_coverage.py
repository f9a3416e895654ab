"""The cost model (tests/bench/bench_cost.py) prices every billed resource the stack deploys: each
CloudFormation type of the synthesized template is either billed by a line of the model or listed
as free with its reason, and the model reads the template's alarms, key and dashboard as deployed."""

from __future__ import annotations

from hyperpod_nccl_sim.synthetic import SweepMeasurement
from tests.bench import bench_cost
from tests.bench._sweeps import StateMachineRun
from tests.infra.conftest import Synthesized


def _small_run() -> StateMachineRun:
    """A counted sweep of a few nodes, enough for the model to produce its lines (no emulation)."""
    measurement = SweepMeasurement(
        nodes=2,
        path="state-machine",
        probe_latency_s=2.0,
        wall_s=10.0,
        bound_s=1.0,
        serial_s=4.0,
        api_calls=10,
        api_calls_by_operation={"ssm:StartSession": 2, "dynamodb:PutItem": 3},
        nodes_probed=2,
        nodes_unreachable=0,
    )
    return StateMachineRun(
        measurement=measurement,
        parent_transitions=10,
        parent_event_bytes=5000,
        parent_events=20,
        child_seconds=[4.0],
        lambda_seconds={"probe_node": 6.0, "aggregate": 1.0},
        lambda_invocations={"probe_node": 2, "aggregate": 1},
        table_item_bytes=[800, 1500],
        notifications=1,
        item_lifetimes=[(800, 3600.0), (1500, None)],
        log_bytes_by_function={"probe_node": 1200},
    )


def test_every_resource_type_of_the_template_is_billed_or_known_free(synthesized: Synthesized) -> None:
    deployed = {resource["Type"] for resource in synthesized.template["Resources"].values()}
    billed, free = set(bench_cost.BILLED_RESOURCE_TYPES), set(bench_cost.UNBILLED_RESOURCE_TYPES)
    assert not billed & free, f"both billed and free: {sorted(billed & free)}"
    unpriced = deployed - billed - free
    assert not unpriced, f"resource types the cost model neither bills nor lists as free: {sorted(unpriced)}"


def test_every_billed_type_names_a_line_the_model_produces(synthesized: Synthesized) -> None:
    stack = bench_cost.inventory(synthesized.template)
    lines = {item.name for item in bench_cost.monthly_items(_small_run(), stack, 15 * 60)}
    missing = {t: name for t, name in bench_cost.BILLED_RESOURCE_TYPES.items() if name not in lines}
    assert not missing, f"billed types whose line the model does not produce: {missing}"


def test_the_model_reads_alarms_keys_and_dashboards_as_the_template_deploys_them(synthesized: Synthesized) -> None:
    stack = bench_cost.inventory(synthesized.template)
    alarms = synthesized.resources("AWS::CloudWatch::Alarm")
    assert len(stack.alarms) == len(alarms)
    # A metric-math alarm is billed per metric it reads, not once.
    read = sum(max(1, sum(1 for q in a["Properties"].get("Metrics", []) if "MetricStat" in q)) for a in alarms.values())
    assert sum(a.metrics for a in stack.alarms) == read
    assert stack.customer_keys == len(synthesized.resources("AWS::KMS::Key"))
    assert stack.dashboards == len(synthesized.resources("AWS::CloudWatch::Dashboard"))
    assert stack.memory_mb.keys() == {
        p["Properties"]["Handler"].split(".")[-2] for p in synthesized.resources("AWS::Lambda::Function").values()
    }
    by_name = {item.name: item for item in bench_cost.monthly_items(_small_run(), stack, 15 * 60)}
    assert by_name["KMS key (customer managed)"].usd >= stack.customer_keys * 1.0
    assert by_name["CloudWatch alarms"].usd > 0


# The lines priced from what a sweep used rather than from a resource of the template: a test per
# template type cannot see one of them dropped, so each is named here and must cost something for a
# sweep that used it (the small run starts sandboxes, logs, emits metrics, writes and notifies).
USAGE_PRICED_LINES = (
    bench_cost.PROBE_COMPUTE_ITEM,
    bench_cost.EXPRESS_CHILDREN_ITEM,
    "Step Functions Standard (transitions)",
    "Lambda compute: the other functions",
    "Lambda INIT (cold starts)",
    "Lambda requests",
    "DynamoDB writes (table)",
    "DynamoDB reads",
    "DynamoDB storage + PITR",
    "KMS requests",
    "SNS publishes",
    "SNS e-mail deliveries",
    "CloudWatch Logs ingestion",
    "CloudWatch Logs storage",
    "CloudWatch custom metrics (EMF)",
    "EventBridge Scheduler invocations",
)


def test_every_usage_priced_line_is_produced_and_costs_what_the_sweep_used(synthesized: Synthesized) -> None:
    stack = bench_cost.inventory(synthesized.template)
    run = _small_run()
    run.cold_starts = {"probe_node": 2, "aggregate": 1}
    run.metric_series = {("HyperPodNccl", "NodesProbed", (("Cluster", "c"),))}
    by_name = {item.name: item for item in bench_cost.monthly_items(run, stack, 15 * 60)}
    missing = [name for name in USAGE_PRICED_LINES if name not in by_name]
    assert not missing, f"usage-priced lines the model no longer produces: {missing}"
    free = [name for name in USAGE_PRICED_LINES if by_name[name].usd <= 0]
    assert not free, f"usage-priced lines that cost nothing for a sweep that used them: {free}"
