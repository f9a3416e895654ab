"""What counts as a secret, decided in one place: every source of cluster text (CloudWatch
events, pod logs, container environment values, probe output, cluster events, Slurm reasons)
is scrubbed where it enters the models, so no report, table item, alert or support bundle can
carry one; the log-record scrubber applies the same rules to whatever the process logs.

Rules, in the order `scrub` applies them (each leaves `REDACTED` where the secret was, and an
earlier rule's `REDACTED` is never matched again, so scrubbing is idempotent):

1. private-key blocks (``-----BEGIN … PRIVATE KEY-----`` to its END line; to the end of the
   line when the END is not there, e.g. a truncated log line);
2. ``Authorization:`` header values (the scheme word is kept: ``Bearer <redacted>``);
3. JWTs, AWS access key ids (AKIA/ASIA), EKS tokens (k8s-aws-v1), Hugging Face ``hf_``, GitHub
   ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/``github_pat_`` and Slack ``xox?-`` tokens;
4. the userinfo of URLs (``postgres://<redacted>@db.internal/app``: the host stays diagnosable);
5. the value of ``key=value``, ``key: value``, ``"key": "value"`` and ``--flag value`` pairs whose
   key names a secret (`is_secret_name`), and 40-character AWS-secret-shaped values of any pair;
6. ``Bearer``/``Basic`` credentials outside a header;
7. long opaque strings (session tokens, signatures, SSM token values): a run of 40 or more
   base64/URL-safe characters that mixes upper case, lower case and digits with the character-
   class changes of random text, or a run of 40 or more hex digits. Paths, GPU UUIDs, instance
   ids, Kubernetes names (lower case by rule) and image digests (``sha256:…``) are kept: they are
   the evidence the checks and a support engineer need.

Every pattern is linear in its input (possessive quantifiers, no nested repetition that can
backtrack): the text is written by whoever runs a job, so a pattern must not be a way to stall
a sweep.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Callable
from itertools import pairwise
from typing import Any

REDACTED = "<redacted>"
# Names of environment variables, ConfigMap keys and `key=value` keys whose values are secret.
# `auth` but not `author(s)`, `token` but not `tokenizer`, `session` (a cookie) and `session_key`
# but not `SessionId` or `session_document`.
_SECRET_WORDS = (
    r"secret|passw|pwd|token(?!iz)|api[_-]?key|access[_-]?key|private[_-]?key|credential"
    r"|auth(?!ors?(?![a-z]))|session(?![\w-])|session[_-]?key|amz-signature"
)
_SECRET_NAME = re.compile(rf"(?i){_SECRET_WORDS}")
# The shell's variables that merely contain "pwd" (the working directory, not a password); exact
# upper case, so `pwd=...` in a connection string is still a secret.
_NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})
# Keys whose numeric or boolean value is still a secret (a PIN, a numeric password).
_ALWAYS_SECRET_NAME = re.compile(r"(?i)secret|passw|pwd")
_HARMLESS_VALUE = re.compile(r"(?i)-?\d+(?:\.\d+)?|true|false|null|none|\*+")

_PRIVATE_KEY = re.compile(
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,10}-----"
    r"(?:(?:[A-Za-z0-9+/=:,.\s\\]|-(?!----))*+-----END[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,10}-----|[^\r\n]*+)"
)
_AUTHORIZATION = re.compile(
    r"(?i)(?P<head>authorization\\?[\"']?[ \t]*+[:=][ \t]*+(?:\\?[\"']|b[\"'])?)"
    r"(?:(?P<scheme>bearer|basic|digest|negotiate|token|aws4-hmac-sha256)[ \t]++)?"
    r"(?P<secret>[^\"'\\\r\n]*+)"
)
_TOKENS = re.compile(
    r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,}+\.eyJ[A-Za-z0-9_-]{4,}+\.[A-Za-z0-9_-]*+"  # JWT
    r"|(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"  # AWS access key id
    r"|k8s-aws-v1\.[A-Za-z0-9_-]++"  # EKS bearer token (a presigned STS URL)
    r"|(?<![A-Za-z0-9_])(?:hf_[A-Za-z0-9]{16,}+|gh[pousr]_[A-Za-z0-9]{20,}+|github_pat_[A-Za-z0-9_]{20,}+)"
    r"|(?<![A-Za-z0-9_-])xox[abposr]-[A-Za-z0-9-]{10,}+"  # Slack
)
# scheme://user:password@host — the password may itself contain '@' (the last one ends it).
_URL_USERINFO = re.compile(
    r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,20}://)"
    r"(?P<user>[^\s/?#@:\"'<>]*+)(?::(?P<password>[^\s/?#\"'<>]*))?@"
)
# A key naming a secret: the first secret word in a run of key characters, then the rest of the
# run, atomically (a word that is no key costs one pass, never a retry per position).
_SECRET_KEY = rf"(?=[A-Za-z_])(?>[\w.-]*?(?i:{_SECRET_WORDS})[\w.-]*+)"
# `--flag value`, `--flag=value`, `key=value`, `key: value`, `"key": "value"`, and the same inside
# JSON that is itself a JSON string or a bytes repr (`\"key\": \"value\"`, `\\"key\\"...`).
_PAIR = re.compile(
    rf"(?<![\w.-])(?:(?P<flag>--?{_SECRET_KEY})(?:=|(?P<flag_space>[ \t]++))"
    rf"|(?P<quote>\\{{0,4}}[\"']?)(?P<key>{_SECRET_KEY})(?P=quote)[ \t]*+[:=][ \t]*+)"
    r"(?:\\{1,4}\"(?P<escaped>[^\"\r\n]*+)"  # up to the (escaped) closing quote
    r"|\"(?P<double>(?:[^\"\\\r\n]|\\.)*+)\"?"
    r"|\\{0,4}'(?P<single>[^'\r\n]*+)'?"
    r"|(?(flag_space)(?!-))(?P<bare>[^\s\"'\\,;&<>{}\[\]()|`]++))"
)
# An AWS secret access key as the value of any pair: 40 base64 characters (checked for mixed
# classes by the rule).
_AWS_SECRET_SHAPE = re.compile(r"[A-Za-z0-9+][A-Za-z0-9+/]{39}")
_AWS_SECRET_VALUE = re.compile(
    r"(?P<lead>[=:][ \t]*+\\?[\"']?+)(?P<secret>[A-Za-z0-9+][A-Za-z0-9+/]{39})(?![A-Za-z0-9+/=_-])"
)
_BEARER = re.compile(r"(?<![\w-])(?P<scheme>[Bb]earer|BEARER|Basic)[ \t]++(?P<secret>[A-Za-z0-9._~+/=-]++)")
_OPAQUE = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/=_-]{40,}+")
_HEX = re.compile(r"[0-9a-fA-F]+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_DIGEST_LABELS = ("sha1:", "sha256:", "sha384:", "sha512:", "md5:")
_SEPARATORS = frozenset("+/=_-")
# Random base64 changes character class (upper/lower/digit) at ~64% of adjacent pairs, hex at
# ~47%; words, camelCase identifiers and paths at well under 20%.
_RANDOM_CLASS_CHANGES = 0.3
_MIN_OPAQUE_PAIRS = 20
_MIN_SEGMENT_PAIRS = 12
# The shortest run of hex digits read as a credential (tests name the same bound).
MIN_HEX_CHARS = 40
# A path component that is a word ("site-packages", "lambda"): two of them make a run a path.
_PATH_WORD = re.compile(r"[A-Za-z_-]{3,}")


def is_secret_name(name: str) -> bool:
    """Whether an environment variable, ConfigMap key or `key=value` key names a secret value."""
    return name not in _NOT_SECRET_NAMES and bool(_SECRET_NAME.search(name))


def _class_of(char: str) -> str:
    if char.isdigit():
        return "d"
    return "u" if char.isupper() else "l"


def _looks_random(text: str, min_pairs: int = _MIN_OPAQUE_PAIRS) -> bool:
    """Whether base64/URL-safe characters read as a credential, not as a name or an identifier."""
    if _HEX.fullmatch(text):
        return len(text) >= MIN_HEX_CHARS and any(c.isdigit() for c in text) and any(c.isalpha() for c in text)
    rest = _UUID.sub("/", text)  # GPU-<uuid>, MIG-<uuid>, pod UIDs: identifiers, not secrets
    if not (any(c.isupper() for c in rest) and any(c.islower() for c in rest) and any(c.isdigit() for c in rest)):
        return False  # Kubernetes names are lower case; constants and ids lack one class
    pairs = changes = 0
    for left, right in pairwise(rest):
        if left in _SEPARATORS or right in _SEPARATORS:
            continue
        pairs += 1
        changes += _class_of(left) != _class_of(right)
    return pairs >= min_pairs and changes >= _RANDOM_CLASS_CHANGES * pairs


def _is_aws_secret_shape(value: str) -> bool:
    return (
        _AWS_SECRET_SHAPE.fullmatch(value) is not None
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and any(c.isdigit() for c in value)
    )


def _is_basic_credential(token: str) -> bool:
    """`Basic <base64 of user:password>` (not the English word in "Basic checks passed")."""
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded


Rule = Callable[[str], tuple[str, int]]


def _substitute(pattern: re.Pattern[str], replace: Callable[[re.Match[str]], str]) -> Rule:
    """A rule from a pattern and a replacement; only matches the replacement changes count."""

    def rule(text: str) -> tuple[str, int]:
        count = 0

        def one(match: re.Match[str]) -> str:
            nonlocal count
            replaced = replace(match)
            count += replaced != match.group(0)
            return replaced

        return pattern.sub(one, text), count

    return rule


def _authorization(match: re.Match[str]) -> str:
    secret = match["secret"].rstrip()
    if not secret or secret == REDACTED:
        return match.group(0)
    scheme = f"{match['scheme']} " if match["scheme"] else ""
    return f"{match['head']}{scheme}{REDACTED}{match['secret'][len(secret) :]}"


def _url_userinfo(match: re.Match[str]) -> str:
    if not match["user"] and not match["password"]:
        return match.group(0)
    return f"{match['scheme']}{REDACTED}@"


def _bearer(match: re.Match[str]) -> str:
    token = match["secret"]
    if match["scheme"] == "Basic":
        secret = _is_basic_credential(token)
    else:  # a token, not a word ("Bearer tokens are sent..."): long, or not only letters
        secret = len(token) >= 16 or (len(token) >= 8 and not token.isalpha())
    return f"{match['scheme']} {REDACTED}" if secret else match.group(0)


def _opaque(match: re.Match[str]) -> str:
    run = match.group(0)
    before = match.string[max(0, match.start() - 8) : match.start()].lower()
    if before.endswith(_DIGEST_LABELS):
        return run  # an image or file digest: evidence, not a secret
    segments = run.split("/")
    if run.startswith("/") or run.endswith("/") or sum(map(bool, map(_PATH_WORD.fullmatch, segments))) >= 2:
        # A path or URL path: only a random-looking component is a credential (a webhook's key,
        # a token as a directory); the rest stays readable, hex components too (the commit of a
        # GitHub link or a `pip install git+https://…@<sha>`). A run next to an earlier REDACTED
        # starts or ends with "/", so a second pass decides every component the same way.
        return "/".join(
            REDACTED if not _HEX.fullmatch(s) and _looks_random(s, _MIN_SEGMENT_PAIRS) else s for s in segments
        )
    return REDACTED if _looks_random(run) else run


def _pair(match: re.Match[str]) -> str:
    name, group = match["flag"] or match["key"], match.lastgroup
    whole = match.group(0)
    if group is None or not is_secret_name(name.lstrip("-")) or name.lower().endswith("authorization"):
        return whole  # PWD; an Authorization header is the header rule's (its scheme word is kept)
    secret = match[group]
    if not secret or secret == REDACTED:
        return whole
    if _HARMLESS_VALUE.fullmatch(secret) and not _ALWAYS_SECRET_NAME.search(name):
        return whole  # max_tokens=2048, use_auth=true: no secret in a count or a switch
    start = match.start(group) - match.start()
    end = start + len(secret.rstrip("\\"))  # the closing quote's escape stays
    return whole[:start] + REDACTED + whole[end:]


def _aws_secret_value(match: re.Match[str]) -> str:
    return match["lead"] + REDACTED if _is_aws_secret_shape(match["secret"]) else match.group(0)


# Each rule with the lower-case words one of which the text must contain for the rule to be able
# to match (None: always run). A substring test runs at C speed, so ordinary text skips most
# rules; replacing a secret by REDACTED never adds a word, so the test on the original holds.
_RULES: tuple[tuple[tuple[str, ...] | None, Rule], ...] = (
    (("private key",), _substitute(_PRIVATE_KEY, lambda _: REDACTED)),
    (("authorization",), _substitute(_AUTHORIZATION, _authorization)),
    (
        ("eyj", "akia", "asia", "k8s-aws-v1.", "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox"),
        _substitute(_TOKENS, lambda _: REDACTED),
    ),
    (("://",), _substitute(_URL_USERINFO, _url_userinfo)),
    (
        ("secret", "passw", "pwd", "token", "api", "access", "private", "credential", "auth", "session", "signature"),
        _substitute(_PAIR, _pair),
    ),
    (None, _substitute(_AWS_SECRET_VALUE, _aws_secret_value)),
    (("bearer", "basic"), _substitute(_BEARER, _bearer)),
    (None, _substitute(_OPAQUE, _opaque)),
)


def scrub_counted(text: str) -> tuple[str, int]:
    """`text` with every secret replaced by REDACTED, and how many were replaced."""
    lowered = text.lower()
    total = 0
    for words, rule in _RULES:
        if words is None or any(word in lowered for word in words):
            text, count = rule(text)
            total += count
    return text, total


def scrub(text: str) -> str:
    """Replace every secret inside free text (log lines, messages, probe output, env values)."""
    return scrub_counted(text)[0]


def scrub_optional(text: str | None) -> str | None:
    """`scrub` for an optional field (None stays None)."""
    return None if text is None else scrub(text)


def redact_value(name: str, value: str) -> str:
    """`value` as it may be shown: REDACTED when its name names a secret or the whole value is
    secret-shaped; otherwise the value with the secrets inside it redacted, so that
    `DATABASE_URL=postgres://u:p@db/app` keeps its host (`postgres://<redacted>@db/app`)."""
    if (is_secret_name(name) and value) or _is_aws_secret_shape(value):
        return REDACTED
    return scrub(value)


def count_redacted(text: str) -> int:
    """How many values `text` shows redacted (its REDACTED markers)."""
    return text.count(REDACTED)


def redact_argv(words: list[str]) -> list[str]:
    """A command line as it may be shown: each word scrubbed, and the word after a flag that
    names a secret without `=` (`--hf-token`, `hf_…` as the next word) redacted."""
    shown: list[str] = []
    for index, word in enumerate(words):
        previous = words[index - 1] if index else ""
        flag = previous.startswith("-") and "=" not in previous and is_secret_name(previous.lstrip("-"))
        shown.append(REDACTED if flag and word and not word.startswith("-") else scrub(word))
    return shown


_scrubber_installed = False


def install_log_scrubber() -> None:
    """Scrub secret-shaped tokens from every log record created from now on, whoever logs it.

    botocore at DEBUG logs response bodies (StartSession's TokenValue among them); a record
    factory catches those too, which a filter on our own loggers would not. Idempotent.
    """
    global _scrubber_installed
    if _scrubber_installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a malformed format string: leave it to the handler
            return record
        scrubbed, count = scrub_counted(message)
        if count:
            record.msg, record.args = scrubbed, None
        return record

    logging.setLogRecordFactory(factory)
    _scrubber_installed = True
