"""Lambda execution environments of the emulation: every invocation runs in a sandbox of its own
function, a separate process, as Lambda runs it.

What Lambda does and this module does too (AWS Lambda Developer Guide, "Lambda execution
environment lifecycle" and "Understanding Lambda function scaling"):

- **One invocation at a time per sandbox.** A function invoked while all its sandboxes are busy
  gets a new one (a cold start: the init phase imports the handler module with the function's
  environment set); a sandbox whose invocation ended is reused for the next one (a warm start),
  keeping its module state. Two concurrent invocations never share memory: a module-global limiter
  or cache is per sandbox, as deployed.
- **The init phase has its own 10-second limit**; the function's timeout counts from the handler's
  start. A sandbox still running at its timeout is stopped (its process is killed, whatever its
  threads were doing) and never reused: the invocation's answer is the function error
  `Sandbox.Timedout` "Task timed out after N seconds"; what it wrote to AWS until then stays.
- **A sandbox whose process dies** (a crash, `os._exit`, a signal) answers `Runtime.ExitError`.
- Whatever the handler prints or logs (stdout and stderr, where Lambda's runtime captures it for
  CloudWatch Logs) is forwarded to this process's stdout after each invocation, so a test reads the
  functions' log lines as it would read their log group.

Sandboxes are forked from a fork server that imported the third-party libraries and the product's
packages once (`PRELOADED`), so a cold start costs what importing the handler module itself costs;
the handler module is imported in the sandbox, after its environment is set, as in Lambda's init.
botocore's data files come parsed from the fork server too (`parsed_models`): a sandbox's first
clients are cheaper than Lambda's, whose init pays the parse; the cold-start benchmark measures it.

Emulation gaps: the function's memory size is not enforced (a sandbox can grow past it instead of
failing with `Runtime.OutOfMemory`; the benchmarks measure peaks instead), Lambda's freeze of an
idle sandbox between invocations is not emulated (its background threads keep running), and
sandboxes are not recycled after hours as Lambda does.

`mode="threads"` runs every invocation on a thread of this process instead (the earlier emulation):
only for tests that plant a fault in the product's own code with monkeypatch, which a separate
process would not see; they say so.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Literal

from hyperpod_nccl.monitor.payloads import SANDBOX_TIMED_OUT

SandboxMode = Literal["processes", "threads"]
# Lambda's limit on the init phase of an on-demand function.
INIT_TIMEOUT_SECONDS = 10.0
# The function error of a sandbox whose process ended during an invocation.
EXIT_ERROR = "Runtime.ExitError"
# Imported once by the fork server: everything the handler modules import, but not the handler
# modules themselves (their import is the sandbox's init phase, with the function's environment).
PRELOADED = [
    "boto3",
    "botocore.session",
    "pydantic",
    "aws_lambda_powertools",
    "websockets.sync.client",
    "hyperpod_nccl.engine",
    "hyperpod_nccl.handlers",
    "hyperpod_nccl.monitor.lock",
    "hyperpod_nccl.monitor.states.aggregate",
    "hyperpod_nccl.monitor.states.collect",
    "hyperpod_nccl.monitor.states.discover",
    "hyperpod_nccl.monitor.states.notify",
    "hyperpod_nccl.monitor.states.probe_node",
    # Last: botocore's data files parsed once for every sandbox (parsed_models says why that is fair).
    "hyperpod_nccl_sim.fork_server_preload",
]
_context_lock = threading.Lock()
_context: Any = None


def _fork_context() -> Any:
    """The multiprocessing context whose fork server preloads `PRELOADED` (started on first use)."""
    global _context
    with _context_lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(PRELOADED)
            _context = context
        return _context


@dataclass
class LambdaContext:
    """What Lambda passes as `context` (the fields Powertools and the handlers read)."""

    function_name: str
    invoked_function_arn: str
    aws_request_id: str
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"
    deadline: float | None = None

    def get_remaining_time_in_millis(self) -> int:
        if self.deadline is None:
            return 300_000
        return max(0, int((self.deadline - time.monotonic()) * 1000))


@dataclass
class Answer:
    """One invocation's outcome: the payload Lambda returns (JSON bytes), its function error (None
    when the handler returned), whether it ran into the timeout, and whether it was a cold start."""

    payload: bytes
    function_error: str | None = None
    timed_out: bool = False
    cold: bool = False
    # The sandbox cannot serve another invocation (timed out, exited, failed its init).
    discard: bool = False


def _error(error_type: str, message: str) -> bytes:
    return json.dumps({"errorType": error_type, "errorMessage": message}).encode()


def timed_out_answer(request_id: str, timeout: float, *, cold: bool = False) -> Answer:
    """Lambda's answer to an invocation still running at its timeout."""
    message = f"RequestId: {request_id} Error: Task timed out after {timeout:.2f} seconds"
    return Answer(_error(SANDBOX_TIMED_OUT, message), "Unhandled", timed_out=True, cold=cold, discard=True)


def _handler_of(handler_path: str) -> Callable[[Any, Any], Any]:
    import importlib

    module, _, name = handler_path.rpartition(".")
    handler: Callable[[Any, Any], Any] = getattr(importlib.import_module(module), name)
    return handler


def _run_handler(handler: Callable[[Any, Any], Any], body: bytes, context: LambdaContext) -> Answer:
    """Call the handler as Lambda's Python runtime does: its JSON result, or its exception as a
    function error (`errorType` the exception's class name)."""
    try:
        payload = json.loads(body or b"{}")
        result = handler(payload, context)
        return Answer(json.dumps(result, default=str).encode())
    except Exception as error:  # noqa: BLE001 - becomes a Lambda function error, as in AWS
        return Answer(_error(type(error).__name__, str(error)), "Unhandled")


def _serve(connection: Connection, handler_path: str, log_path: str) -> None:
    """A sandbox's process: the init phase at the first request, then one invocation per request."""
    # What the runtime captures for CloudWatch Logs: both streams, into this sandbox's log file.
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    # The fork server ignores SIGINT for its children's sake; a sandbox ends when the emulation says.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    handler: Callable[[Any, Any], Any] | None = None
    while True:
        try:
            request = connection.recv()
        except EOFError:
            return
        os.environ.clear()
        os.environ.update(request["environment"])
        if handler is None:
            try:
                handler = _handler_of(handler_path)
            except Exception as error:  # noqa: BLE001 - Lambda's Runtime.ImportModuleError
                traceback.print_exc()
                connection.send(("init_failed", _error("Runtime.ImportModuleError", str(error))))
                return
            connection.send(("initialized", None))
        context = LambdaContext(**request["context"])
        context.deadline = time.monotonic() + float(request["timeout"])
        answer = _run_handler(handler, request["body"], context)
        sys.stdout.flush()
        sys.stderr.flush()
        connection.send(("answer", (answer.payload, answer.function_error)))


@dataclass
class _Sandbox:
    """The emulation's handle on one sandbox process."""

    process: Any
    connection: Connection
    log_path: str
    log_offset: int = 0
    initialized: bool = False
    # The pool's close() and an invocation's own end can both discard a sandbox at once; closing
    # the pipe twice would close a descriptor number another thread may already have reused.
    _stop_lock: threading.Lock = field(default_factory=threading.Lock)
    _stopped: bool = False

    def forward_logs(self) -> None:
        """Copy what the sandbox logged since the last call to this process's stdout."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self.log_offset)
                text = log.read()
        except OSError:
            return
        self.log_offset += len(text)
        if text:
            sys.stdout.write(text.decode("utf-8", "replace"))
            sys.stdout.flush()

    def stop(self) -> None:
        """End the process (Lambda discarding the environment) and keep its last log lines; once."""
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.connection.close()
        self.forward_logs()
        with contextlib.suppress(OSError):
            Path(self.log_path).unlink()


@dataclass
class SandboxPool:
    """Every sandbox of every function of one emulated stack; `invoke` is Lambda's Invoke.

    `environment()` gives the functions' environment at each invocation (the deployed functions'
    configuration; the emulation sets it on this process's environment)."""

    environment: Callable[[], dict[str, str]] = lambda: dict(os.environ)
    mode: SandboxMode = "processes"
    _idle: dict[str, list[_Sandbox]] = field(default_factory=dict)
    _all: list[_Sandbox] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Set by `close`: a sandbox still starting then is not kept (its invocation stops it at its end).
    _closed: bool = False
    # Cold starts by function (handler path): what the cost model bills as init time.
    cold_starts: dict[str, int] = field(default_factory=dict)

    def invoke(self, handler_path: str, body: bytes, context: LambdaContext, timeout: float) -> Answer:
        """Run one invocation of the function whose handler is `handler_path`, within `timeout`."""
        if self.mode == "threads":
            return _invoke_on_thread(handler_path, body, context, timeout)
        sandbox, cold = self._acquire(handler_path)
        keep = False
        try:
            answer = self._invoke_in(sandbox, body, context, timeout, cold)
            keep = not answer.discard
            return answer
        finally:
            if keep:
                sandbox.forward_logs()
                with self._lock:
                    keep = sandbox in self._all  # not when the pool was closed meanwhile
                    if keep:
                        self._idle.setdefault(handler_path, []).append(sandbox)
            if not keep:
                sandbox.stop()
                with self._lock:
                    if sandbox in self._all:
                        self._all.remove(sandbox)

    def _acquire(self, handler_path: str) -> tuple[_Sandbox, bool]:
        with self._lock:
            idle = self._idle.get(handler_path)
            if idle:
                return idle.pop(), False
            self.cold_starts[handler_path] = self.cold_starts.get(handler_path, 0) + 1
        descriptor, log_path = tempfile.mkstemp(prefix="lambda-sandbox-", suffix=".log")
        os.close(descriptor)
        parent, child = _fork_context().Pipe()
        process = _fork_context().Process(
            target=_serve, args=(child, handler_path, log_path), name=f"lambda-{handler_path}", daemon=True
        )
        process.start()
        child.close()
        sandbox = _Sandbox(process=process, connection=parent, log_path=log_path)
        with self._lock:
            # Forking takes a while under load: the pool may have been closed meanwhile.
            if not self._closed:
                self._all.append(sandbox)
        return sandbox, True

    def _invoke_in(self, sandbox: _Sandbox, body: bytes, context: LambdaContext, timeout: float, cold: bool) -> Answer:
        request = {
            "environment": self.environment(),
            "context": {k: v for k, v in vars(context).items() if k != "deadline"},
            "body": body,
            "timeout": timeout,
        }
        try:
            sandbox.connection.send(request)
            if not sandbox.initialized:
                if not sandbox.connection.poll(INIT_TIMEOUT_SECONDS):
                    message = (
                        f"RequestId: {context.aws_request_id} Error: init phase ran past {INIT_TIMEOUT_SECONDS:g} s"
                    )
                    return Answer(_error("Runtime.InitTimeout", message), "Unhandled", cold=cold, discard=True)
                kind, detail = sandbox.connection.recv()
                if kind == "init_failed":
                    return Answer(detail, "Unhandled", cold=cold, discard=True)
                sandbox.initialized = True
            if not sandbox.connection.poll(timeout):
                return timed_out_answer(context.aws_request_id, timeout, cold=cold)
            _, (payload, function_error) = sandbox.connection.recv()
            return Answer(payload, function_error, cold=cold)
        except (EOFError, OSError):
            sandbox.process.join(1)
            code = sandbox.process.exitcode
            message = f"RequestId: {context.aws_request_id} Error: Runtime exited with error: exit status {code}"
            return Answer(_error(EXIT_ERROR, message), "Unhandled", cold=cold, discard=True)

    def close(self) -> None:
        """Discard every sandbox (the stack is gone)."""
        with self._lock:
            self._closed = True
            sandboxes, self._all = list(self._all), []
            self._idle.clear()
        for sandbox in sandboxes:
            sandbox.stop()


# --- mode="threads" ------------------------------------------------------------------------------

# The invocation running on this thread (set on each handler's thread; `freezing` reads it).
_thread_sandbox = threading.local()


class SandboxFrozen(BaseException):
    """Raised into a handler on a thread that makes an AWS call after Lambda ended its invocation
    at the timeout. A BaseException, so that no `except Exception` in the handler's code can go on
    writing as if nothing happened (in Lambda, nothing of the invocation runs any more)."""


def frozen_event() -> threading.Event | None:
    """On a handler thread (mode "threads"), the event set when Lambda ends its invocation at the
    timeout; None on any other thread."""
    frozen: threading.Event | None = getattr(_thread_sandbox, "frozen", None)
    return frozen


def raise_if_frozen() -> None:
    """Raise SandboxFrozen on a handler thread whose invocation timed out."""
    frozen = frozen_event()
    if frozen is not None and frozen.is_set():
        raise SandboxFrozen("the emulated Lambda ended this invocation at its timeout")


def freezing(send: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """botocore's `Endpoint._send`, for a thread whose invocation Lambda ended at its timeout: it
    makes no AWS call any more, and the answer of a call it was waiting on never reaches it."""

    def frozen_aware_send(endpoint: Any, request: Any) -> Any:
        raise_if_frozen()
        response = send(endpoint, request)
        raise_if_frozen()
        return response

    return frozen_aware_send


def run_until(handler: Callable[[Any, Any], Any], payload: Any, context: Any, timeout: float) -> tuple[bool, Any]:
    """Run `handler` on its own thread for at most `timeout` seconds: (True, its result or the
    exception it raised), or (False, None) when it was still running, its invocation frozen.

    Emulation gap of the threads mode: a Python thread cannot be stopped, so the handler's code
    runs on until its next AWS call (which raises), and calls from threads it started itself are
    not cut."""
    frozen = threading.Event()
    done = threading.Event()
    box: list[Any] = [None]

    def run() -> None:
        _thread_sandbox.frozen = frozen
        try:
            box[0] = handler(payload, context)
        except SandboxFrozen:
            pass  # ended by the timeout: nobody waits for this result any more
        except BaseException as error:  # noqa: BLE001 - handed to the caller, as Lambda reports it
            box[0] = error
        finally:
            done.set()

    thread = threading.Thread(target=run, name=f"lambda-{context.function_name}", daemon=True)
    thread.start()
    if done.wait(timeout):
        return True, box[0]
    frozen.set()
    return False, None


def _invoke_on_thread(handler_path: str, body: bytes, context: LambdaContext, timeout: float) -> Answer:
    context.deadline = time.monotonic() + timeout
    try:
        handler = _handler_of(handler_path)
    except Exception as error:  # noqa: BLE001 - becomes a Lambda function error, as in AWS
        return Answer(_error(type(error).__name__, str(error)), "Unhandled")
    # The same runtime as a sandbox's (`_run_handler`), on a thread the timeout can abandon.
    finished, outcome = run_until(lambda _event, ctx: _run_handler(handler, body, ctx), None, context, timeout)
    if not finished:
        return timed_out_answer(context.aws_request_id, timeout)
    if isinstance(outcome, BaseException):  # what the runtime does not catch (SystemExit, ...)
        raise outcome
    answer: Answer = outcome
    return answer


__all__ = [
    "Answer",
    "LambdaContext",
    "SandboxMode",
    "SandboxPool",
    "freezing",
    "frozen_event",
    "run_until",
    "timed_out_answer",
]
