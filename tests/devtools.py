"""A real headless Chromium driven through its DevTools protocol, for tests of live pages.

No driver and no websocket: Chromium's `--remote-debugging-pipe` reads protocol commands from
its fd 3 and writes answers and events to its fd 4, each a JSON object ended by a NUL byte.
One browser per test module, one tab; the tests navigate it, click and type with real input
events (`Input.dispatchMouseEvent`, `Input.insertText`), read the page with `Runtime.evaluate`,
and take screenshots. Console errors, exceptions and CSP violations are collected (`problems`).
Chromium is Debian's (`make system-deps`); `needs_chromium` (tests/browser.py) skips without it.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from browser import CHROMIUM, FLAGS

DEADLINE_S = 60.0  # every wait in a test: generous, the shared machine is busy


class DevToolsError(AssertionError):
    """The browser answered a command with an error, or not in time."""


def _high(fd: int) -> int:
    """`fd` moved to a number above 9, so placing the child's fds 3 and 4 can clobber neither."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Browser:
    """Headless Chromium with one attached tab."""

    def __init__(self, profile: Path, width: int = 1400, height: int = 1000):
        assert CHROMIUM is not None
        to_child, self._to_browser = map(_high, os.pipe())
        self._from_browser, from_child = map(_high, os.pipe())

        def place_fds() -> None:  # in the child, before exec: its fd 3 reads, its fd 4 writes
            os.dup2(to_child, 3)
            os.dup2(from_child, 4)

        self.log = profile.with_suffix(".log")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [CHROMIUM, *FLAGS, "--no-proxy-server", "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=place_fds,  # only dup2 in the child: safe even with threads in the parent
                close_fds=False,  # our own fds are close-on-exec; only the placed 3 and 4 pass
            )
        os.close(to_child)
        os.close(from_child)
        self._next = 0
        self._answers: dict[int, dict[str, Any]] = {}
        self._events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True, name="devtools-reader")
        self._reader.start()
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=self.session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=self.session,
        )

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                data = os.read(self._from_browser, 1 << 16)
            except OSError:
                data = b""
            if not data:
                with self._cond:
                    self._cond.notify_all()
                return
            buffer += data
            *messages, buffer = buffer.split(b"\0")
            with self._cond:
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        self._answers[message["id"]] = message
                    else:
                        self._events.append(message)
                self._cond.notify_all()

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None, timeout: float = DEADLINE_S) -> Any:
        """One protocol command; its result (an error answer raises)."""
        with self._cond:
            self._next += 1
            ident = self._next
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while ident not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0 or not self._reader.is_alive():
                    raise DevToolsError(f"{method}: no answer from Chromium (see {self.log})")
                self._cond.wait(left)
            answer = self._answers.pop(ident)
        if "error" in answer:
            raise DevToolsError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the tab (promises awaited)."""
        result = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}, session=self.session
        )
        if "exceptionDetails" in result:
            raise DevToolsError(f"{expression}: {result['exceptionDetails'].get('exception', result['exceptionDetails'])}")
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str, timeout: float = DEADLINE_S) -> Any:
        """Evaluate `expression` until it is truthy (the page's own updates, no reload); its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout:.0f} s for {what}; the page says: {self.text()[:1500]}")
            time.sleep(0.1)

    def goto(self, url: str) -> None:
        """Open `url` in the tab and wait until it has loaded."""
        self.evaluate("window.__left = true")  # the page being left says so until it is gone
        self.send("Page.navigate", {"url": url}, session=self.session)
        self.wait_for("!window.__left && document.readyState === 'complete'", f"{url} to load")

    def text(self, selector: str = "body") -> str:
        """What a person reads in an element (its innerText)."""
        return str(self.evaluate(f"(document.querySelector({json.dumps(selector)}) || {{innerText: ''}}).innerText"))

    def _centre(self, selector: str) -> tuple[float, float]:
        box = self.evaluate(
            f"(function () {{ var e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); var r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        if not box:
            raise AssertionError(f"no {selector} on the page: {self.text()[:1500]}")
        return float(box[0]), float(box[1])

    def click(self, selector: str) -> None:
        """A real mouse click in the middle of the element."""
        x, y = self._centre(selector)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}, session=self.session)

    def type_into(self, selector: str, text: str) -> None:
        """Click a text field and type `text` into it."""
        self.click(selector)
        self.send("Input.insertText", {"text": text}, session=self.session)

    def screenshot(self, path: Path, whole: bool = True) -> Path:
        """The whole page (else its first screen) as a PNG."""
        metrics = self.send("Page.getLayoutMetrics", session=self.session)
        size = metrics["cssContentSize"] if whole else metrics["cssLayoutViewport"]
        height = size["height"] if whole else size["clientHeight"]
        width = size["width"] if whole else size["clientWidth"]
        clip = {"x": 0, "y": 0, "width": width, "height": min(height, 6000), "scale": 1}
        shot = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}, session=self.session)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and security messages (CSP) since the last call."""
        with self._cond:
            events, self._events = self._events, []
        out = []
        for e in events:
            method, params = e.get("method"), e.get("params") or {}
            if method == "Runtime.exceptionThrown":
                out.append(f"exception: {params.get('exceptionDetails', {}).get('text')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and (params.get("entry", {}).get("level") in ("error", "warning")):
                out.append(f"log: {params['entry'].get('source')}: {params['entry'].get('text')}")
        return out

    def close(self) -> None:
        """Close the browser (by its pid when it does not close)."""
        try:
            self.send("Browser.close", timeout=10)
        except DevToolsError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, 9)
            self.proc.wait(timeout=30)
        os.close(self._to_browser)
        os.close(self._from_browser)
