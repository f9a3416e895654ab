"""`python -m tests.bench.run --update NAME`: one section replaced, the others kept as they ran."""

from __future__ import annotations

from tests.bench.run import _replace_sections

PAGE = "# Benchmarks\n\nGenerated on day 1.\n\n## A\n\nold a\n\n_(ran in 1 s)_\n\n## B\n\nold b\n\n_(ran in 2 s)_\n"


def test_an_updated_section_replaces_its_namesake_only() -> None:
    page = _replace_sections(PAGE, ["## A\n\nnew a\n\n_(ran in 3 s on day 2, alone)_\n"])
    assert "new a" in page and "old a" not in page
    assert "old b" in page and "Generated on day 1." in page
    assert page.index("## A") < page.index("## B")
    assert page.count("## ") == 2


def test_a_section_the_page_lacks_is_appended() -> None:
    page = _replace_sections(PAGE, ["## C\n\nc\n"])
    assert page.endswith("## C\n\nc\n") and "old a" in page and "old b" in page
