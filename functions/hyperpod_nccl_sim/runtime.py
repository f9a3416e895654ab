"""A whole simulated HyperPod cluster, running: AWS emulation, log streams, SSM agents and the
Kubernetes API, all seeded from one scenario and all on loopback."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from hyperpod_nccl.collectors.aws import AwsClients
from hyperpod_nccl_sim.aws import FAKE_ACCESS_KEY, FAKE_SECRET_KEY, EmulatedAws, EmulatedLimits
from hyperpod_nccl_sim.kubernetes import KubernetesApi, start_kubernetes_api
from hyperpod_nccl_sim.logs import seed_logs
from hyperpod_nccl_sim.nodes import NodeAgents, start_node_agents
from hyperpod_nccl_sim.scenario import Scenario, load_scenario
from hyperpod_nccl_sim.seed import seed_cluster


class SimulatedCluster:
    """Start with `with SimulatedCluster(scenario) as sim:`; `sim.clients()` gives boto3 access
    exactly as the CLI would have against AWS.

    Pass an already running `emulation` to reuse one server across scenarios (tests do), and
    `limits` to change the account-wide API rates the emulation enforces for this simulation
    (default: the emulation's own, every AWS rate on; `EmulatedLimits(enforce=False)` for none).
    """

    def __init__(
        self,
        scenario: Scenario | str,
        *,
        emulation: EmulatedAws | None = None,
        now: datetime | None = None,
        limits: EmulatedLimits | None = None,
    ) -> None:
        self.scenario = load_scenario(scenario) if isinstance(scenario, str) else scenario
        self._owns_emulation = emulation is None
        self.emulation = emulation or EmulatedAws(region=self.scenario.region)
        self.limits = limits
        self.now = now or datetime.now(UTC)
        self.cluster_arn = ""
        self._agents: NodeAgents | None = None
        self._kubernetes: KubernetesApi | None = None

    def start(self) -> SimulatedCluster:
        """Start the servers and seed every source from the scenario."""
        if self._owns_emulation:
            self.emulation.start()
        # moto keeps its resources per process, not per server: a second emulation in the same
        # process (the demo run from a test) would otherwise meet the first one's cluster.
        self.emulation.reset()
        self.emulation.serve_account(self.scenario.account_id)
        if self.limits is not None:
            self.emulation.set_limits(self.limits)
        self.cluster_arn = seed_cluster(self.scenario, self.emulation, self.now)
        seed_logs(self.scenario, self.emulation, self.cluster_arn, self.now)
        self._agents = start_node_agents(self.scenario, self.emulation, self.cluster_arn)
        self._kubernetes = start_kubernetes_api(self.scenario, self.emulation)
        # Faults last: seeding itself must not trip over them.
        self.emulation.faults.set_faults(self.scenario.faults)
        return self

    def stop(self) -> None:
        """Stop what this simulation started."""
        if self._kubernetes:
            self._kubernetes.stop()
        if self._agents:
            self._agents.stop()
        if self._owns_emulation:
            self.emulation.stop()

    def clients(self, max_attempts: int = 2) -> AwsClients:
        """AWS clients pointed at the emulation (few retries: injected faults are deliberate)."""
        return AwsClients(
            region=self.scenario.region,
            endpoint_url=self.emulation.endpoint_url,
            session=self.emulation.session(self.scenario.region),
            max_attempts=max_attempts,
        )

    def cli_environment(self) -> dict[str, str]:
        """The environment under which `hyperpod-nccl` run in this process talks to the emulation as
        it would to AWS (AWS_ENDPOINT_URL, the emulation's credentials, the scenario's region)."""
        return {
            "AWS_ENDPOINT_URL": self.emulation.endpoint_url,
            "AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_KEY,
            "AWS_REGION": self.scenario.region,
        }

    def instance_id(self, node_key: str) -> str:
        """The instance id of a scenario node key ("worker:3")."""
        return self.scenario.instance_id(node_key)

    def __enter__(self) -> SimulatedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def set_environment(values: dict[str, str]) -> dict[str, str | None]:
    """Set `values` in this process's environment (the emulated functions' environment at each
    invocation: sandboxes.py); returns what they replaced, for `restore_environment`."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    return saved


def restore_environment(saved: dict[str, str | None]) -> None:
    """Put back what `set_environment` replaced (a variable that was unset is unset again)."""
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
