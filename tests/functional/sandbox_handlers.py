"""Handlers for tests/functional/test_lambda_sandboxes.py: small functions whose answers show which
sandbox ran them and what module state it kept."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

# Module state: what a sandbox keeps between the invocations it serves.
INVOCATIONS = 0


def count(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Count this sandbox's invocations; hold for `hold` seconds; print a log line."""
    global INVOCATIONS
    INVOCATIONS += 1
    print(f"sandbox {os.getpid()} invocation {INVOCATIONS} {event.get('tag', '')}")
    time.sleep(float(event.get("hold", 0)))
    return {"pid": os.getpid(), "invocations": INVOCATIONS, "remaining_ms": context.get_remaining_time_in_millis()}


def write_after(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Sleep `hold` seconds, then create the file `path` (a write after the timeout, if it is later)."""
    time.sleep(float(event["hold"]))
    Path(event["path"]).write_text("written")
    return {}


def exit_process(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """End the sandbox's process mid-invocation."""
    sys.stdout.flush()
    os._exit(3)


def environment(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The value of one environment variable, as the function sees it."""
    return {"value": os.environ.get(event["name"])}
