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
        (["diagnose", "--cluster", "c1", "--region", "us-west-2", "--start-session-rate", "0"], "invalid rate"),
        (["diagnose", "--cluster", "c1", "--region", "us-west-2", "--start-session-rate", "nan"], "invalid rate"),
        (["demo", "--scenario", "no-such-scenario"], "unknown scenario"),
        # No abbreviated flags: `--clus` is never silently `--cluster`.
        (["diagnose", "--clus", "c1", "--region", "us-west-2"], "required: --cluster"),
        (["diagnose", "--cluster", "c1", "--clu", "c2", "--region", "us-west-2"], "unrecognized arguments: --clu"),
        (["diagnose", "--cluster", "c1", "--region", "us-west-2", "--read-timeout", "0"], "invalid timeout"),
        (["diagnose", "--cluster", "c1", "--region", "us-west-2", "--connect-timeout", "x"], "invalid timeout"),
        (["diagnose", "--cluster", "c1", "--region", "us-west-2", "--profile", "a b"], "invalid profile"),
        # The monitor's table knows clusters by name; an ARN would silently match nothing.
        (
            [
                "status",
                "--region",
                "us-west-2",
                "--cluster",
                "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdef123456",
            ],
            "expected a name",
        ),
        (["support-bundle", "--cluster", "c1", "--region", "us-west-2", "--format", "json"], "unrecognized arguments"),
        (["incidents", "--cluster", "c1", "--region", "us-west-2", "--format", "html"], "invalid choice"),
        (
            [
                "diagnose",
                "--region",
                "us-west-2",
                "--cluster",
                "arn:aws:sagemaker:us-east-1:123456789012:cluster/abcdef123456",
            ],
            "--region us-west-2 conflicts with the cluster ARN's region us-east-1",
        ),
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


def test_region_is_required_without_environment(monkeypatch, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    assert main(["diagnose", "--cluster", "c1"]) == 2
    assert "no region: pass --region, a cluster ARN, or set a region" in capsys.readouterr().err


def test_a_profile_that_does_not_exist_is_a_usage_error(monkeypatch, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "config"
    config.write_text("[profile oncall]\nregion = eu-west-1\n", encoding="utf-8")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    assert main(["diagnose", "--cluster", "c1", "--region", "us-west-2", "--profile", "nosuch"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "hyperpod-nccl diagnose: error:" in line and "nosuch" in line


def test_the_region_comes_from_the_arn_else_the_profile(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import argparse

    from hyperpod_nccl.cli.target import resolve_region

    config = tmp_path / "config"
    config.write_text("[profile oncall]\nregion = eu-west-1\n", encoding="utf-8")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    arn = "arn:aws:sagemaker:ap-northeast-1:123456789012:cluster/abcdef123456"
    assert (
        resolve_region(argparse.Namespace(cluster=arn, region=None, profile="oncall"), "diagnose") == "ap-northeast-1"
    )
    assert resolve_region(argparse.Namespace(cluster="c1", region=None, profile="oncall"), "diagnose") == "eu-west-1"
    monkeypatch.setenv("AWS_REGION", "us-east-2")  # the environment before the profile, as botocore reads it
    assert resolve_region(argparse.Namespace(cluster="c1", region=None, profile="oncall"), "diagnose") == "us-east-2"
    assert resolve_region(argparse.Namespace(cluster="c1", region="sa-east-1", profile=None), "diagnose") == "sa-east-1"


def test_cluster_arn_is_accepted() -> None:
    from hyperpod_nccl.cli import validate

    arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdef123456"
    assert validate.cluster(arn) == arn


def test_large_sample_is_capped_with_warning() -> None:
    from hyperpod_nccl.cli import validate

    assert validate.clamp_sample(80)[0] == 50
    assert validate.clamp_sample("all") == ("all", None)


def test_the_start_session_rate_paces_the_run_that_asked_for_it() -> None:
    import argparse

    from hyperpod_nccl import thresholds
    from hyperpod_nccl.cli.commands import diagnose
    from hyperpod_nccl.collectors.aws import AwsClients
    from hyperpod_nccl.collectors.context import CollectionContext
    from hyperpod_nccl.pacing import RateLimiter

    parser = argparse.ArgumentParser()
    diagnose.configure(parser)
    default = parser.parse_args(["--cluster", "c1"])
    slower = parser.parse_args(["--cluster", "c1", "--start-session-rate", "1.5"])
    aws = AwsClients(region="us-west-2")
    paces = []
    for args in (default, slower):
        ctx = CollectionContext(request=diagnose.build_request(args, "c1", "us-west-2"), aws=aws)
        assert isinstance(ctx.start_pacer, RateLimiter)
        paces.append(ctx.start_pacer.rate)
    assert paces == [thresholds.SSM_START_SESSION_PER_SECOND, 1.5]
    # Each run its own pacer: nothing shared through a module.
    first, second = (
        CollectionContext(request=diagnose.build_request(default, "c1", "us-west-2"), aws=aws) for _ in "ab"
    )
    assert first.start_pacer is not second.start_pacer and first.filter_pacer is not second.filter_pacer
