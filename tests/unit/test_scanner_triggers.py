"""The scanner's trigger anchors: the part of each keyword the one-pass search looks for."""

from __future__ import annotations

from hyperpod_nccl.classifier.catalog import load_catalog
from hyperpod_nccl.classifier.scanner import ANCHOR_MIN_BYTES, trigger_anchor, trigger_set


def test_an_anchor_starts_at_the_rarest_byte_of_its_keyword() -> None:
    assert trigger_anchor("rendezvous") == "zvous"
    assert trigger_anchor(b"failed to extend") == b"xtend"
    assert trigger_anchor("fail") == "fail"  # too short to cut
    assert trigger_anchor("socket") == "socket"  # only "s" and "o" start 5 bytes; "s" is the rarer


def test_every_keyword_of_the_catalog_contains_a_trigger() -> None:
    keywords = tuple({keyword.lower() for s in load_catalog().signatures for keyword in s.keywords})
    triggers = trigger_set(keywords)
    for keyword in keywords:
        anchor = trigger_anchor(keyword)
        assert anchor in keyword and len(anchor) >= min(len(keyword), ANCHOR_MIN_BYTES)
        assert any(trigger in keyword for trigger in triggers), keyword
    # none contains another: at most one trigger matches at a position (trigger_pattern relies on it)
    assert not any(a != b and a in b for a in triggers for b in triggers)
