"""The unit layer's guard (tests/unit/conftest.py) refuses sockets: a test that opens one fails."""

from __future__ import annotations

import socket
import threading

import pytest

from tests.unit.conftest import ATTEMPTS, SocketInUnitTest


def test_connect_and_bind_are_refused_even_where_oserror_is_caught(request: pytest.FixtureRequest) -> None:
    with socket.socket() as sock, pytest.raises(SocketInUnitTest):
        sock.connect(("127.0.0.1", 9))
    with socket.socket() as sock, pytest.raises(SocketInUnitTest):
        sock.bind(("127.0.0.1", 0))
    # Product code that turns OSError into "endpoint unreachable" must not hide the refusal.
    assert not issubclass(SocketInUnitTest, Exception)
    assert request.node.stash[ATTEMPTS] == ["socket.connect(('127.0.0.1', 9))", "socket.bind(('127.0.0.1', 0))"]
    request.node.stash[ATTEMPTS].clear()  # the refusals were this test's point; let it pass


def test_a_thread_the_test_starts_is_refused_too(request: pytest.FixtureRequest) -> None:
    refused: list[BaseException] = []

    def connect() -> None:
        with socket.socket() as sock:
            try:
                sock.connect_ex(("127.0.0.1", 9))
            except SocketInUnitTest as error:
                refused.append(error)

    thread = threading.Thread(target=connect)
    thread.start()
    thread.join(timeout=5)
    assert len(refused) == 1
    assert request.node.stash[ATTEMPTS] == ["socket.connect_ex(('127.0.0.1', 9))"]
    request.node.stash[ATTEMPTS].clear()
