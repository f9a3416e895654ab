"""Never more certainty than the data (issue 14, point 7), end to end against the emulation with the
fault injector: a check whose source was denied prints [SKIP] with the reason and never [PASS];
`--fail-on partial` fails a pipeline with its own exit code; a scope that matches nothing is an
error (`--node`) or a WARN (`--namespace`, `--job`); and the monitor never resolves a finding its
check could not read again."""

from __future__ import annotations

import json

from hyperpod_nccl.cli.exit_codes import EXIT_FAIL_ON, EXIT_OK, EXIT_PARTIAL, EXIT_USAGE
from hyperpod_nccl.monitor.alert_messages import ChatbotNotification
from hyperpod_nccl_sim.scenario import FaultSpec
from tests.functional.test_monitor_sweep import _store, _sweep_messages, monitor  # noqa: F401

DENIED_FILTER = FaultSpec(operation="logs:FilterLogEvents", error_code="AccessDeniedException", message="not allowed")
HEALTHY = ("--cluster", "healthy-eks", "--region", "us-west-2")


def test_denied_log_filter_prints_skip_not_pass(simulate, cli) -> None:  # type: ignore[no-untyped-def]
    simulate("healthy-eks")
    clean = cli("diagnose", *HEALTHY, "--no-color")
    assert "[PASS] no NCCL/EFA/GPU failure signatures in CloudWatch logs" in clean.stdout
    assert "[SKIP]" not in clean.stdout and clean.code == EXIT_OK

    simulate("healthy-eks", faults=[DENIED_FILTER])
    run = cli("diagnose", *HEALTHY, "--no-color")
    assert run.code == EXIT_OK, run.stderr
    assert "[PASS] no NCCL/EFA/GPU failure signatures" not in run.stdout
    skip = next(
        i for i, line in enumerate(run.stdout.splitlines()) if "[SKIP] Failure signatures in CloudWatch" in line
    )
    assert run.stdout.splitlines()[skip + 1].strip().startswith("not read: logs:FilterLogEvents denied")
    # No log check passes, and the HMA and version checks, silent for want of events, say SKIP too.
    document = json.loads(cli("diagnose", *HEALTHY, "--format", "json").stdout)
    statuses = {f["check_id"]: f["status"] for f in document["findings"] if f["check_id"].startswith("logs.")}
    assert statuses == {
        "logs.cloudwatch": "WARN",  # the scan says itself that it is incomplete
        "logs.signatures": "SKIP",
        "logs.hma_detections": "SKIP",
        "logs.nccl_versions": "SKIP",
    }
    # The control plane, the probes and Kubernetes read nothing from CloudWatch: they still pass.
    others = [f for f in document["findings"] if not f["check_id"].startswith("logs.")]
    assert others and all(f["status"] != "SKIP" for f in others)
    assert "Partial: 1 source(s) not fully read" in run.stdout


def test_fail_on_partial_has_its_own_exit_code(simulate, cli) -> None:  # type: ignore[no-untyped-def]
    simulate("healthy-eks")
    assert cli("diagnose", *HEALTHY, "--fail-on", "partial").code == EXIT_OK
    simulate("healthy-eks", faults=[DENIED_FILTER])
    assert cli("diagnose", *HEALTHY, "--fail-on", "partial").code == EXIT_PARTIAL == 4
    # With a priority too, an issue at it wins: "CloudWatch scan incomplete" is a P2 WARN.
    assert cli("diagnose", *HEALTHY, "--fail-on", "P2", "--fail-on", "partial").code == EXIT_FAIL_ON
    assert cli("diagnose", *HEALTHY, "--fail-on", "P1", "--fail-on", "partial").code == EXIT_PARTIAL
    assert cli("incidents", *HEALTHY, "--fail-on", "partial").code == EXIT_PARTIAL


def test_a_node_that_is_not_in_the_cluster_is_a_usage_error_listing_the_nodes(simulate, cli) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("healthy-eks")
    run = cli("diagnose", *HEALTHY, "--node", "i-0123456789abcdef0")
    assert run.code == EXIT_USAGE and run.stdout == ""
    [line] = run.messages.strip().splitlines()
    assert line.startswith("hyperpod-nccl diagnose: error: --node i-0123456789abcdef0 is not a node of cluster")
    described = sim.clients().client("sagemaker").list_cluster_nodes(ClusterName="healthy-eks")
    ids = sorted(n["InstanceId"] for n in described["ClusterNodeSummaries"])
    assert f"its {len(ids)} node(s): {', '.join(ids[:5])}" in line
    # One of them probes that node only; a malformed id never reaches the cluster.
    assert cli("diagnose", *HEALTHY, "--node", ids[0]).code == EXIT_OK
    malformed = cli("diagnose", *HEALTHY, "--node", "i-0doesnotexist")
    assert malformed.code == EXIT_USAGE and "invalid instance id" in malformed.stderr


def test_a_namespace_or_job_that_matches_no_pod_is_a_warn(simulate, cli) -> None:  # type: ignore[no-untyped-def]
    simulate("healthy-eks")
    run = cli("diagnose", *HEALTHY, "--no-color", "--namespace", "nope")
    assert "[WARN] P2 0 pods matched --namespace nope" in run.stdout
    assert "namespace nope does not exist" in run.stdout and "→ references/operations.md § 1.1" in run.stdout
    assert "No issues found" not in run.stdout
    job = cli("diagnose", *HEALTHY, "--no-color", "--namespace", "ml", "--job", "nope", "--fail-on", "P2")
    assert "[WARN] P2 0 pods matched --namespace ml --job nope" in job.stdout and job.code == EXIT_FAIL_ON
    matched = cli("diagnose", *HEALTHY, "--no-color", "--namespace", "ml")
    assert "0 pods matched" not in matched.stdout


def test_the_monitor_keeps_open_what_a_denied_source_cannot_confirm(simulate, monitor) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    # eks-p5's security group lacks its outbound self-reference: the first sweep opens that finding.
    deployed = monitor(simulate("eks-p5"))
    assert deployed.sweep().status == "SUCCEEDED"
    cluster = deployed.simulation.scenario.cluster.name

    def sg_findings() -> set[str]:
        items = _store(deployed).open_findings(deployed.region, cluster)
        return {item["sk"] for item in items if "network.security_group" in item["finding"]}

    opened = sg_findings()
    assert opened
    # Next sweep the monitor may no longer read the security groups: nothing is known about them.
    deployed.emulation.faults.add_fault(
        FaultSpec(operation="ec2:DescribeSecurityGroups", error_code="UnauthorizedOperation", http_status=403)
    )
    second = deployed.sweep()
    assert second.status == "SUCCEEDED"
    assert sg_findings() == opened, "a finding whose check could not read its input was resolved"
    # Nothing changed but the permission: no finding new or resolved, the lost read is told instead.
    assert second.output is not None and second.output["aggregate"]["changes"] == 0
    [message] = _sweep_messages(second)
    description = ChatbotNotification.model_validate(message).content.description
    assert "[RESOLVED]" not in description and "ec2:DescribeSecurityGroups" in description
