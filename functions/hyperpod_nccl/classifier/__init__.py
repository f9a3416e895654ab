"""Log intelligence: classify NCCL / EFA / CUDA / driver / kernel log lines into failure signatures.

Public API (used by the CloudWatch scan, the Kubernetes pod-log check and `hyperpod-nccl triage`):

    from hyperpod_nccl.classifier import scan_lines, ScanResult, SignatureHit, hits_to_findings

`scan_lines(lines)` reads any iterable of lines once, in constant memory, and returns one
`SignatureHit` per signature that matched (grouped: count, first/last timestamp, last evidence
lines, extracted fields). The catalog is data: `signatures.json`, validated by `catalog.Signature`.

One input (an excerpt, a log stream, a pod's log) is one scope for two rules of the catalog:

* a generic error (an NCCL result code such as "unhandled system error", a bare warning) is folded
  under the input's most urgent hit that names a cause: one finding, with the cause's class and
  section (`fold_generic_hits`, `Signature.folds`, `Signature.outcome`);
* healthy rules (`catalog.HealthyRule`): a line its emitter prints on purpose is no failure, and a
  success line settles the failures of listed signatures printed before it (`ScanResult.resolved`).
"""

from __future__ import annotations

from hyperpod_nccl.classifier.catalog import Catalog, Signature, load_catalog
from hyperpod_nccl.classifier.findings import hit_status, hits_to_findings
from hyperpod_nccl.classifier.scanner import (
    Scanner,
    ScanResult,
    fold_generic_hits,
    scan_lines,
    scan_stream,
    scan_text,
    version_drift_hit,
)
from hyperpod_nccl.models.logs import SignatureHit

__all__ = [
    "Catalog",
    "ScanResult",
    "Scanner",
    "Signature",
    "SignatureHit",
    "fold_generic_hits",
    "hit_status",
    "hits_to_findings",
    "load_catalog",
    "scan_lines",
    "scan_stream",
    "scan_text",
    "version_drift_hit",
]
