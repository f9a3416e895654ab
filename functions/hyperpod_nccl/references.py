"""Runbook pointers: the one place where every `references/<file>.md § <section>` lives.

Checks, collectors (a degraded source's pointer), the incident layer and suggested commands
import these constants, and the log classifier's `signatures.json` names them; text that shows
a pointer (a finding's detail, a fix, an incident's advice) prints `.pointer` rather than
spelling a file or section. A renamed section therefore breaks exactly one line, and the
contract test (`tests/unit/test_catalog_contract.py`) says which: it resolves every constant to
a heading and fails on a pointer in a string literal (docstrings aside) anywhere else in
`functions/`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, computed_field

REFERENCES_DIR_ENV = "HYPERPOD_NCCL_REFERENCES_DIR"

# A heading resolves when its text starts with the section id: "## 8. NCCL-specific ...",
# "## G.1.a Row remapping ...". The id is letters/digits separated by dots. Only headings of level 2
# and deeper outside code fences count, the first of a file with a given id winning (heading_index).
_HEADING = re.compile(r"^(#{1,6})\s+(?P<id>[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*)\.?\s+(?P<title>.+?)\s*$")


class Reference(BaseModel):
    """A pointer at one section of one runbook under `references/`."""

    model_config = ConfigDict(frozen=True)

    file: str
    section: str

    @computed_field  # type: ignore[prop-decorator]  # serialised with the model: JSON readers get the pointer
    @property
    def pointer(self) -> str:
        """The text form printed after a finding and inside any text that names the section:
        `references/operations.md § 8`."""
        return f"references/{self.file} § {self.section}"

    def url(self, base_url: str) -> str:
        """A browsable link, `<base_url>/<file>#<anchor>` (GitHub-style heading anchor; the file alone
        when the section resolves to no heading)."""
        heading = section_heading(self)
        anchor = github_anchor(heading) if heading else ""
        return f"{base_url.rstrip('/')}/{self.file}" + (f"#{anchor}" if anchor else "")


def _ref(file: str, section: str) -> Reference:
    return Reference(file=file, section=section)


OPS = "operations.md"
DBG = "debugging-guide.md"
PATTERNS = "error-patterns-quick-ref.md"
PERF = "performance-testing.md"
NODE = "node-debugger.md"
CLUSTER = "cluster-debugger.md"

# operations.md
OPS_CLUSTER_NAMES = _ref(OPS, "1")
OPS_SCOPE = _ref(OPS, "1.1")
OPS_IAM = _ref(OPS, "2")
OPS_SSM_TARGET = _ref(OPS, "3")
OPS_CLOUDWATCH = _ref(OPS, "4")
OPS_NCCL_ENV = _ref(OPS, "5")
OPS_NODE_HEALTH_LABELS = _ref(OPS, "6")
OPS_SLURM = _ref(OPS, "7")
OPS_REMEDIATIONS = _ref(OPS, "8")

# debugging-guide.md
DBG_TIMEOUT_RENDEZVOUS = _ref(DBG, "1")
DBG_SECURITY_GROUPS = _ref(DBG, "2")
DBG_SOCKET_IFNAME = _ref(DBG, "3")
DBG_CONTAINER_OOM = _ref(DBG, "4")
DBG_WRONG_RESULTS = _ref(DBG, "5")
DBG_EFA_CONFIG = _ref(DBG, "6")
DBG_NODE_HARDWARE = _ref(DBG, "7")
DBG_SLURM = _ref(DBG, "8")
DBG_NCCL_RAS = _ref(DBG, "9")
DBG_VERSION_MISMATCH = _ref(DBG, "10")
DBG_GPU_OOM = _ref(DBG, "11")
DBG_DNS = _ref(DBG, "12")
DBG_TCP_FALLBACK = _ref(DBG, "13")
DBG_P2P_ACS = _ref(DBG, "14")
DBG_STALE_SHM = _ref(DBG, "15")
DBG_HOST_FIREWALL = _ref(DBG, "16")
DBG_MEMLOCK_SHM = _ref(DBG, "17")
DBG_FRAMEWORKS = _ref(DBG, "18")
DBG_TUNING_NVLS = _ref(DBG, "19")
DBG_POD_FAILURES = _ref(DBG, "20")
DBG_ROW_REMAP_DCGM = _ref(DBG, "21")
DBG_FLIGHT_RECORDER = _ref(DBG, "22")

# error-patterns-quick-ref.md
PAT_RENDEZVOUS = _ref(PATTERNS, "1")
PAT_RUNTIME = _ref(PATTERNS, "2")
PAT_EFA = _ref(PATTERNS, "3")
PAT_RESOURCES = _ref(PATTERNS, "4")
PAT_VERSION_CONFIG = _ref(PATTERNS, "5")
PAT_STALE_TOPOLOGY = _ref(PATTERNS, "6")
PAT_GPU_HARDWARE = _ref(PATTERNS, "7")

# performance-testing.md
PERF_NCCL_TESTS = _ref(PERF, "1")
PERF_SINGLE_NODE = _ref(PERF, "2")
PERF_MULTI_NODE = _ref(PERF, "3")
PERF_FI_PING = _ref(PERF, "4")
PERF_DEBUG_FILE = _ref(PERF, "5")
PERF_TIMEOUT_SCALING = _ref(PERF, "6")
PERF_DEBUG_IMPACT = _ref(PERF, "7")
PERF_EFA_SETTINGS = _ref(PERF, "8")
PERF_STRAGGLERS = _ref(PERF, "9")

# node-debugger.md
NODE_LIFECYCLE = _ref(NODE, "D")
NODE_HARDWARE = _ref(NODE, "F")
NODE_GPU = _ref(NODE, "G")
NODE_NVIDIA = _ref(NODE, "G.1")
NODE_ROW_REMAP = _ref(NODE, "G.1.a")
NODE_DCGM = _ref(NODE, "G.1.b")
NODE_NEURON = _ref(NODE, "G.2")
NODE_SSM = _ref(NODE, "K")
NODE_CLOCK = _ref(NODE, "L")

# cluster-debugger.md
CLUSTER_STATUS = _ref(CLUSTER, "1")
CLUSTER_INSTANCE_GROUPS = _ref(CLUSTER, "2")
CLUSTER_EVENTS = _ref(CLUSTER, "3")
CLUSTER_LARGE = _ref(CLUSTER, "4")


# Where `pip install` puts the runbooks, under the installation's prefix (pyproject.toml's
# data-files; tests/functional/test_runtime_install.py installs it and finds the runbooks there).
INSTALLED_REFERENCES = Path("share", "hyperpod-nccl-monitor", "references")
# The published runbooks, for pointers read away from any installation (alerts, a copied report).
REFERENCES_URL = "https://github.com/aws-samples/hyperpod-nccl-monitor/blob/main/references"


def _installed_candidates() -> list[Path]:
    import site
    import sys

    prefixes = [sys.prefix, sys.base_prefix, site.getuserbase()]
    return [Path(prefix) / INSTALLED_REFERENCES for prefix in dict.fromkeys(prefixes)]


def references_dir() -> Path:
    """Locate `references/`: the env override, else the nearest ancestor that has one (the
    repository keeps it at the top level; the Lambda asset places it beside the package), else
    where `pip install` put it (<prefix>/share/hyperpod-nccl-monitor/references, or the user base's
    for `pip install --user`)."""
    import os

    override = os.environ.get(REFERENCES_DIR_ENV)
    if override:
        return Path(override)
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "references"
        if candidate.is_dir():
            return candidate
    for candidate in _installed_candidates():
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("references/ directory not found; set " + REFERENCES_DIR_ENV)


def runbooks_line() -> str:
    """Where the `→ references/<file>.md § <section>` pointers of a report can be read: the
    directory this installation has (a checkout's, or the one `pip install` put under its prefix)
    and the published copy."""
    try:
        where = str(references_dir())
    except FileNotFoundError:
        where = "not installed here"
    return f"Runbooks (→ references/…): {where} · {REFERENCES_URL}"


@lru_cache(maxsize=1)
def heading_index() -> dict[tuple[str, str], str]:
    """Map (file, section id) to the heading text, parsed from the markdown files (level 2 and
    deeper, outside code fences; the first heading of a file with an id wins)."""
    index: dict[tuple[str, str], str] = {}
    for path in sorted(references_dir().glob("*.md")):
        in_fence = False
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("```"):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            match = _HEADING.match(line)
            if match and len(match.group(1)) >= 2:
                index.setdefault((path.name, match.group("id")), line.lstrip("#").strip())
    return index


def section_heading(reference: Reference) -> str | None:
    """The heading text a reference resolves to, or None when it does not resolve."""
    try:
        return heading_index().get((reference.file, reference.section))
    except FileNotFoundError:
        return None


def github_anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")
