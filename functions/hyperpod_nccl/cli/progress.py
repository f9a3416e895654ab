"""Progress on stderr while a diagnosis runs.

On a terminal that understands control sequences: one line, rewritten in place and cut to the
terminal's width. Anywhere else (a CI log, a file, `TERM=dumb`): a plain line per phase, stamped
with the seconds since the start, so a long run is never a long silence and no control sequence
reaches a log. A phase is the message up to its first digit ("SSM probes 3/16 done" and "SSM probes
4/16 done" are one phase); within a phase a line is printed at most every PHASE_REPEAT_SECONDS.
`verbose` prints every message as a line, and `detail` lines (each check's inputs and timing)."""

from __future__ import annotations

import os
import re
import shutil
import sys
import threading
import time
from typing import TextIO

from hyperpod_nccl.sanitize import one_line

# Within one phase, a repeated progress line at most this often when not on a terminal.
PHASE_REPEAT_SECONDS = 10.0
_PHASE = re.compile(r"^[^0-9]*")
# How a progress line starts when it is a line ("[   12.3s] SSM probes ..."): for readers of stderr
# that want the messages alone.
PROGRESS_LINE = re.compile(r"^\[ *\d+\.\ds\] ")


def rewrites_in_place(stream: TextIO) -> bool:
    """A terminal that can take `\\r` and erase-line: a TTY whose TERM is not `dumb`."""
    return stream.isatty() and os.environ.get("TERM") != "dumb"


class ProgressLine:
    """Callable with each progress message; `clear()` before the report is printed."""

    def __init__(self, stream: TextIO | None = None, *, verbose: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.in_place = rewrites_in_place(self.stream)
        self.verbose = verbose
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._phase: str | None = None
        self._last_line = 0.0
        self._shown = False

    def __call__(self, message: str) -> None:
        # Progress names nodes and pods (cluster data): escaped to one line, then our own codes.
        text = one_line(message)
        with self._lock:
            if self.in_place and not self.verbose:
                width = max(20, shutil.get_terminal_size(fallback=(100, 24)).columns - 3)
                self.stream.write(f"\r\033[K… {text[:width]}")
                self.stream.flush()
                self._shown = True
                return
            now = time.monotonic()
            phase = _PHASE.match(text).group(0)  # type: ignore[union-attr]  # matches any text
            if not self.verbose and phase == self._phase and now - self._last_line < PHASE_REPEAT_SECONDS:
                return
            self._phase, self._last_line = phase, now
            self._line(now, text)

    def detail(self, message: str) -> None:
        """A line shown with `verbose` only (each check's inputs and timing)."""
        if self.verbose:
            with self._lock:
                self._line(time.monotonic(), one_line(message))

    def _line(self, now: float, text: str) -> None:
        self.stream.write(f"[{now - self._started:7.1f}s] {text}\n")
        self.stream.flush()

    def clear(self) -> None:
        """Erase the in-place line before the report is printed (lines stay)."""
        if self.in_place and self._shown:
            with self._lock:
                self.stream.write("\r\033[K")
                self.stream.flush()
                self._shown = False
