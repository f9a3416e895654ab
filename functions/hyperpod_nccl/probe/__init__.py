"""The read-only probe scripts run on nodes over SSM, and the parsers of their output.

`node_probe.sh` collects every on-node signal; `slurm_controller.sh` asks the Slurm controller
about the scheduler. Both print sections (`@@BEGIN name` … `@@END name rc=N`) that
`hyperpod_nccl.probe.parsers` turns into the models of `hyperpod_nccl.models.node_probe`.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from hyperpod_nccl.models.node_probe import ProbeRole

SCRIPTS: dict[ProbeRole, str] = {"node": "node_probe.sh", "slurm_controller": "slurm_controller.sh"}


@cache
def script(role: ProbeRole) -> str:
    """The text of the probe script for `role`."""
    return (resources.files(__name__) / SCRIPTS[role]).read_text(encoding="utf-8")
