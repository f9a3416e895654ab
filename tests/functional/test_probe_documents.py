"""Which Session document the probes run through, against the emulation: the serverless monitor
uses its stack's probe-only documents, the CLI uses them when the stack is deployed and otherwise
falls back to AWS-StartNonInteractiveCommand and says once what that implies; the emulated
StartSession is as strict about documents as AWS."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hyperpod_nccl import thresholds
from hyperpod_nccl.cli.render import TextReport, render_json
from hyperpod_nccl.engine import diagnose
from hyperpod_nccl.models.findings import Scope
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.probe import documents
from hyperpod_nccl.ssm.client import DOCUMENT, wrap_command
from hyperpod_nccl_sim.aws import started_sessions
from hyperpod_nccl_sim.serverless import LocalMonitor


def _diagnose(sim: Any) -> Any:
    request = DiagnoseRequest(
        cluster=sim.scenario.cluster.name, region=sim.scenario.region, scope=Scope(sample_nodes=2)
    )
    return diagnose(request, sim.clients())


def _deploy_documents(sim: Any, stack: str, content: dict[str, str] | None = None) -> None:
    ssm = sim.emulation.client("ssm", sim.scenario.region)
    for role, name in documents.document_names(stack).items():
        text = (content or {}).get(role) or documents.content_text(role)
        ssm.create_document(Name=name, Content=text, DocumentType="Session", DocumentFormat="JSON")


def _documents_used(before: int) -> set[str]:
    return {document for _, document in started_sessions()[before:]}


def test_serverless_probes_use_only_the_stacks_documents(simulate) -> None:
    sim = simulate("slurm-p5en")
    with LocalMonitor(sim, node_coverage=2) as monitor:
        before = len(started_sessions())
        assert monitor.sweep().status == "SUCCEEDED"
        used = _documents_used(before)
    # The controller and the nodes, each through its own document; never the free-text one.
    assert (
        used == set(monitor.probe_documents.values()) == set(documents.document_names("hyperpod-nccl-local").values())
    )


def test_cli_without_a_deployed_stack_falls_back_and_says_what_that_implies(simulate) -> None:
    sim = simulate("healthy-eks")
    before = len(started_sessions())
    result = _diagnose(sim)
    assert _documents_used(before) == {DOCUMENT}
    assert result.coverage.probe_documents == [DOCUMENT]
    note = result.coverage.probe_access_note
    assert note and DOCUMENT in note and "any command as root" in note
    text = io.StringIO()
    TextReport(text, colour=False).render(result)
    assert [line for line in text.getvalue().splitlines() if DOCUMENT in line] == [f"[WARN] {note}"]
    assert json.loads(render_json(result))["coverage"]["probe_access_note"] == note


def test_cli_uses_the_deployed_documents_only_when_they_are_this_versions_probe(simulate, monkeypatch) -> None:
    sim = simulate("healthy-eks")
    _deploy_documents(sim, documents.DEFAULT_STACK_NAME)
    before = len(started_sessions())
    result = _diagnose(sim)
    assert _documents_used(before) == {documents.document_name(documents.DEFAULT_STACK_NAME, "node")}
    assert result.coverage.probe_access_note is None

    # A document of another stack whose probe differs from this checkout's is not trusted.
    stale = documents.document_content("node")
    stale["properties"]["linux"]["commands"] = wrap_command("echo an older probe")
    _deploy_documents(sim, "OtherStack", {"node": json.dumps(stale)})
    monkeypatch.setenv(documents.MONITOR_STACK_ENV, "OtherStack")
    before = len(started_sessions())
    assert _diagnose(sim).coverage.probe_documents == [DOCUMENT]
    assert _documents_used(before) == {DOCUMENT}


def test_cli_falls_back_when_the_documents_cannot_be_read(simulate) -> None:
    from hyperpod_nccl_sim.scenario import FaultSpec

    sim = simulate("healthy-eks", faults=[FaultSpec(operation="ssm:GetDocument", error_code="AccessDeniedException")])
    _deploy_documents(sim, documents.DEFAULT_STACK_NAME)
    before = len(started_sessions())
    result = _diagnose(sim)
    # Unverifiable means untrusted: the managed document, said plainly, and the run still completes.
    assert _documents_used(before) == {DOCUMENT}
    assert result.coverage.nodes_probed == 2 and "ssm:GetDocument" in (result.coverage.probe_access_note or "")


# Throttled StartSession calls `_start` sends again (a few seconds of the account's rate at most).
THROTTLE_RETRIES = 10


def _start(sim: Any, document: str | None, parameters: dict[str, list[str]] | None = None) -> str:
    ssm = sim.emulation.client("ssm", sim.scenario.region)
    target = f"sagemaker-cluster:{sim.cluster_arn.rsplit('/', 1)[-1]}_worker-{sim.instance_id('worker:1')}"
    kwargs: dict[str, Any] = {"Target": target}
    if document:
        kwargs["DocumentName"] = document
    if parameters is not None:
        kwargs["Parameters"] = parameters
    # The emulation keeps the account's StartSession rate (3/s after a burst of 3) across the tests
    # of this worker: a call it throttles is sent again one interval later, as a client would, so
    # that the answer asserted is the document's, whatever the bucket held.
    for _ in range(THROTTLE_RETRIES):
        with pytest.raises(ClientError) as raised:
            ssm.start_session(**kwargs)
        code = str(raised.value.response["Error"]["Code"])
        if code != "ThrottlingException":
            return code
        time.sleep(1 / thresholds.SSM_START_SESSION_PER_SECOND)
    return code


def test_emulated_start_session_is_strict_about_documents(simulate) -> None:
    sim = simulate("healthy-eks")
    _deploy_documents(sim, "Strict")
    ssm = sim.emulation.client("ssm", sim.scenario.region)
    command = {"schemaVersion": "2.2", "mainSteps": [{"action": "aws:runShellScript", "name": "x", "inputs": {}}]}
    ssm.create_document(Name="Strict-Command", Content=json.dumps(command), DocumentType="Command")
    custom = documents.document_name("Strict", "node")
    assert _start(sim, "Strict-Missing") == "InvalidDocument"
    assert _start(sim, "Strict-Command") == "InvalidDocument"
    assert _start(sim, None) == "InvalidDocument"
    # The probe document declares no parameter: a command smuggled in is refused.
    assert _start(sim, custom, {"command": ["id"]}) == "ValidationException"
    assert _start(sim, DOCUMENT, {}) == "ValidationException"
    with pytest.raises(ClientError) as raised:
        ssm.create_document(Name="Strict-Big", Content="x" * (documents.MAX_DOCUMENT_BYTES + 1), DocumentType="Session")
    assert raised.value.response["Error"]["Code"] == "MaxDocumentSizeExceeded"


def test_every_probe_document_fits_the_ssm_document_limit() -> None:
    for role in documents.ROLES:
        size = len(documents.content_text(role).encode("utf-8"))
        # Headroom for the probe to grow: a document at 80 % of the limit fails here first.
        assert size < 0.8 * documents.MAX_DOCUMENT_BYTES, (role, size)
        content = documents.document_content(role)
        assert "parameters" not in content and content["sessionType"] == "NonInteractiveCommands"
        assert "{{" not in content["properties"]["linux"]["commands"]
        assert documents.matches_local(documents.content_text(role), role)
