"""Never more certainty than the data (issue 14, point 7), on hand-built inventories: a check that
could not read what it reads reports SKIP with the reason, never PASS; a source not collected at
all gets one SKIP line; a SKIP is no issue and resolves nothing in the monitor; a scope that
matches nothing is a WARN or an error."""

from __future__ import annotations

import ast
import io
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hyperpod_nccl import reads
from hyperpod_nccl.checks import DEFAULT_READS, check, discover
from hyperpod_nccl.cli.render import TextReport
from hyperpod_nccl.collectors import kubernetes as kubernetes_collector
from hyperpod_nccl.collectors import require_scoped_node
from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl.collectors.context import CollectionContext
from hyperpod_nccl.engine import build_result, evaluate
from hyperpod_nccl.errors import ScopeMatchesNothing
from hyperpod_nccl.models.cluster import (
    ClusterDescription,
    ClusterNode,
    ControlPlaneInventory,
    InstanceGroup,
    SecurityGroup,
    SecurityGroupRule,
)
from hyperpod_nccl.models.findings import DegradedSource, Finding, Priority, Resource, Scope, Status
from hyperpod_nccl.models.inventory import Inventory
from hyperpod_nccl.models.kubernetes import KubernetesInventory
from hyperpod_nccl.models.logs import LogInventory
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl.monitor.diff import OpenFinding, compute_changes
from hyperpod_nccl.monitor.states.aggregate import re_evaluation_rule
from hyperpod_nccl.references import OPS_REMEDIATIONS, OPS_SCOPE

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CHECKS = discover()
SG = "sg-0123456789abcdef0"


def _self_referencing(group_id: str) -> SecurityGroup:
    rule = SecurityGroupRule(protocol="-1", group_ids=[group_id])
    return SecurityGroup(group_id=group_id, ingress=[rule], egress=[rule])


def _inventory(*, logs: LogInventory | None = None, kubernetes: KubernetesInventory | None = None) -> Inventory:
    cluster = ClusterDescription(
        name="c1",
        arn="arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdef123456",
        status="InService",
        orchestrator="eks",
        instance_groups=[InstanceGroup(name="worker", instance_type="ml.p5.48xlarge", current_count=1, target_count=1)],
        security_group_ids=[SG],
    )
    return Inventory(
        cluster_name="c1",
        region="us-west-2",
        orchestrator="eks",
        collected_at=NOW,
        window_start=NOW,
        window_end=NOW,
        control_plane=ControlPlaneInventory(
            cluster=cluster,
            nodes=[
                ClusterNode(
                    instance_id="i-0aaaaaaaaaaaaaaa1", instance_group="worker", instance_type="x", status="Running"
                )
            ],
            events=[],
            security_groups={SG: _self_referencing(SG)},
            security_group_attachments={SG: ["cluster VpcConfig"]},
        ),
        logs=logs,
        kubernetes=kubernetes,
    )


def _scanned_logs() -> LogInventory:
    return LogInventory(log_group="/aws/sagemaker/Clusters/c1/abcdef123456", group_exists=True)


def _denied(action: str, source: str = "somewhere", *, partial: bool = False) -> DegradedSource:
    return DegradedSource(
        source=source,
        reason=f"{action} denied (AccessDeniedException: no)",
        fix=f"grant {action}",
        missing_action=action,
        partial=partial,
        unread=[action],
    )


def _by_check(findings: list[Finding]) -> dict[str, list[Finding]]:
    grouped: dict[str, list[Finding]] = {}
    for finding in findings:
        grouped.setdefault(finding.check_id, []).append(finding)
    return grouped


def test_a_pass_whose_input_was_denied_is_a_skip_naming_the_action() -> None:
    inventory = _inventory(logs=_scanned_logs())
    clean, _ = evaluate(inventory)
    assert [f.status for f in _by_check(clean)["logs.signatures"]] == [Status.PASS]

    found, _ = evaluate(inventory, [_denied(reads.FILTER_LOG_EVENTS, "CloudWatch logs")])
    [signatures] = _by_check(found)["logs.signatures"]
    assert signatures.status is Status.SKIP and not signatures.is_issue
    assert signatures.detail.startswith("not read: logs:FilterLogEvents denied")
    # What the data that was read said stays readable, after the reason; the title claims nothing.
    assert "no NCCL/EFA/GPU failure signatures" in signatures.detail
    assert "no NCCL" not in signatures.title and "unknown" in signatures.title
    assert signatures.fingerprint == _by_check(clean)["logs.signatures"][0].fingerprint


def test_a_check_that_said_nothing_for_want_of_input_says_skip() -> None:
    # Without DescribeSecurityGroups the SG checks yield nothing: silence would read as "fine".
    inventory = _inventory()
    inventory.control_plane.security_groups = None
    found, _ = evaluate(inventory, [_denied(reads.DESCRIBE_SECURITY_GROUPS, "security groups")])
    [self_reference] = _by_check(found)["network.security_group_self_reference"]
    assert self_reference.status is Status.SKIP
    assert self_reference.detail == "not read: ec2:DescribeSecurityGroups denied"


def test_a_partly_read_source_says_so_and_a_fail_stands() -> None:
    open_egress = SecurityGroup(group_id=SG, ingress=[SecurityGroupRule(protocol="-1", group_ids=[SG])])
    inventory = _inventory()
    inventory.control_plane.security_groups = {SG: open_egress}
    throttled = DegradedSource(
        source="security groups",
        reason="ec2:DescribeSecurityGroups throttled after retries (Throttling)",
        fix="re-run later",
        partial=True,
        unread=[reads.DESCRIBE_SECURITY_GROUPS],
    )
    found, _ = evaluate(inventory, [throttled])
    statuses = {f.status for f in _by_check(found)["network.security_group_self_reference"]}
    # What was read shows the missing egress rule: a FAIL is certain even from partial data.
    assert statuses == {Status.FAIL}
    inventory.control_plane.security_groups = {SG: _self_referencing(SG)}
    found, _ = evaluate(inventory, [throttled])
    [skip] = _by_check(found)["network.security_group_self_reference"]
    assert skip.status is Status.SKIP and skip.detail.startswith(
        "not read: ec2:DescribeSecurityGroups throttled after retries, partly read"
    )


@pytest.mark.parametrize(
    ("failed", "unaffected"),
    [
        # The security-group checks read DescribeSecurityGroups only: cluster events do not matter.
        (reads.LIST_CLUSTER_EVENTS, "network.security_group_self_reference"),
        # "The cluster is InService" reads DescribeCluster only: the SGs do not matter.
        (reads.DESCRIBE_SECURITY_GROUPS, "cluster.status"),
        (reads.DESCRIBE_LOG_GROUPS, "cluster.node_status"),
    ],
)
def test_a_degraded_source_skips_only_the_checks_that_read_it(failed: str, unaffected: str) -> None:
    inventory = _inventory(logs=_scanned_logs())
    found, _ = evaluate(inventory, [_denied(failed)])
    assert [f.status for f in _by_check(found)[unaffected]] == [Status.PASS]
    skipped = {f.check_id for f in found if f.status is Status.SKIP and f.check_id in CHECKS}
    assert skipped == {c.meta.id for c in CHECKS.values() if failed in c.meta.reads and c.applies_to(inventory)}
    assert skipped, "the failure must skip the checks that read it"


def test_every_control_plane_check_names_the_one_api_it_reads() -> None:
    for registered in CHECKS.values():
        if registered.meta.source == "control_plane":
            assert len(registered.meta.reads) == 1, registered.meta.id
            assert registered.meta.reads <= reads.CONTROL_PLANE_READS


def test_reads_default_per_source_and_unknown_names_are_refused() -> None:
    assert (
        CHECKS["logs.signatures"].meta.reads
        == DEFAULT_READS["logs"]
        == {
            reads.DESCRIBE_LOG_GROUPS,
            reads.FILTER_LOG_EVENTS,
        }
    )
    assert CHECKS["node.gpu_xid"].meta.reads == frozenset()
    assert all(c.meta.reads <= reads.ALL_READS for c in CHECKS.values())
    with pytest.raises(ValueError, match="logs:FilterLogEvent"):
        check(
            id="logs.typo",
            title="t",
            priority=Priority.P2,
            reference=OPS_REMEDIATIONS,
            source="logs",
            reads=["logs:FilterLogEvent"],
        )
    with pytest.raises(ValueError, match="unknown Kubernetes read"):
        reads.kubernetes_read("pod")


def test_a_source_not_collected_gets_one_skip_line_with_the_reason() -> None:
    inventory = _inventory()  # no logs, no Kubernetes, no probes
    found, _ = evaluate(inventory, [_denied(reads.DESCRIBE_LOG_GROUPS, "CloudWatch logs")])
    lines = {f.check_id: f for f in found if f.check_id in ("logs", "kubernetes", "node_probes")}
    assert set(lines) == {"logs", "kubernetes", "node_probes"}
    logs = lines["logs"]
    assert logs.status is Status.SKIP and not logs.is_issue
    assert logs.fields["checks_not_run"] == sum(1 for c in CHECKS.values() if c.meta.source == "logs")
    assert logs.detail == "not read: logs:DescribeLogGroups denied"
    assert lines["kubernetes"].detail == "nothing was collected for them"
    # A Slurm cluster runs no Kubernetes check: nothing to announce there.
    inventory.orchestrator = "slurm"
    found, _ = evaluate(inventory)
    assert "kubernetes" not in {f.check_id for f in found} and "logs" in {f.check_id for f in found}


def test_the_report_prints_skip_never_pass_and_no_all_clear() -> None:
    inventory = _inventory(logs=_scanned_logs())
    result = build_result(inventory, [_denied(reads.FILTER_LOG_EVENTS, "CloudWatch logs")], NOW)
    out = io.StringIO()
    TextReport(out, colour=False).render(result)
    text = out.getvalue()
    assert "[SKIP] Failure signatures in CloudWatch logs: unknown" in text
    assert "[PASS] no NCCL/EFA/GPU failure signatures" not in text
    assert "No issues found in the data that was read: this is no all-clear" in text
    assert "Partial: 1 source(s) not fully read" in text
    assert result.verdict.root_causes == [] and not result.issues
    coloured = io.StringIO()
    TextReport(coloured, colour=True).render(result)
    assert "\033[2m[SKIP]\033[0m" in coloured.getvalue()


def _open_finding(finding: Finding) -> OpenFinding:
    return OpenFinding(fingerprint=finding.fingerprint, finding=finding, first_seen=NOW, last_seen=NOW)


def _sg_fail() -> Finding:
    return CHECKS["network.security_group_self_reference"].fail(
        "missing", resources=[Resource(kind="security_group", id=SG)]
    )


def test_the_monitor_keeps_open_what_its_check_could_not_read_again() -> None:
    # Last sweep: the SG missed its self-reference. This sweep: DescribeSecurityGroups denied.
    before = [_open_finding(_sg_fail())]
    inventory = _inventory()
    inventory.control_plane.security_groups = None
    degraded = [_denied(reads.DESCRIBE_SECURITY_GROUPS, "security groups")]
    result = build_result(inventory, degraded, NOW)
    changes, kept = compute_changes(
        before, result.findings, re_evaluated=re_evaluation_rule(inventory, result.degraded_sources)
    )
    assert changes == [] and kept == [before[0].fingerprint]
    # The same sweep with the SGs read and fixed does resolve it.
    inventory.control_plane.security_groups = {SG: _self_referencing(SG)}
    result = build_result(inventory, [], NOW)
    changes, kept = compute_changes(before, result.findings, re_evaluated=re_evaluation_rule(inventory, []))
    assert [c.kind for c in changes] == ["resolved"] and kept == []


def test_a_skip_of_the_same_fingerprint_never_resolves() -> None:
    opened = _sg_fail()
    unknown = opened.model_copy(update={"status": Status.SKIP, "priority": None})
    changes, kept = compute_changes([_open_finding(opened)], [unknown], re_evaluated=lambda f: True)
    assert changes == [] and kept == [opened.fingerprint]


def _kubernetes(namespace: str | None, job: str | None, *, pods: list[object] | None) -> KubernetesInventory:
    return KubernetesInventory(
        scope_namespace=namespace,
        scope_job=job,
        pods=pods,  # type: ignore[arg-type]
        namespace_labels={"default": {}, "kube-system": {}, "ml": {}},
    )


def test_a_namespace_that_matches_no_pod_is_a_warn_with_the_namespaces() -> None:
    [finding] = CHECKS["k8s.scope"].run(_inventory(kubernetes=_kubernetes("nope", None, pods=[])))
    assert finding.status is Status.WARN and finding.priority is Priority.P2
    assert finding.title.startswith("0 pods matched --namespace nope")
    assert "namespace nope does not exist" in finding.detail and "ml" in finding.detail
    assert finding.reference == OPS_SCOPE
    assert finding.resources == [Resource(kind="namespace", id="nope")]


def test_a_job_that_matches_no_pod_names_the_labels_searched() -> None:
    [finding] = CHECKS["k8s.scope"].run(_inventory(kubernetes=_kubernetes("ml", "gone", pods=[])))
    assert finding.title.startswith("0 pods matched --namespace ml --job gone")
    assert "job-name" in finding.detail and finding.resources[-1] == Resource(kind="job", id="ml/gone")


@pytest.mark.parametrize(
    ("namespace", "job", "pods"),
    [(None, None, []), ("ml", None, None)],
    ids=["unscoped", "pods-not-read"],
)
def test_no_scope_warning_without_a_scope_or_without_the_pods(
    namespace: str | None, job: str | None, pods: list[object] | None
) -> None:
    assert CHECKS["k8s.scope"].run(_inventory(kubernetes=_kubernetes(namespace, job, pods=pods))) == []


def _context(node: str | None) -> CollectionContext:
    request = DiagnoseRequest(cluster="c1", region="us-west-2", scope=Scope(node=node))
    return CollectionContext(request=request, aws=AwsClients(region="us-west-2"))


def test_a_node_that_is_not_in_the_cluster_stops_with_the_node_list() -> None:
    control_plane = _inventory().control_plane
    control_plane.nodes = [
        ClusterNode(instance_id=f"i-0{n:016x}", instance_group="worker", instance_type="x", status="Running")
        for n in range(8)
    ]
    with pytest.raises(ScopeMatchesNothing) as stopped:
        require_scoped_node(_context("i-0123456789abcdef0"), control_plane)
    message = stopped.value.message
    assert message.startswith("--node i-0123456789abcdef0 is not a node of cluster c1; its 8 node(s): ")
    assert message.endswith("i-00000000000000004 and 3 more")
    require_scoped_node(_context("i-00000000000000003"), control_plane)  # one of them: no error
    control_plane.nodes_complete = False  # a partial listing proves nothing
    require_scoped_node(_context("i-0123456789abcdef0"), control_plane)


def _kubernetes_read_names() -> set[str]:
    """The resource names the Kubernetes collector reads, skips or reports refused, from its source."""
    named: set[str] = set()
    for node in ast.walk(ast.parse(Path(kubernetes_collector.__file__).read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        appended = node.func.attr == "append" and getattr(owner, "attr", "") in ("forbidden_reads", "failed_reads")
        if node.func.attr in ("_read", "_skip_if_slow", "_note_timeout") or appended:
            named |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return named


def test_every_read_the_kubernetes_collector_names_has_an_input_name() -> None:
    # A resource the collector names but `reads` lacks would raise while it reports the failure.
    named = _kubernetes_read_names()
    assert {"nodes", "pods", "configmaps", "pod logs"} <= named
    assert named <= set(reads.KUBERNETES_RESOURCES)
