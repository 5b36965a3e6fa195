"""The wire format of ``POST /v1/forecast``: validating a request, shaping a response.

Pure functions over JSON-decoded values; no HTTP here. Every rejected request raises
:class:`RequestError` with the HTTP status, a CamelCase ``code`` and a message naming the field
(``series[2].values``) and the problem. The format and limits are documented in docs/forecaster.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from presage_forecaster import quantiles
from presage_forecaster.settings import Settings


class RequestError(Exception):
    """A request the server refuses: ``status`` (4xx), ``code`` and a message naming the problem."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field:
            error["field"] = self.field
        return {"error": error}


@dataclass(frozen=True)
class SeriesInput:
    """One series as the model will see it, and what was done to it on the way."""

    id: str
    values: np.ndarray  # finite, oldest first, at most maxContext points
    received: int  # points in the request
    leading_missing: int  # missing points dropped from the start
    filled: int  # missing points filled by linear interpolation (or holding the last value)
    truncated: int  # oldest points cut to fit maxContext
    step: float | None = None  # seconds between timestamps, when they were given
    last_timestamp: float | None = None


@dataclass(frozen=True)
class ForecastCall:
    """A validated forecast request."""

    horizon: int
    treatments: list[quantiles.Treatment]
    series: list[SeriesInput]


_KNOWN_KEYS = {"series", "horizon", "quantiles", "useQuantileHead"}
_KNOWN_SERIES_KEYS = {"id", "values", "timestamps"}


def parse_request(body: object, settings: Settings) -> ForecastCall:
    """Validate a decoded JSON body against the format and ``settings``' limits."""
    if not isinstance(body, dict):
        raise RequestError(400, "InvalidRequest", "the body must be a JSON object")
    unknown = sorted(set(body) - _KNOWN_KEYS)
    if unknown:
        raise RequestError(400, "UnknownField", f"unknown field(s) {unknown}; known: {sorted(_KNOWN_KEYS)}")
    horizon = _horizon(body.get("horizon"), settings)
    use_head = body.get("useQuantileHead", True)
    if not isinstance(use_head, bool):
        raise RequestError(400, "InvalidRequest", f"useQuantileHead must be true or false, got {use_head!r}")
    treatments = _levels(body.get("quantiles", []), settings, use_head)
    raw_series = body.get("series")
    if not isinstance(raw_series, list) or not raw_series:
        raise RequestError(422, "NoSeries", 'series must be a non-empty list of {"values": [...]} objects', "series")
    if len(raw_series) > settings.max_series_per_request:
        raise RequestError(
            413,
            "TooManySeries",
            f"{len(raw_series)} series in one request; the limit is {settings.max_series_per_request}",
            "series",
        )
    series = [_series(i, raw, settings) for i, raw in enumerate(raw_series)]
    return ForecastCall(horizon=horizon, treatments=treatments, series=series)


def _horizon(raw: object, settings: Settings) -> int:
    if raw is None:
        raise RequestError(422, "InvalidHorizon", "horizon (forecast steps) is required", "horizon")
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not float(raw).is_integer():
        raise RequestError(422, "InvalidHorizon", f"horizon must be a whole number of steps, got {raw!r}", "horizon")
    horizon = int(raw)
    if horizon < 1:
        raise RequestError(422, "InvalidHorizon", f"horizon must be at least 1, got {horizon}", "horizon")
    if horizon > settings.max_horizon:
        raise RequestError(
            422,
            "HorizonTooLong",
            f"horizon {horizon} is above this server's maxHorizon {settings.max_horizon}",
            "horizon",
        )
    return horizon


def _levels(raw: object, settings: Settings, use_head: bool) -> list[quantiles.Treatment]:
    if not isinstance(raw, list):
        raise RequestError(
            422, "UnknownQuantileFormat", f"quantiles must be a list of levels such as [0.5, 0.9], got {raw!r}"
        )
    if len(raw) > settings.max_quantiles_per_request:
        raise RequestError(
            413,
            "TooManyQuantiles",
            f"{len(raw)} quantile levels; the limit is {settings.max_quantiles_per_request}",
            "quantiles",
        )
    levels = []
    for i, item in enumerate(raw):
        try:
            levels.append(quantiles.parse_level(item))
        except quantiles.QuantileLevelError as err:
            raise RequestError(422, err.code, f"quantiles[{i}]: {err}", f"quantiles[{i}]") from None
    return quantiles.plan(levels, use_quantile_head=use_head)


def _series(index: int, raw: object, settings: Settings) -> SeriesInput:
    where = f"series[{index}]"
    if not isinstance(raw, dict):
        raise RequestError(422, "InvalidSeries", f'{where} must be an object with "values"', where)
    unknown = sorted(set(raw) - _KNOWN_SERIES_KEYS)
    if unknown:
        raise RequestError(400, "UnknownField", f"{where}: unknown field(s) {unknown}", where)
    name = raw.get("id", str(index))
    if not isinstance(name, str):
        raise RequestError(422, "InvalidSeries", f"{where}.id must be a string, got {name!r}", f"{where}.id")
    values = _values(raw.get("values"), f"{where}.values")
    missing = np.isnan(values)
    if values.size == 0:
        raise RequestError(422, "EmptySeries", f"{where}.values is empty: nothing to forecast from", f"{where}.values")
    if missing.all():
        raise RequestError(
            422,
            "AllMissing",
            f"{where}.values holds no number: all {values.size} are null or NaN",
            f"{where}.values",
        )
    step, last = _timestamps(raw.get("timestamps"), values.size, f"{where}.timestamps")
    first = int(np.argmax(~missing))
    kept = values[first:]  # a view: the gaps are filled in place, in the array _values made
    gaps = np.isnan(kept)
    if gaps.any():
        at = np.flatnonzero(~gaps)
        kept[gaps] = np.interp(np.flatnonzero(gaps), at, kept[at])  # holds the last value past the end
    cut = max(0, kept.size - settings.max_context)
    return SeriesInput(
        id=name,
        values=kept[cut:],
        received=values.size,
        leading_missing=first,
        filled=int(gaps.sum()),
        truncated=cut,
        step=step,
        last_timestamp=last,
    )


def _values(raw: object, where: str) -> np.ndarray:
    if not isinstance(raw, list):
        raise RequestError(422, "InvalidSeries", f"{where} must be a list of numbers (null for missing)", where)
    if not {type(v) for v in raw} <= {int, float, type(None)}:
        bad = next(i for i, v in enumerate(raw) if isinstance(v, bool) or not isinstance(v, int | float | None))
        raise RequestError(
            422, "InvalidValue", f"{where}[{bad}] is {raw[bad]!r}, not a number or null", f"{where}[{bad}]"
        )
    try:
        out = np.array(raw, dtype=np.float64)  # None becomes NaN: missing
    except OverflowError:
        raise RequestError(422, "InvalidValue", f"{where} holds an integer too large for a float", where) from None
    if np.isinf(out).any():
        bad = int(np.flatnonzero(np.isinf(out))[0])
        raise RequestError(
            422,
            "InvalidValue",
            f"{where}[{bad}] is {out[bad]}: infinities are not demand; send null for a missing point",
            f"{where}[{bad}]",
        )
    return out


def _timestamps(raw: object, n: int, where: str) -> tuple[float | None, float | None]:
    """The regular step and the last timestamp, or ``(None, None)`` when none were given."""
    if raw is None:
        return None, None
    if not isinstance(raw, list) or len(raw) != n:
        raise RequestError(
            422, "InvalidTimestamps", f"{where} must be a list of Unix seconds, one per value ({n})", where
        )
    if any(isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) for t in raw):
        raise RequestError(422, "InvalidTimestamps", f"{where} must hold only numbers (Unix seconds)", where)
    if n == 1:
        return None, float(raw[0])
    times = np.asarray(raw, dtype=np.float64)
    steps = np.diff(times)
    if (steps <= 0).any():
        raise RequestError(422, "InvalidTimestamps", f"{where} must be strictly increasing", where)
    step = float(np.median(steps))
    if np.abs(steps - step).max() > 1e-3 * step:
        raise RequestError(
            422,
            "InvalidTimestamps",
            f"{where} are not evenly spaced (steps from {steps.min():g}s to {steps.max():g}s): TimesFM assumes "
            "a regular step; resample and send null for missing points",
            where,
        )
    return step, float(times[-1])


def series_result(series: SeriesInput, call: ForecastCall, forecast: np.ndarray) -> dict[str, Any]:
    """One series' part of the response, from the engine's ``horizon × 10`` forecast."""
    point = forecast[:, quantiles.MEDIAN]
    deciles = forecast[:, 1:]
    out: dict[str, Any] = {
        "id": series.id,
        "point": point.tolist(),
        "quantiles": {t.key: quantiles.apply(t, deciles, point).tolist() for t in call.treatments},
        "context": {
            "received": series.received,
            "used": int(series.values.size),
            "truncated": series.truncated,
            "leadingMissing": series.leading_missing,
            "filled": series.filled,
        },
    }
    if series.step is not None and series.last_timestamp is not None:
        out["timestamps"] = [series.last_timestamp + series.step * (k + 1) for k in range(call.horizon)]
    return out


def treatments_body(treatments: Sequence[quantiles.Treatment]) -> list[dict[str, Any]]:
    """The ``quantiles`` list of a response: each level, its key, and how it was made."""
    out = []
    for t in treatments:
        entry: dict[str, Any] = {"level": t.level, "key": t.key, "source": t.source}
        if t.source in ("interpolated", "extrapolated"):
            entry["from"] = [t.lower, t.upper]
        out.append(entry)
    return out
