"""The read-only Kubernetes client against the loopback API emulation: token, pagination,
typed errors and pod logs, reached through eks:DescribeCluster like in AWS."""

from __future__ import annotations

import base64
import json
import re
import ssl

import pytest
import urllib3

from hyperpod_nccl.kube import (
    KubeClient,
    KubeExpired,
    KubeForbidden,
    KubeNotFound,
    KubeServerError,
    KubeUnauthorized,
    KubeUnreachable,
    convert,
    eks_bearer_token,
)
from hyperpod_nccl_sim.scenario import PodVariation, Scenario


def _client(sim, token: str | None = None, page_size: int = 500) -> KubeClient:  # type: ignore[no-untyped-def]
    aws = sim.clients()
    name = sim.scenario.cluster.eks_cluster_name or f"{sim.scenario.cluster.name}-eks"
    cluster = aws.client("eks").describe_cluster(name=name)["cluster"]
    token = token or eks_bearer_token(name, sim.scenario.region, aws.session)
    return KubeClient(
        endpoint=cluster["endpoint"],
        token=token,
        ca_data=cluster["certificateAuthority"]["data"],
        page_size=page_size,
    )


def test_lists_follow_continue_tokens_across_pages(simulate) -> None:
    sim = simulate("eks-p5")
    with _client(sim, page_size=4) as client:
        names = [n["metadata"]["name"] for n in client.iter_list("/api/v1/nodes")]
        everything = client.get_json("/api/v1/nodes", {"limit": 1000})
    # worker:12 is Pending in HyperPod and has not joined Kubernetes.
    assert len(names) == 17 == len(everything["items"])
    assert len(set(names)) == 17
    assert sim.scenario.k8s_node_name("worker:0") in names
    assert sim.scenario.k8s_node_name("worker:12") not in names
    first_page = [r for r in sim._kubernetes.requests if r.startswith("/api/v1/nodes") and "limit=4" in r]
    assert len(first_page) == 5  # 17 items at 4 per page


def _expiring(expired_continues: int = 0, ttl: float | None = None):  # type: ignore[no-untyped-def]
    def edit(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.expired_continues = expired_continues
        scenario.kubernetes.continue_ttl_seconds = ttl

    return edit


def _node_requests(sim) -> list[str]:  # type: ignore[no-untyped-def]
    return [r for r in sim._kubernetes.requests if r.startswith("/api/v1/nodes?")]


def test_an_expired_continue_token_restarts_the_list_once(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5", edit=_expiring(expired_continues=1))
    with _client(sim, page_size=4) as client:
        names = [n["metadata"]["name"] for n in client.iter_list("/api/v1/nodes")]
    # Every node once: the 4 of the first page are not yielded again by the restarted list.
    assert len(names) == len(set(names)) == 17
    requests = _node_requests(sim)
    first_pages = [r for r in requests if "continue=" not in r]
    assert len(first_pages) == 2 and len(requests) == 2 + 5  # page 1, the expired page 2, then 5 pages


def test_a_list_that_expires_again_is_an_error_naming_what_was_read(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5", edit=_expiring(expired_continues=2))
    with _client(sim, page_size=4) as client, pytest.raises(KubeExpired) as expired:
        client.list("/api/v1/nodes")
    assert expired.value.status == 410
    assert "expired again after 1 restart(s)" in expired.value.message
    assert "4 item(s) read, the rest unread" in expired.value.message
    assert len(_node_requests(sim)) == 4  # never a loop: two attempts of two pages each


@pytest.mark.parametrize(("ttl", "expires"), [(0.0, True), (300.0, False)])
def test_continue_tokens_expire_with_age(simulate, ttl: float, expires: bool) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5", edit=_expiring(ttl=ttl))
    with _client(sim, page_size=4) as client:
        if expires:
            with pytest.raises(KubeExpired):
                client.list("/api/v1/nodes")
        else:
            assert len(client.list("/api/v1/nodes")) == 17


def test_typed_errors(simulate) -> None:
    def edit(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.forbidden = ["networkpolicies"]

    sim = simulate("eks-p5", edit=edit)
    with _client(sim) as client:
        with pytest.raises(KubeForbidden) as forbidden:
            client.list("/apis/networking.k8s.io/v1/networkpolicies")
        assert forbidden.value.status == 403 and "cannot list" in forbidden.value.message
        with pytest.raises(KubeNotFound):
            client.get_json("/api/v1/namespaces/training/configmaps/no-such-map")
        with pytest.raises(KubeServerError) as bad:
            client.get_log("/api/v1/namespaces/training/pods/llama-pretrain-worker-0/log", {"previous": True}, 1024)
        assert bad.value.status == 400
    with _client(sim, token="not-an-eks-token") as client, pytest.raises(KubeUnauthorized):
        client.list("/api/v1/nodes")
    with (
        KubeClient(endpoint="https://127.0.0.1:9", token="x", connect_timeout=0.5) as client,
        pytest.raises(KubeUnreachable),
    ):
        client.list("/api/v1/nodes")
    # Plain http is refused before anything is sent: the bearer token never travels in clear.
    plain, answered = _client(sim), len(sim._kubernetes.requests)
    plain.endpoint = plain.endpoint.replace("https://", "http://")
    with plain, pytest.raises(KubeUnreachable) as refused:
        plain.list("/api/v1/nodes")
    assert "not https" in refused.value.message and len(sim._kubernetes.requests) == answered


def test_pod_logs_tail_and_previous(simulate) -> None:
    sim = simulate("eks-p5")
    path = "/api/v1/namespaces/training/pods/llama-pretrain-worker-3/log"
    with _client(sim) as client:
        current = client.get_log(path, {"container": "pytorch", "tailLines": 2}, 1 << 20).text.splitlines()
        previous = client.get_log(path, {"container": "pytorch", "previous": True}, 1 << 20).text.splitlines()
    assert len(current) == 2 and current[-1] == "step 410 loss=2.913"
    assert any("Memory cgroup out of memory" in line for line in previous)


def _long_log(ignore_limit_bytes: bool, line_bytes: int):  # type: ignore[no-untyped-def]
    """A scenario edit: worker-3's container prints 500 lines of `line_bytes` bytes each."""

    def edit(scenario: Scenario) -> None:
        assert scenario.kubernetes is not None
        scenario.kubernetes.ignore_limit_bytes = ignore_limit_bytes
        job = scenario.kubernetes.jobs[0]
        job.pods = [p for p in job.pods if p.index != 3]
        job.pods.append(PodVariation(index=3, log=[f"{i:05d} " + "x" * (line_bytes - 7) for i in range(500)]))

    return edit


@pytest.mark.parametrize("ignore_limit_bytes", [False, True], ids=["server-honours", "server-ignores"])
def test_pod_log_is_read_with_a_byte_limit(simulate, ignore_limit_bytes: bool) -> None:  # type: ignore[no-untyped-def]
    # 500 lines of 40 KB = 20 MB, far over the limit: what reaches the caller is at most the limit,
    # whether the API server applies limitBytes or (a proxy, a hostile server) ignores it.
    sim = simulate("eks-p5", edit=_long_log(ignore_limit_bytes, 40_000))
    path = "/api/v1/namespaces/training/pods/llama-pretrain-worker-3/log"
    with _client(sim) as client:
        read = client.get_log(path, {"container": "pytorch", "tailLines": 500}, 100_000)
    assert read.truncated and len(read.text.encode()) <= 100_000
    assert read.text.startswith("00000 ")  # limitBytes counts from the start of the tail
    assert any("limitBytes=100000" in r for r in sim._kubernetes.requests if r.startswith(path))


def test_pod_log_under_the_limit_is_whole_and_not_truncated(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5", edit=_long_log(True, 100))
    path = "/api/v1/namespaces/training/pods/llama-pretrain-worker-3/log"
    with _client(sim) as client:
        read = client.get_log(path, {"container": "pytorch", "tailLines": 500}, 100_000)
        with pytest.raises(KubeServerError) as invalid:  # the API server's PodLogOptions validation
            client.get_log(path, {"container": "pytorch"}, 0)
    assert not read.truncated and len(read.text.splitlines()) == 500 and len(read.text) == 50_000
    assert invalid.value.status == 422 and "limitBytes" in invalid.value.message


# --- answers as complete as a real API server's ------------------------------------------------


def _raw_response(sim, path: str, **query: str) -> urllib3.BaseHTTPResponse:  # type: ignore[no-untyped-def]
    """One GET without the product client, answered as the server sent it."""
    with _client(sim) as client:
        ca_pem = base64.b64decode(str(client.ca_data)).decode()
        pool = urllib3.PoolManager(ssl_context=ssl.create_default_context(cadata=ca_pem))
        return pool.request(
            "GET", client.endpoint + path, fields=query or None, headers={"Authorization": f"Bearer {client.token}"}
        )


def _raw(sim, path: str, **query: str) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    """One GET without the product client: the status and the JSON body as the server sent them."""
    response = _raw_response(sim, path, **query)
    return response.status, json.loads(response.data)


def test_the_server_itself_cuts_the_log_at_limit_bytes(simulate) -> None:  # type: ignore[no-untyped-def]
    # The client cuts too (above), so only a raw read shows the server honouring the option.
    sim = simulate("eks-p5", edit=_long_log(False, 100))
    path = "/api/v1/namespaces/training/pods/llama-pretrain-worker-3/log"
    response = _raw_response(sim, path, container="pytorch", tailLines="500", limitBytes="1234")
    assert response.status == 200
    assert len(response.data) == 1234 and response.data.startswith(b"00000 ")


def test_list_items_carry_no_kind_but_a_single_get_does(simulate) -> None:
    sim = simulate("eks-p5")
    status, page = _raw(sim, "/api/v1/namespaces/training/pods")
    assert status == 200 and page["kind"] == "PodList" and page["apiVersion"] == "v1" and page["items"]
    assert not [i for i in page["items"] if "kind" in i or "apiVersion" in i]
    name = page["items"][0]["metadata"]["name"]
    _, pod = _raw(sim, f"/api/v1/namespaces/training/pods/{name}")
    assert (pod["kind"], pod["apiVersion"]) == ("Pod", "v1")


def test_objects_have_the_fields_a_server_always_sends(simulate) -> None:
    sim = simulate("eks-p5")
    _, nodes = _raw(sim, "/api/v1/nodes")
    required = {"architecture", "bootID", "containerRuntimeVersion", "kernelVersion", "kubeProxyVersion"}
    required |= {"kubeletVersion", "machineID", "operatingSystem", "osImage", "systemUUID"}
    assert all(required <= set(n["status"]["nodeInfo"]) for n in nodes["items"])
    _, daemonsets = _raw(sim, "/apis/apps/v1/daemonsets")
    for daemonset in daemonsets["items"]:
        labels = daemonset["spec"]["template"]["metadata"]["labels"]
        assert labels and daemonset["spec"]["selector"] == {"matchLabels": labels}
        assert daemonset["status"]["numberMisscheduled"] == 0
    _, pods = _raw(sim, "/api/v1/namespaces/training/pods")
    statuses = [s for p in pods["items"] for s in p["status"].get("containerStatuses", [])]
    assert statuses and all("lastState" in s and "state" in s for s in statuses)
    assert {} in [s["lastState"] for s in statuses] and [s for s in statuses if s["lastState"].get("terminated")]


@pytest.mark.parametrize("token", ["not base64 !", "eyJ2IjoibWV0YS5rOHMuaW8vdjAifQ", "MTc"])
def test_a_bad_continue_token_is_a_400_status(simulate, token: str) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    _, first = _raw(sim, "/api/v1/nodes", limit="4")
    assert first["metadata"]["continue"] and first["metadata"]["remainingItemCount"] == 13
    status, answer = _raw(sim, "/api/v1/nodes", limit="4", **{"continue": token})
    assert status == 400 and answer["kind"] == "Status" and answer["status"] == "Failure"
    assert answer["reason"] == "BadRequest" and answer["code"] == 400
    assert answer["message"].startswith("invalid continue token: continue key is not valid")


def test_an_expired_continue_token_is_a_410_status_with_a_token_to_go_on(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5", edit=_expiring(expired_continues=1))
    _, first = _raw(sim, "/api/v1/nodes", limit="4")
    status, answer = _raw(sim, "/api/v1/nodes", limit="4", **{"continue": first["metadata"]["continue"]})
    assert status == 410 and answer["kind"] == "Status" and answer["status"] == "Failure"
    assert answer["reason"] == "Expired" and answer["code"] == 410
    assert answer["message"].startswith("The provided continue parameter is too old to display a consistent list")
    # apiserver's token to go on inconsistently: the same start key, at the latest revision (-1).
    token = answer["metadata"]["continue"]
    decoded = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    assert decoded["rv"] == -1 and decoded["start"] == "4"
    status, rest = _raw(sim, "/api/v1/nodes", limit="4", **{"continue": token})
    assert status == 200 and len(rest["items"]) == 4


def test_pod_log_timestamps_prefix_each_line(simulate) -> None:
    sim = simulate("eks-p5")
    path = "/api/v1/namespaces/training/pods/llama-pretrain-worker-3/log"
    with _client(sim) as client:
        plain = client.get_log(path, {"container": "pytorch", "tailLines": 3}, 1 << 20).text.splitlines()
        stamped = client.get_log(path, {"container": "pytorch", "tailLines": 3, "timestamps": True}, 1 << 20)
    lines = stamped.text.splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == plain
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?Z", line.split(" ", 1)[0]) for line in lines)


def test_nodes_carry_hyperpod_identity_and_map_back_to_their_instances(simulate) -> None:
    sim = simulate("eks-p5")
    with _client(sim) as client:
        nodes = [convert.node(o) for o in client.iter_list("/api/v1/nodes")]
    cluster_id = sim.cluster_arn.rsplit("/", 1)[-1]
    joined = [k for k in sim.scenario.node_keys() if sim.scenario.k8s_node_name(k) in {n.name for n in nodes}]
    assert len(joined) == len(nodes) == 17
    for key, node in zip(joined, nodes, strict=True):
        instance = sim.scenario.instance_id(key)
        assert node.name == f"hyperpod-{instance}"
        assert node.provider_id == f"aws:///usw2-az1/sagemaker/cluster/hyperpod-{cluster_id}-{instance}"
        assert node.instance_id == instance
        # The Availability Zone ID label says the zone the providerID names.
        assert f"aws:///{node.labels['topology.k8s.aws/zone-id']}/" in str(node.provider_id)
    # Without a providerID (a proxy stripping spec, a node still registering) the name still says it.
    bare = convert.node({"metadata": {"name": nodes[0].name}, "spec": {}})
    assert bare.instance_id == nodes[0].instance_id


def test_a_faulted_node_carries_what_the_health_agent_writes(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("eks-p5")
    _, node = _raw(sim, f"/api/v1/nodes/{sim.scenario.k8s_node_name('worker:5')}")
    labels = node["metadata"]["labels"]
    assert labels["sagemaker.amazonaws.com/node-health-status"] == "UnschedulablePendingReplacement"
    assert labels["sagemaker.amazonaws.com/fault-types"] == "NvidiaErrorTerminate"
    assert labels["sagemaker.amazonaws.com/fault-reasons"] == "XidHardwareFailure"
    assert node["spec"]["taints"] == [
        {"key": "sagemaker.amazonaws.com/node-health-status", "value": "Unschedulable", "effect": "NoSchedule"}
    ]
    condition = next(c for c in node["status"]["conditions"] if c["type"] == "NvidiaErrorTerminate")
    assert (condition["status"], condition["reason"]) == ("True", "XidHardwareFailure")
    assert condition["message"].startswith("NVRM: Xid (PCI:0000:53:00): 79")
    [detail] = json.loads(node["metadata"]["annotations"]["sagemaker.amazonaws.com/fault-details"])
    assert (detail["type"], detail["reason"], detail["timestamp"]) == (
        "NvidiaErrorTerminate",
        "XidHardwareFailure",
        condition["lastTransitionTime"],
    )
    # A healthy node carries none of it.
    _, healthy = _raw(sim, f"/api/v1/nodes/{sim.scenario.k8s_node_name('worker:0')}")
    assert "taints" not in healthy["spec"] and [c["type"] for c in healthy["status"]["conditions"]] == ["Ready"]
