"""Log intelligence: classify NCCL / EFA / CUDA / driver / kernel log lines into failure signatures.

Public API (used by the CloudWatch scan, the Kubernetes pod-log check and `hyperpod-nccl triage`):

    from hyperpod_nccl.classifier import scan_lines, ScanResult, SignatureHit, hits_to_findings

`scan_lines(lines)` reads any iterable of lines once, in constant memory, and returns one
`SignatureHit` per signature that matched (grouped: count, first/last timestamp, last evidence lines).
"""

from __future__ import annotations

from hyperpod_nccl.classifier.engine import Scanner, ScanResult, SignatureHit, scan_lines
from hyperpod_nccl.classifier.findings import hits_to_findings

__all__ = ["ScanResult", "Scanner", "SignatureHit", "hits_to_findings", "scan_lines"]
