"""Argument validation: one clear line, exit 2, never a traceback."""

from __future__ import annotations

import pytest

from hyperpod_nccl.cli.main import main


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["diagnose", "--region", "us-west-2"], "--cluster"),
        (["diagnose", "--cluster", "bad name!", "--region", "us-west-2"], "invalid cluster"),
        (["diagnose", "--cluster", "c1", "--region", "mars"], "invalid region"),
        (["diagnose", "--cluster", "c1", "--region", "us-west-2", "--node", "i-xyz"], "invalid instance id"),
        (["diagnose", "--cluster", "c1", "--region", "us-west-2", "--namespace", "Bad_NS"], "DNS-1123"),
        (["diagnose", "--cluster", "c1", "--region", "us-west-2", "--sample-nodes", "0"], "sample size"),
        (["diagnose", "--cluster", "c1", "--region", "us-west-2", "--since", "2 weeks"], "duration"),
        (["diagnose", "--cluster", "c1", "--region", "us-west-2", "--orchestrator", "k8s"], "invalid choice"),
        (["diagnose", "--cluster", "c1", "--region", "us-west-2", "--fail-on", "P9"], "invalid choice"),
        (["demo", "--scenario", "no-such-scenario"], "unknown scenario"),
    ],
)
def test_invalid_arguments_exit_2_with_one_line(argv: list[str], fragment: str, capsys) -> None:  # type: ignore[no-untyped-def]
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert fragment in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_region_is_required_without_environment(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    assert main(["diagnose", "--cluster", "c1"]) == 2
    assert "--region is required" in capsys.readouterr().err


def test_cluster_arn_is_accepted() -> None:
    from hyperpod_nccl.cli import validate

    arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdef123456"
    assert validate.cluster(arn) == arn


def test_large_sample_is_capped_with_warning() -> None:
    from hyperpod_nccl.cli import validate

    assert validate.clamp_sample(80)[0] == 50
    assert validate.clamp_sample("all") == ("all", None)
