"""`hyperpod-nccl support-bundle`: every item the skill says a case needs, secrets redacted."""

from __future__ import annotations

import json

from hyperpod_nccl.incidents.escalation import SITUATIONS


def test_bundle_holds_what_a_support_case_needs(simulate, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    out = tmp_path / "bundle"
    run = cli(
        "support-bundle",
        "--cluster",
        sim.scenario.cluster.name,
        "--region",
        sim.scenario.region,
        "--output-dir",
        str(out),
    )
    assert run.code == 0, run.stderr
    names = {p.name for p in out.iterdir()}
    assert names == {
        "case.md",
        "nccl-diag.txt",
        "nccl-diag.json",
        "incidents.json",
        "describe-cluster.json",
        "nccl-env.txt",
        "error-lines.txt",
    }
    case = (out / "case.md").read_text()
    diag = json.loads((out / "nccl-diag.json").read_text())
    assert sim.scenario.cluster.name in case and diag["cluster_arn"] in case
    assert "Region: " + sim.scenario.region in case
    assert "Orchestrator: eks; EKS cluster " in case
    assert "Failure window (UTC):" in case
    assert sim.instance_id("worker:5") in case
    # All five situations are listed, in order, each with a verdict.
    for number, text in SITUATIONS.items():
        assert f"{number}. [" in case and text in case
    # The larger sample of the skill's bundle (--sample-nodes 10).
    assert diag["scope"]["sample_nodes"] == 10
    errors = (out / "error-lines.txt").read_text()
    assert "Xid" in errors or "NCCL" in errors
    assert json.loads((out / "describe-cluster.json").read_text())["arn"] == diag["cluster_arn"]
    assert "Support bundle written to" in run.stdout


def test_redaction_of_secret_looking_values() -> None:
    from hyperpod_nccl.cli.commands.support_bundle import redact

    assert redact("NCCL_DEBUG", "WARN") == "WARN"
    assert redact("NCCL_SOCKET_IFNAME", "^lo,docker") == "^lo,docker"
    assert redact("TORCH_HUB_TOKEN", "abc") == "<redacted>"
    assert redact("FI_EFA_USE_DEVICE_RDMA", "AKIAABCDEFGHIJKLMNOP") == "<redacted>"


def test_unwritable_output_is_a_clean_error(simulate, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("healthy-eks")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    run = cli(
        "support-bundle",
        "--cluster",
        sim.scenario.cluster.name,
        "--region",
        sim.scenario.region,
        "--output-dir",
        str(blocker / "sub"),
    )
    assert run.code == 1 and "cannot write" in run.stderr and "Traceback" not in run.stderr


def _cluster_named(monkeypatch, name: str, requested: str | None = None) -> None:  # type: ignore[no-untyped-def]
    """The diagnosis reports the cluster as `name` (as a hostile DescribeCluster answer would);
    with `requested`, the cluster the operator named is that too (no argument can be, by parsing)."""
    from hyperpod_nccl.cli.commands import support_bundle

    real = support_bundle.incident_run

    def hostile(args, command):  # type: ignore[no-untyped-def]
        outcome = real(args, command)
        if not isinstance(outcome, int):
            outcome.result.cluster_name = name
        if requested is not None:
            args.cluster = requested
        return outcome

    monkeypatch.setattr(support_bundle, "incident_run", hostile)


def test_default_directory_is_a_safe_form_of_the_cluster_name(simulate, cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("healthy-eks")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args = ("support-bundle", "--cluster", sim.scenario.cluster.name, "--region", sim.scenario.region)
    assert cli(*args).code == 0
    [made] = list(work.iterdir())
    assert made.name.startswith(f"support-{sim.scenario.cluster.name}-") and (made / "case.md").is_file()

    # A name that is a path and a terminal escape: the bundle is named after --cluster, in here.
    made.rename(tmp_path / "first")
    _cluster_named(monkeypatch, "../../\x1b]0;pwned\x07evil")
    run = cli(*args)
    assert run.code == 0, run.stderr
    [made] = list(work.iterdir())
    assert made.name.startswith(f"support-{sim.scenario.cluster.name}-")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first", "work"]  # nothing outside
    assert "\x1b" not in run.stdout and f"Support bundle written to support-{sim.scenario.cluster.name}-" in run.stdout


def test_a_cluster_that_cannot_name_a_directory_is_one_line_exit_2(simulate, cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("healthy-eks")
    monkeypatch.chdir(tmp_path)
    _cluster_named(monkeypatch, "../\x1b[2Jevil", requested="../evil")
    run = cli("support-bundle", "--cluster", sim.scenario.cluster.name, "--region", sim.scenario.region)
    assert run.code == 2 and list(tmp_path.iterdir()) == []
    assert run.messages == (
        'hyperpod-nccl support-bundle: error: cluster name "../\\x1b[2Jevil" cannot name a directory: '
        "pass --output-dir DIR\n"
    )


def test_an_output_dir_holding_files_is_refused_before_the_diagnosis(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    taken = tmp_path / "case"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine\n", encoding="utf-8")
    # No cluster exists at all: the refusal must come before any AWS call.
    run = cli("support-bundle", "--cluster", "nosuch", "--region", "us-west-2", "--output-dir", str(taken))
    assert run.code == 2 and run.stdout == ""
    assert run.stderr == (
        f"hyperpod-nccl support-bundle: error: --output-dir {taken} already holds files: "
        "choose another or pass --force\n"
    )
    assert [p.name for p in taken.iterdir()] == ["notes.txt"]
    afile = tmp_path / "a-file"
    afile.write_text("", encoding="utf-8")
    run = cli("support-bundle", "--cluster", "nosuch", "--region", "us-west-2", "--output-dir", str(afile))
    assert run.code == 2 and "is not a directory" in run.stderr
