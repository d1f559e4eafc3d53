"""Headless Chromium driven over its DevTools protocol: pages measured, hovered,
clicked and photographed as a person's browser shows them.

``--screenshot`` and ``--dump-dom`` see a page once, at one size, without a
mouse; the report's layout at two widths, the timeline's hover text and the
web UI's start button need a browser that stays open. The protocol's websocket
is read with aiohttp (a dependency already), one private event loop per
browser. Every request outside 127.0.0.1 fails to resolve, so a page that
reaches for the network shows it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = shutil.which("chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
)


class BrowserError(RuntimeError):
    """The page threw, or Chromium answered a command with an error."""


class Browser:
    """One headless Chromium with one page, ``width`` x ``height`` CSS pixels."""

    def __init__(self, profile: Path, width: int = 1280, height: int = 900) -> None:
        self.profile = profile
        self.size = (width, height)
        self.loop = asyncio.new_event_loop()
        self.process: subprocess.Popen[bytes] | None = None
        self.http: aiohttp.ClientSession | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []

    def __enter__(self) -> Browser:
        assert CHROMIUM is not None, "no chromium on PATH (tools/install-chromium.sh)"
        self.profile.mkdir(parents=True, exist_ok=True)
        (self.profile / "DevToolsActivePort").unlink(missing_ok=True)  # a past browser's
        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             f"--window-size={self.size[0]},{self.size[1]}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            self.loop.run_until_complete(self._connect(self._page_socket()))
            for domain in ("Page", "Runtime"):
                self.send(f"{domain}.enable")
            self.resize(*self.size)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        if self.http is not None:
            self.loop.run_until_complete(self.http.close())
        self.loop.close()
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def _page_socket(self) -> str:
        """The page's debugging websocket, once Chromium has written its port."""
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            assert self.process is not None and self.process.poll() is None, "chromium exited"
            if time.monotonic() > deadline:
                raise TimeoutError("chromium wrote no DevToolsActivePort in 60 s")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as reply:
            targets = json.load(reply)
        return next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")

    async def _connect(self, url: str) -> None:
        self.http = aiohttp.ClientSession()
        self.ws = await self.http.ws_connect(url, max_msg_size=0)

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.ws is not None
        self.next_id += 1
        await self.ws.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            message = await self._receive()
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})

    async def _receive(self) -> dict[str, Any]:
        assert self.ws is not None
        message = await self.ws.receive_json(timeout=120)
        if "method" in message:
            self.events.append(message)
            self._note_error(message)
        return message

    def _note_error(self, event: dict[str, Any]) -> None:
        params = event.get("params", {})
        if event["method"] == "Runtime.exceptionThrown":
            self.errors.append(params["exceptionDetails"].get("text", "exception"))
        elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(" ".join(str(a.get("value")) for a in params.get("args", [])))

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        return self.loop.run_until_complete(self._call(method, params))

    def wait_event(self, method: str, timeout_s: float = 60) -> dict[str, Any]:
        """The first ``method`` event not yet taken, waiting for it if need be."""

        async def wait() -> dict[str, Any]:
            while True:
                for index, event in enumerate(self.events):
                    if event["method"] == method:
                        return self.events.pop(index)
                await self._receive()

        return self.loop.run_until_complete(asyncio.wait_for(wait(), timeout_s))

    def open(self, url: str) -> None:
        """Load ``url`` and wait for its load event."""
        self.events.clear()
        answer = self.send("Page.navigate", url=url)
        if answer.get("errorText"):
            raise BrowserError(f"{url}: {answer['errorText']}")
        self.wait_event("Page.loadEventFired")

    def resize(self, width: int, height: int) -> None:
        self.size = (width, height)
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)  # fmt: skip

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (a promise is awaited)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)  # fmt: skip
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 60) -> Any:
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout_s
        while not (value := self.evaluate(expression)):
            if time.monotonic() > deadline:
                page = self.evaluate(
                    "location.href + ' shows: ' + (document.body ? document.body.innerText : '')"
                )
                raise TimeoutError(
                    f"still false after {timeout_s} s: {expression}\nat {str(page)[:1500]}"
                )
            time.sleep(0.1)
        return value

    def mouse(self, kind: str, x: float, y: float) -> None:
        """A mouse event at page coordinates of the viewport: ``mouseMoved``, or a
        ``click`` (pressed and released)."""
        if kind == "click":
            for event in ("mousePressed", "mouseReleased"):
                self.send("Input.dispatchMouseEvent", type=event, x=x, y=y, button="left",
                          clickCount=1)  # fmt: skip
        else:
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y)

    def screenshot(
        self, path: Path, full_page: bool = False, clip: dict[str, float] | None = None
    ) -> Path:
        """A PNG of the viewport, of the whole page's height, or of ``clip``
        (x, y, width, height and scale, in CSS pixels)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            height = self.evaluate("document.documentElement.scrollHeight")
            clip = {"x": 0, "y": 0, "width": self.size[0], "height": height, "scale": 1}
        if clip is not None:
            params.update(captureBeyondViewport=True, clip=clip)
        shot = self.send("Page.captureScreenshot", **params)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
