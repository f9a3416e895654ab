"""Facts about HyperPod instance types: accelerator family, GPU and EFA adapter counts, GPUDirect RDMA.

The single source for every check that asks "is NCCL relevant here?" or "how many EFA devices
should this node have?" (performance-testing.md and debugging-guide.md § 19 give the counts).
"""

from __future__ import annotations

import re
from typing import Literal

Accelerator = Literal["nvidia", "neuron", "cpu"]

# Expected EFA devices (`fi_info -p efa` / /dev/infiniband/uverbs*) per instance type.
EFA_ADAPTERS: dict[str, int] = {
    "ml.p4d.24xlarge": 4,
    "ml.p4de.24xlarge": 4,
    "ml.p5.48xlarge": 32,
    "ml.p5e.48xlarge": 32,
    "ml.p5en.48xlarge": 16,
    "ml.p6-b200.48xlarge": 8,
    "ml.p6-b300.48xlarge": 17,
    "ml.p6e-gb200.36xlarge": 17,
    "ml.g5.48xlarge": 1,
    "ml.g6.48xlarge": 1,
    "ml.g6e.48xlarge": 1,
    "ml.trn1.32xlarge": 8,
    "ml.trn1n.32xlarge": 16,
    "ml.trn2.48xlarge": 16,
}

GPUS_PER_INSTANCE: dict[str, int] = {
    "ml.p4d.24xlarge": 8,
    "ml.p4de.24xlarge": 8,
    "ml.p5.48xlarge": 8,
    "ml.p5e.48xlarge": 8,
    "ml.p5en.48xlarge": 8,
    "ml.p6-b200.48xlarge": 8,
    "ml.p6-b300.48xlarge": 8,
    "ml.p6e-gb200.36xlarge": 4,
    "ml.g5.48xlarge": 8,
    "ml.g6.48xlarge": 8,
    "ml.g6e.48xlarge": 8,
}

_NVIDIA = re.compile(r"^ml\.(p3|p3dn|p4d|p4de|p5|p5e|p5en|p6-b200|p6-b300|p6e-gb200|g4dn|g5|g6|g6e|g7e)\.")
_NEURON = re.compile(r"^ml\.(trn1|trn1n|trn2|inf2)\.")
# Families whose EFA adapters do GPUDirect RDMA (FI_EFA_USE_DEVICE_RDMA=1; operations.md § 5: "p4d,
# p5 family"), matched as prefixes so that every size and variant of p4d, p5 and p6 counts.
_GPUDIRECT_RDMA = re.compile(r"^ml\.(p4d|p4de|p5|p5e|p5en|p6)")


def accelerator(instance_type: str) -> Accelerator:
    """Which accelerator family an instance type carries."""
    if _NVIDIA.match(instance_type):
        return "nvidia"
    if _NEURON.match(instance_type):
        return "neuron"
    return "cpu"


def expected_efa(instance_type: str) -> int | None:
    """EFA devices the instance type should expose, or None when EFA is not expected."""
    return EFA_ADAPTERS.get(instance_type)


def expects_efa_for_nccl(instance_type: str) -> bool:
    """NVIDIA instance types whose NCCL traffic should ride EFA (never TCP)."""
    return accelerator(instance_type) == "nvidia" and instance_type in EFA_ADAPTERS


def supports_gpudirect_rdma(instance_type: str) -> bool:
    """Instance types whose EFA adapters can move GPU memory directly (GPUDirect RDMA)."""
    return bool(_GPUDIRECT_RDMA.match(instance_type))
