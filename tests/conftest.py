"""Shared fixtures: one AWS emulation per test process, scenario-seeded simulations on it,
and a CLI runner. Nothing here mocks product code: tests talk to the emulation over HTTP."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from hypothesis import settings

from hyperpod_nccl.cli.main import main
from hyperpod_nccl.cli.progress import PROGRESS_LINE
from hyperpod_nccl_sim.aws import FAKE_ACCESS_KEY, FAKE_SECRET_KEY, EmulatedAws
from hyperpod_nccl_sim.runtime import SimulatedCluster
from hyperpod_nccl_sim.scenario import FaultSpec, Scenario, load_scenario

# The contract that some test reaches every check's FAIL or WARN (tests/check_coverage.py): its hooks.
from tests.check_coverage import pytest_configure, pytest_configure_node, pytest_sessionfinish  # noqa: F401

# Never let a test reach real AWS with real credentials.
for _name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
    os.environ.pop(_name, None)
os.environ["AWS_ACCESS_KEY_ID"] = FAKE_ACCESS_KEY
os.environ["AWS_SECRET_ACCESS_KEY"] = FAKE_SECRET_KEY
os.environ["AWS_DEFAULT_REGION"] = "us-west-2"
os.environ["AWS_CONFIG_FILE"] = os.devnull
os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
os.environ["POWERTOOLS_TRACE_DISABLED"] = "1"
os.environ["POWERTOOLS_METRICS_NAMESPACE"] = "HyperPodNccl/Test"

# No per-example wall-clock deadline for property tests: on CI's 2 shared cores, beside the
# functional layer's emulations, one example of a scenario file took 379 ms against Hypothesis's
# default 200 ms and failed a correct test. What a property test checks is the answer, not the time.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


@pytest.fixture(scope="session")
def emulation() -> Iterator[EmulatedAws]:
    """The loopback AWS emulation shared by every test of this process."""
    server = EmulatedAws().start()
    yield server
    server.stop()


SimulateFactory = Callable[..., SimulatedCluster]


@pytest.fixture
def simulate(emulation: EmulatedAws) -> Iterator[SimulateFactory]:
    """Start a scenario on the shared emulation: `simulate("eks-p5", faults=[...])`.

    `faults` are added to the scenario's own; `edit` receives a deep copy of the scenario to
    change before seeding.
    """
    started: list[SimulatedCluster] = []

    def factory(
        scenario: str | Scenario,
        *,
        faults: list[FaultSpec] | None = None,
        edit: Callable[[Scenario], None] | None = None,
    ) -> SimulatedCluster:
        loaded = load_scenario(scenario) if isinstance(scenario, str) else scenario
        loaded = loaded.model_copy(deep=True)
        if faults:
            loaded.faults = [*loaded.faults, *faults]
        if edit:
            edit(loaded)
        simulation = SimulatedCluster(loaded, emulation=emulation).start()
        started.append(simulation)
        return simulation

    yield factory
    for simulation in started:
        simulation.stop()


@dataclass
class CliRun:
    """What one CLI invocation produced."""

    code: int
    stdout: str
    stderr: str

    @property
    def messages(self) -> str:
        """stderr without its progress lines (a line per phase when stderr is not a terminal)."""
        return "".join(line for line in self.stderr.splitlines(keepends=True) if not PROGRESS_LINE.match(line))


@pytest.fixture
def cli(
    emulation: EmulatedAws, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., CliRun]:
    """Run `hyperpod-nccl` in-process with boto3 pointed at the emulation (AWS_ENDPOINT_URL),
    exactly as an operator's shell would run it against AWS."""

    def run(*argv: str, env: dict[str, str | None] | None = None) -> CliRun:
        monkeypatch.setenv("AWS_ENDPOINT_URL", emulation.endpoint_url)
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
        for key, value in (env or {}).items():
            if value is None:
                monkeypatch.delenv(key, raising=False)
            else:
                monkeypatch.setenv(key, value)
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as exit_:
            code = int(exit_.code or 0)
        captured = capsys.readouterr()
        return CliRun(code=code, stdout=captured.out, stderr=captured.err)

    return run
