"""Turn classifier hits into Findings of a given check (shared by the CloudWatch and pod-log checks)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from hyperpod_nccl.classifier.engine import SignatureHit
from hyperpod_nccl.models.findings import Finding, Resource

if TYPE_CHECKING:  # the checks package imports the inventory, which imports this package's models
    from hyperpod_nccl.checks import Check


def hits_to_findings(check: Check, hits: Iterable[SignatureHit], resources: Iterable[Resource] = ()) -> list[Finding]:
    """One finding per hit, about `resources` (e.g. a node, a pod or a log stream)."""
    found = list(resources)
    out: list[Finding] = []
    for hit in hits:
        out.append(
            check.fail(
                f"{hit.title} ({hit.count}x)",
                reference=hit.reference,
                evidence=hit.evidence,
                resources=found,
                fields={"signature": hit.id, "class": hit.cls, "count": hit.count, **hit.fields},
            )
        )
    return out
