"""The one sanitizer every renderer uses: nothing non-printable gets through, nothing is lost,
ordinary text is left alone, and escaping twice changes nothing."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_nccl.sanitize import (
    SNS_SUBJECT_MAX_CHARS,
    email_subject,
    for_slack,
    for_terminal,
    is_valid_sns_subject,
    one_line,
)

# Hostile pieces, mixed with arbitrary text so that hypothesis combines them.
ATTACKS = [
    "\x1b[2J",  # clear screen
    "\x1b]0;pwned\x07",  # window title
    "\x1b]52;c;ZWNobyBoaQ==\x07",  # clipboard write
    "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\",  # hyperlink
    "\r[PASS]",  # overprint
    "\x9b2J",  # single-byte C1 CSI
    "\x7f\x00\x08",
    "\u202eevil\u202c",  # bidi override
    "\u2066\u2069\u200f\u061c",
    "\u200b\u200d\ufeff",  # zero-width
    "\u2028\u2029\x85",  # line/paragraph separators, NEL
    "\U000e0041\U000e007f",  # tag characters ("ASCII smuggling")
    "\ud800",  # lone surrogate (surrogateescape-decoded bytes)
    "<!channel>",
    "<https://evil|click>",
    "<@U123>",
    "```\n*fake*\n```",
    "@here @channel @everyone",
    "&amp; &lt; &",
]
hostile_text = st.lists(st.text(max_size=40) | st.sampled_from(ATTACKS), max_size=6).map("".join)
_ESCAPE = re.compile(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|[nrt])")
_NAMED = {"n": "\n", "r": "\r", "t": "\t"}


def _reveal(shown: str) -> str:
    """The test's own inverse of the escape notation (valid for input without backslashes)."""
    return _ESCAPE.sub(lambda m: _NAMED.get(m.group(1)) or chr(int(m.group(1)[1:], 16)), shown)


def _printable(text: str, keep: str = "") -> bool:
    return all(c.isprintable() or c in keep for c in text)


@settings(max_examples=300, deadline=None)
@given(hostile_text)
def test_for_terminal_lets_only_printable_newline_and_tab_through(text: str) -> None:
    shown = for_terminal(text)
    assert _printable(shown, "\n\t")
    assert "\x1b" not in shown and "\r" not in shown
    assert for_terminal(shown) == shown


@settings(max_examples=300, deadline=None)
@given(hostile_text)
def test_one_line_is_printable_single_line_and_idempotent(text: str) -> None:
    shown = one_line(text)
    assert _printable(shown)
    assert shown.splitlines() in ([shown], [])
    assert one_line(shown) == shown
    assert for_terminal(shown) == shown


@settings(max_examples=300, deadline=None)
@given(hostile_text.filter(lambda t: "\\" not in t))
def test_nothing_is_lost_and_distinct_inputs_stay_distinct(text: str) -> None:
    # Injective on text without backslashes: the escapes read back to exactly the input.
    assert _reveal(one_line(text)) == text
    assert _reveal(for_terminal(text)) == text


@settings(max_examples=200, deadline=None)
@given(st.text().filter(str.isprintable))
def test_printable_text_is_left_alone(text: str) -> None:
    assert for_terminal(text) == text
    assert one_line(text) == text


@settings(max_examples=300, deadline=None)
@given(hostile_text)
def test_for_slack_forms_no_markup_and_is_idempotent(text: str) -> None:
    shown = for_slack(text)
    assert _printable(shown, "\n\t")
    assert "<" not in shown and ">" not in shown and "`" not in shown
    assert not re.search(r"&(?!(?:amp|lt|gt);)", shown)
    assert not re.search(r"(?<!\w)@\w", shown)
    assert for_slack(shown) == shown


@settings(max_examples=300, deadline=None)
@given(hostile_text)
def test_email_subject_meets_sns_rules(text: str) -> None:
    subject = email_subject(text)
    assert all(" " <= c <= "~" for c in subject)
    assert len(subject) <= SNS_SUBJECT_MAX_CHARS < 100
    assert not subject.startswith(" ")
    assert is_valid_sns_subject(subject) or not text.strip(" ")
    assert email_subject(subject) == subject


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),
        ("\x1b]52;c;ZWNobw==\x07", "\\x1b]52;c;ZWNobw==\\x07"),
        ("\x1b]8;;http://evil\x1b\\link", "\\x1b]8;;http://evil\\x1b\\link"),
        ("ok\r[PASS]", "ok\\r[PASS]"),
        ("\x9b\x7f\x00", "\\x9b\\x7f\\x00"),
        ("a\u202eb", "a\\u202eb"),
        ("\u2028", "\\u2028"),
        ("\U000e0041", "\\U000e0041"),
        ("\ud800", "\\ud800"),
        ("line1\nline2\tend", "line1\\nline2\\tend"),
        ("NCCL WARN net/ofi: é → ✓", "NCCL WARN net/ofi: é → ✓"),
    ],
)
def test_one_line_shows_each_control_visibly(raw: str, shown: str) -> None:
    assert one_line(raw) == shown


def test_for_terminal_keeps_newlines_and_tabs() -> None:
    assert for_terminal("a\n\tb\r\n") == "a\n\tb\\r\n"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("<!channel> alert", "&lt;!channel&gt; alert"),
        ("<https://evil|click here>", "&lt;https://evil|click here&gt;"),
        ("<@U123ABC>", "&lt;\uff20U123ABC&gt;"),
        ("```\n*x*", "\u02cb\u02cb\u02cb\n*x*"),
        ("ping @here and @Channel", "ping \uff20here and \uff20Channel"),
        ("ssh ubuntu@ip-10-1-2-3", "ssh ubuntu@ip-10-1-2-3"),
        ("a & b &amp; c", "a &amp; b &amp; c"),
        ("\x1b[31mred", "\\x1b[31mred"),
    ],
)
def test_for_slack_escapes_markup(raw: str, shown: str) -> None:
    assert for_slack(raw) == shown


def test_email_subject_is_ascii_one_line_and_cut_with_a_marker() -> None:
    assert email_subject("  HyperPod hp1: 2 new\r\nBcc: x") == "HyperPod hp1: 2 new\\r\\nBcc: x"
    assert email_subject("pod a → pod b — é") == "pod a -> pod b - \\xe9"
    long = email_subject("HyperPod " + "\x1b" * 200)
    assert len(long) <= SNS_SUBJECT_MAX_CHARS and long.endswith("\\x1b...")
    assert email_subject("") == ""
