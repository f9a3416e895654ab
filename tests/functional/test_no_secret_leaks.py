"""Security invariant: no secret reaches a report, a log line or the JSON document — not the
SSM session tokens the agents issued, not the EKS bearer token, not the values of
secret-looking environment variables, not the AWS secret key."""

from __future__ import annotations

import json
import logging
from typing import Any

from hyperpod_nccl.redaction import REDACTED, scrub
from hyperpod_nccl_sim.aws import FAKE_SECRET_KEY
from tests.functional.test_support_bundle import unpack

# Planted by the eks-p5 scenario in a ConfigMap the training pods read (WANDB_API_KEY).
PLANTED_SECRET = "0123456789abcdef-simulated-not-real"


def test_diagnosis_output_and_logs_carry_no_secret(simulate, cli, caplog) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    caplog.set_level(logging.DEBUG)
    text = cli("diagnose", "--cluster", "ml-training-eks", "--region", "us-west-2", "--sample-nodes", "all")
    document = cli("diagnose", "--cluster", "ml-training-eks", "--region", "us-west-2", "--format", "json")
    assert text.code == 0 and document.code == 0
    tokens = [s.token for s in sim._agents.agent._sessions.values()]  # what the simulated agents issued
    assert len(tokens) >= 16, "the probes really opened sessions"
    haystack = "\n".join([text.stdout, text.stderr, document.stdout, document.stderr, caplog.text])
    for secret in [*tokens, PLANTED_SECRET, FAKE_SECRET_KEY]:
        assert secret not in haystack
    assert "k8s-aws-v1." not in haystack


# --- every kind of secret planted in every source of a simulated cluster ------------------------
# Each kind as a cluster writes it, and the part that must never come out. Shapes, not real keys.
PLANTED: dict[str, tuple[str, str]] = {
    "AWS access key id": ("key AKIAPLANTED7Q2XW4M9K", "AKIAPLANTED7Q2XW4M9K"),
    "AWS secret access key": (
        "aws_secret_access_key=Pl4ntedSecretAccessKey/0123456789abcdEF",
        "Pl4ntedSecretAccessKey/0123456789abcdEF",
    ),
    "session token": (
        "X-Amz-Security-Token=IQoJb3JpZ2luX2VjEPl4ntedSessionToken0123456789abcdefGHIJKLmnop%2F",
        "IQoJb3JpZ2luX2VjEPl4ntedSessionToken0123456789abcdefGHIJKLmnop",
    ),
    "URL userinfo": ("url=postgres://planted_user:Pl4nted-pass@db.internal:5432/app", "planted_user:Pl4nted-pass"),
    "Authorization header": ("Authorization: Bearer Pl4ntedBearerCredential0123", "Pl4ntedBearerCredential0123"),
    "Basic credential": ("Basic cGxhbnRlZDpiYXNpYy1wYXNzd29yZA==", "cGxhbnRlZDpiYXNpYy1wYXNzd29yZA"),
    "JWT": ("jwt eyJhbGciOiJIUzI1NiJ9.eyJwbGFudGVkIjoiand0In0.UGxhbnRlZFNpZ25hdHVyZQ", "eyJwbGFudGVkIjoiand0In0"),
    "Hugging Face token": ("hf_Pl4ntedHuggingFaceToken0123456789", "hf_Pl4ntedHuggingFaceToken0123456789"),
    "GitHub token": ("ghp_Pl4ntedGitHubToken0123456789abcdef", "ghp_Pl4ntedGitHubToken0123456789abcdef"),
    "GitHub fine-grained token": (
        "github_pat_11PL4NTED0_abcdefghijklmnopqrstuvwxyz0123",
        "github_pat_11PL4NTED0_abcdefghijklmnopqrstuvwxyz0123",
    ),
    "Slack token": ("xoxb-1234567890-Pl4ntedSlackToken", "xoxb-1234567890-Pl4ntedSlackToken"),
    "password pair": ("password=Pl4nted-Passw0rd", "Pl4nted-Passw0rd"),
    "JSON password": ('{"passwd": "Pl4nted json pass"}', "Pl4nted json pass"),
    "token pair": ("token: Pl4ntedTokenValue", "Pl4ntedTokenValue"),
    "api_key pair": ("api_key=Pl4ntedApiKey77", "Pl4ntedApiKey77"),
    "secret pair": ("secret=Pl4ntedSecretValue", "Pl4ntedSecretValue"),
    # Last: a private key whose END was cut off takes the rest of the line with it.
    "private key": ("-----BEGIN RSA PRIVATE KEY----- MIIEPl4ntedPrivateKeyMaterial", "MIIEPl4ntedPrivateKeyMaterial"),
}
SECRETS = [secret for _, secret in PLANTED.values()]
# What stays diagnosable of the planted URL once its userinfo is gone.
KEPT_HOST = "@db.internal:5432/app"
# Lines that classify (socket failure, watchdog timeout, Xid 13), each followed by the planted kinds.
NCCL_ERROR = "{host}:{pid}:{pid} [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.1.0.7<43251> failed"
WATCHDOG = (
    "[rank0]:[E301 10:41:07.123456 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600032 ms"
)


def _carriers(prefix: str) -> list[str]:
    """`prefix` followed by the planted kinds, a few per line so each line stays an evidence line."""
    texts = [text for text, _ in PLANTED.values()]
    return [f"{prefix} {' '.join(texts[i : i + 6])}" for i in range(0, len(texts), 6)]


def _literal(text: str) -> str:
    """`text` as the simulated Kubernetes API's str.format templates must spell it."""
    return text.replace("{", "{{").replace("}", "}}")


def _plant_eks(scenario: Any) -> None:
    """Every source of an EKS cluster carries every kind: CloudWatch, pod logs, container env and
    ConfigMap values, the probe's job env and dmesg sections, cluster events, node status."""
    from hyperpod_nccl_sim.node_behaviours import XidSpec
    from hyperpod_nccl_sim.scenario import EventSpec, LogLineSpec, LogStreamSpec, NodeOverride, PodVariation

    lines = [LogLineSpec(minutes_ago=5 - i * 0.5, message=line) for i, line in enumerate(_carriers(NCCL_ERROR))]
    scenario.logs.streams.append(LogStreamSpec(node="worker:0", kind="nccl", lines=lines))
    job = scenario.kubernetes.jobs[0]
    job.pods.append(PodVariation(index=0, log_append=[_literal(line) for line in _carriers(WATCHDOG)]))
    texts = {f"PLANTED_{i}": text for i, (text, _) in enumerate(PLANTED.values())}
    # Innocent names: the values are redacted by their shape, not by the variable's name.
    job.env |= {"NCCL_PLANTED_DB": "postgres://planted_user:Pl4nted-pass@db.internal:5432/app"}
    job.env |= {f"TORCH_{name}": _literal(text) for name, text in texts.items()}
    job.env_from_configmaps.append("planted-env")
    scenario.kubernetes.objects.append(
        {
            "kind": "ConfigMap",
            "metadata": {"name": "planted-env", "namespace": job.namespace},
            "data": {f"FI_{name}": text for name, text in texts.items()},
        }
    )
    behaviours = scenario.node_behaviours
    behaviours.defaults.nccl_job_env = {"NCCL_DEBUG": "WARN", **texts}
    behaviours.defaults.xids = [XidSpec(gpu=0, code=13, message=line) for line in _carriers("Graphics Exception")]
    for i, description in enumerate(_carriers("Lifecycle script execution failed with exit code 1:")):
        scenario.events.append(
            EventSpec(
                minutes_ago=10 - i, level="Error", resource_type="Instance", node="worker:3", description=description
            )
        )
    scenario.nodes.append(NodeOverride(node="worker:3", status="Failure", message=_carriers("Node failed:")[0]))


def _assert_clean(where: str, text: str) -> None:
    leaked = [kind for kind, (_, secret) in PLANTED.items() if secret in text]
    assert not leaked, f"{where} leaks: {', '.join(leaked)}"


def _table_text(table: Any) -> str:
    """Every item of the monitor's table as text, compressed blobs (probe results, sweep results)
    decompressed: what a reader of the table could see."""
    from hyperpod_nccl.monitor.store import Store

    items: list[dict[str, Any]] = []
    page: dict[str, Any] = table.scan()
    items += page["Items"]
    while "LastEvaluatedKey" in page:
        page = table.scan(ExclusiveStartKey=page["LastEvaluatedKey"])
        items += page["Items"]
    plain = [{k: v for k, v in item.items() if k != "data"} for item in items]
    store = Store(table)
    blobs = [text for pk in sorted({str(i["pk"]) for i in items}) for text in store.blobs(pk, "").values()]
    assert len(blobs) == sum(1 for item in items if "chunks" in item), "every blob decompressed"
    return "\n".join([json.dumps(plain, default=str), *blobs])


def _published(topic_arn: str) -> str:
    """Every message the emulated SNS topic accepted (Subject and the e-mail, Chatbot bodies)."""
    from moto.sns.models import sns_backends

    _, _, _, region, account, _ = topic_arn.split(":")
    topic = sns_backends[account][region].topics[topic_arn]
    return "\n".join(f"{subject}\n{message}" for _, message, subject, *_ in topic.sent_notifications)


def test_planted_secrets_never_leave_any_source(simulate, cli, tmp_path, caplog, capsys) -> None:  # type: ignore[no-untyped-def]
    from hyperpod_nccl_sim.serverless import TABLE_NAME, LocalMonitor

    sim = simulate("healthy-eks", edit=_plant_eks)
    target = ("--cluster", sim.scenario.cluster.name, "--region", sim.scenario.region)
    caplog.set_level(logging.INFO)

    logfile = tmp_path / "train.log"
    logfile.write_text("\n".join(_carriers(NCCL_ERROR.format(host="ip-10-1-0-7", pid=41)) + _carriers(WATCHDOG)))
    triage = [cli("triage", str(logfile)), cli("triage", "--format", "json", str(logfile))]
    text = cli("diagnose", *target, "--sample-nodes", "all")
    document = cli("diagnose", *target, "--sample-nodes", "all", "--format", "json")
    incidents = cli("incidents", *target)
    bundle = tmp_path / "bundle"
    support = cli("support-bundle", *target, "--output-dir", str(bundle))
    for run in (*triage, text, document, incidents, support):
        assert run.code in (0, 3), run.stderr
        _assert_clean("stdout", run.stdout)
        _assert_clean("stderr", run.stderr)
    files = unpack(bundle)
    for name, content in files.items():
        _assert_clean(f"bundle {name}", content)

    # The evidence is still there, the secret replaced in place.
    report = json.loads(document.stdout)
    evidence = "\n".join(line for finding in report["findings"] for line in finding.get("evidence", []))
    for kind, (planted, secret) in PLANTED.items():
        if kind != "private key":
            assert planted.replace(secret, REDACTED) in evidence or scrub(planted) in evidence, kind
    assert "socketStartConnect" in evidence and "Watchdog caught" in evidence and "Graphics Exception" in evidence
    assert "Lifecycle script execution failed" in evidence
    assert all("<redacted>" in json.dumps(json.loads(run.stdout)) for run in triage[1:])
    assert f"NCCL_PLANTED_DB=postgres://{REDACTED}{KEPT_HOST}" in files["nccl-env.txt"]
    redacted = sum(content.count(REDACTED) for content in files.values())
    assert f"{redacted} secret-looking value(s) redacted" in support.stdout
    assert f"Secret-looking values redacted in this bundle: {redacted}" in files["case.md"]

    # The monitor: every table item one sweep writes, every message it publishes.
    with LocalMonitor(sim, node_coverage=1) as monitor:
        run = monitor.sweep()
        assert run.status == "SUCCEEDED"
        table = monitor.emulation.session(monitor.region).resource(
            "dynamodb", endpoint_url=monitor.emulation.endpoint_url, region_name=monitor.region
        )
        stored = _table_text(table.Table(TABLE_NAME))
        published = _published(monitor.topic_arn)
        handler_output = capsys.readouterr()  # the functions' own log lines (CloudWatch Logs in AWS)
    assert "socketStartConnect" in stored and KEPT_HOST in stored  # findings
    assert f'"PLANTED_3":"url=postgres://{REDACTED}{KEPT_HOST}"' in stored  # a probe result's job env
    _assert_clean("DynamoDB items", stored)
    _assert_clean("function output", handler_output.out + handler_output.err)
    assert published, "the sweep published its findings"
    _assert_clean("SNS messages", published)
    _assert_clean("logs", caplog.text)


def test_slurm_reasons_and_controller_env_are_redacted(simulate, cli) -> None:  # type: ignore[no-untyped-def]
    def plant(scenario: Any) -> None:
        slurm = scenario.node_behaviours.slurm
        slurm.node_states["compute:5"] = "drained|Kill task failed " + " ".join(t for t, _ in PLANTED.values())
        slurm.nccl_env.append("export NCCL_PLANTED_DB=postgres://planted_user:Pl4nted-pass@db.internal:5432/app")

    sim = simulate("slurm-p5en", edit=plant)
    target = ("--cluster", sim.scenario.cluster.name, "--region", sim.scenario.region, "--sample-nodes", "1")
    document = cli("diagnose", *target, "--format", "json")
    assert document.code in (0, 3), document.stderr
    _assert_clean("diagnose json", document.stdout)
    assert "Kill task failed" in document.stdout and REDACTED in document.stdout
