"""What calibration reads at every scored origin and now: the window's realised maximum, yesterday's
window, the last hour's level, the recent peak, the noise level, and the backend's reference and band
(:mod:`presage_scaler.engine.calibration`, Recent peak to Band ratio). Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from presage_scaler.backends.base import Forecast, band_spread
from presage_scaler.engine.past_forecasts import ANALOG, BAND_LEVELS, ScoredPasts
from presage_scaler.series.rolling import trailing_maxima, trailing_means, window_maxima, window_sums
from presage_scaler.series.timegrid import steps_for

LEVEL_WINDOW = timedelta(hours=1)
"""The span whose mean is the level the backend's reference may be blended with."""

RECENT_PEAK = timedelta(minutes=15)
"""The span whose highest value the backend's reference is held at (see Held reference)."""

BAND_RATIO_RANGE = (0.25, 4.0)
"""How far the backend's band at one origin may be taken as wider or narrower than its mean over the
scored forecasts: one forecast whose band is wild (a model far outside what it was trained on) moves
the unit by at most the BAND_EXPONENT power of this."""

BAND_EXPONENT = 0.5
"""The power of the band ratio that scales the score unit: below 1, so that a band that drifts over
the day (one that narrows as an outage leaves SeasonalNaive's residuals) moves coverage the day after
by less than the errors correct. Checked by
``tests/unit/test_calibration.py::test_property_after_a_day_without_traffic_coverage_returns_to_nominal``."""

SCALE_WINDOW = timedelta(minutes=15)
"""The span whose noise level normalises a score."""

SCALE_MIN_STEPS = 12
"""A noise level is measured over at least this many steps, however coarse the resolution."""

SCALE_LONG_FACTOR = 5
"""The longer noise span, in multiples of the short one (75 minutes at 1-minute steps, 5 hours at
5-minute steps): long enough to steady the noise level, short enough that the band narrows again
after a noisy hour instead of keeping the uncertainty guard holding. Checked by
``benchmarks/bench_backtest.py``."""

SCALE_FLOOR = 0.1
"""A window's noise level is taken as at least this fraction of the typical one."""

FLAT_SCALE = 1e-6
"""Where the series did not move at all, noise is taken as this fraction of its level."""


@dataclass(frozen=True)
class Readings:
    """What :func:`read` found: at every scored origin ``o`` (shape (S,), the rows of
    :class:`~presage_scaler.engine.past_forecasts.ScoredPasts`) and at every forecast's ``n``
    (shape (F,)). Without a scored origin the "then" arrays are empty and the "now" ones neutral."""

    realised: np.ndarray
    """``M(o)``."""
    level_then: np.ndarray
    """``ℓ(o)``."""
    level_now: np.ndarray
    """``ℓ(n)``."""
    yesterday_then: np.ndarray
    """``Y(o)``, NaN where the day before lies before the history's start."""
    yesterday_now: np.ndarray
    """``Y(n)``, as ``Y(o)``."""
    peak_then: np.ndarray
    """``P(o)``."""
    peak_now: np.ndarray
    """``P(n)``."""
    noise_then: np.ndarray
    """``σ(o)``."""
    noise_now: np.ndarray
    """``σ(n)``, NaN for a forecast with no scores."""
    banded_then: np.ndarray
    """``σ(o) · u(o)``: the unit where the band scales it."""
    band_ratio_now: np.ndarray
    """``u(n)``."""
    band_known: np.ndarray
    """Whether the forecast's band is known now and not 0 on average (bool)."""


def read(
    values: np.ndarray,
    step: timedelta,
    spans: Sequence[tuple[int, int]],
    scored: ScoredPasts,
    forecasts: Sequence[Forecast],
    window: int,
) -> Readings:
    """Everything the scores and the current forecast's offsets read from the history and the band.

    Parameters
    ----------
    values : numpy.ndarray, shape (N,)
        The series; forecast ``i`` was made from ``values[begin:end]`` for ``spans[i]``.
    step : timedelta
        Its resolution.
    spans : sequence of (int, int), length F
        Each forecast's history.
    scored : ScoredPasts
        The S scored origins, in series coordinates.
    forecasts : sequence of Forecast, length F
        The current forecasts, whose band gives ``υ(n)``.
    window : int
        ``w``, the sizing window in steps.

    Returns
    -------
    Readings

    Notes
    -----
    With ``R``, ``H`` and ``D`` the RECENT_PEAK, LEVEL_WINDOW and ANALOG spans in steps::

        M(o) = max x[o … o + w - 1]          Y(o) = max x[o - D … o - D + w - 1]
        P(o) = max x[o - R … o - 1]          ℓ(o) = mean x[o - H … o - 1]
        σ(o) = max(√(σ_S(o) · σ_L(o)), SCALE_FLOOR · d, FLAT_SCALE · |x̄|)
        u(o) = clip(υ(o) / ῡ, BAND_RATIO_RANGE) ^ BAND_EXPONENT

    each span cut at the history's start; ``σ_S`` and ``σ_L`` the mean ``|x_t - x_{t-1}|`` over the
    SCALE_WINDOW (at least SCALE_MIN_STEPS) and SCALE_LONG_FACTOR times as many steps, ``d`` and
    ``|x̄|`` the mean absolute change and level over every point the scores read.
    """
    count = len(spans)
    if not len(scored.origins):
        none = np.zeros(0)
        return Readings(
            realised=none,
            level_then=none,
            level_now=np.zeros(count),
            yesterday_then=none,
            yesterday_now=np.zeros(count),
            peak_then=none,
            peak_now=np.full(count, np.nan),
            noise_then=none,
            noise_now=np.full(count, np.nan),
            banded_then=none,
            band_ratio_now=np.ones(count),
            band_known=np.zeros(count, dtype=bool),
        )
    begins = np.array([begin for begin, _ in spans])
    ends = np.array([end for _, end in spans])
    starts = begins[scored.owners]
    noise_then, noise_now = _noise_levels(values, step, scored, spans)
    band_then, band_ratio_now, band_known = _band_ratios(scored, backend_spreads(forecasts, window))
    realised, yesterday_then, yesterday_now = _observed(values, scored, begins, ends, window, steps_for(ANALOG, step))
    hour = steps_for(LEVEL_WINDOW, step)
    recent = steps_for(RECENT_PEAK, step)
    return Readings(
        realised=realised,
        level_then=trailing_means(values, scored.origins, starts, hour),
        level_now=trailing_means(values, ends, begins, hour),
        yesterday_then=yesterday_then,
        yesterday_now=yesterday_now,
        peak_then=trailing_maxima(values, scored.origins, starts, recent),
        peak_now=trailing_maxima(values, ends, begins, recent),
        noise_then=noise_then,
        noise_now=noise_now,
        banded_then=noise_then * band_then,
        band_ratio_now=band_ratio_now,
        band_known=band_known,
    )


def _noise_levels(
    values: np.ndarray, step: timedelta, scored: ScoredPasts, spans: Sequence[tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray]:
    """``σ(o)`` of every scored origin, and ``σ(n)`` of every forecast (NaN for those not scored)."""
    short = steps_for(SCALE_WINDOW, step, at_least=SCALE_MIN_STEPS)
    long = SCALE_LONG_FACTOR * short
    active = np.flatnonzero([last > first for first, last in scored.bounds])
    begins = np.array([spans[i][0] for i in active.tolist()])
    ends = np.array([spans[i][1] for i in active.tolist()])
    lowest = np.array([scored.origins[slice(*scored.bounds[i])].min() for i in active.tolist()])
    # Change t is |x_t − x_{t−1}|. An origin's noise is measured over changes [max(o − span, start + 1), o)
    # for each span; the typical noise of a forecast over all the changes its scores read, up to its own origin.
    first = np.maximum(lowest - long, begins + 1)
    region = int(first.min())
    seen = values[region - 1 : int(ends.max())]
    changes = np.abs(np.diff(seen))
    slot = np.zeros(len(spans), dtype=np.intp)
    slot[active] = np.arange(len(active))
    origins = np.concatenate((scored.origins, ends))
    owners = np.concatenate((slot[scored.owners], np.arange(len(active))))

    def noise(span: int) -> np.ndarray:
        starts = np.maximum(origins - span, begins[owners] + 1)
        return window_sums(changes, starts - region, origins - region) / (origins - starts)

    local = np.sqrt(noise(short) * noise(long))
    typical = window_sums(changes, first - region, ends - region) / (ends - first)
    # A perfectly flat span has no noise at all: measure it against the level instead.
    level = window_sums(np.abs(seen), first - region + 1, ends - region + 1) / (ends - first)
    floor = np.maximum(SCALE_FLOOR * typical, FLAT_SCALE * level)
    sigma = np.maximum(local, floor[owners]) + np.finfo(np.float64).tiny
    now = np.full(len(spans), np.nan)
    now[active] = sigma[len(scored.origins) :]
    return sigma[: len(scored.origins)], now


def _band_ratios(scored: ScoredPasts, spreads_now: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``u(o)`` of every scored origin, ``u(n)`` of every forecast and whether its band is known: the
    backend's band width over its mean at the scored origins where it is known, clipped to
    BAND_RATIO_RANGE, to the power BAND_EXPONENT; 1 at an origin whose band is not known (a history
    too short to measure it then, a forecast recorded without it), and throughout for a forecast whose
    band is not known now or is 0 on average (a point forecast only: calibrated from its errors alone)."""
    count = len(spreads_now)
    owners = scored.owners
    known = np.isfinite(scored.spreads)
    spreads = np.where(known, scored.spreads, 0.0)
    typical = np.bincount(owners, weights=spreads, minlength=count) / np.maximum(
        np.bincount(owners, weights=known, minlength=count), 1
    )
    usable = np.isfinite(spreads_now) & (typical > 0)
    divisor = np.where(usable, typical, 1.0)

    def ratio(spread: np.ndarray, typical: np.ndarray) -> np.ndarray:
        return np.clip(spread / typical, *BAND_RATIO_RANGE) ** BAND_EXPONENT

    now = np.where(usable, ratio(np.where(usable, spreads_now, 1.0), divisor), 1.0)
    then = np.where(usable[owners] & known, ratio(spreads, divisor[owners]), 1.0)
    return then, now, usable


def _observed(
    values: np.ndarray, scored: ScoredPasts, begins: np.ndarray, ends: np.ndarray, window: int, day: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``M(o)`` of every scored origin, and ``Y`` of every scored origin and of every forecast's ``n``
    (NaN where the day before lies before the history's start; it always lies before the origin, a
    sizing window being shorter than a day), all read in one pass."""
    count = len(scored.origins)
    origins = np.concatenate((scored.origins, scored.origins - day, ends - day))
    windows = np.concatenate((scored.windows, scored.windows, np.full(len(ends), window)))
    starts = np.concatenate((scored.origins, begins[scored.owners], begins))
    inside = origins >= starts
    maxima = np.full(len(origins), np.nan)
    maxima[inside] = _realised(values, origins[inside], windows[inside])
    return maxima[:count], maxima[count : 2 * count], maxima[2 * count :]


def _realised(values: np.ndarray, origins: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """``M(o)``: the highest value of each window ``values[o : o + w]``."""
    if len(windows) and windows.min() == windows.max():  # the usual case: one window for all
        return window_maxima(values, origins, int(windows[0]))
    realised = np.empty(len(origins))
    for window in np.unique(windows).tolist():
        rows = windows == window
        realised[rows] = window_maxima(values, origins[rows], window)
    return realised


def backend_reference(forecast: Forecast, window: int) -> float:
    """``β(n)``: the highest point of the backend's forecast over the window."""
    return float(np.max(forecast.point[:window]))


def backend_references(forecasts: Sequence[Forecast], window: int) -> np.ndarray:
    """:func:`backend_reference` of each forecast."""
    heads = [f.point[:window] for f in forecasts]
    if len({len(head) for head in heads}) == 1:  # a backtest's batch: one matrix
        return np.array(heads).max(axis=1)
    return np.array([float(np.max(head)) for head in heads])


def backend_spread(forecast: Forecast, window: int) -> float:
    """``υ(n)``: the backend's band width over the window (BAND_LEVELS); NaN when it did not report
    both levels."""
    lower, upper = (forecast.quantiles.get(level) for level in BAND_LEVELS)
    if lower is None or upper is None:
        return math.nan
    return band_spread(lower, upper, window)


def backend_spreads(forecasts: Sequence[Forecast], window: int) -> np.ndarray:
    """:func:`backend_spread` of each forecast."""
    lower, upper = ([f.quantiles.get(level) for f in forecasts] for level in BAND_LEVELS)
    bands = [band for band in (*lower, *upper) if band is not None]
    if len(bands) < len(lower) + len(upper) or len({len(band) for band in bands}) != 1:
        return np.array([backend_spread(f, window) for f in forecasts])
    # band_spread of each row: fmax, like max(0.0, ·), never yields NaN.
    return np.fmax(0.0, (np.array(upper)[:, :window] - np.array(lower)[:, :window]).max(axis=1))
