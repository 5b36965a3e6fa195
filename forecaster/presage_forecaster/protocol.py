"""The wire format of ``POST /v1/forecast``: validating a request, shaping a response.

Pure functions over the body's bytes and their JSON-decoded values; no HTTP here. Every rejected
request raises :class:`RequestError` with the HTTP status, a CamelCase ``code`` and a message naming
the field (``series[2].values``) and the problem, quoting the client's value only in bounded form
(:mod:`presage_forecaster.quoting`). Whatever the bytes, the outcome is a :class:`ForecastCall`
or a :class:`RequestError`, never another exception. The format and limits are documented in
docs/forecaster.md.

Numbers are bounded by what the server can compute with, not only by JSON:

- a value's magnitude is at most :data:`MAX_ABS_VALUE`. The engine scales each series by its mean
  and standard deviation in float64, and the sum of squared deviations over a full context
  (16,256 points) overflows beyond about 1.05e152; ``tests/forecaster/test_fuzz_http.py`` forecasts
  series at the bound at full context, in float32 and bfloat16.
- a timestamp lies in the years 1 to 9999 (:data:`MIN_TIMESTAMP`, :data:`MAX_TIMESTAMP`), so its
  step and the forecast's timestamps stay finite.
- integers of any size (JSON has no limit) are compared, never converted to float unchecked.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from presage_forecaster import quantiles
from presage_forecaster.quoting import quote
from presage_forecaster.settings import Settings

MAX_ABS_VALUE = 1e150
"""The largest magnitude of a value: 100 times below where the engine's float64 scaling overflows."""

MIN_TIMESTAMP = datetime.min.replace(tzinfo=UTC).timestamp()
MAX_TIMESTAMP = datetime.max.replace(tzinfo=UTC).timestamp()
"""Timestamps are Unix seconds within the years 1 to 9999."""


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


def decode_body(raw: bytes) -> object:
    """The JSON value of a request body; 400 ``InvalidJSON`` when it is not JSON, or nested too deep to decode."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise RequestError(400, "InvalidJSON", "the body is JSON nested too deeply to decode") from None
    except ValueError as err:  # also not UTF-8, and integers beyond Python's digit limit
        raise RequestError(400, "InvalidJSON", f"the body is not valid JSON: {quote(str(err))}") from None


def parse_request(body: object, settings: Settings) -> ForecastCall:
    """Validate a decoded JSON body against the format and ``settings``' limits."""
    if not isinstance(body, dict):
        raise RequestError(400, "InvalidRequest", "the body must be a JSON object")
    unknown = sorted(set(body) - _KNOWN_KEYS)
    if unknown:
        raise RequestError(400, "UnknownField", f"unknown field(s) {quote(unknown)}; known: {sorted(_KNOWN_KEYS)}")
    horizon = _horizon(body.get("horizon"), settings)
    use_head = body.get("useQuantileHead", True)
    if not isinstance(use_head, bool):
        raise RequestError(
            400, "InvalidRequest", f"useQuantileHead must be true or false, got {quote(use_head)}", "useQuantileHead"
        )
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
    if isinstance(raw, bool) or not (isinstance(raw, int) or (isinstance(raw, float) and raw.is_integer())):
        raise RequestError(
            422, "InvalidHorizon", f"horizon must be a whole number of steps, got {quote(raw)}", "horizon"
        )
    if raw < 1:
        raise RequestError(422, "InvalidHorizon", f"horizon must be at least 1, got {quote(raw)}", "horizon")
    if raw > settings.max_horizon:
        raise RequestError(
            422,
            "HorizonTooLong",
            f"horizon {quote(raw)} is above this server's maxHorizon {settings.max_horizon}",
            "horizon",
        )
    return int(raw)


def _levels(raw: object, settings: Settings, use_head: bool) -> list[quantiles.Treatment]:
    if not isinstance(raw, list):
        raise RequestError(
            422,
            "UnknownQuantileFormat",
            f"quantiles must be a list of levels such as [0.5, 0.9], got {quote(raw)}",
            "quantiles",
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
        raise RequestError(400, "UnknownField", f"{where}: unknown field(s) {quote(unknown)}", where)
    name = _id(raw.get("id", str(index)), f"{where}.id")
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
    used = kept[cut:]
    return SeriesInput(
        id=name,
        values=used.copy() if used.size < values.size else used,  # a view would keep all it received alive
        received=values.size,
        leading_missing=first,
        filled=int(gaps.sum()),
        truncated=cut,
        step=step,
        last_timestamp=last,
    )


def _id(raw: object, where: str) -> str:
    if not isinstance(raw, str):
        raise RequestError(422, "InvalidSeries", f"{where} must be a string, got {quote(raw)}", where)
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:  # JSON allows "\ud800", but it cannot be echoed in a UTF-8 response
        raise RequestError(
            422, "InvalidSeries", f"{where} {quote(raw)} holds a lone surrogate: it is not Unicode text", where
        ) from None
    return raw


def _values(raw: object, where: str) -> np.ndarray:
    if not isinstance(raw, list):
        raise RequestError(422, "InvalidSeries", f"{where} must be a list of numbers (null for missing)", where)
    if not {type(v) for v in raw} <= {int, float, type(None)}:
        bad = next(i for i, v in enumerate(raw) if isinstance(v, bool) or not isinstance(v, int | float | None))
        raise RequestError(
            422, "InvalidValue", f"{where}[{bad}] is {quote(raw[bad])}, not a number or null", f"{where}[{bad}]"
        )
    try:
        out = np.array(raw, dtype=np.float64)  # None becomes NaN: missing
    except OverflowError:  # an integer beyond float64; Python compares it with a float exactly
        bad = next(i for i, v in enumerate(raw) if v is not None and abs(v) > MAX_ABS_VALUE)
        raise _too_large(where, bad, raw[bad]) from None
    beyond = np.abs(out) > MAX_ABS_VALUE  # NaN (missing) compares false
    if beyond.any():
        bad = int(np.flatnonzero(beyond)[0])
        if np.isinf(out[bad]):
            raise RequestError(
                422,
                "InvalidValue",
                f"{where}[{bad}] is {out[bad]}: infinities are not demand; send null for a missing point",
                f"{where}[{bad}]",
            )
        raise _too_large(where, bad, raw[bad])
    return out


def _too_large(where: str, index: int, value: object) -> RequestError:
    return RequestError(
        422,
        "InvalidValue",
        f"{where}[{index}] is {quote(value)}: beyond ±{MAX_ABS_VALUE:g}, the largest magnitude this server "
        "can forecast; rescale the series (forecasts scale with it)",
        f"{where}[{index}]",
    )


def _timestamps(raw: object, n: int, where: str) -> tuple[float | None, float | None]:
    """The regular step and the last timestamp, or ``(None, None)`` when none were given."""
    if raw is None:
        return None, None
    if not isinstance(raw, list) or len(raw) != n:
        raise RequestError(
            422, "InvalidTimestamps", f"{where} must be a list of Unix seconds, one per value ({n})", where
        )
    # Comparing rejects NaN and never converts an integer, however large.
    if not all(
        isinstance(t, int | float) and not isinstance(t, bool) and MIN_TIMESTAMP <= t <= MAX_TIMESTAMP for t in raw
    ):
        raise RequestError(
            422,
            "InvalidTimestamps",
            f"{where} must hold only numbers: Unix seconds of the years 1 to 9999 "
            f"([{MIN_TIMESTAMP:.0f}, {MAX_TIMESTAMP:.0f}])",
            where,
        )
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
