"""The cost model's arithmetic: list prices times counted usage, Express rounding, monthly cadence."""

from __future__ import annotations

import pytest

from tests.bench import pricing


def test_standard_transitions_are_priced_per_thousand() -> None:
    cost = pricing.cost_of(pricing.SweepUsage(standard_transitions=4000, traces=0))
    assert cost.step_functions_standard == pytest.approx(0.10)
    assert cost.total == pytest.approx(0.10)


def test_lambda_is_priced_by_memory_seconds_and_requests() -> None:
    usage = pricing.SweepUsage(
        standard_transitions=0,
        traces=0,
        lambdas=[pricing.LambdaUsage(function="probe_node", invocations=1000, billed_seconds=2000.0, memory_mb=128)],
    )
    cost = pricing.cost_of(usage)
    # 2000 s x 0.125 GB = 250 GB-s on Arm; 1000 requests.
    assert cost.lambda_compute == pytest.approx(250 * 0.0000133334)
    assert cost.lambda_requests == pytest.approx(0.0002)


def test_express_duration_rounds_up_to_100_ms_and_memory_to_64_mb_chunks() -> None:
    assert pricing.express_billed_seconds(7.01) == pytest.approx(7.1)
    assert pricing.express_billed_seconds(7.0) == pytest.approx(7.0)
    assert pricing.express_billed_seconds(0.0) == pytest.approx(0.1)
    assert pricing.express_billed_memory_mb(50.1) == 64
    assert pricing.express_billed_memory_mb(65) == 128
    usage = pricing.SweepUsage(
        standard_transitions=0, traces=0, express=pricing.ExpressUsage(executions=2, billed_seconds=32.0, memory_mb=64)
    )
    cost = pricing.cost_of(usage)
    assert cost.step_functions_express == pytest.approx(2 * 1e-6 + 32 * 0.0625 * 0.00001667)


def test_dynamodb_sns_logs_and_xray() -> None:
    usage = pricing.SweepUsage(
        standard_transitions=0,
        dynamodb_write_units=1_000_000,
        dynamodb_read_units=1_000_000,
        sns_publishes=2_000_000,
        log_bytes=2 * 1024**3,
        traces=1_000_000,
    )
    cost = pricing.cost_of(usage)
    assert cost.dynamodb == pytest.approx(0.625 + 0.125)
    assert cost.sns == pytest.approx(1.0)
    assert cost.logs == pytest.approx(1.0)
    assert cost.xray == pytest.approx(5.0)


def test_fifteen_minute_cadence_is_2880_sweeps_a_month() -> None:
    assert pricing.sweeps_per_month(15 * 60) == pytest.approx(2880)
    cost = pricing.cost_of(pricing.SweepUsage(standard_transitions=40, traces=0))
    assert cost.monthly(15 * 60) == pytest.approx(40 * 0.000025 * 2880)


def test_kms_key_fee_grows_with_rotations_up_to_the_second() -> None:
    assert pricing.kms_key_month(0) == pytest.approx(1.0)
    assert pricing.kms_key_month(1) == pytest.approx(2.0)
    assert pricing.kms_key_month(5) == pytest.approx(3.0)


def test_alarms_are_billed_per_metric_read_and_by_resolution() -> None:
    assert pricing.alarm_month(3, 300) == pytest.approx(0.30)
    assert pricing.alarm_month(1, 10) == pytest.approx(0.30)
    assert pricing.alarm_month(1, 60) == pytest.approx(0.10)


def test_dashboards_beyond_the_free_ones() -> None:
    assert pricing.dashboards_month(1, free_left=0) == pytest.approx(3.0)
    assert pricing.dashboards_month(1, free_left=3) == 0.0


def test_sns_kms_requests_are_capped_by_the_data_key_reuse_period() -> None:
    month = pricing.SECONDS_PER_MONTH
    # SNS's own example: one publisher publishing all the time, 5-minute reuse.
    assert pricing.sns_kms_requests(1e9, 1, month) == pytest.approx(2 * month / 300)
    # Two publishes a month cost two data keys each, not a key per reuse period.
    assert pricing.sns_kms_requests(2, 1, month) == pytest.approx(4)
