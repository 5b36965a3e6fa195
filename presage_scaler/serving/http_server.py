"""The scaler's HTTP servers: the Agones FleetAutoscaler webhook, and probes and ``/metrics``.

Starlette apps served by uvicorn as tasks of the running event loop, beside the controller and the
gRPC server, on two listeners:

* the **webhook port** (:func:`serve_http`, 8080): ``POST /agones/v1/scale``
  (:mod:`presage_scaler.serving.agones`, answered from the store alone), and the health routes below.
  Optional TLS (a certificate and key, as mounted from a Secret) is what a FleetAutoscaler's
  ``caBundle`` verifies; uvicorn reads them once, at start.
* the **health port** (:func:`serve_health`, 8081): ``GET /healthz`` (200 whenever the event loop
  answers), ``GET /readyz`` (200 once the ``ready`` callable says so, else 503 with its reason) and
  ``GET /metrics`` (Prometheus exposition of :class:`ScalerMetrics`' registry), plain HTTP. The
  kubelet's probes and Prometheus call it; Agones cannot reach it (the chart's NetworkPolicy), so no
  webhook client can hold what the probes need.

No client can make a listener hold memory or connections without bound, nor starve another client
(:class:`HttpLimits`; :mod:`~presage_scaler.serving.http_connections` says which connections go
when a bound is reached):

* A webhook body is read up to ``max_body_bytes`` (1 MiB) and no further: a larger Content-Length
  is refused at once, before a byte of the body is read, and a chunked body is counted as it
  streams in and refused where it crosses the limit (413 ``RequestTooLarge``). A body that has not
  fully arrived within ``body_timeout`` (10 s) is refused (408 ``RequestTimeout``). Both answers
  carry ``Connection: close``; the rest of the body is then read and discarded, up to
  ``drain_bytes`` (16 MiB) within ``drain_timeout`` (5 s), so a client that sends its whole body
  before reading gets the status rather than a reset.
* A connection must deliver a complete request head within ``head_timeout`` (10 s) of opening (with
  TLS: of its handshake, which asyncio bounds at 60 s) or of its previous response, or it is closed
  unanswered. A head of more than ``max_head_bytes`` (16 KiB), whether it arrives in pieces or in
  one write, is refused with 431; an invalid Content-Length is a plain-text 400 from h11.
* A client that leaves a response unread for ``response_timeout`` (10 s) with the send buffer full
  is disconnected.
* Connections are bounded per peer address (``max_connections_per_peer``, 128) and in total
  (``max_connections``, 1024), and bodies read at once by ``max_bodies`` (64, so at most 64 MiB of
  bodies is buffered). At a bound the connections the server is *waiting on* (for a head, a body, a
  response to be read) of the peer holding the most are closed, oldest first; a newcomer from another
  address is always served.
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
from functools import partial
from pathlib import Path

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.serving import agones
from presage_scaler.serving.http_connections import BoundedH11Protocol, HttpLimits, ListenerConnections
from presage_scaler.serving.store import RecommendationStore

log = logging.getLogger(__name__)

DEFAULT_PORT = 8080
DEFAULT_HEALTH_PORT = 8081
DEFAULT_LIMITS = HttpLimits()
ACCEPTS_PER_TURN = 32
"""Connections accepted per turn of the event loop. asyncio accepts as many per turn as the listen
backlog it was given, and sets each one up before anything else on the loop runs: a burst of a
thousand would hold KEDA's gRPC answers and the evaluations for the whole burst's CPU."""
LISTEN_BACKLOG = 1024
"""Connections the kernel queues for accepting, set after asyncio has started (it sets the queue to
the per-turn count): a burst waits there rather than being refused."""
Readiness = Callable[[], bool | str]
"""True when ready; False, or a string saying why, when not."""


@dataclass(frozen=True)
class TLSFiles:
    """PEM certificate chain and private key files (a mounted ``kubernetes.io/tls`` Secret)."""

    cert: Path
    key: Path


async def _read_body(request: Request, limits: HttpLimits) -> bytes:
    """The request body, or a :class:`~presage_scaler.serving.agones.WebhookError` as soon as it is known to
    be too large (from its Content-Length, else from the bytes counted so far), malformed or slow."""
    limit = limits.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None:
        if not (declared.isascii() and declared.isdigit()):
            raise agones.WebhookError(400, "MalformedRequest", "Content-Length must be a non-negative integer")
        digits = declared.lstrip("0") or "0"
        # The length test first: int() refuses strings of more than 4300 digits.
        if len(digits) > len(str(limit)) or int(digits) > limit:
            raise _too_large(limit)
    body = bytearray()
    try:
        async with asyncio.timeout(limits.body_timeout), contextlib.aclosing(request.stream()) as chunks:
            async for chunk in chunks:
                body += chunk
                if len(body) > limit:
                    raise _too_large(limit)
    except TimeoutError:
        raise agones.WebhookError(
            408, "RequestTimeout", f"the request body did not arrive within {limits.body_timeout:g}s"
        ) from None
    except ClientDisconnect:
        raise agones.WebhookError(
            400, "MalformedRequest", "the client closed the connection before the body ended"
        ) from None
    return bytes(body)


def _too_large(limit: int) -> agones.WebhookError:
    return agones.WebhookError(413, "RequestTooLarge", f"request body exceeds {limit} bytes")


def _health_routes(metrics: ScalerMetrics, ready: Readiness) -> list[Route]:
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

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
    ]


def build_health_app(metrics: ScalerMetrics, *, ready: Readiness = lambda: True) -> Starlette:
    """The health port's ASGI app: ``/healthz``, ``/readyz`` and ``/metrics``."""
    return Starlette(routes=_health_routes(metrics, ready))


def build_app(
    store: RecommendationStore,
    metrics: ScalerMetrics,
    *,
    ready: Readiness = lambda: True,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    limits: HttpLimits = DEFAULT_LIMITS,
) -> Starlette:
    """The webhook port's ASGI app (the webhook and the health routes); :func:`serve_http` runs it,
    tests may drive it in memory."""

    async def scale(request: Request) -> Response:
        started = time.perf_counter()
        headers: dict[str, str] = {}
        try:
            try:
                body = await _read_body(request, limits)
            except agones.WebhookError:
                # The body is not read to its end: the connection cannot carry another request.
                headers["connection"] = "close"
                raise
            review = agones.answer(store, body, now())
            status, content = 200, review
            response = review["response"]
            log.debug("agones webhook answered uid=%s replicas=%d", response["uid"], response["replicas"])
        except agones.WebhookError as err:
            status, content = err.status, err.body()
            log.info("agones webhook refused status=%d reason=%s message=%r", err.status, err.reason, err.message)
        metrics.observe_webhook_request(status, time.perf_counter() - started)
        return JSONResponse(content, status_code=status, headers=headers)

    return Starlette(routes=[*_health_routes(metrics, ready), Route(agones.PATH, scale, methods=["POST"])])


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
            async with asyncio.timeout(grace + 1.0):
                await asyncio.shield(self._task)
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
        sock.listen(LISTEN_BACKLOG)
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
    grace: int = 5,
    limits: HttpLimits = DEFAULT_LIMITS,
) -> HttpServer:
    """Serve the webhook port: bind ``host:port`` (``port=0`` picks a free one; a taken port raises
    OSError at once), start serving on the running loop and return once the server accepts
    connections. ``limits`` bound what clients may cost (:class:`HttpLimits`); ``grace`` is how many
    whole seconds uvicorn lets in-flight requests finish once told to stop."""
    app = build_app(store, metrics, ready=ready, now=now, limits=limits)
    return await _serve(app, "http", host, port, tls, grace, limits)


async def serve_health(
    metrics: ScalerMetrics,
    *,
    port: int = DEFAULT_HEALTH_PORT,
    host: str = "0.0.0.0",
    ready: Readiness = lambda: True,
    grace: int = 5,
    limits: HttpLimits = DEFAULT_LIMITS,
) -> HttpServer:
    """Serve the health port (``/healthz``, ``/readyz``, ``/metrics``, plain HTTP) as :func:`serve_http`
    serves the webhook port, with connections bounded on their own."""
    return await _serve(build_health_app(metrics, ready=ready), "health", host, port, None, grace, limits)


async def _serve(
    app: Starlette, name: str, host: str, port: int, tls: TLSFiles | None, grace: int, limits: HttpLimits
) -> HttpServer:
    sock = _bind(host, port)
    connections = ListenerConnections(limits)
    config = uvicorn.Config(
        app,
        http=partial(BoundedH11Protocol, connections=connections),  # type: ignore[arg-type]
        h11_max_incomplete_event_size=limits.max_head_bytes,
        log_level="warning",
        access_log=False,
        lifespan="off",
        backlog=ACCEPTS_PER_TURN,
        timeout_graceful_shutdown=grace,  # whole seconds, as uvicorn declares it
        ssl_certfile=str(tls.cert) if tls else None,
        ssl_keyfile=str(tls.key) if tls else None,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name=f"presage-{name}")
    while not server.started:
        if task.done():
            sock.close()
            task.result()  # raises what stopped it (a bad certificate, ...)
            raise RuntimeError(f"the {name} HTTP server exited during startup")
        await asyncio.sleep(0.01)
    sock.listen(LISTEN_BACKLOG)  # the kernel's queue only: asyncio keeps its per-turn count
    bound = sock.getsockname()[1]
    log.info("%s server listening host=%s port=%d tls=%s", name, host, bound, tls is not None)
    return HttpServer(port=bound, tls=tls is not None, _server=server, _task=task)
