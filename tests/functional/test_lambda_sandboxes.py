"""The emulated Lambda runs each invocation in a sandbox of its function, as Lambda does: no module
state shared between concurrent invocations, warm reuse of an idle sandbox, a sandbox stopped at
its timeout (nothing it does afterwards reaches anything), a dead process answered as
Runtime.ExitError, and the function's log lines kept (hyperpod_nccl_sim/sandboxes.py)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from hyperpod_nccl_sim.sandboxes import SANDBOX_TIMED_OUT, LambdaContext, SandboxPool

HANDLERS = "tests.functional.sandbox_handlers"


def _context() -> LambdaContext:
    return LambdaContext(
        "sandbox-test", "arn:aws:lambda:us-west-2:123456789012:function:sandbox-test", str(uuid.uuid4())
    )


def _invoke(pool: SandboxPool, handler: str, event: dict[str, Any], timeout: float = 20.0) -> Any:
    return pool.invoke(f"{HANDLERS}.{handler}", json.dumps(event).encode(), _context(), timeout)


@pytest.fixture
def pool() -> Any:
    deployed = SandboxPool()
    yield deployed
    deployed.close()


def test_concurrent_invocations_share_no_module_state_and_an_idle_sandbox_is_reused(pool) -> None:  # type: ignore[no-untyped-def]
    answers: list[Any] = []

    def invoke() -> None:
        answers.append(_invoke(pool, "count", {"hold": 1.0}))

    threads = [threading.Thread(target=invoke) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results = [json.loads(a.payload) for a in answers]
    # Three at once: three sandboxes, each on its first invocation (no shared counter).
    assert len({r["pid"] for r in results}) == 3
    assert [r["invocations"] for r in results] == [1, 1, 1]
    assert all(a.cold for a in answers)
    # The next one finds an idle sandbox: a warm start keeps that sandbox's module state.
    warm = _invoke(pool, "count", {})
    assert not warm.cold
    again = json.loads(warm.payload)
    assert again["pid"] in {r["pid"] for r in results} and again["invocations"] == 2
    assert pool.cold_starts == {f"{HANDLERS}.count": 3}


def test_the_context_counts_down_from_the_handlers_start(pool) -> None:  # type: ignore[no-untyped-def]
    result = json.loads(_invoke(pool, "count", {}, timeout=7.0).payload)
    assert 6000 < result["remaining_ms"] <= 7000


def test_a_sandbox_at_its_timeout_is_stopped_and_writes_nothing_more(pool, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    late = tmp_path / "late"
    started = time.monotonic()
    answer = _invoke(pool, "write_after", {"hold": 1.5, "path": str(late)}, timeout=0.5)
    assert time.monotonic() - started < 1.4
    assert answer.timed_out and answer.function_error == "Unhandled"
    error = json.loads(answer.payload)
    assert error["errorType"] == SANDBOX_TIMED_OUT and "Task timed out after 0.50 seconds" in error["errorMessage"]
    time.sleep(1.5)
    assert not late.exists()  # the process was stopped, not left running on a thread
    # A stopped sandbox is never reused: the next invocation is a cold start.
    assert _invoke(pool, "count", {}).cold


def test_a_sandbox_whose_process_dies_answers_runtime_exit_error(pool) -> None:  # type: ignore[no-untyped-def]
    answer = _invoke(pool, "exit_process", {})
    error = json.loads(answer.payload)
    assert answer.function_error == "Unhandled" and error["errorType"] == "Runtime.ExitError"
    assert "exit status 3" in error["errorMessage"]


def test_the_function_sees_the_environment_of_its_invocation(pool, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SANDBOX_TEST_VALUE", "first")
    assert json.loads(_invoke(pool, "environment", {"name": "SANDBOX_TEST_VALUE"}).payload) == {"value": "first"}
    monkeypatch.delenv("SANDBOX_TEST_VALUE")
    assert json.loads(_invoke(pool, "environment", {"name": "SANDBOX_TEST_VALUE"}).payload) == {"value": None}


def test_what_the_function_prints_is_kept(pool, capsys) -> None:  # type: ignore[no-untyped-def]
    _invoke(pool, "count", {"tag": "log-line-7f3"})
    assert "log-line-7f3" in capsys.readouterr().out


def test_threads_mode_shares_this_process(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The opt-out for tests that monkeypatch the product: one process, so a planted change is seen.
    from tests.functional import sandbox_handlers

    monkeypatch.setattr(sandbox_handlers, "INVOCATIONS", 41)
    threads = SandboxPool(mode="threads")
    assert json.loads(_invoke(threads, "count", {}).payload)["invocations"] == 42


def _invoke_into(answers: list[Any], *args: Any) -> None:
    answers.append(_invoke(*args))


def test_closing_the_pool_while_invocations_run_or_end_raises_nothing_and_leaves_no_process() -> None:
    # The stack torn down while Lambdas are still running (a sweep whose children were stopped
    # leaves probes running): the pool's close and each invocation's own end discard the same
    # sandboxes at once. Some invocations end at their timeout just as close runs, some finish in
    # time and would go back to the idle list of a pool that is gone.
    for _ in range(3):
        pool = SandboxPool()
        answers: list[Any] = []
        threads = [
            threading.Thread(target=_invoke_into, args=(answers, pool, "count", {"hold": 0.4}, timeout))
            for timeout in (0.3, 0.35, 0.4, 2.0)
        ]
        for thread in threads:
            thread.start()
        time.sleep(0.3)
        pool.close()
        for thread in threads:
            thread.join(10)
        assert len(answers) == 4
        with pool._lock:
            left = list(pool._all) + [s for idle in pool._idle.values() for s in idle]
        assert left == []
        for answer in answers:  # every invocation still gets an answer, whatever it is
            assert answer.payload
