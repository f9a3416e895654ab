"""The contract that some test reaches every registered check's FAIL or WARN (issue 17, point 7).

While the suite runs, the status of every finding a check returns is recorded (the check is wrapped,
never changed: it returns what it returned). At the end of a whole run (`make test`: every test
path, no `-k`), a check that no test ever saw fail or warn fails the run, unless it is listed in
`NOT_YET_REACHED` with why; a check listed there that a test now reaches fails the run too, so the
list only shrinks. `CHECK_COVERAGE_REPORT=1` prints the comparison after any run.

With pytest-xdist each worker writes what it saw to a directory the controller names, and the
controller judges the union. Checks run inside Lambda sandbox processes are not seen: the unit and
in-process functional tests are what count.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_nccl.checks import Check, discover
from hyperpod_nccl.models.findings import Finding, Status
from hyperpod_nccl.models.inventory import Inventory

# Checks no test drives to FAIL or WARN yet, with why. Shrink it; never grow it without a reason.
NOT_YET_REACHED: dict[str, str] = {}
# Checks that never FAIL or WARN by design, with why: a test seeing one do so breaks the contract.
NEVER_ISSUES: dict[str, str] = {
    "node.nccl_job_env": "recommendations only (INFO, P2): a rank without Flight Recorder or NCCL_DEBUG=WARN "
    "runs fine, it is only harder to debug",
    "node.kernel_log": "evidence only (INFO): the kernel lines are shown to the engineer; the faults they may "
    "show are judged by the Xid, EFA and ECC checks, and a boot message is no fault",
}

ISSUES = {Status.FAIL.value, Status.WARN.value}
_DIR_KEY = "check_coverage_dir"
_seen: set[tuple[str, str]] = set()


def _recording(run: Callable[[Check, Inventory], list[Finding]]) -> Callable[[Check, Inventory], list[Finding]]:
    def recorded(self: Check, inventory: Inventory) -> list[Finding]:
        findings = run(self, inventory)
        _seen.update((finding.check_id, finding.status.value) for finding in findings)
        return findings

    return recorded


def pytest_configure(config: pytest.Config) -> None:
    Check.run = _recording(Check.run)  # type: ignore[method-assign]
    if not hasattr(config, "workerinput"):
        config.stash[_dir] = tempfile.mkdtemp(prefix="check-coverage-")


_dir = pytest.StashKey[str]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist (controller side): tell each worker where to write what it saw."""
    node.workerinput[_DIR_KEY] = node.config.stash[_dir]


def _whole_run(config: pytest.Config) -> bool:
    """Every test path of the suite ran (not a file, a `-k` selection or `--lf`)."""
    root = Path(str(config.rootpath))
    paths = {Path(arg.split("::")[0]).resolve() for arg in config.args}
    return not config.option.keyword and not getattr(config.option, "lf", False) and paths <= {root, root / "tests"}


def reached_issues(seen: set[tuple[str, str]]) -> set[str]:
    """The checks some recorded finding shows failing or warning."""
    return {check_id for check_id, status in seen if status in ISSUES}


def judge(seen: set[tuple[str, str]], registered: set[str]) -> list[str]:
    """What is wrong with the contract, one line each (empty when it holds)."""
    reached = reached_issues(seen)
    listed = set(NOT_YET_REACHED) | set(NEVER_ISSUES)
    problems = [f"{check_id}: no test reaches its FAIL or WARN" for check_id in sorted(registered - reached - listed)]
    problems += [
        f"{check_id}: a test now reaches its FAIL or WARN; remove it from NOT_YET_REACHED"
        for check_id in sorted(reached & set(NOT_YET_REACHED))
    ]
    problems += [
        f"{check_id}: in NEVER_ISSUES but a test saw it FAIL or WARN"
        for check_id in sorted(reached & set(NEVER_ISSUES))
    ]
    problems += [f"{check_id}: listed but not a registered check" for check_id in sorted(listed - registered)]
    return problems


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        path = Path(workerinput[_DIR_KEY]) / f"{workerinput.get('workerid', 'worker')}.json"
        path.write_text(json.dumps(sorted(_seen)), encoding="utf-8")
        return
    seen = set(_seen)
    for path in Path(config.stash[_dir]).glob("*.json"):
        seen.update((check_id, status) for check_id, status in json.loads(path.read_text(encoding="utf-8")))
    problems = judge(seen, set(discover()))
    report = os.environ.get("CHECK_COVERAGE_REPORT") == "1"
    if report or (problems and _whole_run(config) and exitstatus == 0):
        writer = config.get_terminal_writer()
        writer.line("")
        writer.line(f"check coverage: {len(reached_issues(seen))} check(s) reached FAIL/WARN", bold=True)
        for line in problems:
            writer.line(f"  {line}", red=True)
    if problems and _whole_run(config) and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
