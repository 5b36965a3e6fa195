"""Client CPU per request: aiohttp (presage's one HTTP client stack) against httpx, on one server.

The scaler's HTTP clients (Kubernetes API, Prometheus, presage-forecaster) all speak aiohttp; this
is the measurement that keeps the choice honest. Both clients send the same TimesFM-shaped request
(one POST of a JSON body, a JSON answer) to the same aiohttp server, which runs in its own process
so the CPU counted here is the client's alone (``time.process_time``). The ratio is what matters;
machines are noisy.

Usage: .venv/bin/python benchmarks/bench_http_clients.py [--requests 3000] [--concurrency 8]; writes
``benchmarks/results/bench_http_clients.md`` (``--check`` verifies it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import httpx
import results
from aiohttp import web

HISTORY = [float(k % 288) for k in range(512)]
REQUEST = {"horizon": 12, "quantiles": [0.5, 0.9], "useQuantileHead": True, "series": [{"id": "0", "values": HISTORY}]}
ANSWER = json.dumps(
    {
        "model": "m",
        "revision": "r",
        "horizon": 12,
        "quantiles": [{"level": 0.5, "key": "0.5", "source": "model"}, {"level": 0.9, "key": "0.9", "source": "model"}],
        "series": [{"id": "0", "point": [1.0] * 12, "quantiles": {"0.5": [1.0] * 12, "0.9": [2.0] * 12}}],
    }
).encode()


def _serve(sock: socket.socket) -> None:
    async def forecast(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=ANSWER, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/forecast", forecast)
    web.run_app(app, sock=sock, print=None, handle_signals=True)


async def _drive(send: Callable[[], Awaitable[None]], requests: int, concurrency: int) -> float:
    """CPU seconds per request of ``requests`` sends, ``concurrency`` at a time (after a warm-up)."""
    for _ in range(50):
        await send()
    left = requests

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await send()

    start = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (time.process_time() - start) / requests


async def measure(url: str, requests: int, concurrency: int) -> dict[str, float]:
    out = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def aiohttp_send() -> None:
            async with session.post(url, json=REQUEST) as response:
                json.loads(await response.read())

        out["aiohttp"] = await _drive(aiohttp_send, requests, concurrency)
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(limits=limits) as client:

        async def httpx_send() -> None:
            (await client.post(url, json=REQUEST)).json()

        out["httpx"] = await _drive(httpx_send, requests, concurrency)
    return out


CLIENTS = results.Table(("client", "CPU ms per request"))
LAYOUT = results.Layout(script=Path(__file__), machine=(), sections=(results.Section("Clients", (CLIENTS,)),))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=8)
    results.add_check_argument(parser)
    args = parser.parse_args()
    if args.check:
        return results.check(LAYOUT)
    sock = socket.create_server(("127.0.0.1", 0))
    server = mp.get_context("spawn").Process(target=_serve, args=(sock,), daemon=True)
    server.start()
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1/forecast"
        cpu = asyncio.run(measure(url, args.requests, args.concurrency))
    finally:
        server.terminate()
        server.join()
    results.write(
        LAYOUT,
        datetime.now(UTC),
        sys.argv[1:],
        (),
        {
            "Clients": [
                f"{args.requests} POSTs of a {len(json.dumps(REQUEST))}-byte JSON body, {args.concurrency} at a time",
                "",
                *CLIENTS.render((name, f"{seconds * 1000:.3f}") for name, seconds in cpu.items()),
                "",
                f"httpx / aiohttp: {cpu['httpx'] / cpu['aiohttp']:.1f}x",
            ]
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
