"""Bounded decoding of structured data the cluster sends (JSON answers, Flight Recorder dumps).

Whatever a node, a job or an annotation hands us may be built to hurt the reader: a few KB of
``[[[[…`` make Python's ``json`` raise ``RecursionError`` (not ``ValueError``), and data nested
deeper than the interpreter's recursion limit later breaks everything that walks it recursively
(pydantic, ``repr``, ``json.dumps``), far from where it entered. So structured input is decoded
here, with its size capped before parsing and its nesting depth and element count checked by an
iterative walk before anyone else sees it; every violation is one `UnreadableData` (a
``ValueError``) saying why, never another exception.
"""

from __future__ import annotations

import json
from typing import Any

from hyperpod_nccl import thresholds

# What plain data is made of (JSON yields no bytes; a plain-data pickle may).
PLAIN_TYPES: tuple[type, ...] = (dict, list, tuple, str, bytes, int, float, bool, type(None))


class UnreadableData(ValueError):
    """The data is malformed or exceeds a bound (size, nesting depth, element count, type)."""


def check_plain(
    value: object,
    *,
    max_depth: int,
    max_items: int | None = None,
    types: tuple[type, ...] = PLAIN_TYPES,
) -> None:
    """Walk `value` without recursion: only `types`, containers at most `max_depth` deep, and at
    most `max_items` elements visited (a container shared by reference counts each time it is
    reached, as any later walk pays for it again). Raises `UnreadableData`."""
    stack: list[tuple[object, int]] = [(value, 1)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if max_items is not None and seen > max_items:
            raise UnreadableData(f"more than {max_items} elements")
        if isinstance(item, dict | list | tuple):
            if depth > max_depth:
                raise UnreadableData(f"nested deeper than {max_depth} levels")
            if isinstance(item, dict):
                for key, val in item.items():
                    stack.append((key, depth + 1))
                    stack.append((val, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
        elif not isinstance(item, types):
            raise UnreadableData(f"unexpected type {type(item).__name__}")


def loads_json(
    text: str | bytes,
    *,
    max_bytes: int | None,
    max_depth: int = thresholds.UNTRUSTED_JSON_MAX_DEPTH,
) -> Any:
    """``json.loads`` for text from the cluster: at most `max_bytes` (None: the caller bounded it
    already), at most `max_depth` levels of nesting. Raises `UnreadableData` for anything else."""
    if max_bytes is not None and len(text) > max_bytes:
        raise UnreadableData(f"{len(text)} bytes exceeds the {max_bytes}-byte cap")
    try:
        document = json.loads(text)
    except RecursionError:
        # The C decoder gives up at the interpreter's recursion limit: far past any real answer.
        raise UnreadableData(f"nested deeper than {max_depth} levels") from None
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise UnreadableData(f"invalid JSON: {error}") from None
    check_plain(document, max_depth=max_depth)
    return document
