"""The HTTP API (Starlette): ``/v1/model``, ``/v1/forecast``, ``/healthz``, ``/readyz``, ``/metrics``.

The model loads in the background after the server starts listening: ``/healthz`` answers at once,
``/readyz``, ``/v1/model`` and ``/v1/forecast`` answer 503 ``NotReady`` until the model is loaded
and one warm-up forward pass has run. A load that fails is fatal: ``on_fatal`` is called with the
reason (the command line exits non-zero, so Kubernetes shows the reason and restarts the pod).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from presage_forecaster import protocol, quantiles
from presage_forecaster.batching import MicroBatcher, Overloaded
from presage_forecaster.metrics import Metrics
from presage_forecaster.quoting import quote
from presage_forecaster.settings import Settings

if TYPE_CHECKING:  # torch is imported by the loading thread (_warmed_up_engine), never on the event loop
    from presage_forecaster.engine import Engine
    from presage_forecaster.loading import LoadedModel

log = logging.getLogger("presage_forecaster")

Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class _Serving:
    loaded: LoadedModel
    batcher: MicroBatcher


def _error(status: int, code: str, message: str, field: str | None = None) -> JSONResponse:
    return JSONResponse(protocol.RequestError(status, code, message, field).body(), status_code=status)


def create_app(settings: Settings, on_fatal: Callable[[str], None] | None = None) -> Starlette:
    """The forecaster app for ``settings``. The model starts loading when the app starts."""
    forecaster = _Forecaster(settings, on_fatal)
    return Starlette(routes=forecaster.routes(), lifespan=forecaster.lifespan)


class _Forecaster:
    """One app's state (the model once loaded and warmed up, or why it failed to load), its
    handlers, and the lifespan that loads the model and stops the batcher."""

    def __init__(self, settings: Settings, on_fatal: Callable[[str], None] | None) -> None:
        self.settings = settings
        self.on_fatal = on_fatal
        self.metrics = Metrics()
        self.serving: _Serving | None = None
        self.error: str | None = None

    def routes(self) -> list[Route]:
        """Every route, each counted in the request metrics by its path."""
        return [
            Route("/healthz", self._counted("/healthz", self.healthz)),
            Route("/readyz", self._counted("/readyz", self.readyz)),
            Route("/metrics", self._counted("/metrics", self.metrics_endpoint)),
            Route("/v1/model", self._counted("/v1/model", self.model)),
            Route("/v1/forecast", self._counted("/v1/forecast", self.forecast), methods=["POST"]),
        ]

    def _counted(self, path: str, handler: Handler) -> Handler:
        async def wrapped(request: Request) -> Response:
            began = time.monotonic()
            response = await handler(request)
            self.metrics.requests.labels(path, str(response.status_code)).inc()
            self.metrics.request_seconds.labels(path).observe(time.monotonic() - began)
            return response

        return wrapped

    # --- handlers ---------------------------------------------------------------------------------

    def _not_ready(self) -> JSONResponse:
        if self.error:
            return _error(503, "LoadFailed", f"the model failed to load: {self.error}")
        return _error(503, "NotReady", "the model is still loading; retry after /readyz answers 200")

    async def healthz(self, request: Request) -> Response:
        if self.error:
            return JSONResponse({"status": "failed", "error": self.error}, status_code=500)
        return JSONResponse({"status": "ok"})

    async def readyz(self, request: Request) -> Response:
        if (serving := self.serving) is None:
            return self._not_ready()
        return JSONResponse({"status": "ready", "model": serving.loaded.model_id, "revision": serving.loaded.revision})

    async def metrics_endpoint(self, request: Request) -> Response:
        return Response(self.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def model(self, request: Request) -> Response:
        if (serving := self.serving) is None:
            return self._not_ready()
        return JSONResponse(describe(self.settings, serving.loaded))

    async def forecast(self, request: Request) -> Response:
        """Parse the request, forecast its series in the next batch, check the output, answer."""
        if (serving := self.serving) is None:
            return self._not_ready()
        began = time.monotonic()
        try:
            # Not kept in a variable: the decoded body (up to ~25x its bytes) is freed before the wait below.
            call = protocol.parse_request(
                protocol.decode_body(await _read_body(request, self.settings.max_body_bytes)), self.settings
            )
        except protocol.RequestError as err:
            return JSONResponse(err.body(), status_code=err.status)
        try:
            results = await serving.batcher.forecast([s.values for s in call.series], call.horizon)
        except Overloaded as err:
            refused = _error(503, "Overloaded", str(err))
            refused.headers["Retry-After"] = "1"
            return refused
        except Exception as err:  # logged with its traceback by the batcher
            return _error(500, "ForwardFailed", f"the forward pass failed: {type(err).__name__}: {err}")
        if (not_finite := _not_finite(call, results, serving.loaded.model_id)) is not None:
            return not_finite
        self._count_forecast(call, began)
        return JSONResponse(
            {
                "model": serving.loaded.model_id,
                "revision": serving.loaded.revision,
                "horizon": call.horizon,
                "pointForecast": "median",
                "quantiles": protocol.treatments_body(call.treatments),
                "series": [protocol.series_result(s, call, r) for s, r in zip(call.series, results, strict=True)],
            }
        )

    def _count_forecast(self, call: protocol.ForecastCall, began: float) -> None:
        """Count the series answered (and truncated) and log the call, one line."""
        truncated = sum(1 for s in call.series if s.truncated)
        self.metrics.series.inc(len(call.series))
        self.metrics.truncated.inc(truncated)
        log.info(
            "forecast series=%d horizon=%d quantiles=%s truncated=%d seconds=%.3f",
            len(call.series),
            call.horizon,
            ",".join(t.key for t in call.treatments) or "-",
            truncated,
            time.monotonic() - began,
        )

    # --- lifecycle --------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Load the model in the background while serving; on shutdown stop loading, or the batcher."""
        task = asyncio.create_task(self._load_model(), name="load-model")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if self.serving is not None:
                await self.serving.batcher.stop()

    async def _load_model(self) -> None:
        """Load and warm up the model in a thread, then start serving it; a failure is fatal."""
        settings = self.settings
        try:
            if settings.load_delay_seconds:
                await asyncio.sleep(settings.load_delay_seconds)
            engine = await asyncio.to_thread(_warmed_up_engine, settings)
            batcher = MicroBatcher(
                engine.forecast,
                window=settings.batch_window_ms / 1000,
                max_batch=settings.max_batch_size,
                max_queued=settings.max_queued_series,
                metrics=self.metrics,
            )
            batcher.start()
        except Exception as err:
            self.error = f"{type(err).__name__}: {err}"
            log.error("model load failed error=%s", self.error)
            if self.on_fatal is not None:
                self.on_fatal(self.error)
            return
        loaded = engine.loaded
        self.serving = _Serving(loaded, batcher)
        self.metrics.ready.set(1)
        self.metrics.model_info.labels(loaded.model_id, loaded.revision).set(1)
        self.metrics.load_seconds.set(loaded.load_seconds)


def _not_finite(call: protocol.ForecastCall, results: list[np.ndarray], model_id: str) -> JSONResponse | None:
    """The 500 to answer if the model produced a non-finite forecast for any series (logged)."""
    for s, result in zip(call.series, results, strict=True):
        if not np.isfinite(result).all():
            log.error("non-finite forecast series=%s model=%s", quote(s.id), model_id)
            return _error(500, "ModelOutputNotFinite", f"the model produced a non-finite forecast for {quote(s.id)}")
    return None


def _warmed_up_engine(settings: Settings) -> Engine:
    """Load the model and run one warm-up pass. Blocking, torch's import included: run it in a thread."""
    from presage_forecaster.engine import Engine
    from presage_forecaster.loading import load

    engine = Engine(load(settings), settings.max_horizon, settings.dtype)
    engine.forecast([np.linspace(0.0, 1.0, 64)], 1)
    return engine


async def _read_body(request: Request, limit: int) -> bytes:
    too_large = protocol.RequestError(
        413, "PayloadTooLarge", f"the body is larger than this server's limit of {limit} bytes"
    )
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def describe(settings: Settings, loaded: LoadedModel) -> dict[str, Any]:
    """The ``GET /v1/model`` body."""
    return {
        "model": loaded.model_id,
        "revision": loaded.revision,
        "weightsSha256": loaded.weights_sha256,
        "source": loaded.checkpoint.source,
        "maxContext": settings.max_context,
        "maxHorizon": settings.max_horizon,
        "quantileLevels": list(quantiles.MODEL_LEVELS),
        "extrapolatedLevels": {"min": quantiles.MIN_LEVEL, "max": quantiles.MAX_LEVEL},
        "pointForecast": "median",
        "parameters": loaded.parameters,
        "architecture": loaded.model.architecture or "timesfm-2.5-200m",
        "device": loaded.device,
        "dtype": settings.dtype,
        "flipInvariance": settings.flip_invariance,
        "threads": loaded.threads,
        "batching": {"windowMs": settings.batch_window_ms, "maxBatchSize": settings.max_batch_size},
        "limits": {
            "maxSeriesPerRequest": settings.max_series_per_request,
            "maxQuantilesPerRequest": settings.max_quantiles_per_request,
            "maxBodyBytes": settings.max_body_bytes,
        },
    }
