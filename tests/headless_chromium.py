"""Debian's Chromium, headless, driven over the DevTools protocol: what the HTML report tests read
the rendered page with (layout and computed styles, not the markup we wrote).

`make test` installs the package (`make browser`); a test that needs it fails with that hint when
it is missing rather than passing silently. The browser is started with networking features off
(this machine has no route out, and the report must need none) and a fresh profile per start.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

CHROMIUM_ENV = "HYPERPOD_NCCL_CHROMIUM"
_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
_FLAGS = (
    "--headless",
    "--no-sandbox",  # root in CI containers: Chromium's sandbox refuses to start as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-port=0",
)
_START_SECONDS = 30.0


def chromium_path() -> str:
    """The browser to start: $HYPERPOD_NCCL_CHROMIUM, else Debian's package."""
    found = os.environ.get(CHROMIUM_ENV) or next((p for p in _CANDIDATES if Path(p).exists()), None)
    if not found:
        raise RuntimeError("Chromium is not installed: `make browser` installs Debian's package (make test does)")
    return found


class HeadlessChromium:
    """One headless browser and its first page: `load` a file, `evaluate` JavaScript in it,
    `screenshot` a region of it."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        self._profile = tempfile.mkdtemp(prefix="hpn-chromium-")
        self._process = subprocess.Popen(
            [chromium_path(), *_FLAGS, f"--user-data-dir={self._profile}", f"--window-size={width},{height}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._ids = itertools.count(1)
        self._ws: ClientConnection | None = None
        try:
            self._ws = connect(self._page_socket(), max_size=None, open_timeout=10)
        except BaseException:
            self.close()
            raise

    def _page_socket(self) -> str:
        port_file = Path(self._profile, "DevToolsActivePort")
        deadline = time.monotonic() + _START_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"Chromium exited at start (code {self._process.returncode})")
            if port_file.exists() and (lines := port_file.read_text().splitlines()):
                with urllib.request.urlopen(f"http://127.0.0.1:{lines[0]}/json/list", timeout=5) as answer:
                    pages = [t for t in json.load(answer) if t.get("type") == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            time.sleep(0.1)
        raise RuntimeError("Chromium did not open its DevTools port in time")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command; its result (events in between are ignored)."""
        assert self._ws is not None
        ident = next(self._ids)
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv(timeout=60))
            if message.get("id") != ident:
                continue
            if "error" in message:
                raise RuntimeError(f"{method}: {message['error']}")
            return dict(message.get("result", {}))

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page (exceptions raise)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def load(self, path: Path) -> None:
        """Open a local file and wait until it is laid out."""
        self.call("Page.navigate", url=path.resolve().as_uri())
        deadline = time.monotonic() + _START_SECONDS
        while self.evaluate("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise RuntimeError(f"{path} did not finish loading")
            time.sleep(0.05)

    def screenshot(self, path: Path, selector: str, *, max_height: int = 1600) -> None:
        """A PNG of the element `selector` matches (its first `max_height` pixels), at 1x."""
        box = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
            " return {x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height}; })()"
        )
        clip = {**box, "height": min(box["height"], max_height), "scale": 1}
        shot = self.call("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        """Stop the browser and remove its profile."""
        if self._ws is not None:
            with contextlib.suppress(Exception):
                self._ws.close()
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> HeadlessChromium:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
