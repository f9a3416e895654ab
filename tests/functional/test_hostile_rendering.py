"""Issue 12 § 3: no control character or chat markup from the cluster reaches a person.

Escape sequences, carriage returns, bidi overrides and Slack markup are planted where a job or a
node controls the text (log lines, a node's status message, cluster events, Slurm drain reasons,
job names and environment files) and every renderer runs on the result: `diagnose` text and
JSON, `triage`, `incidents` text and JSON, the support bundle, and the monitor's e-mail, SNS
Subject and Chatbot notification. None may carry a raw control character (only the newlines and
tabs of a multi-line body) or markup that Slack would act on, and the hostile content must still
be there, visibly escaped.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from hyperpod_nccl.cli.commands.support_bundle import bundle_files
from hyperpod_nccl.cli.render import TextReport, render_json
from hyperpod_nccl.cli.render_html import render_html
from hyperpod_nccl.incidents.report import IncidentRun, incidents_json, render_incidents_text, run_incidents
from hyperpod_nccl.models.findings import Scope
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.monitor.alert_messages import Alert, build_alert, build_incident_alert, sns_message
from hyperpod_nccl.monitor.diff import Change, SweepDiff
from hyperpod_nccl.monitor.incident_tracking import IncidentChange, IncidentSweep
from hyperpod_nccl.sanitize import email_subject
from hyperpod_nccl_sim.scenario import LogLineSpec, Scenario

# Every trick at once; no "|" (the probe's field separator) so it survives as one field.
TERMINAL_ATTACK = (
    "\x1b[2J\x1b[H"  # clear the screen
    "\x1b]0;pwned\x07"  # set the window title
    "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # write the clipboard
    "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\"  # plant a hyperlink
    "\x9b31m"  # single-byte C1 CSI
    "\r[PASS] all good "  # overprint
    "\u202egnp.exe\u202c"  # bidi override
)
CHAT_ATTACK = "<!channel> @here <@U0123> ``` *fake* "
PAYLOAD = TERMINAL_ATTACK + CHAT_ATTACK
# A payload with a newline, for fields that are not split into lines by the source.
MULTILINE_PAYLOAD = PAYLOAD + "\n[PASS] forged line"
BASE_URL = "https://docs.example.com/refs"
# What must show, escaped, wherever the payload is rendered.
VISIBLE = ("\\x1b[2J", "\\x1b]52;c;", "\\r[PASS]", "\\u202e")
# The report's own colour codes (render.py; 2, dim, is SKIP's), the only escape sequences allowed in its output.
OUR_COLOURS = re.compile(r"\x1b\[(?:3[1-6]|2|0)m")


# Every tag the HTML report writes: anything else in a page came from the data.
HTML_TAGS = {
    *("html", "head", "meta", "title", "style", "body", "section", "h1", "h2", "h3", "p", "div", "span", "b"),
    *("a", "ul", "li", "br", "details", "summary", "pre", "footer"),
}
HTML_TAGS |= {f"/{tag}" for tag in HTML_TAGS}


def _plant(scenario: Scenario) -> None:
    """The slurm-p5en scenario with the payload in every text the cluster controls."""
    scenario.nodes[0].message = f"Instance failed: hardware failure {MULTILINE_PAYLOAD}"
    for event in scenario.events:
        event.description += f" {MULTILINE_PAYLOAD}"
    assert scenario.logs is not None
    for stream in scenario.logs.streams:
        if stream.kind == "training":
            stream.lines.append(
                LogLineSpec(minutes_ago=72, message=f"RuntimeError: CUDA error: uncorrectable ECC error {PAYLOAD}")
            )
    assert scenario.node_behaviours is not None and scenario.node_behaviours.slurm is not None
    slurm = scenario.node_behaviours.slurm
    slurm.node_states = {node: f"{state} {PAYLOAD}" for node, state in slurm.node_states.items()}
    slurm.pending_jobs = [f"1207|llama3{PAYLOAD.replace(' ', '_')}|(ReqNodeNotAvail {PAYLOAD})"]
    slurm.nccl_env = [*slurm.nccl_env, f"export NCCL_SOCKET_IFNAME={PAYLOAD}"]


def _strings(document: object) -> Iterator[str]:
    if isinstance(document, str):
        yield document
    elif isinstance(document, dict):
        for value in document.values():
            yield from _strings(value)
    elif isinstance(document, list):
        for value in document:
            yield from _strings(value)


def _bad_chars(text: str, allowed: str) -> set[str]:
    return {c for c in text if not c.isprintable() and c not in allowed}


def _assert_safe_text(name: str, text: str, *, multiline: bool = True) -> None:
    """No raw control character other than newline/tab; the attack is still visible."""
    bad = _bad_chars(text, "\n\t" if multiline else "")
    assert not bad, f"{name}: raw {sorted(map(hex, map(ord, bad)))}"
    assert "\n[PASS] forged line" not in text, f"{name}: a value started a line of its own"


def _assert_visible(name: str, text: str) -> None:
    missing = [marker for marker in VISIBLE if marker not in text]
    assert not missing, f"{name}: hostile content lost: {missing}"


def _renderings(incident_run: IncidentRun) -> dict[str, str]:
    """Every rendering for people of one diagnosis (one collection, so that the test is fast;
    the CLI wiring is exercised by the `diagnose` run of the test)."""
    outputs: dict[str, str] = {}
    report = io.StringIO()
    TextReport(report, colour=True).render(incident_run.result)
    outputs["diagnose text (colour)"] = report.getvalue()
    outputs["diagnose json"] = render_json(incident_run.result)
    outputs["diagnose html"] = render_html([incident_run.result])
    incidents = io.StringIO()
    render_incidents_text(incidents, incident_run)
    outputs["incidents text"] = incidents.getvalue()
    outputs["incidents json"] = json.dumps(incidents_json(incident_run), indent=2)
    # The files as they go into the archive (no universal-newline reading: a raw "\r" stays one).
    for name, content in bundle_files(incident_run).items():
        outputs[f"bundle {name}"] = content
    return outputs


def _alerts(incident_run: IncidentRun) -> list[Alert]:
    result = incident_run.result
    started = datetime(2026, 1, 1, tzinfo=UTC)
    changes = [Change(kind="new", fingerprint=f.fingerprint, finding=f) for f in result.issues]
    diff = SweepDiff(
        sweep_id="schedule-1",
        cluster=result.cluster_name,
        region=result.region,
        started_at=started,
        changes=changes,
        degraded_sources=result.degraded_sources,
    )
    news = [IncidentChange(kind="new", incident=incident) for incident in incident_run.incidents]
    sweep = IncidentSweep(
        sweep_id="schedule-1", cluster=result.cluster_name, region=result.region, started_at=started,
        incidents=incident_run.incidents, changes=news,
    )  # fmt: skip
    # The summary three ways: from the findings alone, listing the root causes, and as a baseline.
    alerts = [build_alert(diff, BASE_URL), build_alert(diff, BASE_URL, sweep)]
    alerts.append(build_alert(diff, BASE_URL, sweep.model_copy(update={"baseline": True})))
    alerts.extend(build_incident_alert(sweep, change, BASE_URL) for change in news)
    return alerts


def _assert_safe_chat(name: str, text: str) -> None:
    """Slack markup only where we wrote it: runbook links to our base URL and our code fences."""
    _assert_safe_text(name, text)
    for match in re.finditer(r"<[^>]*>", text):
        assert match.group().startswith(f"<{BASE_URL}/"), f"{name}: markup from data: {match.group()}"
    assert not re.search(r"(?<!\w)@(here|channel|everyone)\b", text), f"{name}: live mention"
    assert "``` *fake*" not in text and "```\n[PASS]" not in text, f"{name}: fence break-out"


def test_no_renderer_passes_control_characters_or_markup(simulate, cli) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("slurm-p5en", edit=_plant)
    cluster, region = sim.scenario.cluster.name, sim.scenario.region
    request = DiagnoseRequest(cluster=cluster, region=region, scope=Scope(sample_nodes="all"))
    incident_run = run_incidents(request, sim.clients())
    outputs = _renderings(incident_run)
    run = cli("diagnose", "--cluster", cluster, "--region", region, "--sample-nodes", "1")
    assert run.code == 0, run.stderr
    outputs["diagnose (CLI)"] = run.stdout + run.stderr

    for name, text in outputs.items():
        _assert_safe_text(name, OUR_COLOURS.sub("", text) if "colour" in name else text)
    # The payload really reached every report (planted where the checks read it), escaped.
    for name in (
        "diagnose (CLI)", "diagnose html", "incidents text", "bundle case.md", "bundle nccl-diag.txt",
        "bundle nccl-env.txt",
    ):  # fmt: skip
        _assert_visible(name, outputs[name])
    # The page: no markup from the data, which shows as text; no value can close an attribute.
    page = outputs["diagnose html"]
    assert "<!channel>" not in page and "<@U0123>" not in page and "&lt;!channel&gt;" in page
    assert re.findall(r"<(/?[a-z0-9]+)", page) and set(re.findall(r"<(/?[a-z0-9]+)", page)) <= HTML_TAGS
    # JSON keeps the exact text, which its encoder escapes (ESC as \u001b).
    for name in ("diagnose json", "incidents json", "bundle nccl-diag.json"):
        assert any(PAYLOAD in value for value in _strings(json.loads(outputs[name]))), name
    # The payload's ``` cannot close case.md's code blocks: they are fenced with more backticks.
    assert "\n````\n" in outputs["bundle case.md"]
    # Our own colours survive, theirs do not.
    assert "\x1b[31m[FAIL]\x1b[0m" in outputs["diagnose text (colour)"]
    assert "\x1b[2J" not in outputs["diagnose text (colour)"]

    alerts = _alerts(incident_run)
    assert len(alerts) > 1, "incidents were built from the hostile evidence"
    for index, alert in enumerate(alerts):
        name = f"alert {index}"
        _assert_safe_text(f"{name} e-mail", alert.email)
        content, metadata = alert.chatbot.content, alert.chatbot.metadata
        _assert_safe_chat(f"{name} description", content.description)
        for field, value in [("title", content.title), ("summary", metadata.summary), *(
            (f"step {i}", step) for i, step in enumerate([*content.nextSteps, *content.keywords])
        )]:  # fmt: skip
            _assert_safe_chat(f"{name} {field}", value)
        assert all(" " <= c <= "~" for c in alert.subject) and len(alert.subject) < 100, alert.subject
        message = sns_message(alert)
        assert not _bad_chars(message["Message"], ""), "the SNS JSON carries every body escaped"
    chat = "\n".join(a.chatbot.content.description for a in alerts)
    mail = "\n".join(a.email for a in alerts)
    _assert_visible("chat", chat)
    _assert_visible("e-mail", mail)
    assert "&lt;!channel&gt;" in chat and "\uff20here" in chat


def test_triage_shows_hostile_lines_and_file_names_escaped(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "worker\x1b]0;pwned\x07.log"
    log.write_text(
        f"NCCL WARN NET/OFI Request error {PAYLOAD}\n"
        f"RuntimeError: CUDA error: uncorrectable ECC error encountered {PAYLOAD}\n"
        "line\rwith carriage returns only\r[PASS] fake\n",
        encoding="utf-8",
    )
    text = cli("triage", str(log))
    document = cli("triage", "--format", "json", str(log))
    missing = cli("triage", str(tmp_path / "gone\x1b[2J.log"))
    for name, run in [("triage text", text), ("triage json", document), ("triage missing", missing)]:
        _assert_safe_text(name, run.stdout + run.stderr)
    # The classifier ends a line at "\r" as well (progress bars), so the evidence is the part
    # before it.
    before_cr = PAYLOAD.split("\r", 1)[0]
    assert "\\x1b[2J" in text.stdout and "\\x1b]52;c;" in text.stdout
    assert "worker\\x1b]0;pwned\\x07.log" in text.stdout
    assert "gone\\x1b[2J.log" in missing.stderr
    [parsed] = json.loads(document.stdout)["inputs"]
    assert any(before_cr in line for finding in parsed["findings"] for line in finding["evidence"]), (
        "JSON keeps the exact text (escaped by the JSON encoding, not by us)"
    )


def test_demo_scenario_text_is_escaped(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from hyperpod_nccl_sim.scenario import load_scenario

    scenario = load_scenario("healthy-eks").model_dump(mode="json")
    scenario["description"] = PAYLOAD
    scenario["logs"] = {"enabled": False}  # only the banner is under test
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(scenario), encoding="utf-8")
    run = cli("demo", "--scenario", str(path), "--no-color", "--sample-nodes", "1")
    _assert_safe_text("demo", run.stdout + run.stderr)
    _assert_visible("demo", run.stdout)
    # An unusable scenario file: its error quotes the file's values, escaped too.
    scenario["cluster"] = PAYLOAD
    path.write_text(json.dumps(scenario), encoding="utf-8")
    broken = cli("demo", "--scenario", str(path))
    assert broken.code == 2
    _assert_safe_text("demo error", broken.stderr)
    assert "\\x1b[2J" in broken.stderr  # pydantic quotes the start of the value


def test_case_md_code_blocks_cannot_be_closed_by_evidence() -> None:
    from hyperpod_nccl.cli.commands.support_bundle import _fenced

    block = _fenced("NCCL WARN x\n```\n# Forged heading\n``````")
    fence = block.split("\n", 1)[0]
    assert fence == "`" * 7 and block.endswith(f"\n{fence}\n")
    assert _fenced("plain").startswith("```\n")


def test_emulated_sns_refuses_the_subjects_aws_refuses(emulation) -> None:  # type: ignore[no-untyped-def]
    sns = emulation.session("us-west-2").client("sns", endpoint_url=emulation.endpoint_url)
    topic = sns.create_topic(Name="hostile-subjects")["TopicArn"]
    sns.publish(TopicArn=topic, Message="m", Subject=email_subject(f"HyperPod hp1: {PAYLOAD}\r\nBcc: x" * 3))
    for bad in ("line\nbreak", "esc \x1b[2J", "caf\u00e9", " leading space", "x" * 100):
        with pytest.raises(ClientError, match="Subject"):
            sns.publish(TopicArn=topic, Message="m", Subject=bad)
