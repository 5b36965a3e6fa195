"""A header-checking proxy in front of a real Prometheus, as a multi-tenant Mimir or Cortex gateway is: a
request reaches Prometheus only when its ``X-Scope-OrgID`` names the expected tenant; without one it is
refused 401 ``no org id`` (Mimir's words), with another tenant 401 too.

It runs on a loopback socket in a thread of its own, with its own event loop, so that both an async test
(the controller's evaluation) and a synchronous one (``presage backtest``, which runs its own loop) can
send to it.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from types import TracebackType
from typing import Self

import aiohttp
from aiohttp import web

TENANT_HEADER = "X-Scope-OrgID"
# Hop-by-hop headers and those aiohttp sets itself are not forwarded.
_NOT_FORWARDED = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "accept-encoding"}


class TenantProxy:
    """Forwards to ``upstream`` (a Prometheus base URL) the requests whose tenant header is ``tenant``.

    ``seen`` lists the tenant header of every request received (None when absent), in order."""

    def __init__(self, upstream: str, tenant: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.tenant = tenant
        self.seen: list[str | None] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tenant-proxy", daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"

    def start(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
        self._socket.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.SockSite(self._runner, self._socket).start()

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        tenant = request.headers.get(TENANT_HEADER)
        self.seen.append(tenant)
        if tenant is None:
            return web.Response(status=401, text="no org id\n")
        if tenant != self.tenant:
            return web.Response(status=401, text=f"tenant {tenant!r} is not served here\n")
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED}
        async with self._session.request(
            request.method, f"{self.upstream}{request.path_qs}", data=await request.read(), headers=headers
        ) as answer:
            body = await answer.read()
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in _NOT_FORWARDED}
            return web.Response(status=answer.status, body=body, headers=kept)
