"""Headless Chromium (Debian's ``chromium`` package, :mod:`tests.harness.debian`) opening a local
page through the Chrome DevTools protocol, as a person's browser would.

:func:`open_page` reports what a test of a page needs: every uncaught exception and console error,
every request the page made beyond its own file (a self-contained page makes none), the value of a
probe expression once it is truthy (e.g. "every plot is drawn") and how long that took, and a
screenshot of the whole page. The browser gets a fresh profile and no background traffic of its own.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from tests.harness.debian import ensure_binaries
from tests.harness.process import ServerProcess

FLAGS = (
    "--headless",
    "--no-sandbox",  # tests run as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
)
OWN_SCHEMES = ("file:", "data:", "blob:", "about:")
"""Requests with these schemes stay inside the page; any other is a fetch from elsewhere."""


class BrowserError(RuntimeError):
    """Chromium did not start, or the page did not get to the probe in time."""


@dataclass
class PageRun:
    """What opening a page did."""

    errors: list[str] = field(default_factory=list)
    """Uncaught exceptions, console.error calls and error log entries, as text."""
    external_requests: list[str] = field(default_factory=list)
    """URLs the page requested outside :data:`OWN_SCHEMES`."""
    probe: Any = None
    """The probe expression's value, once truthy."""
    seconds: float = 0.0
    """From navigation until the probe was truthy."""


class _DevTools:
    """One page's DevTools websocket: commands by id, events gathered into a :class:`PageRun`."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self._socket = socket
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._loaded = asyncio.Event()
        self.run = PageRun()
        self._reader = asyncio.create_task(self._read())

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        await self._socket.send_str(json.dumps({"id": ident, "method": method, "params": params}))
        reply = await future
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def loaded(self) -> None:
        await self._loaded.wait()

    async def close(self) -> None:
        self._reader.cancel()
        await self._socket.close()

    async def _read(self) -> None:
        async for message in self._socket:
            data = json.loads(message.data)
            if "id" in data:
                self._pending.pop(data["id"]).set_result(data)
            else:
                self._event(data["method"], data.get("params", {}))

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Page.loadEventFired":
            self._loaded.set()
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.run.errors.append(details.get("exception", {}).get("description") or details.get("text", ""))
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            self.run.errors.append(" ".join(str(arg.get("value", arg.get("description"))) for arg in params["args"]))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.run.errors.append(params["entry"]["text"])
        elif method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if not url.startswith(OWN_SCHEMES):
                self.run.external_requests.append(url)


async def _page_socket(session: aiohttp.ClientSession, profile: Path, browser: ServerProcess, deadline: float) -> str:
    """The websocket URL of the browser's first tab, once it is listening."""
    port_file = profile / "DevToolsActivePort"
    while not port_file.exists() or not port_file.read_text().strip():
        if not browser.running or time.monotonic() > deadline:
            raise BrowserError(f"chromium did not open its DevTools port:\n{browser.log_tail()}")
        await asyncio.sleep(0.05)
    port = port_file.read_text().split()[0]
    async with session.get(f"http://127.0.0.1:{port}/json/list") as response:
        targets = await response.json()
    return next(target["webSocketDebuggerUrl"] for target in targets if target["type"] == "page")


async def open_page(
    page: Path, probe: str, screenshot: Path, *, width: int = 1280, height: int = 900, timeout: float = 120.0
) -> PageRun:
    """Open ``page`` (a local file), wait for the JavaScript expression ``probe`` to be truthy, and
    write a PNG of the whole page to ``screenshot``."""
    (binary,) = ensure_binaries("chromium", ("chromium",))
    deadline = time.monotonic() + timeout
    profile = Path(tempfile.mkdtemp(prefix="presage-chromium-"))
    argv = [binary, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"]
    browser = ServerProcess("chromium", argv, profile / "chromium.log", error=BrowserError)
    try:
        async with aiohttp.ClientSession() as session:
            url = await _page_socket(session, profile, browser, deadline)
            async with session.ws_connect(url, max_msg_size=0) as socket:
                tools = _DevTools(socket)
                try:
                    return await asyncio.wait_for(_visit(tools, page, probe, screenshot), deadline - time.monotonic())
                finally:
                    await tools.close()
    except TimeoutError:
        raise BrowserError(f"{page}: {probe!r} was not true within {timeout:g}s") from None
    finally:
        browser.stop()
        shutil.rmtree(profile, ignore_errors=True)


async def _visit(tools: _DevTools, page: Path, probe: str, screenshot: Path) -> PageRun:
    for domain in ("Page", "Runtime", "Log", "Network"):
        await tools.send(f"{domain}.enable")
    began = time.monotonic()
    await tools.send("Page.navigate", url=page.resolve().as_uri())
    await tools.loaded()
    while True:
        result = await tools.send("Runtime.evaluate", expression=probe, returnByValue=True)
        value = result["result"].get("value")
        if value:
            break
        await asyncio.sleep(0.05)
    tools.run.probe, tools.run.seconds = value, time.monotonic() - began
    size = (await tools.send("Page.getLayoutMetrics"))["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = await tools.send("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    return tools.run
