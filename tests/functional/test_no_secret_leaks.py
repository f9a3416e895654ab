"""Security invariant: no secret reaches a report, a log line or the JSON document — not the
SSM session tokens the agents issued, not the EKS bearer token, not the values of
secret-looking environment variables, not the AWS secret key."""

from __future__ import annotations

import logging

from hyperpod_nccl.simulation.aws import FAKE_SECRET_KEY

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
