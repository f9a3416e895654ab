"""The check-coverage contract itself (tests/check_coverage.py) fails when it should."""

from __future__ import annotations

from tests import check_coverage
from tests.check_coverage import judge


def test_an_unreached_check_and_stale_lists_are_each_a_problem(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(check_coverage, "NOT_YET_REACHED", {"b.check": "why", "gone.check": "why"})
    monkeypatch.setattr(check_coverage, "NEVER_ISSUES", {"c.check": "info only"})
    seen = {("a.check", "FAIL"), ("b.check", "WARN"), ("c.check", "WARN"), ("d.check", "PASS")}
    problems = judge(seen, {"a.check", "b.check", "c.check", "d.check"})
    assert problems == [
        "d.check: no test reaches its FAIL or WARN",
        "b.check: a test now reaches its FAIL or WARN; remove it from NOT_YET_REACHED",
        "c.check: in NEVER_ISSUES but a test saw it FAIL or WARN",
        "gone.check: listed but not a registered check",
    ]


def test_the_contract_holds_when_every_check_is_reached_or_listed(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(check_coverage, "NOT_YET_REACHED", {})
    monkeypatch.setattr(check_coverage, "NEVER_ISSUES", {"c.check": "info only"})
    assert judge({("a.check", "FAIL"), ("c.check", "INFO")}, {"a.check", "c.check"}) == []
