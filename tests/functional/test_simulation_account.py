"""A scenario's own account: every caller of the emulation is that account's, as real keys would be."""

from __future__ import annotations

from hyperpod_nccl_sim.scenario import Scenario


def test_a_scenario_in_another_account_seeds_and_answers_as_that_account(simulate) -> None:  # type: ignore[no-untyped-def]
    def elsewhere(scenario: Scenario) -> None:
        scenario.account_id = "210987654321"

    sim = simulate("slurm-p5en", edit=elsewhere)
    clients = sim.clients()
    assert sim.cluster_arn.split(":")[4] == "210987654321"
    assert clients.client("sts").get_caller_identity()["Account"] == "210987654321"
    nodes = clients.client("sagemaker").list_cluster_nodes(ClusterName=sim.scenario.cluster.name)
    assert len(nodes["ClusterNodeSummaries"]) == len(sim.scenario.node_keys())
    groups = clients.client("ec2").describe_security_groups()["SecurityGroups"]
    assert {g["OwnerId"] for g in groups} == {"210987654321"}


def test_the_next_scenario_is_served_as_its_own_account(simulate) -> None:  # type: ignore[no-untyped-def]
    sim = simulate("slurm-p5en")
    assert sim.clients().client("sts").get_caller_identity()["Account"] == sim.scenario.account_id == "123456789012"
