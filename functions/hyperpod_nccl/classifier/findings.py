"""Turn classifier hits into Findings of a given check (shared by the CloudWatch and pod-log checks)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from hyperpod_nccl.models.findings import Finding, Priority, Resource, Status
from hyperpod_nccl.models.logs import SignatureHit

if TYPE_CHECKING:  # the checks package imports the inventory, which imports this package's models
    from hyperpod_nccl.checks import Check


# Fields a class cue's hit carries (`by_cue`, and `cue`, the words that matched): said in words.
_CUE_FIELDS = ("by_cue", "cue")


def is_cue_hit(hit: SignatureHit) -> bool:
    """Whether `hit` came from a class cue (its class's words), not from a known message."""
    return hit.fields.get("by_cue") is True


def cue_free_facts(hit: SignatureHit) -> list[tuple[str, object]]:
    """The hit's non-empty fields as facts to print, less the cue's own (said by `by_cue_note`)."""
    hidden = _CUE_FIELDS if is_cue_hit(hit) else ()
    return [(k, v) for k, v in hit.fields.items() if v not in (None, "") and k not in hidden]


def by_cue_note(hit: SignatureHit) -> str:
    """What a reader is told about a hit of a class cue: how it was recognised, and so how far to trust it."""
    words = hit.fields.get("cue")
    return (
        f"recognised by the vocabulary of the {hit.cls} class"
        + (f" ({words!r})" if words else "")
        + ", not by a known message: confirm before acting"
    )


def hit_status(hit: SignatureHit) -> Status:
    """P0/P1 signatures fail; P2 (unclassified warnings) only warn."""
    return Status.WARN if hit.priority is Priority.P2 else Status.FAIL


def hits_to_findings(
    check: Check,
    hits: Iterable[SignatureHit],
    resources: Iterable[Resource] = (),
    *,
    where: str = "",
) -> list[Finding]:
    """One finding per hit about `resources` (a node, a pod, a log stream).

    `where` names the scanned source in the title ("stream worker/i-0abc/nccl", "pod ns/name").
    The signature id goes into `fields["signature"]`, so each signature is its own fingerprint.
    """
    about = list(resources)
    out: list[Finding] = []
    for hit in hits:
        seen = ""
        if hit.first_seen:
            seen = f"; first {hit.first_seen}" + (f", last {hit.last_seen}" if hit.last_seen != hit.first_seen else "")
        facts = ", ".join(f"{k}={v}" for k, v in cue_free_facts(hit))
        if is_cue_hit(hit):
            # A class cue (catalog.CueLayer): the words of a class, not one of its known messages.
            facts = "; ".join(filter(None, [by_cue_note(hit), facts]))
        if hit.folded:
            # The generic errors this cause explains: named, and their last line kept as evidence.
            explained = ", ".join(f"{folded.title} ({folded.count})" for folded in hit.folded)
            facts = "; ".join(filter(None, [facts, f"explains {explained}"]))
        out.append(
            check.finding(
                hit_status(hit),
                f"{hit.title}: {hit.count} line(s)" + (f" in {where}" if where else ""),
                priority=hit.priority,
                reference=hit.reference,
                detail=(facts + seen).strip("; "),
                evidence=[*hit.evidence, *(folded.evidence[-1] for folded in hit.folded if folded.evidence)],
                resources=about,
                fields={
                    "signature": hit.id,
                    "class": hit.cls,
                    "count": hit.count,
                    "first_seen": hit.first_seen,
                    "last_seen": hit.last_seen,
                    **({"folded": ",".join(folded.id for folded in hit.folded)} if hit.folded else {}),
                    **hit.fields,
                },
            )
        )
    return out
