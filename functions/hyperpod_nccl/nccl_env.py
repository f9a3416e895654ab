"""Which environment variables bear on NCCL: the one answer the pod-spec audit (the variables
`checks/k8s_env.py` shows as evidence) and the support bundle (the environment it puts in the case)
share.

operations.md § 5 lists them: NCCL's own, libfabric's (`FI_`), PyTorch's (`TORCH_NCCL_`,
`TORCH_DISTRIBUTED_DEBUG`, ...) and the rendezvous (`MASTER_ADDR`, `MASTER_PORT`, `WORLD_SIZE`).
"""

from __future__ import annotations

# Name prefixes (`str.startswith`) of the NCCL-relevant variables.
NCCL_ENV_PREFIXES: tuple[str, ...] = ("NCCL_", "FI_", "TORCH_", "MASTER_", "WORLD_SIZE")


def is_nccl_variable(name: str) -> bool:
    """Whether the variable `name` bears on NCCL (see the module docstring)."""
    return name.startswith(NCCL_ENV_PREFIXES)


def grep_pattern() -> str:
    """The same answer as an extended regular expression for `grep -E`, for a person to run."""
    return "^(" + "|".join(NCCL_ENV_PREFIXES) + ")"
