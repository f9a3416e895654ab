"""`hyperpod-nccl support-bundle`: every item the skill says a case needs, secrets redacted."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from hyperpod_nccl.incidents.escalation import SITUATIONS


def unpack(directory: Path) -> dict[str, str]:
    """The files of the one archive in `directory`, by name (all under one folder, its stem)."""
    [archive] = directory.glob("support-*.tar.gz")
    folder = archive.name.removesuffix(".tar.gz")
    with tarfile.open(archive, mode="r:gz") as unpacked:
        members = unpacked.getmembers()
        assert all(m.isfile() and m.name.startswith(f"{folder}/") for m in members)
        return {m.name.split("/", 1)[1]: unpacked.extractfile(m).read().decode() for m in members}  # type: ignore[union-attr]


def _bundle(cli, sim, out: Path, *flags: str):  # type: ignore[no-untyped-def]
    """`support-bundle` of the simulated cluster into `out`."""
    cluster, region = sim.scenario.cluster.name, sim.scenario.region
    return cli("support-bundle", "--cluster", cluster, "--region", region, "--output-dir", str(out), *flags)


def test_bundle_holds_what_a_support_case_needs(simulate, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    out = tmp_path / "bundle"
    run = _bundle(cli, sim, out)
    assert run.code == 0, run.stderr
    files = unpack(out)
    assert set(files) == {
        "case.md",
        "nccl-diag.txt",
        "nccl-diag.json",
        "incidents.json",
        "describe-cluster.json",
        "nccl-env.txt",
        "node-versions.txt",
        "error-lines.txt",
        "manifest.json",
    }
    manifest = json.loads(files["manifest.json"])
    assert {f["name"] for f in manifest["files"]} == set(files) - {"manifest.json"}
    assert all(len(files[f["name"]].encode()) == f["bytes"] for f in manifest["files"])
    case = files["case.md"]
    diag = json.loads(files["nccl-diag.json"])
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
    errors = files["error-lines.txt"]
    assert "Xid" in errors or "NCCL" in errors
    assert json.loads(files["describe-cluster.json"])["arn"] == diag["cluster_arn"]
    assert "Support bundle written to" in run.stdout
    # Each node the diagnosis tried to probe, with the versions its probe read (the simulated p5
    # nodes report theirs) or why none were read.
    header, *rows = (line.split("\t") for line in files["node-versions.txt"].splitlines())
    assert header[3:6] == ["driver", "cuda", "nccl"]
    assert len(rows) == diag["coverage"]["nodes_probed"] + diag["coverage"]["nodes_unreachable"], rows
    assert any(row[3] not in ("-", "") and not row[3].startswith("not read") for row in rows), rows


def _listed(case: str, label: str) -> set[str]:
    [line] = [line for line in case.splitlines() if line.startswith(f"- Affected {label}: ")]
    return set(line.removeprefix(f"- Affected {label}: ").split(", "))


def test_case_lists_every_node_and_pod_an_issue_names(simulate, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The hung job's incident blames one node; the issues of the diagnosis name every node of the
    # job (they wait in the collective): all of them are affected, in or out of an incident.
    sim = simulate("hung-job")
    assert _bundle(cli, sim, tmp_path).code == 0
    files = unpack(tmp_path)
    issues = [f for f in json.loads(files["nccl-diag.json"])["findings"] if f["status"] in ("FAIL", "WARN")]
    named = {kind: {r["id"] for f in issues for r in f["resources"] if r["kind"] == kind} for kind in ("node", "pod")}
    assert len(named["node"]) > 1 and named["pod"], named
    assert _listed(files["case.md"], "instance ids") >= named["node"]
    assert _listed(files["case.md"], "pods") >= named["pod"]


def test_redaction_of_secret_looking_values() -> None:
    from hyperpod_nccl.cli.commands.support_bundle import redact

    assert redact("NCCL_DEBUG", "WARN") == "WARN"
    assert redact("NCCL_SOCKET_IFNAME", "^lo,docker") == "^lo,docker"
    assert redact("TORCH_HUB_TOKEN", "abc") == "<redacted>"
    assert redact("FI_EFA_USE_DEVICE_RDMA", "AKIAABCDEFGHIJKLMNOP") == "<redacted>"


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
    assert made.name.startswith(f"support-{sim.scenario.cluster.name}-") and made.name.endswith(".tar.gz")
    assert "case.md" in unpack(work)

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
    assert run.messages == 'hyperpod-nccl support-bundle: error: cluster name "../\\x1b[2Jevil" cannot name a file\n'


def test_an_output_dir_that_cannot_be_written_is_refused_before_the_diagnosis(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    afile = tmp_path / "a-file"
    afile.write_text("", encoding="utf-8")
    # No cluster exists at all: the refusal must come before any AWS call.
    for target, complaint in [(afile, "is not a directory"), (afile / "sub", f"{afile} is not a writable directory")]:
        run = cli("support-bundle", "--cluster", "nosuch", "--region", "us-west-2", "--output-dir", str(target))
        assert run.code == 2 and run.stdout == "", run.stderr
        [line] = run.stderr.splitlines()
        assert line.startswith(f"hyperpod-nccl support-bundle: error: --output-dir {target}") and complaint in line


def test_an_archive_is_never_replaced_without_force(simulate, cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from hyperpod_nccl.cli.commands import support_bundle

    sim = simulate("healthy-eks")
    monkeypatch.setattr(support_bundle, "default_name", lambda *_: "support-fixed")
    args = ("support-bundle", "--cluster", sim.scenario.cluster.name, "--region", sim.scenario.region)
    assert cli(*args, "--output-dir", str(tmp_path)).code == 0
    first = (tmp_path / "support-fixed.tar.gz").read_bytes()
    again = cli(*args, "--output-dir", str(tmp_path))
    assert again.code == 2 and "support-fixed.tar.gz exists: pass --force" in again.messages
    assert (tmp_path / "support-fixed.tar.gz").read_bytes() == first
    assert cli(*args, "--output-dir", str(tmp_path), "--force").code == 0


def test_a_bundle_over_the_limit_cuts_its_largest_files_and_says_so(simulate, cli, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from hyperpod_nccl.cli.commands import support_bundle

    sim = simulate("eks-p5")
    real = support_bundle.pack_bundle
    monkeypatch.setattr(support_bundle, "pack_bundle", lambda run_, folder: real(run_, folder, 24 * 1024))
    run = _bundle(cli, sim, tmp_path)
    assert run.code == 0, run.stderr
    [archive] = tmp_path.glob("*.tar.gz")
    assert archive.stat().st_size <= 24 * 1024
    files = unpack(tmp_path)
    cut = {f["name"]: f["trimmed_bytes"] for f in json.loads(files["manifest.json"])["files"] if "trimmed_bytes" in f}
    assert "nccl-diag.json" in cut and "cut short by" in run.stdout
    assert "left out to keep the bundle under" in files["nccl-diag.json"]
    assert "Attach the archive to the case" in files["case.md"]  # the summary is always whole


def test_node_versions_fill_every_column_support_asks_for(simulate, cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from hyperpod_nccl_sim.nodes import _DEFAULTS as SIMULATED  # what each simulated node reports

    sim = simulate("healthy-eks")
    assert _bundle(cli, sim, tmp_path).code == 0
    header, *rows = (line.split("\t") for line in unpack(tmp_path)["node-versions.txt"].splitlines())
    column = {name: header.index(name) for name in ("driver", "cuda", "nccl", "ofi_nccl", "efa_installer")}
    probed = [row for row in rows if not row[3].startswith("not read")]
    assert probed, rows
    for row in probed:
        assert row[0] in {sim.instance_id(key) for key in sim.scenario.node_keys()}, row
        shown = {name: row[index] for name, index in column.items()}
        assert shown == {
            "driver": SIMULATED["driver_version"],
            "cuda": SIMULATED["cuda_version"],
            "nccl": SIMULATED["nccl_version"],
            "ofi_nccl": SIMULATED["ofi_nccl_version"],
            "efa_installer": SIMULATED["efa_installer_version"],
        }, row
