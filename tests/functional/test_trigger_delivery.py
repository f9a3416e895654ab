"""No event is lost between EventBridge and the first state (issue 15, point 3).

EventBridge rules and Scheduler invoke the trigger asynchronously and are done once Lambda has
queued the event; `LocalMonitor.deliver` does the same through the emulated Lambda, which retries a
failed trigger as many times as its event invoke configuration says (`TRIGGER_RETRY_ATTEMPTS`, as
infra deploys it) and sends the record of an event that failed every attempt to the failed-triggers
queue. The trigger is idempotent by event id: a retry starts nothing an earlier attempt started.
Every failure here is a fault of the emulated AWS; what is asserted is what the monitor did with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from hyperpod_nccl.monitor.settings import TRIGGER_MAX_EVENT_AGE_SECONDS, TRIGGER_RETRY_ATTEMPTS
from hyperpod_nccl.monitor.store import TRIGGER
from hyperpod_nccl_sim.scenario import FaultSpec
from hyperpod_nccl_sim.serverless import SDK_MAX_ATTEMPTS, LocalMonitor
from tests.functional.test_monitor_sweep import _event, _store, _sweep_records, monitor  # noqa: F401 - fixture


def _until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def _only_sweep(deployed: LocalMonitor) -> str:
    """The one execution of the sweep state machine, run to its end: its status."""
    [execution] = deployed.executions()
    return deployed.wait(execution["executionArn"]).status


def test_a_trigger_throttled_by_step_functions_is_retried_and_sweeps_once(simulate, monitor) -> None:  # noqa: F811
    simulation = simulate("eks-p5")
    deployed = monitor(simulation)
    event = _event("accept-node-health-unhealthy.json", InstanceId=simulation.instance_id("worker:5"))
    # Step Functions throttles StartExecution through every attempt but the last (each SDK retry too).
    deployed.emulation.faults.add_fault(
        FaultSpec(
            operation="states:StartExecution",
            error_code="ThrottlingException",
            message="Rate exceeded",
            times=TRIGGER_RETRY_ATTEMPTS * SDK_MAX_ATTEMPTS,
        )
    )
    delivery = deployed.deliver(event).wait()
    assert delivery.outcome == "succeeded" and delivery.attempts == 1 + TRIGGER_RETRY_ATTEMPTS
    assert _only_sweep(deployed) == "SUCCEEDED"
    assert len(_sweep_records(deployed)) == 1
    seen = _store(deployed).trigger_seen(deployed.region, simulation.scenario.cluster.name, event["id"])
    assert seen is not None and seen["status"] == "started"
    assert deployed.drain_failed_triggers() == []


def test_an_event_that_fails_every_attempt_is_kept_whole_in_the_failed_triggers_queue(simulate, monitor) -> None:  # noqa: F811
    simulation = simulate("eks-p5")
    deployed = monitor(simulation)
    cluster = simulation.scenario.cluster.name
    event = _event("accept-state-change-failed.json")
    deployed.emulation.faults.add_fault(
        FaultSpec(operation="states:StartExecution", error_code="AccessDeniedException", message="not authorized")
    )
    delivery = deployed.deliver(event).wait()
    assert delivery.outcome == "failed"
    assert deployed.executions() == []
    assert _store(deployed).lock(deployed.region, cluster) is None  # a failed start leaves no lock behind
    # Lambda's invocation record: the event as it arrived, what failed, after how many attempts.
    [record] = deployed.drain_failed_triggers()
    assert record["requestPayload"] == event
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 1 + TRIGGER_RETRY_ATTEMPTS
    assert record["requestContext"]["functionArn"].startswith(deployed.function_arns["trigger"])
    assert record["responseContext"]["functionError"] == "Unhandled"
    assert record["responsePayload"]["errorType"] == "AwsCallFailed"
    assert "states:StartExecution" in record["responsePayload"]["errorMessage"]
    # Once the cause is fixed, the kept event re-sent as it is sweeps the cluster, once.
    deployed.emulation.faults.set_faults([])
    assert deployed.deliver(record["requestPayload"]).wait().outcome == "succeeded"
    assert _only_sweep(deployed) == "SUCCEEDED"
    assert len(_sweep_records(deployed)) == 1


def test_a_retry_after_its_sweep_started_keeps_what_was_folded_in_and_sweeps_nothing_twice(simulate, monitor) -> None:  # noqa: F811
    simulation = simulate("eks-p5")
    deployed = monitor(simulation, async_retry_delay_seconds=1.0)
    cluster = simulation.scenario.cluster.name
    first = _event("accept-node-health-unhealthy.json", InstanceId=simulation.instance_id("worker:5"))
    second = _event("accept-state-change-failed.json")
    # The first attempt starts the sweep, then DynamoDB fails its write of the event's trigger record.
    deployed.emulation.faults.add_fault(
        FaultSpec(
            operation="dynamodb:PutItem",
            error_code="InternalServerError",
            http_status=500,
            times=SDK_MAX_ATTEMPTS,
            request_contains=f"{TRIGGER}{first['id']}",
        )
    )
    delivery = deployed.deliver(first)
    _until(lambda: delivery.attempts >= 1)
    assert len(deployed.executions()) == 1
    # Before Lambda retries it, another event folds into the sweep the failed attempt started.
    [folded] = deployed.trigger(second)["outcomes"]
    assert folded["status"] == "folded"
    delivery.wait()
    assert delivery.outcome == "succeeded" and delivery.attempts == 2
    assert _only_sweep(deployed) == "SUCCEEDED"
    # The first event's sweep and one follow-up for the second: the retry neither dropped the
    # folded event (by taking the lock afresh) nor folded itself in (a second sweep of its own).
    records = _sweep_records(deployed)
    assert len(records) == 2
    [follow_up] = [r for r in records if r["sweep_id"].endswith("-f1")]
    assert follow_up["triggers"] == [second["id"]]
    seen = _store(deployed).trigger_seen(deployed.region, cluster, first["id"])
    assert seen is not None and seen["status"] == "started"
    assert deployed.drain_failed_triggers() == []


def test_an_event_older_than_its_maximum_age_is_kept_in_the_failed_triggers_queue_unrun(simulate, monitor) -> None:  # noqa: F811
    # Behind a throttled function an event can wait in Lambda's queue; once it is older than the
    # trigger's MaximumEventAgeInSeconds (as infra deploys it), Lambda drops it without running it
    # and the on-failure destination is the only place it is kept.
    simulation = simulate("eks-p5")
    deployed = monitor(simulation)
    event = _event("accept-state-change-failed.json")
    delivery = deployed.deliver(event, queued_seconds=TRIGGER_MAX_EVENT_AGE_SECONDS + 1).wait()
    assert delivery.outcome == "failed" and delivery.attempts == 0
    assert deployed.executions() == []
    [record] = deployed.drain_failed_triggers()
    assert record["requestPayload"] == event
    assert record["requestContext"]["condition"] == "EventAgeExceeded"
    assert record["requestContext"]["approximateInvokeCount"] == 0


def test_an_event_that_ages_out_between_retries_is_kept_after_the_attempts_it_had(simulate, monitor) -> None:  # noqa: F811
    # The first attempt fails; Lambda's wait before the retry carries the event past its maximum
    # age, so the retry never runs and the record says so after one attempt.
    simulation = simulate("eks-p5")
    deployed = monitor(simulation, async_retry_delay_seconds=1.5)
    event = _event("accept-state-change-failed.json")
    deployed.emulation.faults.add_fault(
        FaultSpec(operation="states:StartExecution", error_code="AccessDeniedException", message="not authorized")
    )
    delivery = deployed.deliver(event, queued_seconds=TRIGGER_MAX_EVENT_AGE_SECONDS - 1).wait()
    assert delivery.outcome == "failed" and delivery.attempts == 1
    [record] = deployed.drain_failed_triggers()
    assert record["requestContext"]["condition"] == "EventAgeExceeded"
    assert record["requestContext"]["approximateInvokeCount"] == 1
    assert record["responsePayload"]["errorType"] == "AwsCallFailed"


def test_a_schedule_tick_is_delivered_asynchronously_and_retried_like_scheduler_delivers_it(simulate, monitor) -> None:  # noqa: F811
    # `LocalMonitor.sweep`, which most tests and every bench sweep use, starts its sweep through
    # Lambda's asynchronous queue: a tick whose first attempt fails still sweeps, once.
    deployed = monitor(simulate("healthy-eks"))
    deployed.emulation.faults.add_fault(
        FaultSpec(
            operation="states:StartExecution",
            error_code="ThrottlingException",
            message="Rate exceeded",
            times=SDK_MAX_ATTEMPTS,
        )
    )
    run = deployed.sweep("tick-throttled")
    assert run.status == "SUCCEEDED"
    [handled] = [d for d in deployed.async_invocations if d.event.get("id") == "tick-throttled"]
    assert handled.outcome == "succeeded" and handled.attempts == 2
    assert len(deployed.executions()) == 1
    assert deployed.drain_failed_triggers() == []
