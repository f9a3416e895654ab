"""What counts as a secret (`hyperpod_nccl.redaction`): each kind is redacted in place, the
evidence around it stays, scrubbing twice changes nothing, ordinary NCCL/driver/log text is left
alone, and no rule can be made slow by a crafted line."""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_nccl.classifier import scan_text
from hyperpod_nccl.redaction import (
    MIN_HEX_CHARS,
    REDACTED,
    count_redacted,
    install_log_scrubber,
    is_secret_name,
    redact_argv,
    redact_value,
    scrub,
    scrub_counted,
)

DATA = Path(__file__).resolve().parents[1] / "data"

# (text as a job or node writes it, the secret inside it, what must remain around it)
KINDS = [
    ("key AKIAIOSFODNN7EXAMPLE in use", "AKIAIOSFODNN7EXAMPLE", "key "),
    ("temporary ASIAQ3EXAMPLE7KEYID2 expired", "ASIAQ3EXAMPLE7KEYID2", "expired"),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key = ",
    ),
    (
        '{"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}',
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        '"SecretAccessKey": "',
    ),
    ("CREDS=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "CREDS="),
    ("aws_session_token=FwoGZXIvYXdzEBYaDExampleSessionToken123", "FwoGZXIvYXdzEBYaDExampleSessionToken123", "aws_"),
    (
        "GET /b/k?X-Amz-Security-Token=IQoJb3JpZ2luX2VjEJr%2F%2FExample&X-Amz-Date=20260301T000000Z",
        "IQoJb3JpZ2luX2VjEJr%2F%2FExample",
        "&X-Amz-Date=20260301T000000Z",
    ),
    ("DATABASE_URL=postgres://user:s3cret@db.internal:5432/app", "user:s3cret", "postgres://<redacted>@db.internal"),
    ("pip install git+https://ghuser:p@ss@github.com/org/repo", "ghuser:p@ss", "@github.com/org/repo"),
    ("Authorization: Bearer abc.def-ghi_jkl", "abc.def-ghi_jkl", "Authorization: Bearer <redacted>"),
    ('"authorization": "Basic dXNlcjpwYXNzd29yZA=="', "dXNlcjpwYXNzd29yZA", '"authorization": "Basic <redacted>"'),
    ("curl -H 'Authorization: token ghx_short'", "ghx_short", "Authorization: token <redacted>'"),
    ("sent Bearer 0123456789abcdefXYZ to the proxy", "0123456789abcdefXYZ", "to the proxy"),
    ("Basic dXNlcjpwYXNzd29yZA== was rejected", "dXNlcjpwYXNzd29yZA", "was rejected"),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
        "jwt ",
    ),
    ("HF hub: hf_abcdefghijklmnopqrstuvwxyzABCDEFGH ok", "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", " ok"),
    ("clone ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "clone "),
    ("gho_abcdefghijklmnopqrstuvwxyz0123456789 / ghs_0123456789abcdefghijklmn", "ghs_0123456789abcdefghijklmn", " / "),
    ("github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz012345", "github_pat_11ABCDEFG0", ""),
    ("slack xoxb-1234567890-abcdefghijKLMN posted", "xoxb-1234567890-abcdefghijKLMN", "posted"),
    ("xoxp-1234567890-abcdefghij", "xoxp-1234567890-abcdefghij", ""),
    ("password=hunter2 user=alice", "hunter2", "user=alice"),
    ("passwd: swordfish", "swordfish", "passwd: "),
    ("mysql -u root pwd=Tr0ub4dor", "Tr0ub4dor", "pwd="),
    ("secret=s3cr3t-value", "s3cr3t-value", "secret="),
    ("token=t0ken-value&next=1", "t0ken-value", "&next=1"),
    ("api_key: k3y-value", "k3y-value", "api_key: "),
    ('{"password": "correct horse battery", "user": "alice"}', "correct horse", '"user": "alice"'),
    ("{'api_key': 'k3y value'}", "k3y value", "{'api_key': '"),
    ('{\\"password\\": \\"escaped pass\\"}', "escaped pass", '{\\"password\\": \\"'),
    ('b\'{\\\\"passwd\\\\": \\\\"bytes repr pass\\\\"}\'', "bytes repr pass", "passwd"),
    ("torchrun --hf-token hf_x --wandb-api-key=abc123 train.py", "abc123", "train.py"),
    ("/proc/42/environ:WANDB_API_KEY=0123456789abcdef", "0123456789abcdef", "/proc/42/environ:WANDB_API_KEY="),
    ("EKS k8s-aws-v1.aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbS8_QWN0aW9u", "aHR0cHM6Ly9zdHMuYW1hem9uYXdz", "EKS "),
    ("session TokenValue='AAEAAdmYZgT5Xo2xmNJrCiDqkVGYWyZaeaJT4lAhS0_eumN' sent", "AAEAAdmYZgT5Xo2x", " sent"),
    ("raw AAEAAdmYZgT5Xo2xmNJrCiDqkVGYWyZaeaJT4lAhS0eumNMAAAAAGbcFwoGZXIvYXdz done", "AAEAAdmYZgT5Xo2x", "done"),
    ("wandb 0123456789abcdef0123456789abcdef01234567 login", "0123456789abcdef0123456789abcdef", "login"),
    (
        "webhook https://hooks.slack.com/services/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",
        "aB3dE5fG7hI9",
        "/services/",
    ),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7example\nQ2xvdWRLZXk=\n-----END RSA PRIVATE KEY-----\nnext",
        "MIIEpAIBAAKCAQEA7example",
        "\nnext",
    ),
    ('"key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANexample\\n-----END PRIVATE KEY-----\\n"', "MIIEvQ", '"key": "'),
    ("printed -----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAA", "b3BlbnNzaC1rZXktdjEAAAAA", "printed "),
]


@pytest.mark.parametrize(("text", "secret", "kept"), KINDS)
def test_each_kind_is_redacted_in_place(text: str, secret: str, kept: str) -> None:
    scrubbed, count = scrub_counted(text)
    assert secret not in scrubbed
    assert REDACTED in scrubbed and count >= 1
    assert kept in scrubbed
    assert scrub_counted(scrubbed) == (scrubbed, 0)  # idempotent, and nothing counted twice


# Evidence the checks and a support engineer need: none of it is secret-shaped.
EVIDENCE = [
    "GPU-ed5d2ac8-7e1c-41a5-9bb8-4f1e0a3c2d1b",
    "MIG-GPU-ed5d2ac8-7e1c-41a5-9bb8-4f1e0a3c2d1b/1/0",
    "[Tue Mar  3 10:41:07 2026] NVRM: Xid (PCI:0000:53:00): 79, pid=48213, name=python3, GPU has fallen off the bus.",
    "i-0123456789abcdef0 ip-10-1-0-15.us-west-2.compute.internal 0000:53:00.0",
    "ip-10-1-0-10:4000:4000 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
    "NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.13.2-aws /opt/amazon/ofi-nccl/lib/libnccl-net.so",
    "/usr/local/lib/python3.10/site-packages/torch/nn/parallel/DistributedDataParallel.py",
    "/fsx/checkpoints/Llama3-70B-Instruct/consolidatedCheckpoint00001/model.pt",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/fsx/job123/nccl_trace_rank_",
    "123456789012.dkr.ecr.us-west-2.amazonaws.com/llama@sha256:9b2e4c6d8f0a1b3c5d7e9f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1d3e",
    "https://github.com/org/repo/blob/ecf9c8dcd2d799ef10ae53183b2d7e3d4db18d6b/docs/ISSUES.md#L46",
    "llama-pretrain-worker-0-7f9c8d6b5-x2k4q Running on ip-10-1-0-12",
    "HealthMonitoringAgentDetectionEvent NvidiaErrorTerminate NvidiaXID79Error",
    "WorkNCCL(SeqNum=4211, OpType=ALLREDUCE, NumelIn=262144000, NumelOut=262144000, Timeout(ms)=600000)",
    "arn:aws:sagemaker:us-west-2:123456789012:cluster/54a9124b9b56 ssm:StartSession AccessDeniedException",
    "PWD=/fsx/ubuntu max_tokens=2048 tokenizer=/fsx/tokenizer use_auth=true session_id=s-0123",
    "Basic checks passed; Bearer tokens are rotated hourly; authorization failed for user alice",
    "NCCL_SOCKET_IFNAME=^lo,docker,efa,veth,virbr NCCL_DEBUG_FILE=/fsx/logs/nccl-%h-%p.log",
    "NCCL WARN NET/OFI Request 0x7f3a completed with error. RC: 5. Error: 13 (Permission denied)",
    "rdmap16s27 rx_bytes 1234567 /sys/class/infiniband/rdmap16s27/ports/1/hw_counters/rx_bytes",
]


@pytest.mark.parametrize("line", EVIDENCE)
def test_evidence_is_not_mistaken_for_a_secret(line: str) -> None:
    assert scrub_counted(line) == (line, 0)


def _corpus_lines() -> list[str]:
    corpus = json.loads((DATA / "log_corpus/corpus.json").read_text(encoding="utf-8"))
    return [line for excerpt in corpus["excerpts"] for line in excerpt["text"].splitlines()]


# A run of 40 or more hex digits: a signature or token to the scrubber, which cannot tell it from
# an identifier of that length (Ray's 56-digit worker and node ids are both).
_LONG_HEX = re.compile(rf"(?<![0-9a-fA-F])[0-9a-fA-F]{{{MIN_HEX_CHARS},}}(?![0-9a-fA-F])")


def test_real_log_and_probe_text_is_left_alone() -> None:
    """The classifier corpus (real lines from public issue threads) and every probe fixture pass
    through unchanged, but for runs of 40+ hex digits, and those lines classify as they did:
    redaction at entry costs the checks no evidence."""
    lines = _corpus_lines()
    lines += [line for path in sorted((DATA / "probe").glob("*.txt")) for line in path.read_text().splitlines()]
    assert len(lines) > 500
    changed = [line for line in lines if scrub(line) != line]
    unexplained = [line for line in changed if _LONG_HEX.sub(REDACTED, scrub(line)) != _LONG_HEX.sub(REDACTED, line)]
    assert unexplained == []
    for line in changed:
        before = [(h.id, h.reference) for h in scan_text(line + "\n").hits]
        assert [(h.id, h.reference) for h in scan_text(scrub(line) + "\n").hits] == before, line


def test_count_is_the_number_of_values_replaced() -> None:
    text = "password=a token=b AKIAIOSFODNN7EXAMPLE postgres://u:p@db/x"
    scrubbed, count = scrub_counted(text)
    assert count == 4 == count_redacted(scrubbed)


def test_names_that_hold_secrets() -> None:
    for name in ("HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "db_pwd", "WANDB_API_KEY", "OAUTH_CLIENT"):
        assert is_secret_name(name), name
    for name in ("PWD", "OLDPWD", "NCCL_DEBUG", "TOKENIZER_PATH", "author", "SessionId", "session_document"):
        assert not is_secret_name(name), name


def test_env_values_are_redacted_by_name_or_by_shape() -> None:
    assert redact_value("HF_TOKEN", "short") == REDACTED  # by name
    assert redact_value("INNOCENT", "AKIA" + "ABCDEFGHIJKLMNOP") == REDACTED  # by shape
    assert redact_value("EXTRA", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY") == REDACTED
    # A URL keeps its host: only the userinfo goes.
    assert (
        redact_value("DATABASE_URL", "postgres://u:p@db.internal:5432/app")
        == f"postgres://{REDACTED}@db.internal:5432/app"
    )
    assert redact_value("EXTRA_ARGS", "--lr 3e-4 --password hunter2") == f"--lr 3e-4 --password {REDACTED}"
    assert redact_value("NCCL_SOCKET_IFNAME", "^lo,docker") == "^lo,docker"
    assert redact_value("HF_TOKEN", "") == ""


def test_command_lines_lose_the_value_after_a_secret_flag() -> None:
    argv = ["torchrun", "--hf-token", "abc", "--wandb-key=xyz", "--token", "--verbose", "hf_" + "a" * 20]
    assert redact_argv(argv) == [
        "torchrun",
        "--hf-token",
        REDACTED,
        "--wandb-key=xyz",
        "--token",
        "--verbose",
        REDACTED,
    ]


def test_the_log_scrubber_redacts_every_record(caplog: pytest.LogCaptureFixture) -> None:
    install_log_scrubber()
    with caplog.at_level(logging.INFO):
        logging.getLogger("botocore.test").info("body %s", '{"TokenValue": "AAEAAdmYZgT5Xo2xmNJrCiDqkVGYWy"}')
    assert "AAEAAdmYZgT5Xo2x" not in caplog.text and REDACTED in caplog.text


_FRAGMENTS = [text for text, _, _ in KINDS] + EVIDENCE + ["=", ":", " ", "\n", '"', "'", "\\", "/", "-", "@", "://"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=12), max_size=12))
def test_scrubbing_is_idempotent(pieces: list[str]) -> None:
    once, _ = scrub_counted("".join(pieces))
    assert scrub_counted(once) == (once, 0)


_ADVERSARIAL_UNITS = [
    *"aA0 =:-/@\"'\\\n",
    "password",
    "tokentoken",
    "--password ",
    "--token --",
    '"password":"',
    '\\"password\\": \\"',
    "authorization: ",
    "Bearer ",
    "Basic ",
    "-----BEGIN PRIVATE KEY-----",
    "-----BEGIN RSA ",
    "x://u:p@",
    "a://a:",
    "eyJaaaa.eyJbbbb.",
    "AKIAAAAAAAAAAAAAAAAAAA",
    "hf_aaaaaaaaaaaaaaaaaaaa_",
    "=aA0aA0aA0aA0aA0aA0aA0aA0aA0aA0aA0aA0aA0a",
    "GPU-ed5d2ac8-7e1c-41a5-9bb8-4f1e0a3c2d1b",
    "sha256:",
]


@pytest.mark.parametrize("unit", _ADVERSARIAL_UNITS)
@pytest.mark.parametrize("tail", ["", "a", " ", "=", "@", '"'])
def test_no_crafted_4kb_line_is_slow(unit: str, tail: str) -> None:
    """Every rule together stays far under the 10 ms per-pattern budget on a 4 KB crafted line
    (CPU time of this thread, best of three runs: a loaded machine's scheduling cannot fail it)."""
    line = ((unit + tail) * (4096 // len(unit + tail) + 1))[:4096]
    best = float("inf")
    for _ in range(3):
        started = time.thread_time()
        scrub_counted(line)
        best = min(best, time.thread_time() - started)
    assert best < 0.010
