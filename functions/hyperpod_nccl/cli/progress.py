"""A one-line progress indicator on stderr, shown only on a terminal."""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from hyperpod_nccl.sanitize import one_line


class ProgressLine:
    """Rewrites one stderr line with the current step; silent when stderr is not a TTY."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self._lock = threading.Lock()

    def __call__(self, message: str) -> None:
        if not self.enabled:
            return
        with self._lock:
            # Progress names nodes and pods (cluster data): escaped, cut to one terminal row, then
            # our own codes.
            self.stream.write(f"\r\033[K… {one_line(message)[:100]}")
            self.stream.flush()

    def clear(self) -> None:
        """Erase the line before the report is printed."""
        if self.enabled:
            with self._lock:
                self.stream.write("\r\033[K")
                self.stream.flush()
