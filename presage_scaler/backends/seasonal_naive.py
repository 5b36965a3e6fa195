"""SeasonalNaive: the built-in baseline forecaster — "this time last season", with an honest band.

Definitions (``x_0 … x_{n-1}`` is the history, oldest first; ``h = 1 … H`` is the forecast step, so
step ``h`` is the value expected at index ``n - 1 + h``; ``C`` is the configured ``cycles``):

Season length
    ``S = round(season / step)`` (half-way rounds up), at least 1. When ``season`` is not a whole
    number of steps the forecast says so in ``notes``.

Cycles used
    ``c = min(C, n // S)``: the configured number of past seasons, or as many full ones as exist.

Point
    ``point_h = mean_{k=0..c-1} x[n - 1 + h - (m_h + k)·S]`` with ``m_h = ceil(h / S)``: the same
    phase in the ``c`` most recent seasons that are entirely in the past, so for ``h > S`` the lags
    are the next multiples of ``S``. Equivalently the mean of the last ``c`` seasons, phase by phase,
    repeated over the horizon.

Residuals
    ``e_t = x_t - mean_{k=1..c_t} x[t - k·S]`` with ``c_t = min(c, t // S)``: the error the same
    procedure would have made at ``t`` from the history it had then (so early points, which had
    fewer seasons behind them, use fewer cycles — exactly as this backend would have). They are taken
    for every ``t`` in the last ``W = min(max(c·S, MIN_RESIDUALS), MAX_RESIDUALS)`` steps that has at
    least one season before it (``t >= S``): the span the point forecast reads, bounded for speed.

Quantiles
    ``quantile_q,h = point_h + f · Q_q(e)`` where ``Q_q`` is the empirical quantile with linear
    interpolation between order statistics (numpy's default ``"linear"`` method, Hyndman–Fan type 7)
    and ``f = sqrt(C / c)`` widens the band when fewer cycles than configured exist (``f = 1`` on the
    normal path). The offset is the same for every step ``h``.

Recent-level fallback
    With fewer than ``S + MIN_RESIDUALS`` points there is no full season to repeat plus enough
    points after it to measure its error, so the forecast is ``method = "recent-level"``:
    ``point_h = mean`` of the last ``RECENT_WINDOW`` of history (at least 2 points), and
    ``quantile_q,h = point_h + sqrt(h) · Q_q(±d)`` where ``±d`` is the step-to-step changes
    ``x_t - x_{t-1}`` over the last ``MAX_RESIDUALS`` steps together with their negatives (a level has
    no drift, so a rise is as likely as a fall and the band is centred on the point), widened with the
    horizon like a random walk.
    A single point is repeated as point and every quantile. An empty history is rejected.

Every returned value is clipped at 0 when the whole history is non-negative (demand). Quantiles are
non-decreasing in ``q`` at every step (enforced after interpolation, so float rounding cannot break
it). A non-finite value in the history is rejected: the caller gap-fills, so one means a bug upstream.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from presage_scaler.api.quantities import format_duration
from presage_scaler.api.types import SeasonalNaiveBackend
from presage_scaler.backends.base import (
    BackendRejected,
    Forecast,
    ForecastRequest,
    History,
    ModelIdentity,
    check_history,
)

MIN_RESIDUALS = 24
"""Fewest residuals the seasonal band is estimated from; below that the recent-level fallback runs."""

MAX_RESIDUALS = 8192
"""Most residuals (or step-to-step changes) used, so a long history costs no more than a sort of this."""

RECENT_WINDOW = timedelta(hours=1)
"""The span whose mean is the recent-level point forecast."""

SEASONAL = "seasonal-naive"
RECENT_LEVEL = "recent-level"


@dataclass(frozen=True)
class SeasonalNaive:
    """The SeasonalNaive backend: mean of the same phase over the last ``cycles`` seasons."""

    season: timedelta = timedelta(hours=168)
    cycles: int = 3

    def __post_init__(self) -> None:
        if self.season <= timedelta(0):
            raise ValueError(f"season must be positive, got {self.season}")
        if self.cycles < 1:
            raise ValueError(f"cycles must be at least 1, got {self.cycles}")

    @classmethod
    def from_settings(cls, settings: SeasonalNaiveBackend) -> SeasonalNaive:
        """The backend configured by a ``SeasonalNaiveBackend`` API object."""
        return cls(season=settings.season, cycles=settings.cycles)

    @property
    def identity(self) -> ModelIdentity:
        """``SeasonalNaive`` with its settings as the model, e.g. ``seasonal-naive/168hx3``."""
        model = f"{SEASONAL}/{format_duration(self.season)}x{self.cycles}"
        return ModelIdentity(backend="SeasonalNaive", model=model)

    @property
    def max_context(self) -> int | None:
        """Unbounded: the backend reads only the seasons it needs."""
        return None

    @property
    def max_horizon(self) -> int | None:
        """Unbounded: the seasonal pattern repeats as far as asked."""
        return None

    async def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        """Forecast each request in order. Pure CPU, well under a millisecond each, so run inline."""
        results = []
        for index, request in enumerate(requests):
            try:
                results.append(self.forecast_one(request.history, request.horizon, request.quantiles))
            except BackendRejected as err:
                raise BackendRejected(f"request {index}: {err}") from err
        return results

    def forecast_one(self, history: History, horizon: int, quantiles: Sequence[float]) -> Forecast:
        """Forecast ``horizon`` steps of one history at ``quantiles`` (see the module docstring).

        Synchronous and allocation-light so a backtest can call it in a tight loop. Raises
        :class:`BackendRejected` for an empty or non-finite history, a non-positive step or horizon,
        a level outside (0, 1), or a season shorter than half a step.
        """
        values = np.asarray(history.values, dtype=np.float64)
        levels = _validate(values, history.step, horizon, quantiles)
        season_steps, notes = self._season_steps(history.step)
        n = len(values)

        if n < season_steps + MIN_RESIDUALS:
            point, offsets, how = _recent_level(values, history.step, horizon, levels)
            method = RECENT_LEVEL
            notes += [self._short_history_note(n, history.step, season_steps), how]
        else:
            used = min(self.cycles, n // season_steps)
            point, offsets = _seasonal(values, season_steps, used, horizon, levels)
            method = ""  # the normal path: nothing to report beyond the model's identity
            if used < self.cycles:
                widen = math.sqrt(self.cycles / used)
                offsets = offsets * widen
                method = f"{SEASONAL} ({used} of {self.cycles} cycles)"
                notes.append(
                    f"{format_duration(n * history.step)} of history holds {used} of the {self.cycles} "
                    f"{format_duration(self.season)} seasons configured; band widened by "
                    f"sqrt({self.cycles}/{used}) = {widen:.2f}"
                )

        bands = point[np.newaxis, :] + offsets
        if values.min() >= 0:
            np.maximum(point, 0.0, out=point)
            np.maximum(bands, 0.0, out=bands)
        return Forecast(
            point=point,
            quantiles={float(level): bands[i] for i, level in enumerate(levels)},
            method=method,
            notes=tuple(notes),
        )

    def _season_steps(self, step: timedelta) -> tuple[int, list[str]]:
        """``S``, the season in whole steps, and a note when that had to round."""
        ratio = self.season / step
        steps = math.floor(ratio + 0.5)
        if steps < 1:
            raise BackendRejected(
                f"season {format_duration(self.season)} is shorter than half the {format_duration(step)} step"
            )
        if abs(ratio - steps) > 1e-9 * ratio:
            return steps, [
                f"season {format_duration(self.season)} is {ratio:.2f} steps of {format_duration(step)}; "
                f"rounded to {steps} steps ({format_duration(steps * step)})"
            ]
        return steps, []

    def _short_history_note(self, n: int, step: timedelta, season_steps: int) -> str:
        span = f"{format_duration(n * step)} of history"
        season = format_duration(self.season)
        if n < season_steps:
            return f"{span}, less than one {season} season"
        return (
            f"{span}: only {n - season_steps} steps after the first {season} season to measure the "
            f"seasonal forecast's error (needs {MIN_RESIDUALS})"
        )


def _validate(values: np.ndarray, step: timedelta, horizon: int, quantiles: Sequence[float]) -> np.ndarray:
    """The requested levels, sorted and de-duplicated, once the request is known to be usable."""
    check_history(values, step, horizon)
    levels = np.array(sorted(set(quantiles)), dtype=np.float64)
    if levels.size and not (levels[0] > 0.0 and levels[-1] < 1.0):
        raise BackendRejected(f"quantile levels must lie strictly between 0 and 1, got {list(quantiles)}")
    return levels


def _seasonal(
    values: np.ndarray, season_steps: int, cycles: int, horizon: int, levels: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Point (``horizon``) and unwidened band offsets (``levels × 1``) of the seasonal path."""
    n, s = len(values), season_steps
    template = values[n - cycles * s :].reshape(cycles, s).mean(axis=0)
    point = np.resize(template, horizon)

    window = min(max(cycles * s, MIN_RESIDUALS), MAX_RESIDUALS)
    lo = max(s, n - window)
    lagged = np.zeros(n - lo)
    for k in range(1, cycles + 1):
        start = max(lo, k * s)
        if start >= n:
            break
        lagged[start - lo :] += values[start - k * s : n - k * s]
    counts = cycles if lo >= cycles * s else np.minimum(cycles, np.arange(lo, n) // s)
    residuals = values[lo:] - lagged / counts
    return point, _empirical_quantiles(residuals, levels)[:, np.newaxis]


def _recent_level(
    values: np.ndarray, step: timedelta, horizon: int, levels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, str]:
    """Point, band offsets (``levels × horizon``) and a note on how, for the short-history path."""
    n = len(values)
    if n == 1:
        return (
            np.full(horizon, values[0]),
            np.zeros((len(levels), horizon)),
            "a single point: it is the forecast at every step and every quantile",
        )
    window = min(n, max(2, math.floor(RECENT_WINDOW / step + 0.5)))
    changes = np.diff(values[-(MAX_RESIDUALS + 1) :])
    spread = np.sqrt(np.arange(1, horizon + 1, dtype=np.float64))
    symmetric = np.concatenate((changes, -changes))
    offsets = _empirical_quantiles(symmetric, levels)[:, np.newaxis] * spread[np.newaxis, :]
    return (
        np.full(horizon, values[-window:].mean()),
        offsets,
        f"forecasting the mean of the last {window} steps; band from {len(changes)} step-to-step "
        "changes (both signs), widened by sqrt(steps ahead)",
    )


def _empirical_quantiles(sample: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Type-7 (linear) empirical quantiles of ``sample`` at ascending ``levels``, made non-decreasing.

    Same numbers as ``np.quantile`` without its per-call overhead, which dominates at these sizes.
    """
    ordered = np.sort(sample)
    position = levels * (len(ordered) - 1)
    below = np.floor(position).astype(np.intp)
    above = np.minimum(below + 1, len(ordered) - 1)
    values = ordered[below] + (position - below) * (ordered[above] - ordered[below])
    return np.maximum.accumulate(values)
