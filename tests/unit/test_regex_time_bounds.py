"""Every regex the product runs on cluster text finishes fast on adversarial 4 KB lines.

Log lines, probe output and RAS answers are written by whoever runs a job or owns a node, so a
pattern that backtracks polynomially (``.*x.*y`` on a line of many ``x``, nested quantifiers) is a
way to stall a sweep: one crafted line printed thousands of times would exceed the CollectLogs
timeout. The patterns are collected automatically, so a new one is covered without editing this
file:

* the catalog's compiled signatures, exclusions and extractors, and its class cues;
* every module-level ``re.Pattern`` (alone or inside a tuple/list/dict) of ``hyperpod_nccl.*``;
* every ``re.compile/search/match/...`` call with a literal pattern found in those modules' source
  (patterns compiled inline inside functions).

``hyperpod_nccl_sim`` is skipped: it is the test emulation, it never reads cluster text.

Inputs are derived from each pattern's own parse tree: its literal fragments and class members
repeated, and prefixes of a string that walks the pattern (the "almost matching" line that makes a
backtracking engine retry at every position), each 4096 characters long (the classifier only ever
matches a line's first 4096 bytes; other parsers see node output lines of similar size).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import pkgutil
import re
import time
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import pytest

import hyperpod_nccl
from hyperpod_nccl.classifier.catalog import load_catalog

LINE_CHARS = 4096
LIMIT_SECONDS = 0.010
# Time is the thread's CPU time (what the search costs, not how long a loaded 2-core CI machine
# took to schedule it), and a first run over this is re-measured: the verdict is the best of 3,
# so a hiccup does not fail the test while a pattern that is really slow stays slow.
REMEASURE_SECONDS = 0.002
SKIPPED_PACKAGES = ("hyperpod_nccl_sim",)
FILLERS = ("a", "A", "0", "9", " ", "\t", ":", ".", "-", "_", "/", "=", ",", "[", "]", "(", ")", "x", "#", "\\")
_RE_FUNCTIONS = {"compile": 1, "search": 2, "match": 2, "fullmatch": 2, "findall": 2, "finditer": 2, "split": 3}
_RE_FUNCTIONS |= {"sub": 4, "subn": 4}  # positional index of `flags`


def _modules() -> Iterator[Any]:
    for info in pkgutil.walk_packages(hyperpod_nccl.__path__, "hyperpod_nccl."):
        if not info.name.startswith(SKIPPED_PACKAGES):
            yield importlib.import_module(info.name)


def _flags_value(node: ast.expr | None) -> int | None:
    """`re.I | re.M` → its value; None for anything that is not plain `re.<FLAG>` arithmetic."""
    if node is None:
        return 0
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "re":
        value = getattr(re, node.attr, None)
        return int(value) if isinstance(value, re.RegexFlag) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _flags_value(node.left), _flags_value(node.right)
        return None if left is None or right is None else left | right
    return None


def _inline_patterns(module: Any) -> Iterator[tuple[str, re.Pattern[str], str]]:
    """`re.search(r"...", text, re.I)` and friends with a literal pattern, from the module's source,
    with the method the call uses (an anchored `fullmatch` is timed as one, not as a search)."""
    source = Path(inspect.getfile(module)).read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        func = node.func
        if not (isinstance(func.value, ast.Name) and func.value.id == "re" and func.attr in _RE_FUNCTIONS):
            continue
        if not node.args or not isinstance(node.args[0], ast.Constant) or not isinstance(node.args[0].value, str):
            continue
        index = _RE_FUNCTIONS[func.attr]
        flag_node = node.args[index] if len(node.args) > index else None
        flag_node = next((k.value for k in node.keywords if k.arg == "flags"), flag_node)
        flags = _flags_value(flag_node)
        if flags is not None:
            method = func.attr if func.attr in ("match", "fullmatch") else "search"
            yield f"{module.__name__}:{node.lineno}", re.compile(node.args[0].value, flags), method


def _module_patterns(module: Any) -> Iterator[tuple[str, re.Pattern[str]]]:
    for name, value in vars(module).items():
        values = value.values() if isinstance(value, dict) else value
        if isinstance(value, re.Pattern):
            values = [value]
        elif not isinstance(value, tuple | list | dict | frozenset | set):
            continue
        for item in values:
            if isinstance(item, re.Pattern) and isinstance(item.pattern, str):
                yield f"{module.__name__}.{name}", item


@lru_cache(maxsize=1)
def collect_patterns() -> dict[tuple[str, int, str], tuple[str, re.Pattern[str], str]]:
    """(pattern text, flags, method) → (where it comes from, compiled pattern, method), deduplicated.

    Compiled patterns are timed with `search` (the costliest use: a start at every position),
    whatever their callers do with them."""
    found: dict[tuple[str, int, str], tuple[str, re.Pattern[str], str]] = {}

    def add(where: str, pattern: re.Pattern[str], method: str = "search") -> None:
        found.setdefault((pattern.pattern, pattern.flags, method), (where, pattern, method))

    for signature in load_catalog().signatures:
        if signature.patterns:
            add(f"catalog:{signature.id}:patterns", signature.compiled)
        if signature.compiled_exclude is not None:
            add(f"catalog:{signature.id}:exclude", signature.compiled_exclude)
        for index, extractor in enumerate(signature.compiled_extract):
            add(f"catalog:{signature.id}:extract[{index}]", extractor)
    cues = load_catalog().cues
    if cues is not None:  # the class cues: their vocabulary, and when they fire
        add("catalog:cues:error", cues.compiled_error)
        for name in ("harmless", "quiet", "carry_on", "gave_up", "emitter_tags"):
            compiled = getattr(cues, f"compiled_{name}")
            if compiled is not None:
                add(f"catalog:cues:{name}", compiled)
        for cue in cues.classes:
            add(f"catalog:{cue.id}:patterns", cue.compiled)
            if cue.compiled_exclude is not None:
                add(f"catalog:{cue.id}:exclude", cue.compiled_exclude)
    for module in _modules():
        for where, pattern in _module_patterns(module):
            add(where, pattern)
        for where, pattern, method in _inline_patterns(module):
            add(where, pattern, method)
    return found


# ----------------------------------------------------------------------------- input generation
def _class_chars(items: list[tuple[Any, Any]]) -> str:
    """A few members of a character class (`[a-z0-9_]`, `\\d`, `\\S`, ...)."""
    out = ""
    for op, arg in items:
        if op is sre_constants.LITERAL:
            out += chr(arg)
        elif op is sre_constants.RANGE:
            out += chr(arg[0]) + chr(arg[1])
        elif op is sre_constants.CATEGORY:
            name = str(arg)
            if "NOT_DIGIT" in name or "NOT_SPACE" in name:
                out += "a:"
            elif "NOT_WORD" in name:
                out += " :-"
            elif "DIGIT" in name:
                out += "0"
            elif "SPACE" in name:
                out += " \t"
            elif "WORD" in name:
                out += "a_0"
    return out


class _Walker:
    """Literal fragments, class members and prefixes of a pattern, from its parse tree."""

    def __init__(self) -> None:
        self.fragments: dict[str, None] = {}  # in pattern order
        self.chars: set[str] = set()
        self.prefixes: set[str] = set()

    def sample(self, parsed: Any, choice: int) -> str:
        """A string that follows the pattern, taking alternative `choice` (clamped) of each branch.

        Records every literal run met on the way (`fragments`) and the sample of each sequence cut
        at each of its element boundaries (`prefixes`: lines that almost match)."""
        out = ""
        run = ""
        for op, arg in parsed:
            piece = self._piece(op, arg, choice)
            if op is sre_constants.LITERAL:
                run += piece
                continue
            if run:
                self.fragments[run] = None
                out += run
                self.prefixes.add(out)
                run = ""
            out += piece
            self.prefixes.add(out)
        if run:
            self.fragments[run] = None
            out += run
        return out

    def _piece(self, op: Any, arg: Any, choice: int) -> str:
        if op is sre_constants.LITERAL:
            self.chars.add(chr(arg))
            return chr(arg)
        if op is sre_constants.NOT_LITERAL:
            return "a" if chr(arg) != "a" else "b"
        if op is sre_constants.ANY:
            return "a"
        if op is sre_constants.IN:
            members = _class_chars(arg)
            self.chars.update(members)
            return members[:1] if members and not (arg and arg[0][0] is sre_constants.NEGATE) else "a"
        if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT):
            low, _high, body = arg
            return self.sample(body, choice) * max(min(low, 8), 1)
        if op is sre_constants.SUBPATTERN:
            return self.sample(arg[-1], choice)
        if op is sre_constants.ATOMIC_GROUP:
            return self.sample(arg, choice)
        if op is sre_constants.BRANCH:
            samples = [self.sample(branch, choice) for branch in arg[1]]
            return samples[min(choice, len(samples) - 1)]
        if op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            self.sample(arg[1], choice)  # for its literals: an assertion consumes nothing
            return ""
        if op is sre_constants.GROUPREF_EXISTS:
            return self.sample(arg[1], choice)
        return ""


def _fill(seed: str, filler: str = "") -> str:
    """`seed` repeated (or followed by `filler`) up to 4096 characters."""
    if not seed:
        return ""
    if filler:
        return (seed + filler * LINE_CHARS)[:LINE_CHARS]
    return (seed * (LINE_CHARS // len(seed) + 1))[:LINE_CHARS]


def adversarial_lines(pattern: re.Pattern[str]) -> list[str]:
    """4 KB lines built from the pattern's own fragments: repeats, prefixes, near misses."""
    walker = _Walker()
    parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    for choice in range(3):  # first, second and third alternative of every branch
        walker.sample(parsed, choice)
    seeds: set[str] = set(FILLERS) | walker.chars | walker.prefixes
    fragments = list(walker.fragments)
    for fragment in fragments:
        # the literal repeated, spaced, and cut short of its last character (never completed)
        seeds.update({fragment, fragment + " ", " " + fragment, fragment[:-1]})
    for first, second in itertools.pairwise(fragments):
        seeds.add(f"{first} {second} ")  # neighbours: "NCCL WARN " * n and the like
    lines = {_fill(seed) for seed in seeds}
    for char in walker.chars | set(FILLERS[:5]):
        # a long run of one class member spoilt by its last character: `\d+x$` on "000…0a"
        lines.update(char * (LINE_CHARS - 1) + end for end in ("!", " ", "a", "0", ":"))
    for seed in walker.prefixes | set(fragments):
        lines.update(_fill(seed, filler) for filler in (" ", "a", "0", ":"))
    lines.discard("")
    return sorted(lines)


def _best_time(run: Any, line: str) -> float:
    start = time.thread_time()
    run(line)
    elapsed = time.thread_time() - start
    if elapsed <= REMEASURE_SECONDS:
        return elapsed
    for _ in range(2):
        start = time.thread_time()
        run(line)
        elapsed = min(elapsed, time.thread_time() - start)
    return elapsed


def slowest(pattern: re.Pattern[str], method: str = "search") -> tuple[float, str]:
    """The worst best-of-3 time of `pattern.<method>` over the adversarial lines, and that line."""
    run = getattr(pattern, method)
    worst, worst_line = 0.0, ""
    for line in adversarial_lines(pattern):
        elapsed = _best_time(run, line)
        if elapsed > worst:
            worst, worst_line = elapsed, line
    return worst, worst_line


def test_collects_patterns_from_every_source() -> None:
    patterns = collect_patterns()
    wheres = [where for where, _, _ in patterns.values()]
    assert any(w.startswith("catalog:") and ":extract[" in w for w in wheres)
    assert any(w.startswith("hyperpod_nccl.probe.parsers.") for w in wheres)  # module level
    assert any(w.startswith("hyperpod_nccl.probe.parsers:") for w in wheres)  # inline re.search
    assert not any(w.startswith(SKIPPED_PACKAGES) for w in wheres)


def test_generator_finds_a_known_quadratic_pattern() -> None:
    # The generator must be able to fail: `.*` twice retries from every position of a line full
    # of the first literal.
    quadratic = re.compile(r"warn.*peer.*closed")
    assert any(_best_time(quadratic.search, line) > LIMIT_SECONDS for line in adversarial_lines(quadratic))


# The patterns are timed in this many shards so that pytest-xdist spreads them over its workers
# (one test took ~20 s of one worker with ~480 patterns).
SHARDS = 8


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_pattern_is_fast_on_adversarial_lines(shard: int) -> None:
    slow = []
    for where, pattern, method in list(collect_patterns().values())[shard::SHARDS]:
        worst, line = slowest(pattern, method)
        if worst > LIMIT_SECONDS:
            slow.append(f"{where}: {worst * 1000:.1f} ms on {line[:60]!r}… /{pattern.pattern[:120]}/")
    assert not slow, "patterns over 10 ms on a 4 KB line:\n" + "\n".join(slow)
