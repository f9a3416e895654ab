"""Which root cause explains which symptom, and over what relation of resources and time.

A rule reads "a `cause` explains a `symptom` when `relation` holds between them". The fold
(`verdict/fold.py`) applies them to groups of findings; a symptom no rule explains is a root cause
of its own. The rules are data: adding one is a line here and a test in
`tests/unit/test_verdict.py`, which also keeps the graph of kinds acyclic (a cause is never, through
a chain, its own symptom).

Relations:

- `same_node`: the two share an instance (the probe, the logs, Kubernetes and Slurm all name it);
- `same_pod`: they share a pod;
- `same_job`: they share a job (a job resource, or the job of a pod they name);
- `peers`: the symptom's job had a rank on the cause's node, or the symptom was seen on that node,
  or, when the sweep cannot tell which job the symptom belongs to, the cause is the only one of its
  kind that could explain it (a hang logged by every waiting rank, one faulted node);
- `anywhere`: a cluster-wide cause explains the symptom wherever it was seen.

`within_seconds` bounds the time between the cause and the symptom when both carry a time: a hang
an hour before a GPU fault is not that fault's doing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hyperpod_nccl import thresholds

Relation = Literal["same_node", "same_pod", "same_job", "peers", "anywhere"]
# How close a relation is: a symptom goes to the closest cause that explains it.
RELATION_RANK: dict[Relation, int] = {"same_node": 0, "same_pod": 0, "same_job": 1, "peers": 2, "anywhere": 3}


@dataclass(frozen=True)
class Explains:
    """A `cause` kind explains a `symptom` kind when `relation` holds; `why` is the sentence the
    report prints under the cause for each symptom it folded."""

    cause: str
    symptom: str
    relation: Relation
    why: str
    within_seconds: int | None = None


_WINDOW = thresholds.INCIDENT_CAUSAL_WINDOW_SECONDS

# Order matters only between causes of the same priority and blast radius: the first rule wins.
EXPLAINS: tuple[Explains, ...] = (
    # a GPU that fell off the bus: the node is marked unhealthy, stops answering, its ranks fault and hang
    Explains("gpu_hardware", "node_unhealthy", "same_node", "HyperPod and Kubernetes mark the node faulty"),
    Explains("gpu_hardware", "node_unreachable", "same_node", "the node stops answering while it is repaired"),
    Explains("gpu_hardware", "slurm_node_state", "same_node", "Slurm takes the faulty node out"),
    Explains("gpu_hardware", "gpu_memory_health", "same_node", "the memory errors of the faulted GPU"),
    Explains("gpu_hardware", "cuda_fault", "same_node", "the faulted GPU fails the kernels that run on it"),
    Explains("gpu_hardware", "hang_attributed", "same_node", "the rank on the faulted GPU stopped"),
    Explains("gpu_hardware", "pod_crash", "same_node", "the rank on the faulted GPU crashed"),
    Explains(
        "gpu_hardware",
        "collective_hang",
        "peers",
        "the other ranks wait on the faulted GPU until the watchdog fires",
        within_seconds=_WINDOW,
    ),
    Explains("gpu_hardware", "slurm_job", "peers", "the job lost the faulted node", within_seconds=_WINDOW),
    Explains(
        "gpu_hardware",
        "gpu_error_in_job_output",
        "peers",
        "the job's gathered output repeats the faulted GPU's error",
        within_seconds=_WINDOW,
    ),
    # EFA devices gone: the health check fails, the node is marked, collectives lose their paths
    Explains("efa_hardware", "node_unhealthy", "same_node", "HyperPod marks the node whose EFA check fails"),
    Explains("efa_hardware", "node_straggler", "same_node", "the remaining EFA devices carry all the traffic"),
    Explains("efa_hardware", "hang_attributed", "same_node", "the rank behind the missing EFA devices stopped"),
    Explains(
        "efa_hardware",
        "collective_hang",
        "peers",
        "collectives through the missing EFA devices time out",
        within_seconds=_WINDOW,
    ),
    # a node that never finished its lifecycle script
    Explains("lifecycle_script", "node_unhealthy", "same_node", "the node never became healthy"),
    Explains("lifecycle_script", "node_unreachable", "same_node", "the node's agent may never have started"),
    # a node marked unhealthy for a reason not seen here
    Explains("node_unhealthy", "node_unreachable", "same_node", "the unhealthy node does not answer"),
    Explains("node_unhealthy", "slurm_node_state", "same_node", "Slurm follows the node's health"),
    Explains("slurm_node_state", "slurm_job", "same_node", "the job waits for the down or drained node"),
    # the rank attribution named: the other ranks' timeouts are its consequence
    Explains("hang_attributed", "collective_hang", "peers", "the other ranks wait on the rank that stopped"),
    # network rules
    Explains(
        "security_group_rules",
        "collective_hang",
        "anywhere",
        "NCCL connections between the nodes are dropped by the security group",
    ),
    Explains("security_group_rules", "hang_attributed", "anywhere", "the stopped rank's connections are dropped"),
    Explains(
        "security_group_rules",
        "peer_connection_failed",
        "anywhere",
        "the security group drops the connections NCCL opens between the nodes",
    ),
    Explains(
        "security_group_rules",
        "rendezvous_failed",
        "anywhere",
        "the security group drops the ranks' connections to the rendezvous store",
    ),
    Explains(
        "network_policy",
        "peer_connection_failed",
        "same_job",
        "the policy drops the connections between the job's pods",
    ),
    Explains("network_policy", "rendezvous_failed", "same_job", "the policy drops the ranks' connections to the store"),
    Explains("rendezvous", "rendezvous_failed", "same_job", "the ranks cannot reach the rendezvous endpoint"),
    Explains("network_policy", "collective_hang", "same_job", "the policy drops traffic between the job's pods"),
    Explains("network_policy", "hang_attributed", "same_job", "the policy drops the stopped rank's traffic"),
    # TCP fallback: why NCCL had no EFA
    Explains("efa_not_requested", "tcp_fallback", "same_pod", "pods without EFA devices can only use sockets"),
    Explains("efa_plugin_missing", "tcp_fallback", "same_node", "without the plugin NCCL can only use sockets"),
    # memory the transports need
    Explains(
        "node_memory_limits",
        "memory_registration_failed",
        "same_node",
        "the node's memlock or /dev/shm limit is too small for what EFA and NCCL register",
    ),
    Explains(
        "pod_shared_memory",
        "memory_registration_failed",
        "same_pod",
        "the pod has no IPC_LOCK or a small /dev/shm",
    ),
    # versions
    Explains("node_software_drift", "version_mismatch", "same_node", "the node runs other versions"),
    Explains("version_mismatch", "collective_hang", "same_job", "mismatched NCCL versions hang collectives"),
    # a rank killed for memory
    Explains("pod_memory", "pod_crash", "same_pod", "the container restarts after each OOM kill"),
    Explains("pod_memory", "collective_hang", "same_job", "the killed rank leaves its peers waiting"),
    Explains("pod_crash", "collective_hang", "same_job", "the crashed rank leaves its peers waiting"),
)
