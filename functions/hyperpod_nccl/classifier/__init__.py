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

Two layers recognise a failure. A *signature* knows a message (an emitter's format, a known
wording) and names its class and runbook section. A *class cue* (`catalog.CueLayer`, the catalog's
`cues`) is the weaker second layer: per class, the class's own vocabulary ("getaddrinfo",
"/dev/shm", "Xid", "rendezvous"), tried only on a line that no signature matched, that no healthy
rule matches, that carries an error word outside a harmless role ("errors: 0", "--error=FILE"),
that is no INFO/DEBUG line nor a warning its process carries on from, and that does not say it
carries on ("retrying") without saying it gave up; among the classes whose words are in its message
(the printing program's syslog tag set aside), the most specific wins (a named cause before
rendezvous, connectivity, timeout and NCCL). Its hit has the id `cue_<class>`,
the class's section, the field `by_cue: true` and priority P2 (a warning): "Looks like a <class>
problem (no known message matched)". It folds like its class's signatures (`by_cue_note` says how
it was recognised; the verdict takes it as a cause of its own, never as evidence of a kind).
"""

from __future__ import annotations

from hyperpod_nccl.classifier.catalog import Catalog, Signature, load_catalog
from hyperpod_nccl.classifier.findings import by_cue_note, cue_free_facts, hit_status, hits_to_findings, is_cue_hit
from hyperpod_nccl.classifier.scanner import (
    ONLY_BESIDE,
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
    "ONLY_BESIDE",
    "Catalog",
    "ScanResult",
    "Scanner",
    "Signature",
    "SignatureHit",
    "by_cue_note",
    "cue_free_facts",
    "fold_generic_hits",
    "hit_status",
    "hits_to_findings",
    "is_cue_hit",
    "load_catalog",
    "scan_lines",
    "scan_stream",
    "scan_text",
    "version_drift_hit",
]
