"""The control-plane half of `diagnose` against the AWS emulation, including every row of the
skill's error-handling table that concerns the control plane."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from hyperpod_nccl.engine import diagnose
from hyperpod_nccl.models.findings import Priority, Status
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.models.verdict import SCHEMA_VERSION
from hyperpod_nccl_sim.scenario import EventSpec, FaultSpec, NodeOverride, Scenario


def _request(sim) -> DiagnoseRequest:  # type: ignore[no-untyped-def]
    return DiagnoseRequest(cluster=sim.scenario.cluster.name, region=sim.scenario.region)


def _by_check(result, check_id):  # type: ignore[no-untyped-def]
    return [f for f in result.findings if f.check_id == check_id]


def test_healthy_cluster_has_no_control_plane_issues(simulate) -> None:
    # Given a healthy simulated cluster
    sim = simulate("healthy-eks")
    # When it is diagnosed
    result = diagnose(_request(sim), sim.clients())
    # Then nothing is an issue and the cluster is recognised as EKS with a real-shaped ARN
    assert result.issues == []
    assert result.orchestrator == "eks"
    assert result.cluster_arn and result.cluster_arn.rsplit("/", 1)[-1].isalnum()
    assert len(result.cluster_arn.rsplit("/", 1)[-1]) == 12
    assert result.eks_cluster_name == "healthy-eks-eks"
    assert result.degraded_sources == []


def test_eks_scenario_reports_each_injected_fault(simulate) -> None:
    sim = simulate("eks-p5")
    result = diagnose(_request(sim), sim.clients())
    sg = _by_check(result, "network.security_group_self_reference")
    failing = [f for f in sg if f.status is Status.FAIL]
    assert len(failing) == 1 and "outbound" in failing[0].title and failing[0].priority is Priority.P0
    group_id = failing[0].resources[0].id
    assert any(group_id in c.command and "egress" in c.command for c in failing[0].suggested_commands)
    assert all("0.0.0.0/0" not in c.command for f in result.findings for c in f.suggested_commands)

    failed_node = sim.instance_id("worker:5")
    nodes = _by_check(result, "cluster.node_status")
    assert [f.resources[0].id for f in nodes if f.status is Status.FAIL] == [failed_node]
    # DeepHealthCheckInProgress and Pending are transitions, not failures (a defect of the original).
    transitions = next(f for f in nodes if f.status is Status.INFO)
    assert any("DeepHealthCheckInProgress" in line for line in transitions.evidence)

    events = _by_check(result, "cluster.events")
    categories = {f.fields["signature"] for f in events if f.is_issue}
    assert categories == {"efa_health_check", "lifecycle_script", "capacity"}
    efa = next(f for f in events if f.fields.get("signature") == "efa_health_check")
    assert efa.reference.pointer == "references/debugging-guide.md § 6"
    assert any(r.id == failed_node for r in efa.resources)


def test_slurm_scenario_checks_override_security_groups(simulate) -> None:
    sim = simulate("slurm-p5en")
    result = diagnose(_request(sim), sim.clients())
    assert result.orchestrator == "slurm"
    titles = [f.title for f in result.issues]
    assert any("no inbound self-referencing rule" in t for t in titles)
    assert any("does not admit all traffic" in t for t in titles)
    assert any(f.check_id == "cluster.node_recovery" and f.status is Status.WARN for f in result.findings)


def test_cluster_not_found_lists_existing_clusters_and_exits_1(simulate, cli) -> None:
    simulate("healthy-eks")
    run = cli("diagnose", "--cluster", "no-such-cluster", "--region", "us-west-2")
    assert run.code == 1
    assert "not found" in run.stderr
    assert "healthy-eks (InService)" in run.stderr
    assert "Traceback" not in run.stderr + run.stdout


def test_missing_credentials_exit_1_with_fix(simulate, cli) -> None:
    simulate("healthy-eks")
    run = cli(
        "diagnose",
        "--cluster",
        "healthy-eks",
        "--region",
        "us-west-2",
        env={"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None},
    )
    assert run.code == 1
    assert "credentials" in run.stderr.lower() and "fix" in run.stderr
    assert "Traceback" not in run.stderr


def test_sts_rejection_exit_1(simulate, cli) -> None:
    simulate("healthy-eks", faults=[FaultSpec(operation="sts:GetCallerIdentity", error_code="ExpiredToken")])
    run = cli("diagnose", "--cluster", "healthy-eks", "--region", "us-west-2")
    assert run.code == 1
    assert "ExpiredToken" in run.stderr


def test_describe_cluster_access_denied_warns_and_continues(simulate) -> None:
    sim = simulate(
        "eks-p5", faults=[FaultSpec(operation="sagemaker:DescribeCluster", error_code="AccessDeniedException")]
    )
    result = diagnose(_request(sim), sim.clients())
    denied = [d for d in result.degraded_sources if d.missing_action == "sagemaker:DescribeCluster"]
    assert denied and "grant sagemaker:DescribeCluster" in denied[0].fix
    assert denied[0].reference is not None and denied[0].reference.pointer == "references/operations.md § 2"
    # What can still be read is still evaluated: node status comes from ListClusterNodes.
    assert any(f.check_id == "cluster.node_status" and f.status is Status.FAIL for f in result.findings)


def test_each_control_plane_access_denied_names_its_action(simulate) -> None:
    for operation, action in [
        ("sagemaker:ListClusterNodes", "sagemaker:ListClusterNodes"),
        ("sagemaker:ListClusterEvents", "sagemaker:ListClusterEvents"),
        ("ec2:DescribeSecurityGroups", "ec2:DescribeSecurityGroups"),
    ]:
        code = "UnauthorizedOperation" if operation.startswith("ec2") else "AccessDeniedException"
        sim = simulate("eks-p5", faults=[FaultSpec(operation=operation, error_code=code, http_status=403)])
        result = diagnose(_request(sim), sim.clients())
        assert [d.missing_action for d in result.degraded_sources] == [action], operation
        assert result.findings, "the rest of the diagnosis still reports"
        sim.stop()


def test_throttled_events_warn_and_keep_partial_data(simulate) -> None:
    sim = simulate(
        "eks-p5", faults=[FaultSpec(operation="sagemaker:ListClusterEvents", error_code="ThrottlingException")]
    )
    result = diagnose(_request(sim), sim.clients())
    throttled = [d for d in result.degraded_sources if d.source == "cluster events"]
    assert throttled and "throttled" in throttled[0].reason and "re-run later" in throttled[0].fix
    assert any(f.check_id == "network.security_group_self_reference" for f in result.findings)


def test_throttling_burst_is_absorbed_by_retries(simulate) -> None:
    sim = simulate(
        "eks-p5",
        faults=[FaultSpec(operation="sagemaker:ListClusterEvents", error_code="ThrottlingException", times=1)],
    )
    result = diagnose(_request(sim), sim.clients(max_attempts=3))
    assert result.degraded_sources == []
    assert any(f.check_id == "cluster.events" and f.is_issue for f in result.findings)


def test_events_are_not_listed_without_continuous_provisioning(simulate) -> None:
    # DescribeCluster's NodeProvisioningMode decides, not an error message: ListClusterEvents is
    # never called (even a denial planted on it stays unseen) and an INFO says why.
    def edit(scenario: Scenario) -> None:
        scenario.cluster.node_provisioning_mode = None

    denied = FaultSpec(operation="sagemaker:ListClusterEvents", error_code="AccessDeniedException", http_status=403)
    sim = simulate("eks-p5", edit=edit, faults=[denied])
    sim.emulation.faults.calls.clear()
    result = diagnose(_request(sim), sim.clients())
    assert "sagemaker:DescribeCluster" in sim.emulation.faults.calls
    assert "sagemaker:ListClusterEvents" not in sim.emulation.faults.calls
    events = _by_check(result, "cluster.events")
    assert len(events) == 1 and events[0].status is Status.INFO
    assert "NodeProvisioningMode unset" in events[0].detail and "Continuous" in events[0].detail
    assert result.degraded_sources == []


def test_the_emulation_refuses_cluster_events_of_a_cluster_not_in_continuous_mode(simulate) -> None:
    # What AWS answers is undocumented (aws.py says so); the emulation refuses, and the product
    # never relies on how.
    def edit(scenario: Scenario) -> None:
        scenario.cluster.node_provisioning_mode = None

    sim = simulate("eks-p5", edit=edit)
    sagemaker = sim.emulation.client("sagemaker", sim.scenario.region)
    assert "NodeProvisioningMode" not in sagemaker.describe_cluster(ClusterName=sim.scenario.cluster.name)
    with pytest.raises(ClientError) as refused:
        sagemaker.list_cluster_events(ClusterName=sim.scenario.cluster.name)
    assert refused.value.response["Error"]["Code"] == "ValidationException"


def test_describe_cluster_failing_still_lists_events_and_reports_what_they_answer(simulate) -> None:
    # Without DescribeCluster the mode is unknown: ListClusterEvents is asked, and its answer shown.
    denied = FaultSpec(operation="sagemaker:DescribeCluster", error_code="AccessDeniedException", http_status=403)
    sim = simulate("eks-p5", faults=[denied])
    result = diagnose(_request(sim), sim.clients())
    assert any(f.check_id == "cluster.events" and f.is_issue for f in result.findings)


def test_a_cluster_event_without_event_level_is_read_with_its_level_unknown(simulate) -> None:
    def edit(scenario: Scenario) -> None:
        scenario.events.append(
            EventSpec(
                minutes_ago=30,
                level=None,
                resource_type="Instance",
                node="worker:3",
                description="Lifecycle script execution failed with exit code 2",
            )
        )

    sim = simulate("eks-p5", edit=edit)
    raw = sim.emulation.client("sagemaker", sim.scenario.region).list_cluster_events(
        ClusterName=sim.scenario.cluster.name
    )
    assert any("EventLevel" not in event for event in raw["Events"])  # the record really lacks it
    result = diagnose(_request(sim), sim.clients())
    assert result.degraded_sources == []
    node = sim.instance_id("worker:3")
    [event] = [f for f in _by_check(result, "cluster.events") if any(r.id == node for r in f.resources)]
    assert event.status is Status.FAIL and any("level-unknown" in line for line in event.evidence)


def test_every_node_status_of_the_api_is_handled_as_what_it_is(simulate) -> None:
    held = {"worker:6": "NotFound", "worker:7": "AttachInProgress", "worker:8": "DetachInProgress"}
    held |= {"worker:9": "ShuttingDown", "worker:10": "SystemUpdating"}

    def edit(scenario: Scenario) -> None:
        scenario.nodes = [*scenario.nodes, *(NodeOverride(node=k, status=s) for k, s in held.items())]

    sim = simulate("eks-p5", edit=edit)
    request = _request(sim)
    request.scope.sample_nodes = "all"
    result = diagnose(request, sim.clients())
    # Nodes without an instance (Pending, ShuttingDown, NotFound) are not probed; the others are.
    assert result.coverage.nodes_skipped == 3
    nodes = _by_check(result, "cluster.node_status")
    # Only the Failure fails; NotFound warns with a read of the node only; the rest are transitions.
    assert [f.resources[0].id for f in nodes if f.status is Status.FAIL] == [sim.instance_id("worker:5")]
    [not_found] = [f for f in nodes if f.status is Status.WARN]
    assert not_found.resources[0].id == sim.instance_id("worker:6")
    assert [c.effect for c in not_found.suggested_commands] == ["read"]
    [moving] = [f for f in nodes if f.status is Status.INFO]
    for key in ("worker:7", "worker:8", "worker:9", "worker:10", "worker:11", "worker:12"):
        assert any(sim.instance_id(key) in line for line in moving.evidence), key
    # No finding and no plan step reboots or replaces a node its status rules out.
    ids = {sim.instance_id(k) for k in [*held, "worker:11", "worker:12"]}
    destructive = [
        c.command for f in result.findings for c in f.suggested_commands if c.effect in ("reboot", "replace")
    ]
    destructive += [
        s.command or "" for c in result.verdict.root_causes for s in c.plan if s.stage in ("reboot", "replace")
    ]
    assert not [command for command in destructive if any(i in command for i in ids)]


def test_node_listing_spans_every_page(simulate) -> None:
    def edit(scenario: Scenario) -> None:
        scenario.cluster.instance_groups[0].count = 230
        scenario.nodes = [*scenario.nodes, scenario.nodes[0].model_copy(update={"node": "worker:229"})]

    sim = simulate("eks-p5", edit=edit)
    result = diagnose(_request(sim), sim.clients())
    assert result.coverage.nodes_total == 232
    failed = {f.resources[0].id for f in _by_check(result, "cluster.node_status") if f.status is Status.FAIL}
    assert sim.instance_id("worker:229") in failed


def test_large_cluster_advisory(simulate) -> None:
    def edit(scenario: Scenario) -> None:
        scenario.cluster.instance_groups[0].count = 256

    sim = simulate("healthy-eks", edit=edit)
    result = diagnose(_request(sim), sim.clients())
    advisory = _by_check(result, "cluster.large_cluster")
    assert advisory and advisory[0].priority is Priority.P2
    assert advisory[0].fields["suggested_timeout_s"] == 256 * 5 + 600


def test_cli_text_report_layout(simulate, cli) -> None:
    simulate("eks-p5")
    run = cli("diagnose", "--cluster", "ml-training-eks", "--region", "us-west-2", "--no-color")
    assert run.code == 0
    out = run.stdout
    assert "[FAIL] P0" in out and "→ references/operations.md § 8" in out
    assert "Issues Found: " in out and "Suggested commands (run yourself):" in out
    issues = int(out.split("Issues Found: ", 1)[1].split()[0])
    listed = sum(1 for line in out.splitlines() if line.startswith("  ") and ". [" in line and "→" in line)
    assert issues == listed
    # The report opens with the verdict, then each root cause's findings, then INFO and PASS by source
    # (the whole layout on every scenario: test_report_layout.py).
    verdict, first_cause = out.index("==== Verdict ===="), out.index("\n== 1. P0 ")
    assert verdict < first_cause < out.index("\n== HyperPod control plane: INFO and PASS ==")
    assert "[FAIL] P0" not in out[:first_cause]
    assert "\033[" not in out


def test_cli_json_has_every_field_and_counts_agree(simulate, cli) -> None:
    simulate("eks-p5")
    run = cli("diagnose", "--cluster", "ml-training-eks", "--region", "us-west-2", "--format", "json")
    document = json.loads(run.stdout)
    for key in (
        "cluster_name",
        "cluster_arn",
        "region",
        "orchestrator",
        "window_start",
        "window_end",
        "coverage",
        "findings",
        "degraded_sources",
        "scope",
    ):
        assert key in document
    assert document["schema_version"] == SCHEMA_VERSION
    issues = [f for f in document["findings"] if f["status"] in ("FAIL", "WARN")]
    causes = document["verdict"]["root_causes"]
    assert document["issues_found"] == len(causes) == sum(document["issues_by_priority"].values())
    assert document["findings_with_issues"] == len(issues) == document["verdict"]["findings_folded"]
    # Every issue belongs to exactly one root cause, named by its fingerprint.
    owned = [fp for c in causes for fp in [*c["evidence"], *(f for s in c["explains"] for f in s["findings"])]]
    assert sorted(owned) == sorted(f["fingerprint"] for f in issues)
    assert len(causes) < len(issues)  # the verdict folds: eks-p5 plants symptoms that share a cause
    assert all(f["reference"]["pointer"].startswith("references/") for f in document["findings"])
    assert all(c["reference"]["pointer"].startswith("references/") for c in causes)


def test_fail_on_sets_exit_3(simulate, cli) -> None:
    simulate("eks-p5")
    assert cli("diagnose", "--cluster", "ml-training-eks", "--region", "us-west-2", "--fail-on", "P0").code == 3
    simulate("healthy-eks")
    assert cli("diagnose", "--cluster", "healthy-eks", "--region", "us-west-2", "--fail-on", "P2").code == 0
