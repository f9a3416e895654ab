"""What the classifier's unit tests share about notices that are failures only beside their
consequence (`Signature.only_beside`), and about reading a hit with what folded under it."""

from __future__ import annotations

from collections.abc import Iterable

from hyperpod_nccl.models.logs import SignatureHit

# INVENTED, from NCCL's own INFO format: the consequence each `only_beside` signature the tests read
# with its notice waits for.
CONSEQUENCE_LINES = {
    "tcp_fallback": "ip-10-1-2-3:1234:1234 [0] NCCL INFO Using network Socket",
    "socket_ifname_selection": "[1717000000.123456] [ip-10-1-2-3:1234 :0]  select.c:630 UCX  ERROR no usable "
    "transports/devices (asked tcp on network: eth5)",
}


def ids_with_folded(hits: Iterable[SignatureHit]) -> list[str]:
    """Every signature of `hits`, the generic ones folded under a cause included."""
    return [hit_id for hit in hits for hit_id in (hit.id, *(folded.id for folded in hit.folded))]
