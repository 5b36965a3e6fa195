"""The scaler's HTTP server: probes, ``/metrics`` and the Agones FleetAutoscaler webhook.

A Starlette app served by uvicorn as a task of the running event loop, beside the controller and
the gRPC server. Optional TLS (a certificate and key, as mounted from a Secret) is what a
FleetAutoscaler's ``caBundle`` verifies; uvicorn reads them once, at start.

* ``GET /healthz``: 200 whenever the event loop answers (liveness).
* ``GET /readyz``: 200 once the ``ready`` callable says so, else 503 with its reason.
* ``GET /metrics``: Prometheus exposition of :class:`ScalerMetrics`' registry.
* ``POST /agones/v1/scale``: :mod:`presage_scaler.serving.agones`, answered from the store alone.

No client can make the server hold memory or connections without bound (:class:`HttpLimits`):

* A webhook body is read up to ``max_body_bytes`` (1 MiB) and no further: a larger Content-Length
  is refused at once, before a byte of the body is read, and a chunked body is counted as it
  streams in and refused where it crosses the limit (413 ``RequestTooLarge``). A body that has not
  fully arrived within ``body_timeout`` (10 s) is refused (408 ``RequestTimeout``). Both answers
  carry ``Connection: close``, so the rest of the body is never read.
* A connection must deliver a complete request head within ``head_timeout`` (10 s) of opening (with
  TLS: of its handshake, which asyncio bounds at 60 s) or of its previous response, or it is closed
  unanswered: uvicorn alone restarts its keep-alive timer on every byte, so a client trickling a
  header (slowloris) would hold its connection forever. Heads are at most 16 KiB (h11's default);
  an invalid Content-Length is a plain-text 400 from h11.
* Once ``limit_concurrency`` (100) connections are open, uvicorn answers a further request 503
  (plain text) without calling the app, so at most about 100 MiB of bodies are buffered at once.
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
from typing import Any

import h11
import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.serving import agones
from presage_scaler.serving.store import RecommendationStore

log = logging.getLogger(__name__)

DEFAULT_PORT = 8080
Readiness = Callable[[], bool | str]
"""True when ready; False, or a string saying why, when not."""


@dataclass(frozen=True)
class TLSFiles:
    """PEM certificate chain and private key files (a mounted ``kubernetes.io/tls`` Secret)."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class HttpLimits:
    """What one client may cost the server; the module docstring says how each is enforced."""

    max_body_bytes: int = agones.MAX_BODY_BYTES
    """The largest webhook body read; a larger one is refused with 413."""
    body_timeout: float = 10.0
    """Seconds from the request head to the last byte of its body; a slower body is refused with 408."""
    head_timeout: float = 10.0
    """Seconds a connection may take to send a complete request head, from opening or its last response."""
    limit_concurrency: int = 100
    """Open connections (the asking one included) at which uvicorn answers 503 instead of calling the app."""


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


def build_app(
    store: RecommendationStore,
    metrics: ScalerMetrics,
    *,
    ready: Readiness = lambda: True,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    limits: HttpLimits = HttpLimits(),
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
        headers: dict[str, str] = {}
        try:
            try:
                body = await _read_body(request, limits)
            except agones.WebhookError:
                # Close rather than keep the connection: uvicorn would otherwise read the rest of the body.
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

    return Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            Route(agones.PATH, scale, methods=["POST"]),
        ]
    )


class _H11WithHeadDeadline(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request head.

    uvicorn arms no timer before a connection's first request and restarts its keep-alive timer on
    every byte, so without this a client sending a header a byte at a time keeps its connection
    forever. The deadline is armed when the connection opens and after each response, cancelled once
    h11 has a complete request head, and when it fires the connection is closed unanswered (HTTP has
    no response to a request that has not been made)."""

    def __init__(self, *args: Any, head_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timeout = head_timeout
        self._head_deadline: asyncio.TimerHandle | None = None

    def _arm_if_waiting_for_a_head(self) -> None:
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._disarm()
            # uvicorn's keep-alive handler is exactly "close this idle connection".
            self._head_deadline = self.loop.call_later(self._head_timeout, self.timeout_keep_alive_handler)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_if_waiting_for_a_head()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()

    def on_response_complete(self) -> None:
        # A pipelined request already parsed by uvicorn leaves their_state past IDLE: no deadline then.
        super().on_response_complete()
        self._arm_if_waiting_for_a_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


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
    limits: HttpLimits = HttpLimits(),
) -> HttpServer:
    """Bind ``host:port`` (``port=0`` picks a free one; a taken port raises OSError at once), start
    serving on the running loop and return once the server accepts connections. ``limits`` bound
    what one client may cost (:class:`HttpLimits`)."""
    sock = _bind(host, port)
    config = uvicorn.Config(
        build_app(store, metrics, ready=ready, now=now, limits=limits),
        http=partial(_H11WithHeadDeadline, head_timeout=limits.head_timeout),  # type: ignore[arg-type]
        limit_concurrency=limits.limit_concurrency,
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
