"""The TimesFM backend: TimesFM 2.5 through presage-forecaster's HTTP API (docs/forecaster.md).

One evaluation is one ``POST /v1/forecast`` carrying every signal: the horizon is the longest any
signal asks for and the levels are the union of what they ask for; each signal's forecast keeps its
own horizon and levels. Histories are cut to the ForecastBackend's ``maxContext`` (most recent
points) before sending, and a horizon above its ``maxHorizon`` is refused without a request.

Quantiles. The server serves the model's deciles as they are, levels between them interpolated and
levels outside them (0.95, 0.99) extrapolated; the response says which, and so does the forecast
here: ``Forecast.method`` names the interpolated or extrapolated levels (``lastForecast.method``)
and ``notes`` say from which deciles. With ``useQuantileHead: false`` the server is asked for the
point forecast only, so every level is the point forecast (the median), as the API documents:
``method`` is then ``"point forecast only (useQuantileHead: false)"``, and the band between the
levels is 0, so calibration sizes from the forecast's past errors alone
(:mod:`presage_scaler.engine.calibration`, Band ratio). With the quantile head, a band wider than
the model's usual provisions more.

Identity. ``identity.backend`` is the ForecastBackend's name; ``model`` and ``revision`` are what the
server last reported, in ``GET /v1/model`` (:meth:`TimesFMClient.describe`, the ForecastBackend probe)
or in a forecast response — never the spec's ``model`` field, which only says what the server
*should* load.

Errors are :class:`~presage_scaler.backends.base.BackendError` subclasses whose ``reason`` is the
condition reason the controller reports with Degraded: ``BackendUnreachable``, ``BackendTimeout``,
``BackendNotReady``, ``BackendServerError`` (all :class:`BackendUnavailable`), ``BackendRejected``
(4xx, :class:`BackendRejected`, with the server's error code) and ``InvalidBackendResponse``.

Answers are read within :data:`MAX_ANSWER_BYTES`, on the wire and once inflated
(:func:`~presage_scaler.backends.bounded_body.read_body`); a larger one, a body nested deeper than the
recursion limit and numbers out of float range are an ``InvalidBackendResponse`` that names the limit.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import numpy as np

from presage_scaler.api.forecast_backend import ForecastBackendSpec, TimesFMBackend
from presage_scaler.api.quantities import format_duration
from presage_scaler.api.reasons import Reason
from presage_scaler.backends.base import (
    BackendError,
    BackendRejected,
    BackendUnavailable,
    Forecast,
    ForecastRequest,
    ModelIdentity,
    check_history,
)
from presage_scaler.backends.bounded_body import ACCEPT_ENCODING, BodyTooLarge, UnreadableBody, excerpt, read_body

log = logging.getLogger(__name__)

POINT_ONLY = "point forecast only (useQuantileHead: false)"

MAX_ANSWER_BYTES = 32 << 20
"""The most bytes one answer may take, on the wire and once inflated: 32 MiB. The largest legitimate
answer is to a batch of 16 signals (a scaler's most) at the forecaster's own limits, a horizon of 1024
and 32 quantile levels: 16 x (1 + 32) arrays x 1024 values x at most 26 bytes a value (as in
``-1.2345678901234567e+300, ``) is 14.1 MB, with a few kB of treatments and context beside; the limit
leaves more than twice that."""


class ForecasterUnreachable(BackendUnavailable):
    """No connection to the forecaster (refused, DNS, reset)."""

    reason = Reason.BACKEND_UNREACHABLE


class ForecasterTimeout(BackendUnavailable):
    """The forecaster did not answer within the ForecastBackend's ``timeout``."""

    reason = Reason.BACKEND_TIMEOUT


class ForecasterNotReady(BackendUnavailable):
    """The forecaster answered 503: its model is still loading (or failed to load)."""

    reason = Reason.BACKEND_NOT_READY


class ForecasterOverloaded(BackendUnavailable):
    """The forecaster refused because too many series were already waiting (it asks to retry)."""

    reason = Reason.BACKEND_OVERLOADED


class ForecasterServerError(BackendUnavailable):
    """The forecaster answered with another 5xx."""

    reason = Reason.BACKEND_SERVER_ERROR


class ForecasterRejected(BackendRejected):
    """The forecaster refused the request (4xx); ``code`` is its error code, e.g. ``HorizonTooLong``."""

    reason = Reason.BACKEND_REJECTED

    def __init__(self, message: str, *, status: int, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class InvalidForecasterResponse(BackendError):
    """The forecaster answered 2xx with a body that is not a valid answer."""

    reason = Reason.INVALID_BACKEND_RESPONSE


@dataclass(frozen=True)
class ModelInfo:
    """What ``GET /v1/model`` reports: the loaded model and the server's limits."""

    model: str
    revision: str | None
    max_context: int
    max_horizon: int
    quantile_levels: tuple[float, ...]

    def mismatches(self, settings: TimesFMBackend) -> list[str]:
        """Where the ForecastBackend's settings and the server disagree, one sentence each."""
        out = []
        if settings.max_horizon > self.max_horizon:
            out.append(
                f"maxHorizon {settings.max_horizon} is above the server's {self.max_horizon}: "
                "longer forecasts will be refused"
            )
        if settings.max_context > self.max_context:
            out.append(
                f"maxContext {settings.max_context} is above the server's {self.max_context}: "
                "the server will use only the most recent points"
            )
        if settings.model != self.model:
            out.append(f"the server serves {self.model}, not the configured {settings.model}")
        return out


class TimesFMClient:
    """The TimesFM backend of one ForecastBackend, talking to presage-forecaster over HTTP.

    Pass a shared ``aiohttp.ClientSession`` to pool connections across backends (it is not closed
    by :meth:`aclose`); without one the backend makes its own, on first use inside the running loop
    (as aiohttp requires).
    """

    def __init__(self, name: str, settings: TimesFMBackend, client: aiohttp.ClientSession | None = None) -> None:
        self.name = name
        self.settings = settings
        self._endpoint = settings.endpoint.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=settings.timeout.total_seconds())
        self._client = client
        self._owns_client = client is None
        self._model: str | None = None
        self._revision: str | None = None

    @property
    def identity(self) -> ModelIdentity:
        """The ForecastBackend's name, with the model and revision the server last reported."""
        return ModelIdentity(backend=self.name, model=self._model, revision=self._revision)

    @property
    def max_context(self) -> int | None:
        return self.settings.max_context

    @property
    def max_horizon(self) -> int | None:
        return self.settings.max_horizon

    async def aclose(self) -> None:
        """Close the HTTP client if this backend made it."""
        if self._owns_client and self._client is not None:
            await self._client.close()
            self._client = None

    async def describe(self) -> ModelInfo:
        """``GET /v1/model``: the loaded model, its revision and the server's limits (the probe's call)."""
        body = await self._call("GET", "/v1/model")
        try:
            info = ModelInfo(
                model=_text(body, "model"),
                revision=_optional_text(body, "revision"),
                max_context=_count(body, "maxContext"),
                max_horizon=_count(body, "maxHorizon"),
                quantile_levels=tuple(float(q) for q in body["quantileLevels"]),
            )
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            raise InvalidForecasterResponse(
                f"{self._endpoint}/v1/model: unexpected answer: {excerpt(str(err), 200)}"
            ) from err
        self._model, self._revision = info.model, info.revision
        return info

    async def probe(self) -> str | None:
        """The ForecastBackend probe: :meth:`describe`, warning where the spec and the server disagree;
        the model as ``model@revision`` when the server reports a revision."""
        info = await self.describe()
        for problem in info.mismatches(self.settings):
            log.warning("backend=%s settings disagree with the server: %s", self.name, problem)
        return f"{info.model}@{info.revision}" if info.revision else info.model

    async def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        """Forecast every request in one HTTP call; results in request order."""
        if not requests:
            return []
        for i, request in enumerate(requests):
            try:
                check_history(
                    np.asarray(request.history.values, dtype=np.float64), request.history.step, request.horizon
                )
            except BackendRejected as err:
                raise BackendRejected(f"request {i}: {err}") from err
            if request.horizon > self.settings.max_horizon:
                raise BackendRejected(
                    f"request {i}: horizon {request.horizon} is above the ForecastBackend's maxHorizon "
                    f"{self.settings.max_horizon}"
                )
        payload = request_body(requests, self.settings)
        body = await self._call("POST", "/v1/forecast", payload)
        forecasts, model, revision = parse_forecast_response(body, requests, self.settings.use_quantile_head)
        self._model, self._revision = model, revision
        return forecasts

    async def _call(self, method: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        url = f"{self._endpoint}{path}"
        if self._client is None:
            self._client = aiohttp.ClientSession()
        try:
            async with self._client.request(
                method,
                url,
                json=payload,
                timeout=self._timeout,
                # Inflated by read_body, within MAX_ANSWER_BYTES; aiohttp's inflation is unbounded.
                auto_decompress=False,
                headers={"Accept-Encoding": ACCEPT_ENCODING},
            ) as response:
                status = response.status
                text = (await read_body(response, MAX_ANSWER_BYTES)).decode(errors="replace")
        except BodyTooLarge as err:
            raise InvalidForecasterResponse(
                f"presage-forecaster at {url} answered {status}: {err}; the largest forecast a scaler asks for "
                "takes well under it, so check that the ForecastBackend's endpoint is a presage-forecaster"
            ) from err
        except UnreadableBody as err:
            raise InvalidForecasterResponse(f"presage-forecaster at {url} answered {status}: {err}") from err
        except TimeoutError as err:  # aiohttp's own timeout errors subclass it
            raise ForecasterTimeout(
                f"presage-forecaster at {url} did not answer within {format_duration(self.settings.timeout)} "
                f"({type(err).__name__}); raise the ForecastBackend's timeout or check the forecaster's load"
            ) from err
        except aiohttp.ClientError as err:
            raise ForecasterUnreachable(
                f"cannot reach presage-forecaster at {url}: {type(err).__name__}: {err or 'connection failed'}; "
                "check the ForecastBackend's endpoint and that the forecaster's Service has ready endpoints"
            ) from err
        if status >= 400:
            raise _status_error(url, status, text)
        try:
            body = json.loads(text)
        except (ValueError, RecursionError) as err:  # RecursionError: nested deeper than the recursion limit
            raise InvalidForecasterResponse(f"{url} answered {status} with non-JSON: {excerpt(str(err))}") from err
        if not isinstance(body, dict):
            raise InvalidForecasterResponse(f"{url} answered a JSON {type(body).__name__}, not an object")
        return body


def from_spec(name: str, spec: ForecastBackendSpec, http: aiohttp.ClientSession | None = None) -> TimesFMClient:
    """The TimesFM backend of the ForecastBackend ``name`` (the registry's factory), on ``http``
    when given, else on a client of its own."""
    assert spec.times_fm is not None  # enforced by the API rules
    return TimesFMClient(name, spec.times_fm, http)


def _status_error(url: str, status: int, body: str) -> BackendError:
    code, message = f"HTTP{status}", body[:500]
    try:
        error = json.loads(body)["error"]
        code, message = excerpt(str(error["code"])), excerpt(str(error["message"]), 500)
    except (ValueError, KeyError, TypeError, RecursionError):
        pass
    text = f"presage-forecaster at {url} answered {status} {code}: {message}"
    if status == 503:
        return ForecasterOverloaded(text) if code == "Overloaded" else ForecasterNotReady(text)
    if status >= 500:
        return ForecasterServerError(text)
    return ForecasterRejected(text, status=status, code=code)


def request_body(requests: Sequence[ForecastRequest], settings: TimesFMBackend) -> dict[str, Any]:
    """The ``POST /v1/forecast`` body for a batch: longest horizon, union of levels, histories cut."""
    levels = sorted({float(q) for r in requests for q in r.quantiles})
    return {
        "horizon": max(r.horizon for r in requests),
        "quantiles": levels if settings.use_quantile_head else [],
        "useQuantileHead": settings.use_quantile_head,
        "series": [
            {"id": str(i), "values": np.asarray(r.history.values, dtype=np.float64)[-settings.max_context :].tolist()}
            for i, r in enumerate(requests)
        ],
    }


def parse_forecast_response(
    body: dict[str, Any], requests: Sequence[ForecastRequest], use_quantile_head: bool
) -> tuple[list[Forecast], str, str | None]:
    """Forecasts (each cut to its request's horizon and levels), model and revision from a response."""
    try:
        model = _text(body, "model")
        revision = _optional_text(body, "revision")
        treatments = {str(t["key"]): t for t in body["quantiles"]}
        series = body["series"]
        if len(series) != len(requests):
            raise ValueError(f"{len(series)} series answered for {len(requests)} sent")
        forecasts = [
            _forecast(i, one, request, treatments, use_quantile_head)
            for i, (one, request) in enumerate(zip(series, requests, strict=True))
        ]
    except (KeyError, TypeError, ValueError, IndexError, OverflowError) as err:
        raise InvalidForecasterResponse(
            f"unexpected /v1/forecast answer: {type(err).__name__}: {excerpt(str(err), 200)}"
        ) from err
    return forecasts, model, revision


def _forecast(
    index: int,
    one: dict[str, Any],
    request: ForecastRequest,
    treatments: dict[str, dict[str, Any]],
    use_quantile_head: bool,
) -> Forecast:
    point = _steps(one["point"], request.horizon, f"series[{index}].point")
    quantiles: dict[float, np.ndarray] = {}
    approximated: list[str] = []
    notes: list[str] = []
    for level in sorted({float(q) for q in request.quantiles}):
        if not use_quantile_head:
            quantiles[level] = point.copy()
            continue
        key = format(level, "g")
        quantiles[level] = _steps(one["quantiles"][key], request.horizon, f"series[{index}].quantiles[{key}]")
        treatment = treatments.get(key, {})
        source = treatment.get("source", "model")
        if source in ("interpolated", "extrapolated"):
            approximated.append(f"q{key} {source}")
            lower, upper = treatment.get("from", ("?", "?"))
            notes.append(f"quantile {key} {source} from the model's {lower} and {upper} deciles")
        elif source != "model":
            raise ValueError(f"quantile {key}: unexpected source {source!r}")
    context = one.get("context", {})
    if context.get("truncated"):
        notes.append(
            f"the forecaster used the most recent {context.get('used')} of {context.get('received')} points "
            "(its maxContext)"
        )
    if not use_quantile_head:
        method = POINT_ONLY
        notes.append("useQuantileHead is false: every quantile is the point forecast (the median)")
    else:
        method = ", ".join(approximated) + " from deciles" if approximated else ""
    return Forecast(point=point, quantiles=quantiles, method=method, notes=tuple(notes))


def _steps(raw: object, horizon: int, where: str) -> np.ndarray:
    values = np.asarray(raw, dtype=np.float64)
    if values.ndim != 1 or len(values) < horizon:
        raise ValueError(f"{where}: expected at least {horizon} values, got shape {values.shape}")
    values = values[:horizon]
    if not np.isfinite(values).all():
        raise ValueError(f"{where}: non-finite value")
    return values


def _text(body: dict[str, Any], key: str) -> str:
    value = body[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} must be a non-empty string, got {value!r}")
    return value


def _optional_text(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{key} must be a string, got {value!r}")
    return value or None


def _count(body: dict[str, Any], key: str) -> int:
    value = body[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 1:
        raise ValueError(f"{key} must be a positive integer, got {value!r}")
    return int(value)
