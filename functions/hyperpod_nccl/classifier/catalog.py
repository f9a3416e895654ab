"""The signature catalog: failure signatures as data (`signatures.json`), validated and compiled.

A signature names a failure class in the real wording families of NCCL, PyTorch, aws-ofi-nccl,
libfabric, the NVIDIA driver, the kernel, Slurm and Kubernetes, and points at the specific
runbook section (a constant name of `hyperpod_nccl.references`). Where one wording family names
causes fixed in different sections, the signature's `routes` send the matching lines there (`Route`);
a notice that is a failure only beside its consequence names it in `only_beside`.

Class cues (`CueLayer`, the catalog's `cues`) are the second, weaker layer: per failure class, the
class's own vocabulary, tried only on an error line no signature recognised (see the scanner).
"""

from __future__ import annotations

import json
import re
from functools import cached_property, lru_cache
from importlib import resources
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from hyperpod_nccl import references
from hyperpod_nccl.models.findings import Priority
from hyperpod_nccl.references import Reference

CATALOG_FILE = "signatures.json"


def _https_urls(value: list[str]) -> list[str]:
    for url in value:
        if not url.startswith("https://"):
            raise ValueError(f"written_from {url!r} must be the https URL of the source")
    return value


def _lower_ascii(value: list[str]) -> list[str]:
    # ASCII: the scanner lower-cases raw bytes with the (ASCII-only) bytes.lower().
    for keyword in value:
        if keyword != keyword.lower() or not keyword.strip() or not keyword.isascii():
            raise ValueError(f"keyword {keyword!r} must be non-empty lower-case ASCII")
    return value


def _compiling(value: list[str]) -> list[str]:
    for pattern in value:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"pattern {pattern!r} does not compile: {error}") from error
    return value


# The field types both kinds of catalog entry share, validated the same way.
def _reference_constant(value: str) -> str:
    if not isinstance(getattr(references, value, None), Reference):
        raise ValueError(f"unknown reference constant {value!r} (see hyperpod_nccl/references.py)")
    return value


SourceUrls = Annotated[list[str], AfterValidator(_https_urls)]
# A runbook section by its constant's name in hyperpod_nccl.references ("DBG_TCP_FALLBACK").
ReferenceName = Annotated[str, AfterValidator(_reference_constant)]
Keywords = Annotated[list[str], AfterValidator(_lower_ascii)]
Patterns = Annotated[list[str], AfterValidator(_compiling)]


def _pointer(name: str) -> Reference:
    """The `references` constant a validated `ReferenceName` names."""
    value: Reference = getattr(references, name)
    return value


class Route(BaseModel):
    """A narrower cause inside one signature's wording family, with its own runbook section.

    One message family can name causes fixed in different sections (Slurm's messages: a job step's
    exit is read in the Slurm procedures, a node that stopped answering in the node operations, an
    expired munge credential in the node clock). A line the route's patterns match takes the
    route's section; lines of the same input that take different sections make separate hits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reference: ReferenceName
    # Why these lines belong to that section (the runbook's own symptom list, the emitter's meaning).
    why: str
    patterns: Patterns = Field(min_length=1)

    @cached_property
    def ref(self) -> Reference:
        """The runbook pointer."""
        return _pointer(self.reference)

    @cached_property
    def compiled(self) -> re.Pattern[str]:
        """The patterns as one alternation (case-insensitive)."""
        return _compile_alternation(self.patterns, case_sensitive=False)


class Signature(BaseModel):
    """One failure signature of the catalog."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    cls: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str
    priority: Priority
    reference: ReferenceName
    # Lower-case ASCII literals; a line is only tried against this signature when one of them occurs
    # (so every pattern must contain one: they are the scanner's prefilter).
    keywords: Keywords = Field(default_factory=list)
    # Optional context words (lower-case ASCII): when given, one of them must occur as well. For
    # signatures whose keywords are common error words ("fail", "error") but whose patterns all
    # name a subject ("net/ofi", "nvls"), so that ordinary failure chatter skips their regexes.
    requires: Keywords = Field(default_factory=list)
    patterns: Patterns = Field(default_factory=list)
    # A line matching any of these is not this failure (benign INFO wording, another class).
    exclude: Patterns = Field(default_factory=list)
    # Applied to matching lines only; named groups become fields.
    extract: Patterns = Field(default_factory=list)
    # Constant facts of the signature (e.g. the NCCL error code it stands for).
    fields: dict[str, str] = Field(default_factory=dict)
    # Healthy NCCL logs are mostly "NCCL INFO" lines; most signatures ignore those lines.
    allow_info: bool = False
    # Generic signatures only count when no specific signature matched the same line (and, like
    # `folds`, are folded under a specific hit of the same input).
    generic: bool = False
    # An error code that says something failed, not what ("unhandled system error", "internal
    # error"): when the same input (an excerpt, a log stream, a pod's log) also has a hit that names
    # a cause (a network, a version, a memory registration line), this hit is folded under it and
    # the finding takes that cause's class and section (`fold_generic_hits`).
    folds: bool = False
    # The line says how a job or a collective ended (a timeout, an abort, a task's exit), not why:
    # nothing is folded under it (the verdict explains outcomes by the causes it finds).
    outcome: bool = False
    case_sensitive: bool = False
    # Group hits by this extracted field too (one hit per Xid code, per HMA reason).
    split_by: str | None = None
    # Produced by cross-line analysis (the version drift), not by patterns.
    synthetic: bool = False
    # The public sources (issue threads, files, pages: their URLs) whose lines this signature was
    # written from. The classifier benchmark's cross-validation never scores an excerpt of one of
    # them with this signature, so a line cannot vouch for the pattern written from it. Empty for
    # the signatures written before this was recorded: all of them from the in-sample corpus
    # (tests/data/log_corpus/corpus.json), which is why that corpus's score is reported as in-sample.
    written_from: SourceUrls = Field(default_factory=list)
    # Narrower causes with their own sections, tried in order on each matching line (`Route`).
    routes: list[Route] = Field(default_factory=list)
    # A notice that is a failure only beside its consequence: its hits are kept only when the same
    # input (an excerpt, a stream) also has a hit of one of these signatures. NCCL that finds no
    # network plugin says so and uses its own transports; on InfiniBand that is the normal run, on
    # EFA nodes it is why the job then runs over sockets (`tcp_fallback`), and only then a finding.
    only_beside: list[str] = Field(default_factory=list)
    kind: Literal["failure"] = "failure"

    @model_validator(mode="after")
    def _matchable(self) -> Signature:
        if not self.synthetic and (not self.patterns or not self.keywords):
            raise ValueError(f"signature {self.id}: patterns and keywords are required")
        return self

    @property
    def ref(self) -> Reference:
        """The runbook pointer."""
        return _pointer(self.reference)

    def route_of(self, line: str) -> Route | None:
        """The first route whose patterns match `line`, or None (the signature's own section)."""
        for route in self.routes:
            if route.compiled.search(line):
                return route
        return None

    @cached_property
    def compiled(self) -> re.Pattern[str]:
        """All patterns as one alternation (named groups renamed apart)."""
        return _compile_alternation(self.patterns, self.case_sensitive)

    @cached_property
    def compiled_exclude(self) -> re.Pattern[str] | None:
        """The exclusion guard, or None."""
        return _compile_alternation(self.exclude, self.case_sensitive) if self.exclude else None

    @cached_property
    def compiled_extract(self) -> tuple[re.Pattern[str], ...]:
        """Field extractors."""
        return tuple(re.compile(p, _flags(self.case_sensitive)) for p in self.extract)

    def extract_fields(self, line: str) -> dict[str, str]:
        """The fields the extractors find in `line` (the first extractor to find a field wins)."""
        values: dict[str, str] = {}
        for extractor in self.compiled_extract:
            found = extractor.search(line)
            if found:
                for name, value in found.groupdict().items():
                    if value:
                        values.setdefault(name, value)
        return values


_GROUP = re.compile(r"\(\?P<(\w+)>")


def _compile_alternation(patterns: list[str], case_sensitive: bool) -> re.Pattern[str]:
    # The same group name may appear in several alternatives; suffix them so they compile as one
    # pattern, and fold them back to the plain name when fields are read (`group_fields`).
    renamed = []
    for index, pattern in enumerate(patterns):
        suffixed = _GROUP.sub(rf"(?P<\1__{index}>", pattern)
        renamed.append(f"(?:{suffixed})")
    return re.compile("|".join(renamed), _flags(case_sensitive))


def _flags(case_sensitive: bool) -> re.RegexFlag:
    # ASCII: `\b` and `\w` must treat CJK (or any non-ASCII) text as non-word characters, or
    # `\bRendezvous` fails in "多机多卡集群训练RendezvousTimeoutError()" (a real title) because the
    # preceding ideograph counts as a word character in Unicode mode. Catalog words are ASCII.
    return re.ASCII if case_sensitive else re.ASCII | re.IGNORECASE


def group_fields(match: re.Match[str]) -> dict[str, str]:
    """Named groups of a match with the alternation suffixes removed (first non-empty wins)."""
    out: dict[str, str] = {}
    for name, value in match.groupdict().items():
        if value:
            out.setdefault(name.split("__", 1)[0], value)
    return out


class HealthyRule(BaseModel):
    """What an emitter prints on a healthy run although it reads like a failure, from its own source.

    Two forms. A *line rule* (`resolves` empty): the line itself is healthy, a notice the program
    prints at warning level on purpose (an option the operator enabled, a deprecated setting), so no
    failure signature is recorded for it. A *context rule*: a success line that settles earlier
    failures of the same input (an excerpt, a stream): the listed signatures' hits are dropped when
    this line comes after their last line (a c10d client that connected after retrying, a network
    plugin found after NCCL tried other names and API versions, an NCCL warning during an init that
    completed). A failure printed after the success line stands.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    why: str
    # Lower-case ASCII literals, one of which every matching line contains (the scanner searches
    # them in whole blocks for context rules).
    keywords: Keywords = Field(min_length=1)
    patterns: Patterns = Field(min_length=1)
    resolves: list[str] = Field(default_factory=list)
    # The emitter's source files (pinned to the commit read) that print the line and show it harmless.
    written_from: SourceUrls = Field(min_length=1)
    case_sensitive: bool = False

    @cached_property
    def compiled(self) -> re.Pattern[str]:
        """All patterns as one alternation."""
        return _compile_alternation(self.patterns, self.case_sensitive)


# A cue hit's id is `cue_<class>`: no signature may take that prefix.
CUE_PREFIX = "cue_"
# Where a cue's vocabulary may come from (`Catalog._cues_known`): a runbook section, named by its
# constant of `hyperpod_nccl.references` ("DBG_DNS"), or an emitter's source file pinned to the commit read
# that a signature of the same class also cites. Never an issue or pull-request thread, a
# discussion or a web page: those are what the log corpora are made of, and the leave-one-source-out
# scoring (`tests/log_corpus.catalog_without`) can only keep a cue away from its own source when the
# cue names it; a file that is also a corpus source is named, and catalog_without drops the cue.
_PINNED_SOURCE_FILE = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+$")


def is_reference_name(name: str) -> bool:
    """Whether `name` is a runbook section's constant of `hyperpod_nccl.references`."""
    return name.isupper() and isinstance(getattr(references, name, None), Reference)


class Cue(BaseModel):
    """One failure class's own vocabulary: the words its failures are told in, whoever tells them
    (another tool, a wrapper's paraphrase, a user's copy), as bounded regexes.

    Weaker than a signature: a cue never names a message, only a subject. It is tried only on a
    line that carries an error word and that no signature recognised (`CueLayer`); a hit is marked
    `by_cue` and has the layer's priority (P2, a warning)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cls: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    # How a report names the class: "Looks like a <name> problem (no known message matched)".
    name: str
    # The section the class is fixed in: the one its most general signature points at.
    reference: ReferenceName
    # What a hit does in its input, as its class's most general signature does: a "cause" (generic
    # errors fold under it), an "outcome" (how a job ended: nothing folds under it), or "folds" (a
    # failure that names no cause: it folds under one, `Signature.folds`).
    role: Literal["cause", "outcome", "folds"] = "cause"
    patterns: Patterns = Field(min_length=1)
    # A line matching one of these is not this class (another subject sharing a word).
    exclude: Patterns = Field(default_factory=list)
    # Where the words come from: runbook sections and pinned emitter source files that the class's
    # signatures cite (checked by `Catalog`); never a thread or a page, the stuff corpora are made of.
    vocabulary_from: list[str] = Field(min_length=1)

    @property
    def id(self) -> str:
        """The id of this cue's hits: `cue_<class>`."""
        return f"{CUE_PREFIX}{self.cls}"

    @cached_property
    def compiled(self) -> re.Pattern[str]:
        """The vocabulary as one alternation."""
        return _compile_alternation(self.patterns, case_sensitive=False)

    @cached_property
    def compiled_exclude(self) -> re.Pattern[str] | None:
        """The exclusion guard, or None."""
        return _compile_alternation(self.exclude, case_sensitive=False) if self.exclude else None


class CueLayer(BaseModel):
    """The class cues and when they fire (the catalog's `cues`).

    A cue fires on a line only when (a) no signature matched the line (a generic hit of another
    line of the same input, a bare "NCCL WARN", folds under a cue hit of a cause as under any
    cause); (b) no healthy line rule matches it; (c) the line carries an error word (`error_words`,
    `error_names`) outside a harmless role (`harmless`: "errors: 0", "Uncorrectable Error   : 0",
    "ECC Errors" as a heading, "no errors", "--error=FILE", "ecc.errors.corrected.volatile.total" as a
    field name); (d) it is no INFO/DEBUG line of a program that prints levels nor an in-process warning
    the program carries on from (`quiet_levels`: glog/PyTorch/klog `W`, Python's `warnings`, UCX
    `WARN`), no line that says it succeeded (`quiet`, sought outside the reader's instructions:
    `advice`), and no line that says it carries on (`carry_on`: "retrying", "ignored") unless it also
    says it gave up (`gave_up`: "giving up", "failed after 3 retries"); and (e) a class's vocabulary is
    on the line once the name of the program that printed it is set aside (`emitter_tags`:
    "slurmd[23484]:" says who speaks, not what failed): the first such class of `classes`, which are
    listed most specific first (a named cause before the generic
    `rendezvous`, `k8s`, `slurm`, `connectivity`, `timeout` and `nccl_error`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    priority: Priority = Priority.P2
    # Lower-case ASCII literals, one of which every error word contains (the scanner's prefilter
    # finds them with the signatures' keywords, in the same one pass).
    triggers: Keywords = Field(min_length=1)
    error_words: Patterns = Field(min_length=1)  # matched case-insensitively
    error_names: Patterns = Field(default_factory=list)  # case-sensitive: "RuntimeError", "cudaErrorX"
    harmless: Patterns = Field(default_factory=list)  # removed from the line before error words are sought
    quiet: Patterns = Field(default_factory=list)  # a line matching one is never a cue hit
    # The reader's instructions a failing program prints ("Check that the GCS started successfully"):
    # set aside before `quiet` is sought, so a success word in advice does not silence the failure.
    advice: Patterns = Field(default_factory=list)
    # A line matching one is no cue hit unless it also matches `gave_up` (case-insensitive both).
    carry_on: Patterns = Field(default_factory=list)
    gave_up: Patterns = Field(default_factory=list)
    quiet_levels: Patterns = Field(default_factory=list)  # case-sensitive: "NCCL INFO", "[INFO]", "I1207 ..."
    # The printing program's own name in its log prefix (case-sensitive), set aside before the
    # classes' vocabulary is sought.
    emitter_tags: Patterns = Field(default_factory=list)
    classes: list[Cue] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_per_class(self) -> CueLayer:
        names = [cue.cls for cue in self.classes]
        if len(names) != len(set(names)):
            raise ValueError("a class has two cue entries")
        return self

    @cached_property
    def compiled_error(self) -> re.Pattern[str]:
        """Error words (case-insensitive) and error names (case-sensitive) as one pattern."""
        words = [f"(?i:{pattern})" for pattern in self.error_words]
        return re.compile("|".join(f"(?:{p})" for p in [*words, *self.error_names]), re.ASCII)

    @cached_property
    def compiled_harmless(self) -> re.Pattern[str] | None:
        """Error words in a harmless role, or None."""
        return _compile_alternation(self.harmless, case_sensitive=False) if self.harmless else None

    @cached_property
    def compiled_quiet(self) -> re.Pattern[str] | None:
        """Lines that are never cue hits (INFO levels, in-process warnings, success), or None."""
        parts = [f"(?i:{pattern})" for pattern in self.quiet] + list(self.quiet_levels)
        return re.compile("|".join(f"(?:{p})" for p in parts), re.ASCII) if parts else None

    @cached_property
    def compiled_advice(self) -> re.Pattern[str] | None:
        """The reader's instructions on a line, or None."""
        return _compile_alternation(self.advice, case_sensitive=False) if self.advice else None

    @cached_property
    def compiled_carry_on(self) -> re.Pattern[str] | None:
        """Lines that say the program carries on (no cue hit unless they also say it gave up), or None."""
        return _compile_alternation(self.carry_on, case_sensitive=False) if self.carry_on else None

    @cached_property
    def compiled_gave_up(self) -> re.Pattern[str] | None:
        """A final failure said beside a carry-on word ("retrying ... giving up"), or None."""
        return _compile_alternation(self.gave_up, case_sensitive=False) if self.gave_up else None

    @cached_property
    def compiled_emitter_tags(self) -> re.Pattern[str] | None:
        """The printing program's name in its log prefix, or None."""
        return _compile_alternation(self.emitter_tags, case_sensitive=True) if self.emitter_tags else None

    def silenced(self, line: str) -> bool:
        """Whether `line` is no cue candidate whatever its words: a quiet level or wording, or a
        carry-on wording without a give-up (condition (d) of the class docstring)."""
        quiet, advice = self.compiled_quiet, self.compiled_advice
        if quiet is not None and quiet.search(advice.sub(" ", line) if advice is not None else line):
            return True
        carry_on, gave_up = self.compiled_carry_on, self.compiled_gave_up
        return bool(carry_on is not None and carry_on.search(line) and not (gave_up and gave_up.search(line)))

    def cue_of(self, line: str) -> tuple[Cue, str] | None:
        """The class whose cue fires on `line` (a line's head, decoded) and the vocabulary word that
        matched, by conditions (c) to (e) of the class docstring; None when no cue fires."""
        if self.silenced(line):
            return None
        harmless = self.compiled_harmless
        if self.compiled_error.search(harmless.sub(" ", line) if harmless is not None else line) is None:
            return None
        tags = self.compiled_emitter_tags
        subject = tags.sub(" ", line) if tags is not None else line
        for cue in self.classes:
            found = cue.compiled.search(subject)
            if found is not None and not (cue.compiled_exclude is not None and cue.compiled_exclude.search(line)):
                return cue, found.group()
        return None


class FailureClass(BaseModel):
    """What a failure class means and the read-only commands that confirm it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cause: str
    confirm: list[str] = Field(default_factory=list)


class Catalog(BaseModel):
    """The whole catalog file."""

    model_config = ConfigDict(extra="forbid")

    version: int
    # Case-sensitive quoted terms for CloudWatch FilterLogEvents: one call per term, so that only
    # candidate lines cross the network (every positive corpus line contains one; see the tests).
    cloudwatch_terms: list[str] = Field(default_factory=list)
    # Lines a healthy run prints on success (the original tool's markers: "AllReduce SUCCESS"),
    # matched case-insensitively as substrings; a log that prints one gets a PASS line for it.
    success_markers: list[str] = Field(default_factory=list)
    classes: dict[str, FailureClass]
    signatures: list[Signature]
    # Lines that read like failures but are not, or that settle earlier failures (`HealthyRule`).
    healthy: list[HealthyRule] = Field(default_factory=list)
    # The class cues, the weaker second layer (`CueLayer`); None: signatures only.
    cues: CueLayer | None = None

    @model_validator(mode="after")
    def _unique(self) -> Catalog:
        seen: set[str] = set()
        for signature in self.signatures:
            if signature.id.startswith(CUE_PREFIX):
                raise ValueError(f"signature {signature.id}: the prefix {CUE_PREFIX!r} is the class cues'")
            if signature.id in seen:
                raise ValueError(f"duplicate signature id {signature.id}")
            seen.add(signature.id)
            if signature.cls not in self.classes:
                raise ValueError(f"signature {signature.id}: class {signature.cls!r} is not described in `classes`")
        for signature in self.signatures:
            unknown = [other for other in signature.only_beside if other not in seen or other == signature.id]
            if unknown:
                raise ValueError(f"signature {signature.id}: only_beside names unknown signatures {unknown}")
        for rule in self.healthy:
            if rule.id in seen:
                raise ValueError(f"duplicate id {rule.id}")
            seen.add(rule.id)
            unknown = [signature_id for signature_id in rule.resolves if signature_id not in seen]
            if unknown:
                raise ValueError(f"healthy rule {rule.id} resolves unknown signatures {unknown}")
        self._cues_known()
        return self

    def _cues_known(self) -> None:
        """Every cue names a described class and cites runbook sections or pinned source files that
        its class's signatures also cite, never a thread or a page (`_PINNED_SOURCE_FILE`)."""
        for cue in self.cues.classes if self.cues else []:
            if cue.cls not in self.classes:
                raise ValueError(f"cue of {cue.cls!r}: the class is not described in `classes`")
            cited = {url for s in self.signatures if s.cls == cue.cls for url in s.written_from}
            for source in cue.vocabulary_from:
                if is_reference_name(source):
                    continue
                if not _PINNED_SOURCE_FILE.match(source):
                    raise ValueError(
                        f"cue of {cue.cls}: {source!r} is neither a runbook section (a constant of references.py)"
                        " nor a pinned source file"
                        " (a thread or a page is what the corpora are made of: a cue never cites one)"
                    )
                if source not in cited:
                    raise ValueError(f"cue of {cue.cls}: {source!r} is a source none of its class's signatures cite")

    def by_id(self, signature_id: str) -> Signature:
        """The signature with this id (KeyError when unknown)."""
        for signature in self.signatures:
            if signature.id == signature_id:
                return signature
        raise KeyError(signature_id)

    def failure_class(self, name: str) -> FailureClass:
        """The description of a class."""
        return self.classes[name]


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The shipped catalog, parsed and validated once per process."""
    text = resources.files(__package__).joinpath(CATALOG_FILE).read_text(encoding="utf-8")
    return Catalog.model_validate(json.loads(text))
