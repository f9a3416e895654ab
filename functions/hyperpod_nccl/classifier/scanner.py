"""The scanner: one pass, constant memory, a cheap keyword prefilter, grouped hits per signature.

Speed comes from never running a regex on a line that cannot match, and from doing the search at
C speed on whole blocks rather than line by line in Python:

* text is handled as UTF-8 bytes, so a file is never decoded as a whole and lower-casing is the
  fast ASCII `bytes.lower()` (keywords are ASCII; only candidate lines are decoded);
* a block (about 1 MB, cut at a line boundary) is searched with `bytes.find` for a minimal set of
  triggers (substrings covering every catalog keyword), one C-speed pass per trigger;
* healthy NCCL logs are mostly `NCCL INFO` lines, and only the few signatures marked
  `allow_info` can match those. So only their triggers are searched in the whole block; the
  other triggers are searched in the non-INFO lines alone, joined into a much smaller text;
* a candidate line is then checked for the exact keywords of its triggers and a signature's
  `requires` context words before any regex runs.

Everything the prefilter decides is derived from the catalog (`keywords`, `requires`,
`allow_info`); a unit test checks that it never changes a classification.

Class cues, the second and weaker layer (`catalog.CueLayer`, the catalog's `cues`): a line that
carries an error word but that no signature recognised is read once more for the vocabulary of a
failure class ("getaddrinfo", "/dev/shm", "Xid", "rendezvous"), so that wording no signature was
written for (another tool's message, a wrapper's paraphrase, a user's copy) still points at the
class's section. A cue fires only when

* no signature matched the line (a signature knows the message; a generic one, a bare "NCCL WARN"
  of another line of the same input, folds under a cue hit of a cause as under any cause: issue 16,
  point 4);
* no healthy line rule matches the line;
* the line carries an error word ("error", "failed", "unable", "refused", "timed out", "does not
  exist", "not supported", "unreachable", "no ... found", a `RuntimeError`...) outside a harmless
  role ("errors: 0", "Uncorrectable Error      : 0", "Remapping Failure Occurred : No", "ECC
  Errors" alone as a heading, "no errors found", "--error=job.err", "if the connection fails", the
  text a shell `echo` prints or `grep` seeks, a component of a dotted field name such as
  nvidia-smi's "ecc.errors.uncorrected.volatile.total");
* it is no INFO/DEBUG line of a program that prints levels ("NCCL INFO", "[INFO]", "level=info",
  glog's "I1207 ..."), no in-process warning (below), no line that says it succeeded ("passed"),
  no node-condition row whose status is False (`kubectl describe node`'s "XidCriticalError   False"),
  and no line that says it carries on ("retrying", "will retry", "ignored") unless it also says it
  gave up ("giving up", "failed after 3 retries", "retries exhausted", "aborting");
* a class's vocabulary is on it once the printing program's syslog tag is set aside
  ("node slurmd[23484]: error: ..." names who speaks, not what failed; a bare "srun: error:" prefix
  is kept, it is also how tools name a message's subject): the first such class in the catalog's
  order, most specific first (a named cause before `rendezvous`, `k8s`, `slurm`, `connectivity`,
  `timeout` and `nccl_error`).

Decisions on what the cue layer reads (each tested in tests/unit/test_classifier_cues.py, and
measured on real healthy runs, tests/data/log_corpus/healthy_runs.json):

* Warning levels. A warning is silent when the process that prints it carries on from it and has
  an error level it uses when it cannot: PyTorch's TORCH_WARN ("[W socket.cpp:663]",
  "[rank0]:[W1206 ...]"), glog/klog "W1207 ...", TensorFlow's and SageMaker's "<time>: W file:N]",
  tagged "[NeMo W <date>", UCX "WARN", Python's `warnings` module ("x.py:12: UserWarning: ..." and
  the `warnings.warn(...)` source line it echoes) and Slurm, whose log.c has no warning level at
  all ("srun: Warning: can't run 1 processes on 2 nodes, setting nnodes to 1" is an info() text of
  a setting it adjusted). When such a process cannot carry on, the failure comes again as an
  E-level line, an exception or "error:"/"fatal:" (Gloo's "Unable to resolve hostname ... Using the
  loopback address as fallback" warning is followed, when it matters, by "Gloo connectFullMesh
  failed"). A warning that reports a failure is read: a launcher's or agent's Python `logging`
  WARNING about its workers ("WARNING:torch.distributed.elastic...:... failed"), "[WARN]",
  "level=warning", and every error level. The levels silence cues only, never a signature (a CUDA
  initialization failure printed as a UserWarning stays a finding).
* Carrying on. "retrying", "will retry", "ignored", "proceeding without" say the program goes on
  (a lifecycle script's "[WARN] Could not determine instance AZ - proceeding without EFA
  verification"), so the line is no cue hit; the same line that also says it stopped ("...
  retrying ... giving up", "failed after 3 retries", "max retries exceeded", "aborting") is one.
  "falling back" is not a carry-on word: it is the symptom of the `tcp_fallback` class ("falling
  back to sockets").
* Where the words come from. A cue cites runbook sections and pinned emitter source files that a
  signature of its class also cites, never a thread or a page (`catalog.Catalog` rejects one): the
  corpora are made of threads and pages, and the leave-one-source-out scoring can keep a cue away
  from an excerpt only through a source the cue names. A pinned file can still be a corpus source
  (an excerpt quoted from it), so `tests/log_corpus.catalog_without` drops every cue that cites the
  source left out, the whole cue (its sources are recorded per class, not per word).

A cue hit is an ordinary hit of its class and section, with the id `cue_<class>`, the title
"Looks like a <class> problem (no known message matched)", the field `by_cue: true` (and `cue`, the
words that matched) and the layer's priority, P2: a warning, never a failure by itself. It folds and
is folded by its class's role (a cause, an outcome, or a failure that folds under a cause). The
error words are among the prefilter's triggers, so cue candidates are found in the same one pass;
the cue regexes run only on candidate lines without a hit.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import BinaryIO, TypeVar

from pydantic import BaseModel, Field

from hyperpod_nccl import xid as xid_facts
from hyperpod_nccl.classifier.catalog import (
    CUE_PREFIX,
    Catalog,
    Cue,
    CueLayer,
    HealthyRule,
    Route,
    Signature,
    group_fields,
    load_catalog,
)
from hyperpod_nccl.models.findings import Priority
from hyperpod_nccl.models.logs import FoldedHit, SignatureHit
from hyperpod_nccl.models.node_probe import canonical_pci_bus_id
from hyperpod_nccl.redaction import scrub
from hyperpod_nccl.references import NODE_GPU, NODE_ROW_REMAP, Reference

# Keywords and regexes only see the head of a line: evidence worth reading is at the start, and
# it bounds the work per line whatever a pathological line looks like.
MAX_MATCH_BYTES = 4096
EVIDENCE_LINES = 5
EVIDENCE_CHARS = 500
MAX_FIELD_VALUES = 16
MAX_SPLIT_GROUPS = 64
BLOCK_BYTES = 1 << 20
# A block full of lines that carry a context rule's keyword but not its success wording is
# searched backwards this many lines per keyword at most.
SUCCESS_LOOKBACK = 64
# A line end that never comes (a `\r`-only progress bar, a binary blob) must not grow the carried
# partial line without bound: past this many bytes the rest of the line is counted, not kept.
# (Only its first MAX_MATCH_BYTES are ever matched.)
MAX_LINE_BYTES = 64 * 1024

# A line carrying this marker is NCCL's INFO chatter: only `allow_info` signatures apply to it.
INFO_MARKER = b"NCCL INFO"
VERSION_KEYWORD = b"nccl version"
_NCCL_PREFIX = re.compile(r"(?:^|\s)(?P<host>[A-Za-z][\w.-]{0,80}):(?P<pid>\d+):(?P<tid>\d+) \[(?P<device>\d+)\] NCCL ")
_RANK = re.compile(r"\[(?:PG [\w:]+ (?:\([^)]{0,80}\) )?)?[Rr]ank ?(?P<rank>\d+)\]")
# A captured field that is a whole number is a number in the hit (`"xid": 79`), except these
# identifiers, which keep their spelling even when all digits (Slurm job 4211 next to step 4211.0).
# Past 15 digits it stays text: JSON readers that hold numbers as doubles would change it.
_IDENTIFIER_FIELDS = frozenset({"job", "host", "node", "peer", "instance_id", "interface", "segment"})
_INTEGER = re.compile(r"-?\d{1,15}")
_VERSION_BANNER = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+)(?:[+-][\w.]+)?")
_TIMESTAMPS = (
    # ISO 8601 / RFC 3339 (CloudWatch, kubectl --timestamps, Python logging, PyTorch "[2024-05-01 12:00:00,123]")
    re.compile(r"(?P<ts>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"),
    # dmesg -T: "[Wed May  1 12:34:56 2024]"
    re.compile(r"\[(?P<ts>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\]"),
    # syslog: "May  1 12:34:56"
    re.compile(r"^(?P<ts>(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} \d{2}:\d{2}:\d{2})"),
)


_Text = TypeVar("_Text", str, bytes)


# The `ResolvedHit.rule` of lines whose signature is a failure only beside its consequence.
ONLY_BESIDE = "only_beside"


class ResolvedHit(BaseModel):
    """The lines of one signature that a later success line settled (a retry that connected), or
    that are a failure only beside a consequence the input does not show (`rule` `ONLY_BESIDE`)."""

    id: str
    title: str
    count: int
    rule: str
    why: str


class ScanResult(BaseModel):
    """What one scan found: the hits (most urgent first) and how much was read."""

    hits: list[SignatureHit] = Field(default_factory=list)
    lines_scanned: int = 0
    bytes_scanned: int = 0
    # NCCL version banner → how many lines announced it (input to the cross-source drift check).
    nccl_versions: dict[str, int] = Field(default_factory=dict)
    # The catalog's success markers the input printed ("AllReduce SUCCESS"), in catalog order.
    success_markers: list[str] = Field(default_factory=list)

    # Failures a later success line of the same input settled (`HealthyRule.resolves`): not hits,
    # but said, so that a reader sees what was read and why it is not reported.
    resolved: list[ResolvedHit] = Field(default_factory=list)

    def by_id(self, signature_id: str) -> list[SignatureHit]:
        """The hits of one signature (several when it is split, e.g. per Xid code)."""
        return [hit for hit in self.hits if hit.id == signature_id]


@dataclass
class _Group:
    signature: Signature
    count: int = 0
    evidence: deque[str] = field(default_factory=lambda: deque(maxlen=EVIDENCE_LINES))
    values: dict[str, list[str]] = field(default_factory=dict)
    first_seen: str | None = None
    last_seen: str | None = None
    # Offset in the input of the start of the group's last line (against context rules' success lines).
    last_position: int = -1
    # The signature's narrower cause these lines took (its section), or None: the signature's own.
    route: Route | None = None

    def add(self, line: str, fields: dict[str, str], timestamp: str | None, position: int) -> None:
        self.count += 1
        self.last_position = max(self.last_position, position)
        self.evidence.append(line[:EVIDENCE_CHARS])
        for name, value in fields.items():
            bucket = self.values.setdefault(name, [])
            if value not in bucket and len(bucket) < MAX_FIELD_VALUES:
                bucket.append(value)
        if timestamp:
            self.first_seen = self.first_seen or timestamp
            self.last_seen = timestamp


# Bytes of lower-cased log text from the most common to the rarer (spaces, digits and separators,
# then letters by their frequency in English); a byte not listed is rarer still. The trigger search
# tries a position only when its byte starts some trigger, so triggers that start at rare bytes
# leave it fewer positions to try on a long run of ordinary lines.
_BYTE_FREQUENCY_ORDER = b" \t0123456789.:-,[]/=_()etaoinsrhldcumfpgwybvk+xjqz"
_RARITY = {byte: rank for rank, byte in enumerate(_BYTE_FREQUENCY_ORDER)}
# An anchor keeps at least this many bytes of its keyword, so that it stays selective.
ANCHOR_MIN_BYTES = 5


def trigger_anchor(keyword: _Text) -> _Text:
    """The suffix of `keyword` the trigger search looks for: the one of at least ANCHOR_MIN_BYTES
    that starts at its rarest byte (the earliest of equals, so the longest). Any part of a keyword
    is on every line the keyword is on, so no line is lost; a rarer first byte makes the search
    try fewer positions ("rendezvous" is looked for as "zvous", not from its common "r")."""
    encoded = keyword.encode() if isinstance(keyword, str) else keyword
    best, best_rarity = 0, -1
    for index in range(max(1, len(encoded) - ANCHOR_MIN_BYTES + 1)):
        rarity = _RARITY.get(encoded[index], len(_RARITY))
        if rarity > best_rarity:
            best, best_rarity = index, rarity
    return keyword[best:]


def trigger_set(keywords: tuple[_Text, ...]) -> tuple[_Text, ...]:
    """The fewest anchors (`trigger_anchor`) such that every keyword contains one of them ("fail"
    covers "failed to extend"); none contains another.

    The block prefilter finds every trigger in one search, so fewer and rarer-starting triggers are faster.
    """
    return _fewest(tuple(trigger_anchor(keyword) for keyword in _fewest(keywords)))


def _fewest(texts: tuple[_Text, ...]) -> tuple[_Text, ...]:
    """The texts that contain none of the others (the others each contain one of them), sorted."""
    kept: list[_Text] = []
    for text in sorted(set(texts), key=len):
        if not any(shorter in text for shorter in kept):
            kept.append(text)
    return tuple(sorted(kept))


def trigger_pattern(triggers: Iterable[bytes]) -> re.Pattern[bytes]:
    """One pattern that finds the next occurrence of any trigger.

    The triggers form a trie, so the engine tests a position against their common prefixes once
    instead of once per trigger (one `find` pass per trigger cost hundreds of passes over a job's
    log), and skips positions whose byte starts no trigger. `trigger_set` leaves no trigger that is a
    prefix of another, so at most one trigger matches at a position: searching again one byte past
    each match start finds every occurrence, overlapping ones included ("abc" and "bcd" in "abcd").
    """
    trie: dict[int | None, dict] = {}  # type: ignore[type-arg]
    for trigger in sorted(set(triggers)):
        node = trie
        for byte in trigger:
            node = node.setdefault(byte, {})
        node[None] = {}

    def alternation(node: dict) -> bytes:  # type: ignore[type-arg]
        branches = [
            re.escape(bytes([byte])) + alternation(child)
            for byte, child in sorted(((b, c) for b, c in node.items() if b is not None), key=lambda item: item[0])
        ]
        if not branches:
            return b""
        body = branches[0] if len(branches) == 1 and None not in node else b"(?:" + b"|".join(branches) + b")"
        return body + (b"?" if None in node else b"")

    return re.compile(alternation(trie)) if trie else re.compile(b"(?!)")


def _gated_out(head: bytes, triggers: list[bytes], gate: dict[bytes, tuple[bytes, ...] | None]) -> bool:
    """True when no trigger of this INFO line can lead to a match (see `Scanner._info_gate`)."""
    for trigger in triggers:
        words = gate[trigger]
        if words is None:
            return False
        for word in words:
            if word in head:
                return False
    return True


def parse_timestamp(line: str) -> str | None:
    """The timestamp a log line starts with (or carries near its start), as written."""
    head = line[:120]
    for pattern in _TIMESTAMPS:
        match = pattern.search(head)
        if match:
            return match.group("ts")
    return None


_Admitted = tuple[int, Signature, tuple[bytes, ...]]


@dataclass(frozen=True)
class _Prefilter:
    """Everything a scanner derives from its catalog, built once per catalog (`_prefilter`): building
    it costs tens of milliseconds, which a scanner per log stream or per file would pay each time."""

    order: dict[str, int]
    keywords: tuple[bytes, ...]
    # keyword → the signatures it admits (catalog order, context words), for INFO lines (True) and others
    admitted: dict[bool, dict[bytes, list[_Admitted]]]
    # The triggers that count on INFO lines too; every other one counts only off them.
    info_triggers: frozenset[bytes]
    # Every trigger of both kinds, found in one pass (`trigger_pattern`).
    triggers: re.Pattern[bytes]
    keywords_of: dict[bytes, tuple[bytes, ...]]
    info_gate: dict[bytes, tuple[bytes, ...] | None]
    # Lower-cased success marker → its catalog spelling.
    markers: dict[bytes, str]
    # Signatures whose hits fold under a cause (`generic` or `folds`), and those no hit folds
    # under (the folding ones themselves and `outcome` lines).
    folding: frozenset[str]
    not_causes: frozenset[str]
    # Healthy line rules, and context rules with the lower-cased keywords searched for their lines.
    healthy_lines: tuple[HealthyRule, ...]
    context_rules: tuple[tuple[HealthyRule, tuple[bytes, ...]], ...]
    # signature id → the context rules that settle it
    settled_by: dict[str, tuple[HealthyRule, ...]]
    # The class cues (None: signatures only), their error-word keywords, and the signature a hit of
    # each class's cue is recorded as (class → `cue_<class>`).
    cues: CueLayer | None
    cue_words: frozenset[bytes]
    cue_signatures: dict[str, Signature]


# The catalogs whose prefilter is built, by identity (the catalog is kept, so its id is not reused):
# the shipped one for the life of the process, and a few others (tests, the benchmark's
# leave-one-source-out catalogs) at a time.
_PREFILTERS: dict[int, tuple[Catalog, _Prefilter]] = {}
_PREFILTERS_KEPT = 8


def _prefilter(catalog: Catalog) -> _Prefilter:
    """`catalog`'s prefilter tables, built on first use."""
    cached = _PREFILTERS.get(id(catalog))
    if cached is not None and cached[0] is catalog:
        return cached[1]
    tables = _build_prefilter(catalog)
    if len(_PREFILTERS) >= _PREFILTERS_KEPT:
        _PREFILTERS.pop(next(iter(_PREFILTERS)))
    _PREFILTERS[id(catalog)] = (catalog, tables)
    return tables


def cue_signature(cue: Cue, layer: CueLayer) -> Signature:
    """The signature a hit of `cue` is recorded as: `cue_<class>`, the class's section and role,
    the layer's priority (never part of `Catalog.signatures`)."""
    return Signature(
        id=cue.id,
        cls=cue.cls,
        title=f"Looks like a {cue.name} problem (no known message matched)",
        priority=layer.priority,
        reference=cue.reference,
        keywords=list(layer.triggers),
        patterns=list(cue.patterns),
        folds=cue.role == "folds",
        outcome=cue.role == "outcome",
    )


def _build_prefilter(catalog: Catalog) -> _Prefilter:
    order = {s.id: i for i, s in enumerate(catalog.signatures)}
    cues = catalog.cues
    cue_signatures = {cue.cls: cue_signature(cue, cues) for cue in cues.classes} if cues else {}
    for signature in cue_signatures.values():  # after every signature of the same priority
        order[signature.id] = len(order)
    matchable = [s for s in catalog.signatures if not s.synthetic]
    by_keyword: dict[bytes, list[Signature]] = {}
    for signature in matchable:
        for keyword in signature.keywords:
            by_keyword.setdefault(keyword.encode(), []).append(signature)
    by_keyword.setdefault(VERSION_KEYWORD, [])  # version banners feed the drift analysis
    # The error words of the cues are keywords that admit no signature: found in the same pass.
    cue_words = frozenset(word.encode() for word in cues.triggers) if cues else frozenset()
    for word in cue_words:
        by_keyword.setdefault(word, [])
    keywords = tuple(sorted(by_keyword))
    # INFO lines get their own shorter lists since only allow_info signatures apply to them.
    admitted: dict[bool, dict[bytes, list[_Admitted]]] = {
        is_info: {
            keyword: [
                (order[s.id], s, tuple(word.encode() for word in s.requires))
                for s in sigs
                if s.allow_info or not is_info
            ]
            for keyword, sigs in by_keyword.items()
        }
        for is_info in (False, True)
    }
    # Keywords that can matter on an INFO line (allow_info signatures, the version banner) are
    # searched in the whole block; the rest only in the non-INFO lines.
    info_keywords = {VERSION_KEYWORD} | {keyword.encode() for s in matchable if s.allow_info for keyword in s.keywords}
    info_triggers = trigger_set(tuple(info_keywords))
    uncovered = tuple(k for k in keywords if not any(t in k for t in info_triggers))
    other_triggers = trigger_set(uncovered)
    # A trigger found on a line stands for every keyword that contains it, and for those of every
    # trigger inside it: each set is prefix-free, the two together are not ("pported" of the INFO
    # keyword "not supported" starts with "pport" of the cue word "support"), and where two start at
    # one position the search reports only one of them.
    all_triggers = info_triggers + other_triggers
    containing = {trigger: {k for k in keywords if trigger in k} for trigger in all_triggers}
    keywords_of: dict[bytes, tuple[bytes, ...]] = {}
    for trigger in all_triggers:
        stands_for: set[bytes] = set().union(*(containing[inner] for inner in all_triggers if inner in trigger))
        keywords_of[trigger] = tuple(k for k in keywords if k in stands_for)
    # On an INFO line, a trigger whose signatures all need context words ("fail" → EFA, NVLS)
    # is dropped at once unless one of those words is there: INFO chatter with a common error
    # word ("Failed to find ncclCollNetPlugin symbol") then costs one substring test.
    info_gate: dict[bytes, tuple[bytes, ...] | None] = {}
    for trigger, found in keywords_of.items():
        entries = [entry for keyword in found for entry in admitted[True][keyword]]
        gated = VERSION_KEYWORD not in found and all(requires for _, _, requires in entries)
        words = {word for _, _, requires in entries for word in requires}
        info_gate[trigger] = tuple(sorted(words)) if gated else None
    return _Prefilter(
        order=order,
        keywords=keywords,
        admitted=admitted,
        info_triggers=frozenset(info_triggers),
        triggers=trigger_pattern(info_triggers + other_triggers),
        keywords_of=keywords_of,
        info_gate=info_gate,
        markers={marker.lower().encode(): marker for marker in catalog.success_markers},
        folding=frozenset(s.id for s in [*catalog.signatures, *cue_signatures.values()] if s.generic or s.folds),
        not_causes=frozenset(
            s.id for s in [*catalog.signatures, *cue_signatures.values()] if s.generic or s.folds or s.outcome
        ),
        healthy_lines=tuple(rule for rule in catalog.healthy if not rule.resolves),
        context_rules=tuple(
            (rule, tuple(keyword.encode() for keyword in rule.keywords)) for rule in catalog.healthy if rule.resolves
        ),
        settled_by={
            signature.id: tuple(rule for rule in catalog.healthy if signature.id in rule.resolves)
            for signature in catalog.signatures
            if any(signature.id in rule.resolves for rule in catalog.healthy)
        },
        cues=cues,
        cue_words=cue_words,
        cue_signatures=cue_signatures,
    )


class Scanner:
    """Incremental scanner; feed text with `feed_text`/`feed_binary`/`feed_line`, then call `finish()`.

    Memory is bounded by the block size and the catalog size (a few evidence lines and field
    values per signature), never by the input.
    """

    def __init__(self, catalog: Catalog | None = None) -> None:
        self.catalog = catalog or load_catalog()
        tables = _prefilter(self.catalog)
        self._order = tables.order
        self._keywords = tables.keywords
        self._admitted = tables.admitted
        self._info_triggers = tables.info_triggers
        self._triggers = tables.triggers
        self._keywords_of = tables.keywords_of
        self._info_gate = tables.info_gate
        self._markers = tables.markers
        self._folding, self._not_causes = tables.folding, tables.not_causes
        self._healthy_lines, self._context_rules = tables.healthy_lines, tables.context_rules
        self._settled_by = tables.settled_by
        self._cues, self._cue_words = tables.cues, tables.cue_words
        self._cue_signatures = tables.cue_signatures
        # context rule id → offset of the start of its last success line; looked for only once a
        # failure some rule settles was recorded (a success line before it can settle nothing)
        self._settled_at: dict[str, int] = {}
        self._settleable = False
        self._markers_seen: set[str] = set()
        self._groups: dict[tuple[str, str], _Group] = {}
        self._versions: dict[str, int] = {}
        self._version_lines: dict[str, str] = {}
        self._lines = 0
        self._bytes = 0
        self._pending = b""
        # The last block ended in "\r": a "\n" opening the next one completes that "\r\n".
        self._after_cr = False

    # ------------------------------------------------------------------ input
    def feed_text(self, text: str) -> None:
        """Scan a block of text (any number of lines; a trailing partial line is carried over)."""
        # Encoded a block at a time: a huge text never needs a second, encoded copy of itself.
        for offset in range(0, len(text), BLOCK_BYTES):
            self.feed_bytes(text[offset : offset + BLOCK_BYTES].encode("utf-8", errors="replace"))

    def feed_bytes(self, data: bytes) -> None:
        """Scan UTF-8 bytes of any size, a block at a time (a trailing partial line is carried over).

        A line ends at "\n", "\r\n" or a lone "\r" (a terminal's carriage return: progress bars
        redraw themselves with it and may never print a newline); a line longer than
        `MAX_LINE_BYTES` keeps only its head. Memory stays bounded by the block size whatever the
        input looks like."""
        for offset in range(0, len(data), BLOCK_BYTES):
            self._feed_block(data[offset : offset + BLOCK_BYTES])

    def _feed_block(self, data: bytes) -> None:
        if self._after_cr:
            self._after_cr = False
            if data[:1] == b"\n":
                data = data[1:]  # the "\n" of a "\r\n" cut between two blocks ends no more lines
                self._bytes += 1
        if not data:
            return
        self._after_cr = data.endswith(b"\r")
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if cut < 0:
            self._carry(data)
            return
        block = self._pending + data[: cut + 1] if self._pending else data[: cut + 1]
        self._pending = b""
        self._carry(data[cut + 1 :])
        if b"\r" in block:
            size = len(block)
            block = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            self._bytes += size - len(block)  # bytes_scanned counts the input, not the newlines made
        self._scan_block(block)

    def _carry(self, tail: bytes) -> None:
        """Keep the start of an unfinished line, at most `MAX_LINE_BYTES` of it; count the rest."""
        room = max(MAX_LINE_BYTES - len(self._pending), 0)
        if len(tail) > room:
            self._bytes += len(tail) - room
            tail = tail[:room]
        if tail:
            self._pending += tail

    def feed_line(self, line: str, timestamp: str | None = None) -> None:
        """Scan one line; `timestamp` overrides the one parsed from the text (CloudWatch events)."""
        raw = line.encode("utf-8", errors="replace")
        position = self._bytes
        self._lines += 1
        self._bytes += len(raw) + 1
        lowered = raw[:MAX_MATCH_BYTES].lower()
        self._note_markers(lowered)
        found = [k for k in self._keywords if k in lowered]
        if found:
            self._line(raw.rstrip(b"\r\n"), lowered, found, timestamp, position)
        if self._settleable:
            self._note_success_lines(raw, lowered, position)

    def feed_lines(self, lines: Iterable[str]) -> None:
        """Scan lines, batching them into blocks so the keyword search runs at C speed."""
        batch: list[str] = []
        size = 0
        for line in lines:
            batch.append(line if line.endswith("\n") else line + "\n")
            size += len(line)
            if size >= BLOCK_BYTES:
                self.feed_text("".join(batch))
                batch, size = [], 0
        if batch:
            self.feed_text("".join(batch))

    def feed_binary(self, stream: BinaryIO, block_bytes: int = BLOCK_BYTES) -> None:
        """Scan a binary stream (a file) in blocks; candidate lines are decoded leniently."""
        while True:
            data = stream.read(block_bytes)
            if not data:
                break
            self.feed_bytes(data)

    # ------------------------------------------------------------------ core
    def _scan_block(self, block: bytes) -> None:
        """Classify a block of whole lines (it ends with a newline)."""
        base = self._bytes
        self._lines += block.count(b"\n")
        self._bytes += len(block)
        lowered = block.lower()
        self._note_markers(lowered)
        candidates = self._candidates(block, lowered)
        keywords_of, info_gate = self._keywords_of, self._info_gate
        for start in sorted(candidates):
            end = block.find(b"\n", start)
            stop = min(end, start + MAX_MATCH_BYTES)
            head = lowered[start:stop]
            triggers = candidates[start]
            if block.find(INFO_MARKER, start, stop) >= 0 and _gated_out(head, triggers, info_gate):
                continue
            found: list[bytes] = []
            for trigger in triggers:
                for keyword in keywords_of[trigger]:
                    if keyword in head and keyword not in found:
                        found.append(keyword)
            if found:
                self._line(block[start:end].rstrip(b"\r"), head, found, None, base + start)
        if self._settleable:  # after the block's failures: only its last success line counts
            self._note_success_lines(block, lowered, base)

    def _candidates(self, block: bytes, lowered: bytes) -> dict[int, list[bytes]]:
        """The start of every line of `block` with a trigger on it, and the triggers found there.

        An INFO trigger counts on any line; the others only on lines without the INFO marker (and on
        over-long lines, whose marker may lie beyond the head that is matched). One pass of
        search of `trigger_pattern` per occurrence; the line of each occurrence is looked up once per
        line, so a line made of one trigger repeated costs a step per occurrence, never a scan back to
        its start.
        """
        candidates: dict[int, list[bytes]] = {}
        info_triggers = self._info_triggers
        line_start = line_end = -1
        plain_line = False  # the current line may take the non-INFO triggers
        search = self._triggers.search
        match = search(lowered)
        while match is not None:
            position = match.start()
            if position >= line_end:
                line_start = lowered.rfind(b"\n", 0, position) + 1
                line_end = lowered.find(b"\n", position)
                if line_end < 0:
                    line_end = len(lowered)
                plain_line = (
                    line_end - line_start > MAX_MATCH_BYTES or block.find(INFO_MARKER, line_start, line_end) < 0
                )
            trigger = match.group()
            if plain_line or trigger in info_triggers:
                found = candidates.setdefault(line_start, [])
                if trigger not in found:
                    found.append(trigger)
            match = search(lowered, position + 1)
        return candidates

    def _note_success_lines(self, text: bytes, lowered: bytes, base: int) -> None:
        """Record where the last success line of each context rule in `text` (whole lines, or one
        line) starts, `base` being the offset of `text` in the input."""
        for rule, keywords in self._context_rules:
            for keyword in keywords:
                end = len(lowered)
                for _ in range(SUCCESS_LOOKBACK):
                    at = lowered.rfind(keyword, 0, end)
                    if at < 0:
                        break
                    start = lowered.rfind(b"\n", 0, at) + 1
                    stop = lowered.find(b"\n", at)
                    stop = len(text) if stop < 0 else stop
                    line = text[start : min(stop, start + MAX_MATCH_BYTES)].decode("utf-8", errors="replace")
                    if rule.compiled.search(line):
                        self._settled_at[rule.id] = max(self._settled_at.get(rule.id, -1), base + start)
                        break
                    end = start

    def _line(self, raw: bytes, lowered: bytes, keywords: list[bytes], timestamp: str | None, position: int) -> None:
        """Classify one candidate line: its signatures, then, when none named what failed and an
        error word is on it, the class cues."""
        settled = self._classify(raw, lowered, keywords, timestamp, position)
        if not settled and self._cues is not None and not self._cue_words.isdisjoint(keywords):
            self._cue(raw, timestamp, position)

    def _cue(self, raw: bytes, timestamp: str | None, position: int) -> None:
        """Record the hit of the class cue that fires on this line, if one does (module docstring)."""
        assert self._cues is not None
        head = raw[:MAX_MATCH_BYTES].decode("utf-8", errors="replace")
        fired = self._cues.cue_of(head)
        if fired is None:
            return
        cue, word = fired
        if any(rule.compiled.search(head) for rule in self._healthy_lines):
            return
        self._record(self._cue_signatures[cue.cls], head, {"cue": word}, timestamp, position)

    def _classify(
        self, raw: bytes, lowered: bytes, keywords: list[bytes], timestamp: str | None, position: int
    ) -> bool:
        """Try the signatures admitted by `keywords` (found in `lowered`, the lower-cased head).

        True when a signature matched the line (then it was recorded, or a healthy line rule
        matched it): no class cue is tried on it."""
        head_bytes = raw[:MAX_MATCH_BYTES]
        admitted = self._admitted[INFO_MARKER in head_bytes]
        signatures: dict[int, Signature] = {}
        for keyword in keywords:
            for order, signature, requires in admitted[keyword]:
                if order in signatures:
                    continue
                if requires:
                    for word in requires:
                        if word in lowered:
                            break
                    else:
                        continue  # none of the context words: the patterns cannot match
                signatures[order] = signature
        has_version = VERSION_KEYWORD in keywords
        if not signatures and not has_version:
            return False
        head = head_bytes.decode("utf-8", errors="replace")
        if has_version:
            self._record_version(head)
        matched: list[tuple[Signature, dict[str, str]]] = []
        generic: list[tuple[Signature, dict[str, str]]] = []
        for order in sorted(signatures):
            signature = signatures[order]
            match = signature.compiled.search(head)
            if match is None:
                continue
            exclude = signature.compiled_exclude
            if exclude is not None and exclude.search(head):
                continue
            (generic if signature.generic else matched).append((signature, group_fields(match)))
        if (matched or generic) and any(rule.compiled.search(head) for rule in self._healthy_lines):
            return True  # a notice its emitter prints on purpose (a healthy line rule)
        for signature, fields in matched or generic:
            self._record(signature, head, fields, timestamp, position)
        return bool(matched or generic)

    def _record(
        self, signature: Signature, line: str, fields: dict[str, str], timestamp: str | None, position: int
    ) -> None:
        # The line becomes evidence here, whoever fed the scanner (triage reads the operator's
        # files as they are): what is kept carries no secret.
        line = scrub(line)
        fields = {name: scrub(value) for name, value in fields.items()}
        values = dict(signature.fields)
        prefix = _NCCL_PREFIX.search(line)
        if prefix:
            values["host"] = prefix.group("host")
        rank = _RANK.search(line)
        if rank:
            values["rank"] = rank.group("rank")
        for name, value in signature.extract_fields(line).items():
            values.setdefault(name, value)
        values.update(fields)
        if "pci_bus_id" in values:
            values["pci_bus_id"] = canonical_pci_bus_id(values["pci_bus_id"])
        split = values.get(signature.split_by, "") if signature.split_by else ""
        route = signature.route_of(line) if signature.routes else None
        if route is not None:
            split = f"{split}\0{route.reference}"  # a route's lines are their own hit, in its section
        key = (signature.id, split)
        group = self._groups.get(key)
        if group is None:
            if split and sum(1 for k in self._groups if k[0] == signature.id) >= MAX_SPLIT_GROUPS:
                key = (signature.id, "")  # bound memory: fold further split values together
                group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = _Group(signature, route=None if key[1] == "" else route)
        group.add(line, values, timestamp or parse_timestamp(line), position)
        self._settleable = self._settleable or signature.id in self._settled_by

    def _record_version(self, line: str) -> None:
        match = _VERSION_BANNER.search(line)
        if match:
            version = match.group("version")
            self._versions[version] = self._versions.get(version, 0) + 1
            self._version_lines.setdefault(version, scrub(line[:EVIDENCE_CHARS]))

    def _note_markers(self, lowered: bytes) -> None:
        for marker, spelling in self._markers.items():
            if spelling not in self._markers_seen and marker in lowered:
                self._markers_seen.add(spelling)

    # ------------------------------------------------------------------ output
    def finish(self) -> ScanResult:
        """Flush the carried-over partial line and return the grouped result."""
        if self._pending:
            pending, self._pending = self._pending, b""
            self._scan_block(pending + b"\n")
        groups, resolved = self._settle(list(self._groups.values()))
        hits = [_to_hit(group) for group in groups]
        drift = version_drift_hit(self._versions, list(self._version_lines.values()), self.catalog)
        if drift is not None:
            hits.append(drift)
        order = self._order

        def urgency(hit: SignatureHit) -> tuple[int, int, int]:
            return hit.priority.rank, order.get(hit.id, 0), -hit.count

        hits.sort(key=urgency)
        # Folding may raise a cause to its generic line's priority: sorted again after it.
        hits = sorted(fold_generic_hits(hits, self._folding, self._not_causes), key=urgency)
        return ScanResult(
            hits=hits,
            lines_scanned=self._lines,
            bytes_scanned=self._bytes,
            nccl_versions=dict(self._versions),
            success_markers=[m for m in self.catalog.success_markers if m in self._markers_seen],
            resolved=resolved,
        )

    def _settle(self, groups: list[_Group]) -> tuple[list[_Group], list[ResolvedHit]]:
        """`groups` less those a context rule's success line came after and those whose consequence
        the input does not show (`Signature.only_beside`), and what those were."""
        kept, resolved = self._settle_by_context(groups)
        present = {group.signature.id for group in kept}
        standing: list[_Group] = []
        for group in kept:
            signature = group.signature
            if not signature.only_beside or not present.isdisjoint(signature.only_beside):
                standing.append(group)
                continue
            resolved.append(
                ResolvedHit(
                    id=signature.id,
                    title=signature.title,
                    count=group.count,
                    rule=ONLY_BESIDE,
                    why="a failure only beside what it causes, which this input does not show: "
                    + "; ".join(self.catalog.by_id(other).title for other in signature.only_beside),
                )
            )
        return standing, resolved

    def _settle_by_context(self, groups: list[_Group]) -> tuple[list[_Group], list[ResolvedHit]]:
        """`groups` less those a context rule's success line came after, and what those were."""
        kept: list[_Group] = []
        resolved: list[ResolvedHit] = []
        for group in groups:
            signature = group.signature
            rule = next(
                (
                    rule
                    for rule in self._settled_by.get(signature.id, ())
                    if self._settled_at.get(rule.id, -1) > group.last_position
                ),
                None,
            )
            if rule is None:
                kept.append(group)
            else:
                resolved.append(
                    ResolvedHit(id=signature.id, title=signature.title, count=group.count, rule=rule.id, why=rule.why)
                )
        return kept, resolved


def fold_generic_hits(
    hits: list[SignatureHit], folding: frozenset[str], not_causes: frozenset[str]
) -> list[SignatureHit]:
    """`hits` (most urgent first) with every hit of a `folding` signature folded under the most
    urgent hit that names a cause (any signature outside `not_causes`), when the input has one.

    "unhandled system error" says that NCCL failed, the socket or EFA line beside it says why: one
    finding, with the cause's class and section, the generic lines kept under it (`folded`), and the
    more urgent of the two priorities (the job did fail). Without a cause in the input the generic
    hits stay as they are. One input (an excerpt, a stream, a pod's log) is one scope: lines of
    different streams are never folded together here (the verdict relates those).
    """
    cause = next((hit for hit in hits if hit.id not in not_causes), None)
    generic = [hit for hit in hits if hit.id in folding]
    if cause is None or not generic:
        return hits
    folded = [
        FoldedHit(id=hit.id, cls=hit.cls, title=hit.title, count=hit.count, evidence=hit.evidence[-2:])
        for hit in generic
    ]
    urgent = min([cause, *generic], key=lambda hit: hit.priority.rank).priority
    merged = cause.model_copy(update={"folded": [*cause.folded, *folded], "priority": urgent})
    return [merged if hit is cause else hit for hit in hits if hit.id not in folding]


def _to_hit(group: _Group) -> SignatureHit:
    signature = group.signature
    fields: dict[str, str | int | float | bool | None] = {
        name: _field_value(name, values) for name, values in group.values.items()
    }
    priority, reference = signature.priority, signature.ref if group.route is None else group.route.ref
    if signature.split_by == "xid" and "xid" in group.values:
        priority, reference = _enrich_xid(fields, group.values["xid"])
    if signature.id.startswith(CUE_PREFIX):
        fields["by_cue"] = True  # recognised by its class's vocabulary, not by a known message
    return SignatureHit(
        id=signature.id,
        cls=signature.cls,
        title=f"{signature.title} {fields['xid']}"
        if signature.split_by == "xid" and "xid" in fields
        else signature.title,
        priority=priority,
        reference=reference,
        count=group.count,
        evidence=list(group.evidence),
        fields=fields,
        first_seen=group.first_seen,
        last_seen=group.last_seen,
    )


def _field_value(name: str, values: list[str]) -> str | int:
    """One value as itself (a whole number as an int, identifiers aside); several joined with commas."""
    if len(values) > 1:
        return ",".join(values)
    value = values[0]
    return int(value) if name not in _IDENTIFIER_FIELDS and _INTEGER.fullmatch(value) else value


def _enrich_xid(fields: dict[str, str | int | float | bool | None], codes: list[str]) -> tuple[Priority, Reference]:
    """Xid code → app vs hardware and the action (reboot vs replace), from `hyperpod_nccl.xid`.

    A log line's Xid points at node-debugger.md § G whatever its action: § G's table is where the
    code is read (app or hardware, reset, reboot or replace) and it sends the commands to § F. Row
    remapping codes point at § G.1.a. (An incident about a node to replace points at § F itself,
    `incidents.build`: there the node, not the line, is the subject.)"""
    numbers = [int(code) for code in codes if code.isdigit()]
    infos = [xid_facts.xid_info(code) for code in numbers]
    if not infos:
        return Priority.P0, NODE_GPU
    fields["xid_name"] = "; ".join(info.name for info in infos)
    fields["xid_category"] = ",".join(sorted({info.category for info in infos}))
    fields["action"] = xid_facts.most_severe_action(numbers)
    if any(info.code in (63, 64) for info in infos):
        return Priority.P0, NODE_ROW_REMAP
    # Application Xids are P1: fix the workload before touching hardware.
    hardware = any(info.is_hardware or info.category == "unknown" for info in infos)
    return Priority.P0 if hardware else Priority.P1, NODE_GPU


def version_drift_hit(
    versions: dict[str, int], examples: list[str], catalog: Catalog | None = None
) -> SignatureHit | None:
    """A hit when more than one NCCL version was announced in one scope (ranks disagree)."""
    if len(versions) < 2:
        return None
    signature = (catalog or load_catalog()).by_id("nccl_version_drift")
    ordered = sorted(versions, key=lambda v: tuple(int(p) for p in v.split(".")))
    return SignatureHit(
        id=signature.id,
        cls=signature.cls,
        title=signature.title,
        priority=signature.priority,
        reference=signature.ref,
        count=sum(versions.values()),
        evidence=examples[:EVIDENCE_LINES],
        fields={"nccl_versions": ",".join(ordered), **{f"lines_{v}": versions[v] for v in ordered}},
    )


def scan_lines(lines: Iterable[str], catalog: Catalog | None = None) -> ScanResult:
    """Classify every line of `lines` and return the grouped hits."""
    scanner = Scanner(catalog)
    scanner.feed_lines(lines)
    return scanner.finish()


def scan_text(text: str, catalog: Catalog | None = None) -> ScanResult:
    """Classify a whole text (a pasted error string, a log excerpt)."""
    scanner = Scanner(catalog)
    scanner.feed_text(text)
    return scanner.finish()


def scan_stream(stream: BinaryIO, catalog: Catalog | None = None) -> ScanResult:
    """Classify a binary stream (a log file) block by block in constant memory."""
    scanner = Scanner(catalog)
    scanner.feed_binary(stream)
    return scanner.finish()
