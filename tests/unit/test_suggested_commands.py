"""Every suggested command pastes as what it says it is (issue 14, point 6): YAML that parses, with
the nesting path it goes under; shell that `bash -n` accepts; a command for a node only after the
line that opens that node's shell."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from hyperpod_nccl import suggested
from hyperpod_nccl.models.findings import SuggestedCommand

TARGET = "sagemaker-cluster:abc123def456_worker-i-0aaa"
BUILT: list[SuggestedCommand] = [
    suggested.sg_self_reference("sg-1", "us-west-2", "ingress"),
    suggested.sg_self_reference("sg-1", "us-west-2", "egress"),
    suggested.describe_cluster_node("c", "i-0aaa", "us-west-2"),
    suggested.batch_reboot("c", ["i-0aaa"], "us-west-2"),
    suggested.batch_replace("c", ["i-0aaa"], "us-west-2"),
    suggested.efa_pingpong_pair("10.1.0.5"),
    *(suggested.node_memlock_limit("us-west-2", TARGET, o) for o in ("eks", "slurm")),
    *(suggested.node_dev_shm("us-west-2", TARGET, o) for o in ("eks", "slurm")),
    suggested.node_remove_ipc("us-west-2", TARGET),
    suggested.node_hugepages("us-west-2", TARGET),
    suggested.node_stale_shm("us-west-2", TARGET),
]


@pytest.mark.parametrize("command", BUILT, ids=lambda c: c.description[:40])
def test_each_suggested_command_parses_as_its_language(command: SuggestedCommand) -> None:
    if command.language == "yaml":
        assert command.yaml_path and command.yaml_path.startswith("spec.")
        assert isinstance(yaml.safe_load(command.command), dict)
        assert command.session is None
        return
    result = subprocess.run(["bash", "-n", "-c", command.text], check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("command", [c for c in BUILT if c.session], ids=lambda c: c.description[:40])
def test_a_command_for_a_node_opens_the_nodes_shell_first(command: SuggestedCommand) -> None:
    assert command.session == f"aws ssm start-session --region us-west-2 --target {TARGET}"
    first, second, *_ = command.text.split("\n")
    assert first == command.session and "run inside the session" in second
    assert "start-session" not in command.command


def test_only_the_node_builders_reboot_or_replace() -> None:
    assert {c.effect for c in BUILT if "batch-reboot" in c.command} == {"reboot"}
    assert {c.effect for c in BUILT if "batch-replace" in c.command} == {"replace"}
    assert all(c.effect in ("read", "change") for c in BUILT if "batch-re" not in c.command)
