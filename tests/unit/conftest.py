"""Unit tests are pure: a test here that binds or connects a socket fails (tests/README.md).

A test that needs the loopback AWS emulation, the simulated SSM agent or the Kubernetes API
emulation belongs in tests/functional/. The guard refuses `bind`, `connect` and `connect_ex` from
the test's thread and from any thread the test starts; threads that were already running (a
server a functional test left in this worker process) are let through, since they are not this
test's doing.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

GUARDED = ("bind", "connect", "connect_ex")
ATTEMPTS = pytest.StashKey[list[str]]()


class SocketInUnitTest(BaseException):
    """Raised at the socket call. A BaseException, so that product code catching OSError (or
    Exception) to report an unreachable endpoint cannot swallow it and let the test pass."""


@pytest.fixture(autouse=True)
def _no_sockets(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[None]:
    bystanders = {thread.ident for thread in threading.enumerate()} - {threading.get_ident()}
    attempts = request.node.stash.setdefault(ATTEMPTS, [])

    def refuse(name: str) -> Callable[..., Any]:
        original = getattr(socket.socket, name)

        def guarded(self: socket.socket, address: Any, *args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() in bystanders:
                return original(self, address, *args, **kwargs)
            attempts.append(f"socket.{name}({address!r})")
            raise SocketInUnitTest(
                f"{request.node.nodeid} called socket.{name}({address!r}): unit tests open no sockets; "
                "move it to tests/functional/ (tests/README.md)"
            )

        return guarded

    for name in GUARDED:
        monkeypatch.setattr(socket.socket, name, refuse(name))
    yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Fail a test that passed although it tried a socket: the code under test caught the refusal,
    or met it in a thread it started."""
    report = yield
    attempts = item.stash.get(ATTEMPTS, [])
    if report.when == "call" and report.passed and attempts:
        report.outcome = "failed"
        report.longrepr = f"unit test opened sockets: {', '.join(attempts)}; move it to tests/functional/"
    return report
