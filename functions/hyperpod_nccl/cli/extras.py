"""What the commands that run the simulation need beyond the runtime dependencies.

`pip install hyperpod-nccl-monitor` installs what `diagnose`, `triage`, `incidents` and
`support-bundle` need against a real cluster. `demo` and `bench` run the embedded simulation
(`hyperpod_nccl_sim`), which emulates AWS with moto's server (Werkzeug) and the EKS API over TLS
(cryptography): those come with the `demo` extra. Without them, those commands say which extra to
install, in one line, instead of failing on an import.
"""

from __future__ import annotations

import importlib.util
import sys

from hyperpod_nccl.cli.exit_codes import EXIT_PREREQUISITE

# The optional-dependencies key in pyproject.toml (tests/unit/test_cli_extras.py holds them equal).
DEMO_EXTRA = "demo"
DISTRIBUTION = "hyperpod-nccl-monitor"
# Import name -> the requirement of the `demo` extra that provides it.
SIMULATION_MODULES = {"moto": "moto", "werkzeug": "Werkzeug", "cryptography": "cryptography"}


def missing_simulation_modules() -> list[str]:
    """The simulation's third-party modules that cannot be imported here (none in a dev install)."""
    return [name for name in SIMULATION_MODULES if importlib.util.find_spec(name) is None]


def require_simulation(command: str) -> int | None:
    """None when the simulation can run; else print one line naming the extra and return the exit
    code of a missing prerequisite."""
    missing = missing_simulation_modules()
    if not missing:
        return None
    sys.stderr.write(
        f"hyperpod-nccl {command}: the simulated cluster needs {', '.join(missing)}, which a runtime-only "
        f"install leaves out: pip install '{DISTRIBUTION}[{DEMO_EXTRA}]'\n"
    )
    return EXIT_PREREQUISITE
