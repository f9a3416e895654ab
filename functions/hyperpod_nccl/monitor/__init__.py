"""The serverless monitor's runtime: settings, the DynamoDB single-table store, the finding diff,
notifications and the sweep orchestration the Lambda handlers call.

`ASL_PATH` is the Step Functions definition (with `${...}` placeholders) that the CDK app
deploys and the local simulation executes: one definition for both.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ASL_PATH: Path = Path(__file__).with_name("sweep.asl.json")

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


def asl_placeholders() -> set[str]:
    """The `${Name}` placeholders the definition expects to be substituted."""
    return set(_PLACEHOLDER.findall(ASL_PATH.read_text()))


def render_definition(substitutions: dict[str, str | int]) -> str:
    """The definition with every placeholder substituted, as Step Functions receives it.

    Raises ValueError naming any placeholder left without a value, so a renamed placeholder
    cannot silently reach Step Functions.
    """
    text = ASL_PATH.read_text()
    missing = sorted(asl_placeholders() - set(substitutions))
    if missing:
        raise ValueError(f"no substitution for ASL placeholders: {', '.join(missing)}")
    rendered = _PLACEHOLDER.sub(lambda m: str(substitutions[m.group(1)]), text)
    json.loads(rendered)  # fail here, not in CreateStateMachine, on a broken substitution
    return rendered


def load_definition(substitutions: dict[str, str | int]) -> dict[str, Any]:
    """The rendered definition parsed to a dict (for inspection and tests)."""
    parsed: dict[str, Any] = json.loads(render_definition(substitutions))
    return parsed


# Each function's Lambda timeout is its state's TimeoutSeconds less this: Lambda stops the function
# first (Sandbox.Timedout) and the state's Catch runs once the function is dead. With equal
# timeouts the state timer may fire first, and the recovery state would run while a killed
# Aggregate still writes.
LAMBDA_TIMEOUT_HEADROOM_SECONDS = 5


def lambda_timeouts(probe_timeout_seconds: int | None = None) -> dict[str, int]:
    """Each state machine function's Lambda timeout (seconds), as infra deploys it and the local
    emulation enforces it: its `task_timeouts` less `LAMBDA_TIMEOUT_HEADROOM_SECONDS`."""
    return {h: t - LAMBDA_TIMEOUT_HEADROOM_SECONDS for h, t in task_timeouts(probe_timeout_seconds).items()}


def task_timeouts(probe_timeout_seconds: int | None = None) -> dict[str, int]:
    """Each state machine function's task timeout (seconds): the shortest TimeoutSeconds of the
    Task states that invoke it. The ASL is the one place that sets a state's budget; the Lambda
    timeout follows from it (`lambda_timeouts`). `probe_timeout_seconds` replaces the ProbeNode
    state's (default `settings.PROBE_TIMEOUT_SECONDS`)."""
    from hyperpod_nccl.monitor.settings import (
        ASL_FUNCTION_PLACEHOLDERS,
        ASL_MAP_CONCURRENCY_PLACEHOLDER,
        ASL_PROBE_TIMEOUT_PLACEHOLDER,
        PROBE_TIMEOUT_SECONDS,
    )

    handler_of = {f"arn:placeholder:{p}": handler for handler, p in ASL_FUNCTION_PLACEHOLDERS.items()}
    substitutions: dict[str, str | int] = {p: f"arn:placeholder:{p}" for p in ASL_FUNCTION_PLACEHOLDERS.values()}
    substitutions[ASL_PROBE_TIMEOUT_PLACEHOLDER] = probe_timeout_seconds or PROBE_TIMEOUT_SECONDS
    substitutions[ASL_MAP_CONCURRENCY_PLACEHOLDER] = 1
    timeouts: dict[str, int] = {}

    def visit(node: object) -> None:
        if isinstance(node, dict):
            handler = handler_of.get(str(node.get("Resource", "")))
            if node.get("Type") == "Task" and handler and "TimeoutSeconds" in node:
                timeouts[handler] = min(timeouts.get(handler, node["TimeoutSeconds"]), node["TimeoutSeconds"])
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(load_definition(substitutions))
    return timeouts
