"""The EKS env audit's rendezvous variables (original Check 7; issue 17, point 7): a PyTorch job whose
pods leave MASTER_ADDR, MASTER_PORT, WORLD_SIZE or RANK unset is warned about, unless torchrun or a
training operator provides them."""

from __future__ import annotations

from hyperpod_nccl.checks._kubernetes import EnvValue
from hyperpod_nccl.checks.k8s_env import _audit
from hyperpod_nccl.models.findings import Priority, Status


def _rendezvous(env: dict[str, str], command: tuple[str, ...] = ("python", "train.py")) -> list[str]:
    values = {name: EnvValue(value, "env") for name, value in env.items()}
    rules = _audit(values, uses_efa=False, instance_type=None, pytorch=True, command=command, pods=4)
    return [r.title for r in rules if r.title.startswith("torch.distributed rendezvous") and r.status is Status.WARN]


def test_a_python_job_without_the_variables_is_warned() -> None:
    (title,) = _rendezvous({"NCCL_DEBUG": "WARN"})
    assert title.endswith("MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK")
    (title,) = _rendezvous({"MASTER_ADDR": "job-0.job", "MASTER_PORT": "29500"})
    assert title.endswith("WORLD_SIZE, RANK")


def test_operators_and_torchrun_provide_them() -> None:
    # a training operator writes all four into the pod spec
    assert _rendezvous({"MASTER_ADDR": "a", "MASTER_PORT": "1", "WORLD_SIZE": "4", "RANK": "0"}) == []
    # torchrun computes WORLD_SIZE and RANK; its endpoint comes from flags, PET_ variables or MASTER_ADDR
    assert _rendezvous({}, ("torchrun", "--nnodes=4", "--rdzv-endpoint=job-0:29500", "train.py")) == []
    assert _rendezvous({"PET_RDZV_ENDPOINT": "job-0:29500"}, ("torchrun", "train.py")) == []
    assert _rendezvous({"MASTER_ADDR": "a", "MASTER_PORT": "1"}, ("torchrun", "--nnodes=4", "train.py")) == []
    (title,) = _rendezvous({}, ("torchrun", "--nnodes=4", "train.py"))
    assert title.endswith("MASTER_ADDR, MASTER_PORT")


def test_the_warning_is_a_p2_recommendation_and_only_for_pytorch_jobs() -> None:
    values = {"NCCL_DEBUG": EnvValue("WARN", "env")}
    rules = _audit(values, uses_efa=False, instance_type=None, pytorch=True, command=("python", "train.py"), pods=2)
    assert [r.priority for r in rules if r.variable == "MASTER_ADDR"] == [Priority.P2]
    # one pod's ranks meet locally: nothing to say
    one = _audit(values, uses_efa=False, instance_type=None, pytorch=True, command=("python", "train.py"), pods=1)
    assert not [r for r in one if r.variable == "MASTER_ADDR"]
    assert not [r for r in _audit(values, uses_efa=False, instance_type=None, pytorch=False) if r.variable == "RANK"]


def test_a_value_taken_from_the_downward_api_counts_as_set() -> None:
    # RANK from a fieldRef or a Secret: the spec carries no literal value, but the variable is set
    values = {name: EnvValue("x", "env") for name in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE")}
    values["RANK"] = EnvValue(None, "fieldRef")
    rules = _audit(values, uses_efa=False, instance_type=None, pytorch=True, command=("python", "train.py"), pods=2)
    assert not [r for r in rules if r.title.startswith("torch.distributed rendezvous")]
