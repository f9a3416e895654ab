"""`hyperpod-nccl support-bundle`: every item the skill says a case needs, secrets redacted."""

from __future__ import annotations

import json

from hyperpod_nccl.incidents.escalation import SITUATIONS


def test_bundle_holds_what_a_support_case_needs(simulate, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    out = tmp_path / "bundle"
    run = cli(
        "support-bundle", "--cluster", sim.scenario.cluster.name, "--region", sim.scenario.region, "--output", str(out)
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
        "--output",
        str(blocker / "sub"),
    )
    assert run.code == 1 and "cannot write" in run.stderr and "Traceback" not in run.stderr
