"""Which version of the product a sweep ran: a digest of the package's own sources.

The monitor sends one baseline summary on the first sweep after a deployment (issue 14, point 8):
a sweep recorded by other code does not count as having told the cluster's state, because what
that code called a root cause (its ids, its folding) may not be what this code calls one. The
digest changes exactly when the shipped code does; a configuration-only deployment keeps it.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import hyperpod_nccl

_PACKAGE = Path(hyperpod_nccl.__file__).resolve().parent
# Enough to tell deployments apart in a sweep record; not a security boundary.
DIGEST_CHARS = 16


@cache
def code_version() -> str:
    """The digest of every `.py` file of the package (path and content), computed once per sandbox."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(_PACKAGE).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:DIGEST_CHARS]
