"""SeasonalNaive: the built-in baseline forecaster — "this time last season", at today's level.

Definitions (``x_0 … x_{n-1}`` is the history, oldest first; a forecast made from the first ``o``
points has *origin* ``o``, so the current forecast has origin ``n``; ``h = 1 … H`` is the step
ahead, so step ``h`` is the value expected at index ``o - 1 + h``; ``C`` is the configured
``cycles``; a span "in steps" is the whole steps that cover it,
:func:`presage_scaler.series.timegrid.steps_for`):

Season length
    ``S = round(season / step)`` (half-way rounds up), at least 1. When ``season`` is not a whole
    number of steps the forecast says so in ``notes``.

Cycles used
    ``c = min(C, n // S)``: the configured number of past seasons, or as many full ones as exist.

Seasonal mean
    ``m_h(o) = mean_k x[o - 1 + h - (⌈h / S⌉ + k - 1)·S]`` over ``k = 1 … c`` (lags that would
    reach before ``x_0`` are left out of the mean; none are at ``o = n``): the same phase in the
    ``c`` most recent seasons that are entirely before the origin, so for ``h > S`` the lags are the
    next multiples of ``S``.

Level
    ``r(o) = clip(Σ x[o-L … o-1] / F(o), 0.5, 2)`` with ``L`` = the last hour in steps (at least 1,
    at most ``o``) and ``F(o) = mean_k Σ x[o-L-k·S … o-1-k·S]`` over the ``k = 1 … c`` whose span
    lies in the history: the last hour against what the same hour of the past seasons held. The
    seasonal profile is scaled to the current level, within a factor of two. ``r = 1`` when no
    past season covers the hour, when ``F(o) ≤ 0`` or when the hour's sum is negative.

Recent peak
    ``p(o) = max x[o-P … o-1]`` with ``P`` = PEAK_WINDOW (the last minute) in steps (at least 1, at
    most ``o``): at 1-minute steps or coarser, the latest point.

Point
    ``point_h(o) = max(r(o)·m_h(o), p(o))``: the seasonal profile at the current level, never below
    the latest demand. Calibration holds the window forecast at the last 15 minutes' peak where that
    pays (:mod:`presage_scaler.engine.calibration`, Held reference), which a longer span here would
    force on every forecast.

Residuals
    ``e_t = x_t - mean_{k=1..c_t} x[t - k·S]`` with ``c_t = min(c, t // S)``: the error the plain
    seasonal mean would have made at ``t`` from the history it had then. They are taken for every
    ``t`` in the last ``W = min(max(c·S, MIN_RESIDUALS), MAX_RESIDUALS)`` steps that has at least
    one season before it (``t >= S``): the span the point forecast reads, bounded for speed.

Quantiles
    ``quantile_q,h = point_h + f · Q_q(e)`` where ``Q_q`` is the empirical quantile with linear
    interpolation between order statistics (numpy's default ``"linear"`` method, Hyndman–Fan type 7)
    and ``f = sqrt(C / c)`` widens the band when fewer cycles than configured exist (``f = 1`` on the
    normal path). The offset is the same for every step ``h``. These per-step quantiles are what
    the backend reports; capacity is sized from the calibrated window maximum that
    :mod:`presage_scaler.engine.calibration` derives from the point forecast and its own past errors.

Recent-level fallback
    With fewer than ``S + MIN_RESIDUALS`` points there is no full season to repeat plus enough
    points after it to measure its error, so the forecast is ``method = "recent-level"``:
    ``point_h(o) = max(mean x[o-R … o-1], p(o))`` with ``R`` = the last ``RECENT_WINDOW`` in steps
    (at least 2, at most ``o``), and ``quantile_q,h = point_h + sqrt(h) · Q_q(±d)`` where ``±d`` is
    the step-to-step changes ``x_t - x_{t-1}`` over the last ``MAX_RESIDUALS`` steps together with
    their negatives (a level has no drift, so a rise is as likely as a fall), widened with the
    horizon like a random walk. A single point is repeated as point and every quantile. An empty
    history is rejected.

Hindcast
    When the request asks for one: ``max_{h=1..w} point_h(e)`` for each requested origin ``e``,
    what this backend would have forecast for a window of ``w`` steps from the first ``e`` points,
    with the path and ``c`` of the current forecast (NaN where that path has nothing to forecast
    from: ``e < S`` on the seasonal path, ``e < 1`` or ``e > n``). Computed with the same
    arithmetic as the current forecast, so at ``e = n`` it would be exactly the maximum of the first
    ``w`` steps of the point forecast. When the request also names a ``band`` of two levels, the
    widest that band was over those ``w`` steps (its quantiles from the residuals before ``e``, as
    above; NaN where there were none), :func:`presage_scaler.backends.base.band_spread`.

Bands are clipped at 0 when the whole history is non-negative (demand); the point then is already
at least 0. Quantiles are non-decreasing in ``q`` at every step (enforced after interpolation, so
float rounding cannot break it). A non-finite value in the history is rejected: the caller
gap-fills, so one means a bug upstream.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

import numpy as np

from presage_scaler.api.forecast_backend import ForecastBackendSpec, SeasonalNaiveBackend
from presage_scaler.api.quantities import format_duration
from presage_scaler.backends.base import (
    BackendRejected,
    Forecast,
    ForecastRequest,
    Hindcast,
    HindcastRequest,
    History,
    ModelIdentity,
    check_history,
)
from presage_scaler.series.blocks import row_blocks
from presage_scaler.series.rolling import (
    split_window_order_statistics,
    trailing_maxima,
    trailing_means,
    window_order_statistics,
    window_sums,
)
from presage_scaler.series.timegrid import steps_for

if TYPE_CHECKING:
    import aiohttp

MIN_RESIDUALS = 24
"""Fewest residuals the seasonal band is estimated from; below that the recent-level fallback runs."""

MAX_RESIDUALS = 1024
"""Most residuals (or step-to-step changes) used, so a long history costs no more than a selection
among this many."""

RECENT_WINDOW = timedelta(hours=1)
"""The span whose mean is the recent-level point forecast."""

LEVEL_WINDOW = timedelta(hours=1)
"""The span whose level the seasonal profile is scaled to."""

LEVEL_CLIP = (0.5, 2.0)
"""The level ratio's bounds: one unusual hour moves the forecast by at most a factor of two."""

PEAK_WINDOW = timedelta(minutes=1)
"""The point forecast never goes below the peak of this last span: short, because a longer hold here
would apply to every forecast, while calibration holds the 15-minute peak only where it pays
(:data:`presage_scaler.engine.calibration_readings.RECENT_PEAK`). Checked by ``benchmarks/bench_backtest.py``."""

SEASONAL = "seasonal-naive"
RECENT_LEVEL = "recent-level"


# The paths compute point forecasts for many (start, origin) pairs at once: origin ``o`` forecasts
# from the history ``values[start:o]``. One forecast is one pair; a backtest chunk is many. A
# forecast is its anchors (per-origin numbers read from running sums over every pair at once, whose
# rounding depends on which pairs are read together) shaped into steps row by row, so that the
# steps of many pairs can be made a row block at a time from anchors made once.


@dataclass(frozen=True)
class _SeasonalPath:
    season: int
    cycles: int
    level_steps: int
    peak_steps: int

    def forecastable(self, starts: np.ndarray, origins: np.ndarray) -> np.ndarray:
        """Origins with at least one season of their history behind them."""
        return origins - starts >= self.season

    def _means(self, values: np.ndarray, starts: np.ndarray, origins: np.ndarray, steps: int) -> np.ndarray:
        ahead = np.arange(1, steps + 1)
        targets = origins[:, np.newaxis] - 1 + ahead
        first_lag = (ahead + self.season - 1) // self.season
        floor = starts[:, np.newaxis]
        total = np.zeros(targets.shape)
        count = np.zeros(targets.shape)
        for k in range(self.cycles):
            index = targets - (first_lag + k) * self.season
            inside = index >= floor
            if inside.all():  # the usual case: every lag lies in the history
                total += values[index]
                count += 1.0
            else:
                total += np.where(inside, values[np.maximum(index, floor)], 0.0)
                count += inside
        return total / count

    def _levels(self, values: np.ndarray, starts: np.ndarray, origins: np.ndarray) -> np.ndarray:
        span = np.minimum(self.level_steps, origins - starts)
        recent = window_sums(values, origins - span, origins)
        past = np.zeros(len(origins))
        seasons = np.zeros(len(origins))
        for k in range(1, self.cycles + 1):
            ends = origins - k * self.season
            inside = ends - span >= starts
            past[inside] += window_sums(values, ends[inside] - span[inside], ends[inside])
            seasons += inside
        usable = (seasons > 0) & (past > 0) & (recent >= 0)
        ratio = np.ones(len(origins))
        ratio[usable] = np.clip(recent[usable] * seasons[usable] / past[usable], *LEVEL_CLIP)
        return ratio

    def anchors(self, values: np.ndarray, starts: np.ndarray, origins: np.ndarray) -> _Anchors:
        """Per origin, the level ratio the seasonal mean is scaled by and the recent peak below which
        no step goes."""
        return (self._levels(values, starts, origins), trailing_maxima(values, origins, starts, self.peak_steps))

    def shaped(
        self, values: np.ndarray, starts: np.ndarray, origins: np.ndarray, steps: int, anchors: _Anchors
    ) -> np.ndarray:
        """``point_h(o)``, ``len(origins) × steps``: the scaled seasonal mean, at least the recent peak."""
        levels, peaks = anchors
        scaled = levels[:, np.newaxis] * self._means(values, starts, origins, steps)
        return np.maximum(scaled, peaks[:, np.newaxis])


@dataclass(frozen=True)
class _RecentLevelPath:
    level_steps: int
    peak_steps: int

    def forecastable(self, starts: np.ndarray, origins: np.ndarray) -> np.ndarray:
        """Origins with at least one point of their history behind them."""
        return origins - starts >= 1

    def anchors(self, values: np.ndarray, starts: np.ndarray, origins: np.ndarray) -> _Anchors:
        """Per origin, the recent mean held at the recent peak: every step's forecast."""
        mean = trailing_means(values, origins, starts, self.level_steps)
        return (np.maximum(mean, trailing_maxima(values, origins, starts, self.peak_steps)),)

    def shaped(
        self, values: np.ndarray, starts: np.ndarray, origins: np.ndarray, steps: int, anchors: _Anchors
    ) -> np.ndarray:
        """``point_h(o)``, ``len(origins) × steps``: the recent mean, at least the recent peak."""
        (level,) = anchors
        return np.repeat(level[:, np.newaxis], steps, axis=1)


_Path = _SeasonalPath | _RecentLevelPath

_Anchors = tuple[np.ndarray, ...]
"""A path's per-origin numbers, one array each (:meth:`_SeasonalPath.anchors`)."""


def _points(path: _Path, values: np.ndarray, starts: np.ndarray, origins: np.ndarray, steps: int) -> np.ndarray:
    """``point_h(o)`` of every (start, origin) pair, ``len(origins) × steps``."""
    return path.shaped(values, starts, origins, steps, path.anchors(values, starts, origins))


@dataclass(frozen=True)
class _Hindcasts:
    """The usable hindcast origins of a group of requests, all in one array."""

    starts: np.ndarray
    origins: np.ndarray
    asked: np.ndarray | list[np.ndarray]
    """Per request, which origins of its hindcast request are usable: a mask each, or one matrix of
    them when every request asked for as many."""
    bounds: list[tuple[int, int]]
    """Per request, its rows ``[first, last)``."""


def _answers(past: _Hindcasts, found: np.ndarray) -> np.ndarray | list[np.ndarray]:
    """Per request, ``found`` (one value per usable origin, in order) at its usable origins of its
    hindcast request, and NaN at the others: one row each of a matrix, or one array each (as
    ``past.asked``)."""
    if isinstance(past.asked, np.ndarray):  # every request asked for as many: one matrix
        answers = np.full(past.asked.shape, np.nan)
        answers[past.asked] = found if len(found) else np.zeros(0)
        return answers
    answered = []
    for usable, (first, last) in zip(past.asked, past.bounds, strict=True):
        answer = np.full(len(usable), np.nan)
        answer[usable] = found[first:last] if len(found) else np.zeros(0)
        answered.append(answer)
    return answered


def _hindcasts(path: _Path, spans: Sequence[tuple[int, int]], requests: Sequence[ForecastRequest]) -> _Hindcasts:
    begins = np.array([begin for begin, _ in spans], dtype=np.intp)
    ends = np.array([end for _, end in spans], dtype=np.intp)
    asked = [np.zeros(0, dtype=np.intp) if r.hindcast is None else r.hindcast.origins for r in requests]
    if len({len(origins) for origins in asked}) == 1:  # a backtest's: every request asks as many
        past = begins[:, np.newaxis] + np.array(asked, dtype=np.intp).reshape(len(requests), -1)
        starts = np.broadcast_to(begins[:, np.newaxis], past.shape)
        usable = path.forecastable(starts, past) & (past <= ends[:, np.newaxis])
        rows = np.concatenate(([0], np.cumsum(usable.sum(axis=1))))
        found: tuple[np.ndarray, np.ndarray, np.ndarray | list[np.ndarray]] = (starts[usable], past[usable], usable)
    else:
        pasts = [begin + np.asarray(origins, dtype=np.intp) for begin, origins in zip(begins, asked, strict=True)]
        firsts = [np.full(len(p), begin) for begin, p in zip(begins, pasts, strict=True)]
        masks = [path.forecastable(b, p) & (p <= end) for b, p, end in zip(firsts, pasts, ends, strict=True)]
        rows = np.concatenate(([0], np.cumsum([int(m.sum()) for m in masks])))
        found = (
            np.concatenate([b[m] for b, m in zip(firsts, masks, strict=True)]),
            np.concatenate([p[m] for p, m in zip(pasts, masks, strict=True)]),
            masks,
        )
    found_starts, found_origins, found_asked = found
    bounds = list(zip(rows[:-1].tolist(), rows[1:].tolist(), strict=True))
    return _Hindcasts(found_starts, found_origins, found_asked, bounds=bounds)


@dataclass(frozen=True)
class SeasonalNaive:
    """The SeasonalNaive backend: mean of the same phase over the last ``cycles`` seasons."""

    season: timedelta = timedelta(hours=168)
    cycles: int = 3
    name: str = "default"
    """The ForecastBackend this is: ``lastForecast.backend``, as for every backend."""

    def __post_init__(self) -> None:
        if self.season <= timedelta(0):
            raise ValueError(f"season must be positive, got {self.season}")
        if self.cycles < 1:
            raise ValueError(f"cycles must be at least 1, got {self.cycles}")

    @classmethod
    def from_settings(cls, settings: SeasonalNaiveBackend, name: str = "default") -> SeasonalNaive:
        """The backend configured by a ``SeasonalNaiveBackend`` API object, for the ForecastBackend ``name``."""
        return cls(season=settings.season, cycles=settings.cycles, name=name)

    @functools.cached_property
    def identity(self) -> ModelIdentity:
        """The ForecastBackend's name, with the settings as the model, e.g. ``seasonal-naive/168hx3``."""
        model = f"{SEASONAL}/{format_duration(self.season)}x{self.cycles}"
        return ModelIdentity(backend=self.name, model=model)

    async def probe(self) -> str | None:
        """Nothing to reach, so always ready: the model is the identity's (its settings)."""
        return self.identity.model

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
                results.append(self.forecast_one(request.history, request.horizon, request.quantiles, request.hindcast))
            except BackendRejected as err:
                raise BackendRejected(f"request {index}: {err}") from err
        return results

    def forecast_one(
        self, history: History, horizon: int, quantiles: Sequence[float], hindcast: HindcastRequest | None = None
    ) -> Forecast:
        """Forecast ``horizon`` steps of one history at ``quantiles``, and answer ``hindcast`` (see the
        module docstring).

        Raises :class:`BackendRejected` for an empty or non-finite history, a non-positive step or
        horizon (or hindcast window), a level outside (0, 1), or a season shorter than half a step.
        """
        values = np.asarray(history.values, dtype=np.float64)
        request = ForecastRequest(History(values, history.step), horizon, tuple(quantiles), hindcast)
        return self.forecast_windows(values, [(0, len(values))], [request])[0]

    def forecast_windows(
        self, series: np.ndarray, spans: Sequence[tuple[int, int]], requests: Sequence[ForecastRequest]
    ) -> list[Forecast]:
        """Forecast requests whose histories are windows of one series: request ``i``'s history is
        ``series[begin:end]`` for ``spans[i] = (begin, end)`` (what a backtest replays).

        The point forecasts and hindcasts of all of them are computed in one vectorised pass, which
        is what makes a backtest fast; each result is what :meth:`forecast_one` returns for its own
        history, up to the order of floating-point additions in running sums.
        """
        values = np.asarray(series, dtype=np.float64)
        if not requests:
            return []
        step = requests[0].history.step
        check_history(values, step, min(r.horizon for r in requests))
        for (begin, end), request in zip(spans, requests, strict=True):
            if request.history.step != step or len(request.history.values) != end - begin or end <= begin:
                raise ValueError(f"request history does not match the series window [{begin}, {end})")
        season_steps, season_notes = self._season_steps(step)
        groups: dict[tuple[_Path, int, int, tuple[float, ...], tuple[float, float] | None], list[int]] = {}
        for i, ((begin, end), request) in enumerate(zip(spans, requests, strict=True)):
            window, spread_levels = 0, None
            if request.hindcast is not None:
                window, spread_levels = request.hindcast.window, request.hindcast.band
                if window < 1:
                    raise BackendRejected(f"hindcast window must be at least 1 step, got {window}")
                if spread_levels is not None:
                    _levels_of(spread_levels)
            path = self._path(end - begin, season_steps, step)
            key = (path, request.horizon, window, _levels_of(request.quantiles), spread_levels)
            groups.setdefault(key, []).append(i)
        results: dict[int, Forecast] = {}
        for (path, horizon, window, levels, spread_levels), members in groups.items():
            group = [spans[i] for i in members]
            begins = np.array([begin for begin, _ in group])
            ends = np.array([end for _, end in group])
            points = _points(path, values, begins, ends, horizon)
            past = _hindcasts(path, group, [requests[i] for i in members])
            peaks, spreads = np.zeros(0), np.zeros(0)
            if window and len(past.origins):
                # A backtest's decisions ask for the same past forecasts over and over: make each once.
                unique, inverse = _distinct([past.starts, past.origins])
                band = None if spread_levels is None else np.sort(spread_levels)
                peaks, spreads = self._hindcast_figures(
                    values, past.starts[unique], past.origins[unique], window, path, band
                )
                peaks, spreads = peaks[inverse], spreads[inverse]
            negatives = np.concatenate(([0], np.cumsum(values[begins.min() : ends.max()] < 0)))
            demand = negatives[ends - begins.min()] == negatives[begins - begins.min()]
            spans_used = _band_spans(path, ends - begins)
            offsets, method = self._bands(values, begins, ends, spans_used, path, np.array(levels))
            bands = points[:, np.newaxis, :] + _widened(offsets, path, horizon)
            np.maximum(bands, 0.0, out=bands, where=demand[:, np.newaxis, np.newaxis])
            references = _answers(past, peaks)
            answered_spreads = _answers(past, spreads) if spread_levels is not None else None
            lengths = (ends - begins).tolist()
            for row, (band, used) in enumerate(zip(bands, spans_used.tolist(), strict=True)):
                notes = self._notes(lengths[row], step, path, used)
                answer = None
                hindcast = requests[members[row]].hindcast
                if hindcast is not None:
                    answer = Hindcast(
                        origins=hindcast.origins,
                        references=references[row],
                        spreads=None if answered_spreads is None else answered_spreads[row],
                    )
                results[members[row]] = Forecast(
                    point=points[row],
                    quantiles=dict(zip(levels, band, strict=True)),
                    method=method,
                    notes=tuple(season_notes + notes),
                    hindcast=answer,
                )
        return [results[i] for i in range(len(requests))]

    def _bands(
        self,
        values: np.ndarray,
        begins: np.ndarray,
        ends: np.ndarray,
        used: np.ndarray,
        path: _Path,
        levels: np.ndarray,
    ) -> tuple[np.ndarray, str]:
        """Band offsets (``rows × levels × 1``, before :func:`_widened`) of the histories
        ``values[begin:end]``, each from its last ``used`` residuals (or changes; one count per
        history), and the method that made them."""
        if isinstance(path, _RecentLevelPath):
            return _recent_level_bands(values, ends, used, levels), RECENT_LEVEL
        offsets = _seasonal_bands(values, begins, ends, used, path.season, path.cycles, levels)
        if path.cycles == self.cycles:
            return offsets, ""  # the normal path: nothing to report beyond the model's identity
        return offsets * math.sqrt(self.cycles / path.cycles), f"{SEASONAL} ({path.cycles} of {self.cycles} cycles)"

    def _hindcast_figures(
        self,
        values: np.ndarray,
        starts: np.ndarray,
        origins: np.ndarray,
        window: int,
        path: _Path,
        band: np.ndarray | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per forecast from a history ``values[start:origin]`` over ``window`` steps: its highest
        point (``β``) and, with two ``band`` levels, :func:`band_spread` of the band
        :meth:`forecast_windows` reports between them, with the path and cycles of the current
        forecast, clipped at 0 where that history is demand (NaN where the history holds no residual
        to measure it from, or without ``band``).

        The anchors and band offsets are made for all of them at once; the ``window``-step points and
        bands a row block at a time (:func:`presage_scaler.series.blocks.row_blocks`), so the
        matrices of a day's hindcasts of a thousand decisions never exist at once. Histories that
        have the same band (the same residuals, each over the same number of cycles) share one
        computation: a backtest's hindcasts from one origin repeat across decisions."""
        anchors = path.anchors(values, starts, origins)
        peaks = np.empty(len(origins))
        spreads = np.full(len(origins), np.nan)
        offsets, banded, demand = self._hindcast_offsets(values, starts, origins, path, band)
        levels = 0 if band is None else len(band)
        for rows in row_blocks(len(origins), 8 * window * (1 + 2 * levels)):  # points, bands and a clip's mask
            points = path.shaped(values, starts[rows], origins[rows], window, tuple(a[rows] for a in anchors))
            peaks[rows] = points.max(axis=1)
            some = banded[rows] >= 0
            if some.any():
                bands = points[some, np.newaxis, :] + _widened(offsets[banded[rows][some]], path, window)
                np.maximum(bands, 0.0, out=bands, where=demand[rows][some, np.newaxis, np.newaxis])
                spreads[np.flatnonzero(some) + rows.start] = np.maximum(0.0, (bands[:, 1] - bands[:, 0]).max(axis=1))
        return peaks, spreads

    def _hindcast_offsets(
        self, values: np.ndarray, starts: np.ndarray, origins: np.ndarray, path: _Path, band: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For :meth:`_hindcast_figures`: the distinct band offsets (``× band levels × 1``), per
        history the row of its own (-1 where it has none), and whether the history is demand."""
        banded = np.full(len(origins), -1, dtype=np.intp)
        demand = np.zeros(len(origins), dtype=bool)
        if band is None:
            return np.zeros((0, 0, 1)), banded, demand
        used = _band_spans(path, origins - starts)
        some = np.flatnonzero(used > 0)
        if not len(some):
            return np.zeros((0, len(band), 1)), banded, demand
        starts, origins, used = starts[some], origins[some], used[some]
        keys = [origins, used]
        if isinstance(path, _SeasonalPath):
            # Where each history's residuals gain a cycle: its start's k-th season, within the residuals read.
            keys += [np.clip(starts + k * path.season, origins - used, origins) for k in range(2, path.cycles + 1)]
        first, banded[some] = _distinct(keys)
        offsets, _ = self._bands(values, starts[first], origins[first], used[first], path, band)
        low = int(starts.min())
        negatives = np.concatenate(([0], np.cumsum(values[low : int(origins.max())] < 0)))
        demand[some] = negatives[origins - low] == negatives[starts - low]
        return offsets, banded, demand

    def _notes(self, n: int, step: timedelta, path: _Path, used: int) -> list[str]:
        """What a forecast from ``n`` points on ``path`` says about how it was made."""
        if isinstance(path, _RecentLevelPath):
            if n == 1:
                return [
                    self._short_history_note(n, step),
                    "a single point: it is the forecast at every step and every quantile",
                ]
            peak_steps = min(n, path.peak_steps)
            peak = "the latest point" if peak_steps == 1 else f"the highest of the last {peak_steps}"
            return [
                self._short_history_note(n, step),
                f"forecasting the mean of the last {min(n, path.level_steps)} steps (at least {peak}); band from "
                f"{used} step-to-step changes (both signs), widened by sqrt(steps ahead)",
            ]
        if path.cycles == self.cycles:
            return []
        return [
            f"{format_duration(n * step)} of history holds {path.cycles} of the {self.cycles} "
            f"{format_duration(self.season)} seasons configured; band widened by "
            f"sqrt({self.cycles}/{path.cycles}) = {math.sqrt(self.cycles / path.cycles):.2f}"
        ]

    def _path(self, n: int, season_steps: int, step: timedelta) -> _Path:
        if n < season_steps + MIN_RESIDUALS:
            return _path_of(0, season_steps, step)
        return _path_of(min(self.cycles, n // season_steps), season_steps, step)

    def _season_steps(self, step: timedelta) -> tuple[int, list[str]]:
        """``S``, the season in whole steps, and a note when that had to round. Unlike a span, which is
        covered (rounded up), a season is a period to repeat: the nearest whole number of steps repeats
        it most faithfully, and one under half a step has no such number."""
        if step <= timedelta(0):
            raise BackendRejected(f"history step must be positive, got {step}")
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

    def _short_history_note(self, n: int, step: timedelta) -> str:
        span = f"{format_duration(n * step)} of history"
        season = format_duration(self.season)
        season_steps, _ = self._season_steps(step)
        if n < season_steps:
            return f"{span}, less than one {season} season"
        return (
            f"{span}: only {n - season_steps} steps after the first {season} season to measure the "
            f"seasonal forecast's error (needs {MIN_RESIDUALS})"
        )


@functools.lru_cache(maxsize=256)
def _path_of(cycles: int, season_steps: int, step: timedelta) -> _Path:
    """The seasonal path over ``cycles`` seasons, or the recent-level fallback for 0 (made once per
    shape: a backtest forecasts thousands of histories on a handful)."""
    peak_steps = steps_for(PEAK_WINDOW, step)
    if not cycles:
        return _RecentLevelPath(level_steps=steps_for(RECENT_WINDOW, step, at_least=2), peak_steps=peak_steps)
    return _SeasonalPath(
        season=season_steps, cycles=cycles, level_steps=steps_for(LEVEL_WINDOW, step), peak_steps=peak_steps
    )


def from_spec(name: str, spec: ForecastBackendSpec, http: aiohttp.ClientSession | None = None) -> SeasonalNaive:
    """The SeasonalNaive backend of the ForecastBackend ``name`` (the registry's factory; in-process,
    so ``http`` is unused)."""
    return SeasonalNaive.from_settings(spec.seasonal_naive_or_default, name)


def _distinct(keys: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The rows whose ``keys`` (columns of equal length) first take each distinct value, and for
    every row the position of its value among those."""
    order = np.lexsort(keys[::-1])
    changed = np.zeros(len(order), dtype=bool)
    changed[0] = True
    for key in keys:
        ordered = key[order]
        changed[1:] |= ordered[1:] != ordered[:-1]
    group = np.cumsum(changed) - 1
    inverse = np.empty(len(order), dtype=np.intp)
    inverse[order] = group
    return order[changed], inverse


def _levels_of(quantiles: Sequence[float]) -> tuple[float, ...]:
    """The requested levels, sorted and de-duplicated; refused outside (0, 1)."""
    return _checked_levels(tuple(quantiles))


@functools.lru_cache(maxsize=256)
def _checked_levels(quantiles: tuple[float, ...]) -> tuple[float, ...]:
    """:func:`_levels_of`, once per request shape (a backtest's requests all ask for the same)."""
    levels = tuple(sorted(set(quantiles)))
    if levels and not (levels[0] > 0.0 and levels[-1] < 1.0):
        raise BackendRejected(f"quantile levels must lie strictly between 0 and 1, got {list(quantiles)}")
    return levels


def _band_spans(path: _Path, lengths: np.ndarray) -> np.ndarray:
    """How many residuals (seasonal path) or step-to-step changes (recent level) each history's band
    is measured from."""
    if isinstance(path, _RecentLevelPath):
        return np.minimum(lengths, MAX_RESIDUALS + 1) - 1
    window = min(max(path.cycles * path.season, MIN_RESIDUALS), MAX_RESIDUALS)
    return np.minimum(lengths - path.season, window)


def _last_positions(ends: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the ``counts[r]`` positions before ``ends[r]``, right-aligned in a matrix as wide as
    the largest count, and which entries are real; the rest repeat ``ends[r] - 1``."""
    width = int(counts.max()) if len(counts) else 0
    columns = np.arange(width)
    real = columns >= (width - counts)[:, np.newaxis]
    positions = np.where(real, ends[:, np.newaxis] - width + columns, ends[:, np.newaxis] - 1)
    return positions, real


def _seasonal_bands(
    values: np.ndarray,
    begins: np.ndarray,
    ends: np.ndarray,
    used: np.ndarray,
    season_steps: int,
    cycles: int,
    levels: np.ndarray,
) -> np.ndarray:
    """Unwidened band offsets (``rows × levels × 1``) of the seasonal path, from the last ``used[r]``
    plain residuals of each history ``values[begin:end]``."""
    s = season_steps
    firsts = ends - used
    count = np.minimum(cycles, (firsts - begins) // s)
    if len(used) and used.min() == used.max() and begins.min() == begins.max():
        # Histories of one start and residuals of one length (a backtest's, while its history is
        # shorter than the signal's): each position's residual is the same in every history that
        # reads it, over the cycles before it, so every history's residuals are a window of one series.
        span = np.arange(int(firsts.min()), int(ends.max()))
        counts = np.minimum(cycles, (span - int(begins[0])) // s)
        residuals = _residuals_by_count(values, span, s, cycles)[counts - 1, np.arange(len(span))]
        return _window_quantiles(residuals, firsts - int(span[0]), int(used[0]), levels)[:, :, np.newaxis]
    offsets = np.empty((len(ends), len(levels)))
    general = np.ones(len(ends), dtype=bool)
    if len(used) and used.min() == used.max():
        # The usual cases, every history's residuals of one length: read them as windows of one
        # residual series per cycle count, or where a history's residuals gain a cycle (its start's
        # next season falls among them), of two such series, with no position matrices.
        width = int(used[0])
        last = np.minimum(cycles, (ends - 1 - begins) // s)
        for k in np.unique(last[count == last]).tolist():
            rows = np.flatnonzero((count == k) & (last == k))
            span = np.arange(int(firsts[rows].min()), int(ends[rows].max()))
            residuals = _residuals_by_count(values, span, s, k)[k - 1]
            offsets[rows] = _window_quantiles(residuals, firsts[rows] - int(span[0]), width, levels)
            general[rows] = False
        for k in np.unique(last[(count == last - 1) & (count >= 1)]).tolist():
            rows = np.flatnonzero((count == k - 1) & (last == k))
            span = np.arange(int(firsts[rows].min()), int(ends[rows].max()))
            fewer, more = _residuals_by_count(values, span, s, k)[k - 2 :]
            splits = begins[rows] + k * s - int(span[0])
            offsets[rows] = _split_window_quantiles(fewer, more, ends[rows] - int(span[0]), width, splits, levels)
            general[rows] = False
    rows = np.flatnonzero(general)
    # Per row: positions, counts, residuals, a mask and a sort's copy of the widest history's.
    for block in row_blocks(len(rows), 6 * 8 * int(used[rows].max(initial=1))):
        these = rows[block]
        positions, real = _last_positions(ends[these], used[these])
        counts = np.minimum(cycles, (positions - begins[these, np.newaxis]) // s)
        # Consecutive histories share most residuals: compute each position's residual once per cycle
        # count it can have (k = 1 … cycles), then pick each history's.
        low = int(positions.min())
        span = np.arange(low, int(positions.max()) + 1)
        residuals = _residuals_by_count(values, span, s, cycles)[counts - 1, positions - low]
        offsets[these] = _empirical_quantiles(residuals, levels, real)
    return offsets[:, :, np.newaxis]


def _residuals_by_count(values: np.ndarray, span: np.ndarray, season_steps: int, cycles: int) -> np.ndarray:
    """``(cycles, len(span))``: the residual at each position of ``span`` over ``k = 1 … cycles``
    seasons, row ``k - 1`` (lags before the series' start read its first value, for positions no
    history reads over that many)."""
    lagged = np.zeros(len(span))
    by_count = np.empty((cycles, len(span)))
    for k in range(1, cycles + 1):
        lagged += values[np.maximum(span - k * season_steps, 0)]
        by_count[k - 1] = values[span] - lagged / k
    return by_count


def _widened(offsets: np.ndarray, path: _Path, horizon: int) -> np.ndarray:
    """Band offsets (``rows × levels × 1``) over ``horizon`` steps: the recent-level path's widen by
    sqrt(steps ahead) (``rows × levels × horizon``), the seasonal path's are the same at every step."""
    if isinstance(path, _RecentLevelPath):
        return offsets * np.sqrt(np.arange(1, horizon + 1, dtype=np.float64))
    return offsets


def _recent_level_bands(values: np.ndarray, ends: np.ndarray, used: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Band offsets (``rows × levels × 1``, before :func:`_widened`) of the recent-level path, from
    the last ``used[r]`` step-to-step changes of each history ending at ``ends`` (none: a single
    point, no band)."""
    bands = np.zeros((len(ends), len(levels), 1))
    some = used > 0
    if some.any() and used[some].min() == used[some].max():
        # The usual case (every band from as many changes): each history's changes and their
        # negatives, interleaved, are a window of one series of them all.
        width, last = int(used[some][0]), ends[some]
        low = int(last.min()) - width - 1
        changes = np.diff(values[low : int(last.max())])
        both = np.empty(2 * len(changes))
        both[0::2], both[1::2] = changes, -changes
        bands[some] = _window_quantiles(both, 2 * (last - width - 1 - low), 2 * width, levels)[:, :, np.newaxis]
    elif some.any():
        rows = np.flatnonzero(some)
        # Per row: positions, values, changes both ways, masks and a sort's copy of the widest history.
        for block in row_blocks(len(rows), 8 * 8 * (int(used[rows].max()) + 1)):
            these = rows[block]
            positions, real = _last_positions(ends[these], used[these] + 1)
            changes = np.diff(values[positions], axis=1)
            real = real[:, :-1]  # change j is real where its first point is
            symmetric = np.concatenate((changes, -changes), axis=1)
            both = np.concatenate((real, real), axis=1)
            bands[these] = _empirical_quantiles(symmetric, levels, both)[:, :, np.newaxis]
    return bands


def _window_quantiles(series: np.ndarray, starts: np.ndarray, width: int, levels: np.ndarray) -> np.ndarray:
    """:func:`_empirical_quantiles` of the windows ``series[start : start + width]``, read as order
    statistics of sliding windows (:func:`presage_scaler.series.rolling.window_order_statistics`)."""
    return _quantiles_of(lambda ranks: window_order_statistics(series, starts, width, ranks), width, levels)


def _split_window_quantiles(
    fewer: np.ndarray, more: np.ndarray, ends: np.ndarray, width: int, splits: np.ndarray, levels: np.ndarray
) -> np.ndarray:
    """:func:`_empirical_quantiles` of the windows that read ``fewer`` before their split and ``more``
    from it on (:func:`presage_scaler.series.rolling.split_window_order_statistics`)."""
    return _quantiles_of(
        lambda ranks: split_window_order_statistics(fewer, more, ends, width, splits, ranks), width, levels
    )


def _quantiles_of(order_statistics: Callable[[np.ndarray], np.ndarray], width: int, levels: np.ndarray) -> np.ndarray:
    """Type-7 quantiles at ``levels`` (``rows × levels``, made non-decreasing) of rows of ``width``
    samples, from ``order_statistics(ranks)``: each row's samples at those ranks once sorted."""
    below, above, fraction = _type7(levels, width)
    ranks, at = np.unique(np.concatenate((below, above)), return_inverse=True)
    ordered = order_statistics(ranks)
    low, high = ordered[:, at[: len(levels)]], ordered[:, at[len(levels) :]]
    return np.maximum.accumulate(low + fraction * (high - low), axis=1)


def _type7(levels: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where type-7 quantiles at ``levels`` of ``size`` sorted samples lie: the order statistics
    below and above each, and how far between them."""
    position = levels * (size - 1)
    below = np.floor(position).astype(np.intp)
    return below, np.minimum(below + 1, size - 1), position - below


def _empirical_quantiles(samples: np.ndarray, levels: np.ndarray, real: np.ndarray | None = None) -> np.ndarray:
    """Type-7 (linear) empirical quantiles of each row of ``samples`` at ascending ``levels``
    (``rows × levels``), made non-decreasing; with ``real``, each row's samples are only where it
    says (at least one per row).

    Same numbers as ``np.quantile``: rows are sorted, those of several sizes with the missing
    samples last.
    """
    rows, width = samples.shape
    if not levels.size:
        return np.zeros((rows, 0))
    if real is None or bool(real.all()):
        below, above, fraction = _type7(levels, width)
        # A sort: numpy's partition at several positions costs more than sorting rows this short.
        ordered = np.sort(samples, axis=1)
        values = ordered[:, below] + fraction * (ordered[:, above] - ordered[:, below])
    else:
        ordered = np.sort(np.where(real, samples, np.inf), axis=1)
        sizes = real.sum(axis=1)
        position = levels * (sizes[:, np.newaxis] - 1)
        below = np.floor(position).astype(np.intp)
        above = np.minimum(below + 1, sizes[:, np.newaxis] - 1)
        low = np.take_along_axis(ordered, below, axis=1)
        values = low + (position - below) * (np.take_along_axis(ordered, above, axis=1) - low)
    return np.maximum.accumulate(values, axis=1)
