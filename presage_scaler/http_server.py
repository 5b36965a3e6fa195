"""The scaler's HTTP server: probes, ``/metrics`` and the Agones FleetAutoscaler webhook.

A Starlette app served by uvicorn as a task of the running event loop, beside the controller and
the gRPC server. Optional TLS (a certificate and key, as mounted from a Secret) is what a
FleetAutoscaler's ``caBundle`` verifies; uvicorn reads them once, at start.

* ``GET /healthz``: 200 whenever the event loop answers (liveness).
* ``GET /readyz``: 200 once the ``ready`` callable says so, else 503 with its reason.
* ``GET /metrics``: Prometheus exposition of :class:`ScalerMetrics`' registry.
* ``POST /agones/v1/scale``: :mod:`presage_scaler.agones`, answered from the store alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from presage_scaler import agones
from presage_scaler.metrics import ScalerMetrics
from presage_scaler.store import RecommendationStore

log = logging.getLogger(__name__)

DEFAULT_PORT = 8080
Readiness = Callable[[], bool | str]
"""True when ready; False, or a string saying why, when not."""


@dataclass(frozen=True)
class TLSFiles:
    """PEM certificate chain and private key files (a mounted ``kubernetes.io/tls`` Secret)."""

    cert: Path
    key: Path


def build_app(
    store: RecommendationStore,
    metrics: ScalerMetrics,
    *,
    ready: Readiness = lambda: True,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Starlette:
    """The ASGI app; :func:`serve_http` runs it, tests may drive it in memory."""

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def readyz(_: Request) -> Response:
        state = ready()
        if state is True:
            return PlainTextResponse("ok\n")
        reason = state if isinstance(state, str) and state else "not ready"
        return PlainTextResponse(f"{reason}\n", status_code=503)

    async def metrics_endpoint(_: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def scale(request: Request) -> Response:
        started = time.perf_counter()
        body = await request.body()
        try:
            review = agones.answer(store, body, now())
            status, content = 200, review
            response = review["response"]
            log.debug("agones webhook answered uid=%s replicas=%d", response["uid"], response["replicas"])
        except agones.WebhookError as err:
            status, content = err.status, err.body()
            log.info("agones webhook refused status=%d reason=%s message=%r", err.status, err.reason, err.message)
        metrics.observe_webhook_request(status, time.perf_counter() - started)
        return JSONResponse(content, status_code=status)

    return Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route(agones.PATH, scale, methods=["POST"]),
        ]
    )


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the process's owner (the scaler's main) handles signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class HttpServer:
    """A started server: the bound ``port`` and :meth:`stop`."""

    port: int
    tls: bool
    _server: _Server
    _task: asyncio.Task[None]

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish for up to ``grace`` seconds, then close."""
        self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout=grace + 1.0)
        except TimeoutError:
            self._server.force_exit = True
            await self._task


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # "::" serves IPv4 too
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


async def serve_http(
    store: RecommendationStore,
    metrics: ScalerMetrics,
    *,
    port: int = DEFAULT_PORT,
    host: str = "0.0.0.0",
    tls: TLSFiles | None = None,
    ready: Readiness = lambda: True,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    grace: float = 5.0,
) -> HttpServer:
    """Bind ``host:port`` (``port=0`` picks a free one; a taken port raises OSError at once), start
    serving on the running loop and return once the server accepts connections."""
    sock = _bind(host, port)
    config = uvicorn.Config(
        build_app(store, metrics, ready=ready, now=now),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=grace,
        ssl_certfile=str(tls.cert) if tls else None,
        ssl_keyfile=str(tls.key) if tls else None,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name="presage-http")
    while not server.started:
        if task.done():
            sock.close()
            task.result()  # raises what stopped it (a bad certificate, ...)
            raise RuntimeError("the HTTP server exited during startup")
        await asyncio.sleep(0.01)
    bound = sock.getsockname()[1]
    log.info("http server listening host=%s port=%d tls=%s", host, bound, tls is not None)
    return HttpServer(port=bound, tls=tls is not None, _server=server, _task=task)
