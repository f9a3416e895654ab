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
