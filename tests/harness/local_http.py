"""A real HTTP server on a loopback socket, answering with a test's handler (aiohttp.web).

For tests of presage's HTTP clients: the client under test opens real connections, sends real
requests and reads real responses, so its transport errors, timeouts and body handling are the ones
it meets in production; only the answers are the test's.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Seen:
    """One request as the server received it."""

    method: str
    path: str
    body: bytes


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """Serve every path with ``handler``; yield the base URL (``http://127.0.0.1:PORT``)."""

    async def handle(request: web.Request) -> web.StreamResponse:  # aiohttp wants a coroutine function
        return await handler(request)

    app = web.Application()
    app.router.add_route("*", "/{path:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = socket.create_server(("127.0.0.1", 0))
    try:
        await web.SockSite(runner, sock).start()
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        await runner.cleanup()
        sock.close()


async def seen(request: web.Request) -> Seen:
    """What ``request`` carried."""
    return Seen(request.method, request.path, await request.read())
