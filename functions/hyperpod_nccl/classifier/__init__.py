"""Log intelligence: classify NCCL / EFA / CUDA / driver / kernel log lines into failure signatures.

Public API (used by the CloudWatch scan, the Kubernetes pod-log check and `hyperpod-nccl triage`):

    from hyperpod_nccl.classifier import scan_lines, ScanResult, SignatureHit, hits_to_findings

`scan_lines(lines)` reads any iterable of lines once, in constant memory, and returns one
`SignatureHit` per signature that matched (grouped: count, first/last timestamp, last evidence
lines, extracted fields). The catalog is data: `signatures.json`, validated by `catalog.Signature`.
"""

from __future__ import annotations

from hyperpod_nccl.classifier.catalog import Catalog, Signature, load_catalog
from hyperpod_nccl.classifier.findings import hit_status, hits_to_findings
from hyperpod_nccl.classifier.scanner import (
    Scanner,
    ScanResult,
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
    "hit_status",
    "hits_to_findings",
    "load_catalog",
    "scan_lines",
    "scan_stream",
    "scan_text",
    "version_drift_hit",
]
