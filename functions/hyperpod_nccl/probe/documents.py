"""The monitor's own Session Manager documents: one per probe role, each embedding its probe script
as the document's only command, with no parameters.

A principal allowed `ssm:StartSession` on such a document (and nothing else, with
`ssm:SessionDocumentAccessCheck`) can run exactly that probe as root on a node, nothing more.
`AWS-StartNonInteractiveCommand`, the fallback, takes its command as a free-text parameter: whoever
may start sessions with it may run any command as root on every node they can reach.

The content is built here from the scripts as shipped (`hyperpod_nccl.probe.script`), so the CDK
app (which embeds it at synth time), the CLI (which compares a deployed document with it) and the
emulation read one definition.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from typing import Any, get_args

from hyperpod_nccl import thresholds
from hyperpod_nccl.models.node_probe import ProbeRole
from hyperpod_nccl.probe import SCRIPTS, script
from hyperpod_nccl.ssm.client import DOCUMENT, wrap_command

# The stack name `cdk deploy` uses when none is configured (infra re-exports it as STACK_ID_DEFAULT).
DEFAULT_STACK_NAME = "HyperPodNcclMonitor"
# CLI: the monitor stack whose documents the diagnosis looks for (default DEFAULT_STACK_NAME).
MONITOR_STACK_ENV = "HYPERPOD_NCCL_MONITOR_STACK"


def monitor_stack_name(named: str | None = None) -> str:
    """The monitor's stack the CLI looks at: `named` (a `--stack` flag), else $MONITOR_STACK_ENV,
    else the stack name `cdk deploy` uses."""
    return named or os.environ.get(MONITOR_STACK_ENV, "").strip() or DEFAULT_STACK_NAME


DOCUMENT_SUFFIXES: dict[ProbeRole, str] = {"node": "NodeProbe", "slurm_controller": "SlurmControllerProbe"}
ROLES: tuple[ProbeRole, ...] = get_args(ProbeRole)
DOCUMENT_TYPE = "Session"
SESSION_TYPE = "NonInteractiveCommands"
# CreateDocument: "The content of the document must not exceed 64KB" (MaxDocumentSizeExceeded).
MAX_DOCUMENT_BYTES = 64 * 1024
# Session preferences (minutes, as strings in the schema): the session outlives the node's probe
# budget by a minute and ends by itself if a client vanishes. While the probe runs the session is
# idle (NonInteractiveCommands send the output when the command exits), so the idle timeout equals
# the maximum duration.
SESSION_MINUTES = math.ceil(thresholds.SSM_NODE_BUDGET_SECONDS / 60) + 1


def managed_document_note() -> str:
    """The one line a report carries when probes ran through the AWS managed document (a function:
    `ssm.client` may still be initialising when this module is imported)."""
    return (
        f"node probes used {DOCUMENT}: its command is free text, so the identity that ran this"
        " diagnosis may run any command as root on every HyperPod node it can start sessions on; deploy the"
        " monitor stack (and allow ssm:GetDocument on its probe documents) to probe through them instead:"
        " they run only the embedded probe"
    )


def document_name(stack_name: str, role: ProbeRole) -> str:
    """The fixed name of the stack's document for `role`, e.g. `HyperPodNcclMonitor-NodeProbe`."""
    return f"{stack_name}-{DOCUMENT_SUFFIXES[role]}"


def document_names(stack_name: str) -> dict[ProbeRole, str]:
    """Every probe role's document name for one stack."""
    return {role: document_name(stack_name, role) for role in ROLES}


def embedded_command(role: ProbeRole) -> str:
    """The one command the document of `role` runs: the probe script, wrapped as for the managed
    document (base64, so no quoting can change it, and the `__RC__` exit marker)."""
    return wrap_command(script(role))


def script_digest(role: ProbeRole) -> str:
    """sha256 of the probe script as shipped (named in the document's description)."""
    return hashlib.sha256(script(role).encode("utf-8")).hexdigest()


def document_content(role: ProbeRole) -> dict[str, Any]:
    """The Session document (schema 1.0) of `role`: NonInteractiveCommands, no `parameters`."""
    return {
        "schemaVersion": "1.0",
        "description": (
            f"hyperpod-nccl read-only {role} probe: runs {SCRIPTS[role]} (sha256 {script_digest(role)},"
            " base64-embedded) as root and nothing else; takes no parameters."
        ),
        "sessionType": SESSION_TYPE,
        "inputs": {
            # No account-wide Run As user replaces root: the probe reads other users' /proc entries.
            "runAsEnabled": False,
            "idleSessionTimeout": str(SESSION_MINUTES),
            "maxSessionDuration": str(SESSION_MINUTES),
        },
        "properties": {"linux": {"commands": embedded_command(role), "runAsElevated": True}},
    }


def content_text(role: ProbeRole) -> str:
    """The document content as CreateDocument receives it (compact JSON)."""
    return json.dumps(document_content(role), separators=(",", ":"))


def content_digest(content: Mapping[str, Any]) -> str:
    """sha256 of a document's content in canonical JSON (key order and spacing do not count)."""
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def matches_local(content: str, role: ProbeRole) -> bool:
    """Whether a deployed document's content (GetDocument, JSON) is exactly this version's document
    of `role`: a stale or edited document is not used."""
    try:
        deployed = json.loads(content)
    except ValueError:
        return False
    return isinstance(deployed, dict) and content_digest(deployed) == content_digest(document_content(role))
