"""What cluster text may look like once it reaches a person, decided in one place.

Every byte the product shows was written by someone on the cluster: a job controls its log lines
and Slurm job name, an admin or a compromised node its drain reason and host name. Left raw, an
ESC/CSI/OSC sequence clears a terminal, sets its title, writes its clipboard (OSC 52) or plants a
hyperlink (OSC 8); a lone carriage return overprints a fake ``[PASS]``; a bidi override reorders
what is read; a newline forges a line of a report or an e-mail header; ``<!channel>`` pages a whole
Slack channel. The renderers therefore pass cluster text through exactly one of these functions
at the point where it is written out, and add their own colours and markup afterwards:

- `for_terminal`: multi-line text for a terminal or a file meant for people (keeps ``\\n``, ``\\t``).
- `one_line`: a value that must stay on its line (table cell, header, list entry).
- `for_slack`: a value placed inside our own Slack/Chatbot markdown.
- `for_html`: a value inside our HTML report (`one_line`, then HTML-escaped; escaping is applied
  once, where the page is written, so unlike the others it is not idempotent).
- `email_subject`: an SNS ``Subject`` (printable ASCII, one line, under 100 characters).

Rendering rule, used everywhere: a character Python does not consider printable
(`str.isprintable`: C0 and C1 controls, DEL, format characters such as bidi overrides and
zero-width joiners, line and paragraph separators, lone surrogates, unassigned and private-use
code points, spaces other than U+0020) is replaced by its Python escape: ``\\x1b`` for ESC,
``\\r``, ``\\n``, ``\\t`` by name, ``\\u202e`` above U+00FF, ``\\U000e0041`` above U+FFFF. Nothing
is dropped, so hostile content stays visible as evidence. The functions are idempotent (text
already shown safely is left alone, so a value that passes two layers is not garbled) and leave
ordinary printable text unchanged; the price is that a log that literally contains the four
characters ``\\x1b`` looks the same as one that contained ESC, which hides nothing.
"""

from __future__ import annotations

import html
import re

# Named escapes read better than hex for the three whitespace controls people know.
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# SNS Publish: "Subjects must be ASCII text that begins with a letter, number, or punctuation
# mark; must not include line breaks or control characters; and must be less than 100 characters."
SNS_SUBJECT_MAX_CHARS = 99
_SNS_SUBJECT = re.compile(rf"[!-~][ -~]{{0,{SNS_SUBJECT_MAX_CHARS - 1}}}")
_ELLIPSIS = "..."
# Typographic characters our own titles use, spelled in ASCII for the Subject line rather than
# escaped (``\u2192`` would be correct but unreadable).
_ASCII_SPELLING = {
    "\u2192": "->",
    "\u2190": "<-",
    "\u2014": "-",
    "\u2013": "-",
    "\u2026": "...",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u00d7": "x",
}
# Slack: `&`, `<` and `>` are its control characters (links, mentions, `<!channel>`), to be sent
# as HTML entities; an `&` that already starts one of those entities is left so that escaping
# twice changes nothing.
_SLACK_AMP = re.compile(r"&(?!(?:amp|lt|gt);)")
# A mention-shaped word (`@here`, `@channel`, `@everyone`, `@alice`): Slack links plain-text
# mentions when the poster asks it to (`link_names`, `parse=full`), which AWS Chatbot decides, not
# us. The `@` becomes the fullwidth commercial at, which reads the same and notifies nobody;
# `user@host` is left alone.
_SLACK_MENTION = re.compile(r"(?<!\w)@(?=\w)")
_FULLWIDTH_AT = "\uff20"
# Every backtick from data becomes a modifier grave accent, so that no value can close our code
# fence (```), open one, or start inline code.
_BACKTICK_LOOKALIKE = "\u02cb"


def _visible(char: str) -> str:
    """The escape shown in place of one non-printable character."""
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _escape(text: str, keep: str) -> str:
    if text.isprintable():  # the common case, checked in C
        return text
    return "".join(c if c.isprintable() or c in keep else _visible(c) for c in text)


def for_terminal(text: str) -> str:
    """Multi-line cluster text made safe for a terminal or a human-readable file.

    Newlines and tabs are kept (they cannot move the cursor backwards or change the terminal's
    state); every other non-printable character, carriage return included, is shown as its
    escape (``\\x1b[2J`` for a clear-screen sequence). Idempotent; printable text is unchanged.
    """
    return _escape(text, "\n\t")


def one_line(text: str) -> str:
    """A cluster value that must not break out of its line: `for_terminal`, and newlines and
    tabs shown as ``\\n`` and ``\\t`` too (table cells, headers, one entry of a list)."""
    return _escape(text, "")


def for_html(text: str) -> str:
    """A cluster value as the text of an HTML element or attribute: `one_line`, then `&<>"'`
    escaped, so that no value can open a tag, close an attribute or hide behind a control or
    bidirectional-override character."""
    return html.escape(one_line(text), quote=True)


def for_slack(text: str) -> str:
    """Cluster text to embed in our own Slack (AWS Chatbot client-markdown) message.

    `for_terminal` first; then `&`, `<`, `>` become ``&amp;``, ``&lt;``, ``&gt;`` as Slack
    requires, so that ``<!channel>``, ``<@U123>`` and ``<https://x|text>`` cannot form; a
    mention-shaped ``@word`` gets a fullwidth at (U+FF20) and every backtick a look-alike
    (U+02CB), so that no value pings anyone or breaks out of a code fence. Newlines are kept:
    pass `one_line` output for a value that must stay on its line. Idempotent.
    """
    text = _SLACK_AMP.sub("&amp;", for_terminal(text))
    text = text.replace("<", "&lt;").replace(">", "&gt;")
    # Backticks first: their look-alike is a word character, so `@` before one is a mention.
    text = text.replace("`", _BACKTICK_LOOKALIKE)
    return _SLACK_MENTION.sub(_FULLWIDTH_AT, text)


def _subject_units(text: str) -> list[str]:
    """`text` as printable-ASCII pieces, one per input character (so truncation never cuts an
    escape in half)."""
    units = []
    for char in text:
        if " " <= char <= "~":
            units.append(char)
        else:
            units.append(_ASCII_SPELLING.get(char) or _visible(char))
    return units


def is_valid_sns_subject(subject: str) -> bool:
    """Whether SNS Publish accepts `subject` (the rule the emulation enforces as AWS does)."""
    return _SNS_SUBJECT.fullmatch(subject) is not None


def email_subject(text: str) -> str:
    """An SNS Publish ``Subject``: printable ASCII only, one line, starting with a letter, digit
    or punctuation mark, fewer than 100 characters (SNS replaces a Subject that breaks these
    rules with an error text). Longer text is cut at a character boundary and ends in "...".
    Returns "" for text with nothing printable: the caller must then omit the Subject.
    """
    units = _subject_units(text.lstrip(" "))
    if sum(map(len, units)) <= SNS_SUBJECT_MAX_CHARS:
        return "".join(units)
    kept: list[str] = []
    room = SNS_SUBJECT_MAX_CHARS - len(_ELLIPSIS)
    for unit in units:
        if len(unit) > room:
            break
        kept.append(unit)
        room -= len(unit)
    return "".join(kept) + _ELLIPSIS
