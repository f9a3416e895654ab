"""The EKS checks end to end: the product finds the Kubernetes API through eks:DescribeCluster,
authenticates with its STS-presigned token and reads the loopback API emulation seeded from the
scenario files; each check is exercised on a healthy and a faulty cluster."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator

import pytest

from hyperpod_nccl.engine import diagnose
from hyperpod_nccl.models.findings import Finding, Priority, Scope, Status, SweepResult
from hyperpod_nccl.models.request import DiagnoseRequest
from hyperpod_nccl_sim.aws import EmulatedAws
from hyperpod_nccl_sim.runtime import SimulatedCluster
from hyperpod_nccl_sim.scenario import FaultSpec, PodVariation, Scenario, load_scenario

K8S_CHECKS_WITH_PASS = [
    "k8s.node_ready",
    "k8s.node_health_labels",
    "k8s.pod_status",
    "k8s.container_exit_codes",
    "k8s.efa_device_plugin",
    "k8s.efa_requests",
    "k8s.dev_shm",
    "k8s.memlock_ipc_lock",
    "k8s.nccl_env",
    "k8s.rendezvous_service",
    "k8s.network_policies",
    "k8s.image_digest_mismatch",
    "k8s.nccl_version_logs",
    "k8s.pod_logs",
]


def _diagnose(sim: SimulatedCluster, scope: Scope | None = None) -> SweepResult:
    request = DiagnoseRequest(cluster=sim.scenario.cluster.name, region=sim.scenario.region, scope=scope or Scope())
    return diagnose(request, sim.clients())


def _found(result: SweepResult, check_id: str, status: Status | None = None) -> list[Finding]:
    return [f for f in result.findings if f.check_id == check_id and (status is None or f.status is status)]


def _k8s_issues(result: SweepResult) -> list[Finding]:
    return [f for f in result.issues if f.check_id.startswith("k8s.")]


def _run(emulation: EmulatedAws, name: str) -> SweepResult:
    with SimulatedCluster(load_scenario(name), emulation=emulation) as sim:
        return _diagnose(sim)


@pytest.fixture(scope="module")
def faulty(emulation: EmulatedAws) -> Iterator[SweepResult]:
    """One diagnosis of eks-p5, shared by the read-only assertions below."""
    yield _run(emulation, "eks-p5")


@pytest.fixture(scope="module")
def healthy(emulation: EmulatedAws) -> Iterator[SweepResult]:
    """One diagnosis of healthy-eks."""
    yield _run(emulation, "healthy-eks")


def _edit(change: Callable[[Scenario], None]) -> Callable[[Scenario], None]:
    def edit(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        change(scenario)

    return edit


# --- healthy cluster ---------------------------------------------------------------------------


def test_healthy_cluster_passes_every_kubernetes_check(healthy: SweepResult) -> None:
    assert _k8s_issues(healthy) == []
    assert healthy.degraded_sources == []
    for check_id in K8S_CHECKS_WITH_PASS:
        assert _found(healthy, check_id, Status.PASS), check_id
    assert not _found(healthy, "k8s.init_containers")


# --- nodes -------------------------------------------------------------------------------------


def test_unhealthy_nodes_each_get_a_finding_with_instance_id(faulty: SweepResult) -> None:
    sim_scenario = load_scenario("eks-p5")
    failed = sim_scenario.instance_id("worker:5")
    deep = sim_scenario.instance_id("worker:11")
    labels = _found(faulty, "k8s.node_health_labels")
    replacing = next(f for f in labels if any(r.id == failed for r in f.resources))
    assert replacing.status is Status.FAIL and "waiting to be replaced" in replacing.title
    assert "NodeRecovery is Automatic" in replacing.detail
    # What the health-monitoring agent wrote for the Xid 79 it detected: its fault type and reason, in
    # the labels, the node condition and the fault-details annotation.
    assert "fault-type(s)=NvidiaErrorTerminate" in replacing.evidence
    assert "fault-reason(s)=XidHardwareFailure" in replacing.evidence
    assert any(
        e.startswith("condition NvidiaErrorTerminate=True reason=XidHardwareFailure: NVRM: Xid (PCI:0000:53:00): 79")
        for e in replacing.evidence
    )
    assert any("fault-details" in e and "Xid (PCI:0000:53:00): 79" in e for e in replacing.evidence)
    in_progress = next(f for f in labels if any(r.id == deep for r in f.resources))
    assert in_progress.status is Status.WARN and in_progress.priority is Priority.P2
    assert "deep health checks" in in_progress.title
    assert len([f for f in labels if f.is_issue]) == 2

    not_ready = _found(faulty, "k8s.node_ready", Status.FAIL)
    assert [r.id for f in not_ready for r in f.resources if r.kind == "node"] == [sim_scenario.instance_id("system:1")]
    assert "PLEG" in not_ready[0].detail


def test_singular_fault_label_spelling_is_read(simulate) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        node = scenario.kubernetes.nodes[0]
        node.hma_fault = None
        node.labels = {
            "sagemaker.amazonaws.com/node-health-status": "UnschedulablePendingReboot",
            "sagemaker.amazonaws.com/fault-type": "NvidiaErrorReboot",
            "sagemaker.amazonaws.com/fault-reason": "XidHardwareFailure",
        }
        scenario.cluster.node_recovery = "None"

    result = _diagnose(simulate("eks-p5", edit=_edit(change)))
    reboot = next(f for f in _found(result, "k8s.node_health_labels") if "reboot" in f.title)
    assert "fault-type(s)=NvidiaErrorReboot" in reboot.evidence
    assert "fault-reason(s)=XidHardwareFailure" in reboot.evidence
    assert "NodeRecovery is not Automatic" in reboot.detail


def test_the_agents_fault_condition_alone_is_a_finding(simulate) -> None:
    # The labels say Schedulable (cleared by hand), but the health-monitoring agent still holds its
    # NvidiaErrorTerminate condition True: the node is not healthy, and the finding says why.
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.nodes[0].labels = {
            "sagemaker.amazonaws.com/node-health-status": "Schedulable",
            "sagemaker.amazonaws.com/deep-health-check-status": "Passed",
            "sagemaker.amazonaws.com/fault-types": "",
            "sagemaker.amazonaws.com/fault-reasons": "",
        }

    sim = simulate("eks-p5", edit=_edit(change))
    result = _diagnose(sim)
    node = sim.scenario.instance_id("worker:5")
    flagged = next(f for f in _found(result, "k8s.node_health_labels") if any(r.id == node for r in f.resources))
    assert flagged.status is Status.WARN
    assert "health-monitoring agent reports NvidiaErrorTerminate (XidHardwareFailure)" in flagged.title
    assert not [e for e in flagged.evidence if e.startswith("fault-type")]


# --- pods --------------------------------------------------------------------------------------


def test_pod_phases_crashloop_and_restarts(faulty: SweepResult) -> None:
    status = _found(faulty, "k8s.pod_status")
    titles = [f.title for f in status if f.is_issue]
    assert any("research/nccl-tests-worker-1" in t and "CrashLoopBackOff" in t for t in titles)
    assert any("research/eval-sweep-worker-0 is Pending" in t for t in titles)
    assert any("llama-pretrain-worker-3" in t and "restarted 3 times" in t for t in titles)
    pending = next(f for f in status if "Pending" in f.title)
    assert "untolerated taint" in pending.detail
    crash = next(f for f in status if "CrashLoopBackOff" in f.title)
    assert crash.reference.pointer == "references/debugging-guide.md § 20"
    assert any(r.kind == "node" and r.id == load_scenario("eks-p5").instance_id("worker:7") for r in crash.resources)


def test_exit_codes_are_explained(faulty: SweepResult) -> None:
    exits = _found(faulty, "k8s.container_exit_codes")
    oom = next(f for f in exits if f.fields["exit_code"] == 137)
    assert "OOMKilled" in oom.title and oom.reference.pointer == "references/debugging-guide.md § 4"
    segv = next(f for f in exits if f.fields["exit_code"] == 139)
    assert "SIGSEGV" in segv.detail


def test_sigterm_is_advisory(simulate) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        variation = scenario.kubernetes.jobs[0].pods[2]
        variation.restarts, variation.last_exit_code, variation.last_reason = 1, 143, "Error"

    result = _diagnose(simulate("eks-p5", edit=_edit(change)))
    term = next(f for f in _found(result, "k8s.container_exit_codes") if f.fields["exit_code"] == 143)
    assert term.status is Status.WARN and term.priority is Priority.P2 and "SIGTERM" in term.detail


def test_init_container_failure(simulate) -> None:
    failing_pod = {
        "kind": "Pod",
        "metadata": {"name": "prep-0", "namespace": "training", "labels": {"job-name": "prep"}},
        "spec": {
            "initContainers": [{"name": "fetch-dataset", "image": "busybox"}],
            "containers": [{"name": "main", "image": "busybox"}],
        },
        "status": {
            "phase": "Pending",
            "initContainerStatuses": [
                {
                    "name": "fetch-dataset",
                    "restartCount": 4,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
                }
            ],
        },
    }

    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.objects.append(failing_pod)

    result = _diagnose(simulate("healthy-eks", edit=_edit(change)))
    init = _found(result, "k8s.init_containers", Status.FAIL)
    assert len(init) == 1 and "fetch-dataset" in init[0].title and "CrashLoopBackOff" in init[0].title


# --- EFA, /dev/shm, memlock ----------------------------------------------------------------------


def test_efa_plugin_partly_ready_and_pods_without_efa(faulty: SweepResult) -> None:
    plugin = _found(faulty, "k8s.efa_device_plugin", Status.WARN)
    assert plugin and "14/15" in plugin[0].title
    no_efa = _found(faulty, "k8s.efa_requests", Status.FAIL)
    assert sorted(f.resources[0].id for f in no_efa) == ["research/nccl-tests-worker-0", "research/nccl-tests-worker-1"]
    assert no_efa[0].reference.pointer == "references/debugging-guide.md § 6"


def test_missing_efa_plugin_is_p0_when_pods_request_efa(simulate) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.objects = [o for o in scenario.kubernetes.objects if "efa" not in o["metadata"]["name"]]

    result = _diagnose(simulate("eks-p5", edit=_edit(change)))
    missing = _found(result, "k8s.efa_device_plugin", Status.FAIL)
    assert len(missing) == 1 and missing[0].priority is Priority.P0


def test_efa_count_below_adapters_and_too_many(simulate) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        job = scenario.kubernetes.jobs[0]
        job.pods = [PodVariation(index=0, efa=4), PodVariation(index=1, efa=64)]

    result = _diagnose(simulate("healthy-eks", edit=_edit(change)))
    findings = {f.resources[0].id: f for f in _found(result, "k8s.efa_requests") if f.is_issue}
    assert findings["ml/gpt-finetune-worker-0"].priority is Priority.P2
    assert "4 of 32" in findings["ml/gpt-finetune-worker-0"].title
    assert findings["ml/gpt-finetune-worker-1"].status is Status.FAIL


def test_dev_shm_and_ipc_lock(faulty: SweepResult) -> None:
    shm = _found(faulty, "k8s.dev_shm", Status.WARN)
    assert [f.resources[0].id for f in shm] == ["training/llama-pretrain-worker-1"]
    assert shm[0].reference.pointer == "references/debugging-guide.md § 17"
    ipc = _found(faulty, "k8s.memlock_ipc_lock", Status.WARN)
    assert [f.resources[0].id for f in ipc] == ["training/llama-pretrain-worker-2"]


def test_small_or_disk_backed_shm(simulate) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.jobs[0].shm_size_limit = "256Mi"

    result = _diagnose(simulate("healthy-eks", edit=_edit(change)))
    assert all("256Mi" in f.title for f in _found(result, "k8s.dev_shm", Status.WARN))
    assert len(_found(result, "k8s.dev_shm", Status.WARN)) == 4


# --- NCCL environment ----------------------------------------------------------------------------


def test_env_audit_reads_configmaps_and_never_prints_secrets(faulty: SweepResult) -> None:
    env = [f for f in _found(faulty, "k8s.nccl_env") if f.fields.get("job") == "training/llama-pretrain"]
    by_variable = {f.fields["signature"]: f for f in env}
    assert by_variable["NCCL_DEBUG"].status is Status.WARN
    timeout = by_variable["NCCL_TIMEOUT"]
    assert timeout.status is Status.INFO and "not an NCCL or PyTorch variable" in timeout.detail
    assert any(line.startswith("FI_PROVIDER=efa (configmap nccl-env)") for line in timeout.evidence)
    dumped = faulty.model_dump_json()
    assert "hf_SIMULATED" not in dumped and "simulated-not-real" not in dumped


def test_env_audit_trace_and_forced_tcp(simulate) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.jobs[0].env.update(
            {
                "NCCL_DEBUG": "TRACE",
                "FI_PROVIDER": "tcp",
                "NCCL_P2P_DISABLE": "1",
                "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0",
            }
        )

    result = _diagnose(simulate("healthy-eks", edit=_edit(change)))
    by_variable = {f.fields["signature"]: f for f in _found(result, "k8s.nccl_env") if f.is_issue}
    assert by_variable["NCCL_DEBUG"].priority is Priority.P1
    assert by_variable["FI_PROVIDER"].reference.pointer == "references/debugging-guide.md § 13"
    assert {"NCCL_P2P_DISABLE", "TORCH_NCCL_ASYNC_ERROR_HANDLING"} <= set(by_variable)


# --- rendezvous ----------------------------------------------------------------------------------


def test_master_addr_without_service(faulty: SweepResult) -> None:
    rdzv = _found(faulty, "k8s.rendezvous_service", Status.FAIL)
    assert len(rdzv) == 1 and "llama-pretrain-master resolves to no Service" in rdzv[0].title
    assert rdzv[0].reference.pointer == "references/debugging-guide.md § 12"


def test_cluster_ip_service_selecting_other_pods_and_missing_port(simulate) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        service = next(o for o in scenario.kubernetes.objects if o["kind"] == "Service")
        service["spec"] = {"clusterIP": "172.20.4.10", "selector": {"job-name": "other"}, "ports": [{"port": 80}]}

    result = _diagnose(simulate("healthy-eks", edit=_edit(change)))
    rdzv = _found(result, "k8s.rendezvous_service", Status.FAIL)
    assert len(rdzv) == 1
    assert "per-pod name" in rdzv[0].detail and "selects none" in rdzv[0].detail and "port 29500" in rdzv[0].detail


# --- NetworkPolicies -----------------------------------------------------------------------------


def test_network_policy_allowing_only_the_rendezvous_port_blocks_nccl(faulty: SweepResult) -> None:
    blocked = _found(faulty, "k8s.network_policies", Status.FAIL)
    assert len(blocked) == 1 and blocked[0].priority is Priority.P0
    assert "TCP/29500" in blocked[0].detail and "ephemeral" in blocked[0].detail
    assert {r.id for r in blocked[0].resources if r.kind == "network_policy"} == {
        "training/default-deny",
        "training/allow-rendezvous",
    }
    assert blocked[0].reference.pointer == "references/operations.md § 8"


def test_network_policy_without_dns_egress(simulate) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        allow = next(o for o in scenario.kubernetes.objects if o["metadata"]["name"] == "allow-intra-namespace-nccl")
        allow["spec"]["egress"] = allow["spec"]["egress"][:1]

    result = _diagnose(simulate("healthy-eks", edit=_edit(change)))
    fails = _found(result, "k8s.network_policies", Status.FAIL)
    assert [f.fields["signature"] for f in fails] == ["dns"]


def test_network_policy_peer_in_another_namespace_does_not_admit_the_job(simulate) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        allow = next(o for o in scenario.kubernetes.objects if o["metadata"]["name"] == "allow-intra-namespace-nccl")
        allow["spec"]["ingress"] = [
            {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]}
        ]

    result = _diagnose(simulate("healthy-eks", edit=_edit(change)))
    fails = _found(result, "k8s.network_policies", Status.FAIL)
    assert len(fails) == 1 and fails[0].fields["signature"] == "pod_to_pod"
    assert "ingress" in fails[0].detail and "egress" not in fails[0].detail.split("isolate the pods for")[1][:20]


# --- versions and logs ---------------------------------------------------------------------------


def test_image_digest_and_nccl_version_mismatch(faulty: SweepResult) -> None:
    digest = _found(faulty, "k8s.image_digest_mismatch", Status.FAIL)
    assert len(digest) == 1 and "training/llama-pretrain-worker-2" in [r.id for r in digest[0].resources]
    versions = _found(faulty, "k8s.nccl_version_logs", Status.FAIL)
    assert len(versions) == 1 and versions[0].fields["versions"] == "2.19.3,2.21.5"
    assert versions[0].reference.pointer == "references/debugging-guide.md § 10"


def test_pod_logs_classified_with_pod_node_and_instance(faulty: SweepResult) -> None:
    logs = _found(faulty, "k8s.pod_logs", Status.FAIL)
    instance = load_scenario("eks-p5").instance_id("worker:1")
    watchdog = next(f for f in logs if f.fields["signature"] == "watchdog_timeout@pytorch")
    kinds = {r.kind: r.id for r in watchdog.resources}
    assert kinds["pod"] == "training/llama-pretrain-worker-1" and kinds["node"] == instance
    assert kinds["k8s_node"] == load_scenario("eks-p5").k8s_node_name("worker:1")
    # The OOM kill is only in the log of the instance before the restart.
    assert any(f.fields["previous"] and "llama-pretrain-worker-3" in f.title for f in logs)
    assert len({f.fingerprint for f in logs}) == len(logs)


# --- scope ---------------------------------------------------------------------------------------


def test_namespace_and_job_scope(simulate) -> None:
    sim = simulate("eks-p5")
    research = _diagnose(sim, Scope(namespace="research"))
    pods = {r.id for f in research.findings if f.check_id.startswith("k8s.") for r in f.resources if r.kind == "pod"}
    assert pods and all(p.startswith("research/") for p in pods)
    job = _diagnose(sim, Scope(job="llama-pretrain"))
    pods = {r.id for f in job.findings if f.check_id.startswith("k8s.") for r in f.resources if r.kind == "pod"}
    assert pods and all(p.startswith("training/llama-pretrain-") for p in pods)
    # Node health does not depend on the scope.
    assert _found(job, "k8s.node_health_labels", Status.FAIL)


# --- access failures leave a complete report of everything else -----------------------------------


def _rest_is_complete(result: SweepResult) -> None:
    assert _found(result, "cluster.node_status", Status.FAIL)
    assert _found(result, "network.security_group_self_reference", Status.FAIL)
    assert _found(result, "cluster.events")


def test_missing_access_entry_401(simulate) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.reject_tokens = True

    result = _diagnose(simulate("eks-p5", edit=_edit(change)))
    [degraded] = [d for d in result.degraded_sources if d.source == "kubernetes"]
    assert "401" in degraded.reason and "access entry" in degraded.reason
    assert "aws eks create-access-entry --cluster-name ml-training-eks-control" in degraded.fix
    assert "hyperpod-nccl-read" in degraded.fix
    assert not [f for f in result.findings if f.check_id.startswith("k8s.")]
    _rest_is_complete(result)


def test_rbac_forbidden_403_skips_only_what_it_hides(simulate) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.forbidden = ["networkpolicies", "pods/log"]

    result = _diagnose(simulate("eks-p5", edit=_edit(change)))
    [degraded] = [d for d in result.degraded_sources if d.source == "kubernetes"]
    assert degraded.partial and "403" in degraded.reason and "networkpolicies" in degraded.reason
    assert "ClusterRole hyperpod-nccl-read" in degraded.fix
    assert degraded.reference is not None and degraded.reference.pointer == "references/operations.md § 2"
    # What the refusal hides is a SKIP naming the read (issue 14: never silence, never PASS).
    for check_id, read in (
        ("k8s.network_policies", "kubernetes:networkpolicies"),
        ("k8s.pod_logs", "kubernetes:pod logs"),
    ):
        [skip] = _found(result, check_id)
        assert skip.status is Status.SKIP and skip.detail.startswith(f"not read: {read} (Kubernetes RBAC forbids")
    assert _found(result, "k8s.dev_shm", Status.WARN) and _found(result, "k8s.node_health_labels", Status.FAIL)
    _rest_is_complete(result)


def test_unreachable_endpoint(simulate) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.unreachable = True

    result = _diagnose(simulate("eks-p5", edit=_edit(change)))
    [degraded] = [d for d in result.degraded_sources if d.source == "kubernetes"]
    assert "cannot reach the EKS API endpoint" in degraded.reason and "private" in degraded.fix
    _rest_is_complete(result)


def test_api_is_read_over_https_verified_with_the_cluster_ca(simulate) -> None:
    sim = simulate("eks-p5")
    name = sim.scenario.cluster.eks_cluster_name or f"{sim.scenario.cluster.name}-eks"
    described = sim.clients().client("eks").describe_cluster(name=name)["cluster"]
    assert described["endpoint"].startswith("https://")
    assert base64.b64decode(described["certificateAuthority"]["data"]).startswith(b"-----BEGIN CERTIFICATE-----")
    result = _diagnose(sim)
    assert not [d for d in result.degraded_sources if d.source == "kubernetes"]
    assert _found(result, "k8s.node_health_labels", Status.FAIL)


def test_wrong_cluster_ca_is_one_clear_degraded_source(simulate) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.wrong_ca = True

    sim = simulate("eks-p5", edit=_edit(change))
    result = _diagnose(sim)
    [degraded] = [d for d in result.degraded_sources if d.source == "kubernetes"]
    assert "does not verify against the cluster CA of eks:DescribeCluster" in degraded.reason
    assert "certificate verify failed" in degraded.reason and "Traceback" not in degraded.reason
    assert "\n" not in degraded.reason and "TLS-inspecting" in degraded.fix
    assert not [f for f in result.findings if f.check_id.startswith("k8s.")]
    assert sim._kubernetes.requests == []  # refused at the handshake: no request was ever sent in clear
    _rest_is_complete(result)


def test_describe_eks_cluster_denied(simulate) -> None:
    sim = simulate("eks-p5", faults=[FaultSpec(operation="eks:DescribeCluster", error_code="AccessDeniedException")])
    result = _diagnose(sim)
    assert [d.missing_action for d in result.degraded_sources] == ["eks:DescribeCluster"]
    _rest_is_complete(result)


def test_slurm_cluster_has_no_kubernetes_source(simulate) -> None:
    result = _diagnose(simulate("slurm-p5en"))
    assert not [f for f in result.findings if f.check_id.startswith("k8s.")]
    assert not [d for d in result.degraded_sources if d.source == "kubernetes"]


def test_cli_json_report_carries_kubernetes_findings(simulate, cli) -> None:
    simulate("eks-p5")
    run = cli("diagnose", "--cluster", "ml-training-eks", "--region", "us-west-2", "--format", "json")
    document = json.loads(run.stdout)
    ids = {f["check_id"] for f in document["findings"]}
    assert {"k8s.network_policies", "k8s.pod_logs", "k8s.node_health_labels"} <= ids
    assert "hf_SIMULATED" not in run.stdout


# --- a failing or slow API server --------------------------------------------------------------


def test_server_error_500_degrades_only_that_resource_and_names_it(simulate) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.server_errors = ["networkpolicies"]

    result = _diagnose(simulate("eks-p5", edit=_edit(change)))
    [degraded] = [d for d in result.degraded_sources if d.source == "kubernetes"]
    assert degraded.partial and "500" in degraded.reason and "networkpolicies" in degraded.reason
    assert "control plane" in degraded.fix
    [skip] = _found(result, "k8s.network_policies")  # issue 14: the unread policies make it a SKIP
    assert skip.status is Status.SKIP and skip.detail.startswith("not read: kubernetes:networkpolicies")
    assert _found(result, "k8s.dev_shm", Status.WARN) and _found(result, "k8s.node_health_labels", Status.FAIL)
    assert _found(result, "k8s.pod_logs")
    _rest_is_complete(result)


@pytest.mark.parametrize("expired_continues", [1, 2])
def test_a_node_list_whose_continue_token_expires(
    simulate, monkeypatch: pytest.MonkeyPatch, expired_continues: int
) -> None:  # type: ignore[no-untyped-def]
    # Pages of 4: the 17 nodes take 5 pages, and the first continue tokens the API server sees are the
    # node list's. One expiry: the list restarts and nothing is lost. Two: the nodes are reported unread.
    from hyperpod_nccl import thresholds

    monkeypatch.setattr(thresholds, "K8S_PAGE_SIZE", 4)

    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.expired_continues = expired_continues

    result = _diagnose(simulate("eks-p5", edit=_edit(change)))
    degraded = [d for d in result.degraded_sources if d.source == "kubernetes"]
    if expired_continues == 1:
        assert degraded == []
        assert len([f for f in _found(result, "k8s.node_health_labels") if f.is_issue]) == 2
        return
    [unread] = degraded
    assert unread.partial and "410" in unread.reason and "4 item(s) read, the rest unread" in unread.reason
    assert "kubernetes:nodes" in unread.unread
    [skip] = _found(result, "k8s.node_health_labels")
    assert skip.status is Status.SKIP and skip.detail.startswith("not read: kubernetes:nodes")


def _slow(sim: SimulatedCluster, read_timeout: float, monkeypatch: pytest.MonkeyPatch) -> tuple[SweepResult, float]:
    import time

    from hyperpod_nccl.kube.client import READ_TIMEOUT_ENV

    monkeypatch.setenv(READ_TIMEOUT_ENV, str(read_timeout))
    request = DiagnoseRequest(cluster=sim.scenario.cluster.name, region=sim.scenario.region)
    started = time.monotonic()
    result = diagnose(request, sim.clients())
    return result, time.monotonic() - started


def test_slow_api_beyond_the_read_timeout_costs_one_timeout_and_names_the_fix(simulate, monkeypatch) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.latency_seconds = 2.0

    sim = simulate("eks-p5", edit=_edit(change))
    result, seconds = _slow(sim, 0.5, monkeypatch)
    [degraded] = [d for d in result.degraded_sources if d.source == "kubernetes"]
    assert "too slow" in degraded.reason and "within 0.5 s" in degraded.reason and not degraded.partial
    assert "control plane" in degraded.fix and "describe-cluster" in degraded.fix
    assert not [f for f in result.findings if f.check_id.startswith("k8s.")]
    # One read timed out and was not retried; nothing else was asked of the slow server.
    assert len(sim._kubernetes.requests) == 1
    assert seconds < 30, f"the diagnosis took {seconds:.0f} s against a slow API"
    _rest_is_complete(result)


def test_slow_pod_logs_keep_what_was_read_and_skip_the_rest(simulate, monkeypatch) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.latency_seconds = 2.0
        scenario.kubernetes.slow_resources = ["pods/log"]

    sim = simulate("eks-p5", edit=_edit(change))
    result, _ = _slow(sim, 0.5, monkeypatch)
    [degraded] = [d for d in result.degraded_sources if d.source == "kubernetes"]
    assert degraded.partial and "/log got no answer within 0.5 s" in degraded.reason
    assert "read before it: nodes, namespaces, pods" in degraded.reason and "not read: pod logs" in degraded.reason
    log_requests = [r for r in sim._kubernetes.requests if "/log" in r]
    assert 1 <= len(log_requests) <= 4  # the reads in flight when the first timed out, no more
    assert _found(result, "k8s.dev_shm", Status.WARN) and _found(result, "k8s.node_health_labels", Status.FAIL)
    _rest_is_complete(result)


def test_slow_api_within_the_read_timeout_is_read_in_full(simulate, monkeypatch) -> None:
    def change(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.latency_seconds = 0.05

    result, _ = _slow(simulate("eks-p5", edit=_edit(change)), 5.0, monkeypatch)
    assert not [d for d in result.degraded_sources if d.source == "kubernetes"]
    assert _found(result, "k8s.network_policies") and _found(result, "k8s.pod_logs")
