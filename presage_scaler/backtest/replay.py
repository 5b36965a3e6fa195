"""presage itself as a simulated policy: production's evaluator on a simulated clock.

For every decision the replay gathers what the controller would (the signal's history up to the
last complete point, capped to ``spec.signal.history`` and the backend's ``max_context``; the
per-replica capacity), builds the requests with :func:`presage_scaler.engine.evaluator.forecast_requests`,
and decides with :func:`presage_scaler.engine.evaluator.decide`, carrying the policy state and the
calibration state from one decision to the next, as the controller does through ``.status``. There
is no second implementation of the decision.

The simulated clock starts at the trace's start aligned down to the signal's resolution, so that
each decision's newest history point is at the time production's range query would put it (the
calibration records forecasts by that time); it differs from the trace's own times by less than
one resolution step, which only shifts ``generatedAt``.

Forecasts depend only on history, never on the policy's state, so :class:`DecisionFeed` makes them
ahead in chunks of upcoming decisions, apart from the decisions themselves: one backend call per
chunk (a model server sees batches, not single requests), and each window in a chunk still ends at
its own decision. When the backend answered the hindcasts
(SeasonalNaive), calibration needs no state either, and the chunk's sizing windows are calibrated in
one vectorised pass (:func:`presage_scaler.engine.calibration_windows.calibrated_windows`, which production calls with
a chunk of one); otherwise each decision calibrates from the state the previous one left.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

import numpy as np

from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.backends.base import Backend, Forecast, ForecastRequest, History
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.backtest.memory import CHUNK_BYTES
from presage_scaler.backtest.trace import Trace
from presage_scaler.engine.calibration_windows import CalibratedWindows, calibrated_windows
from presage_scaler.engine.evaluator import (
    Recommendation,
    SignalData,
    SignalSpec,
    Sizing,
    context_points,
    decide,
    forecast_requests,
    size,
    sizing_window,
)
from presage_scaler.engine.leadtime import LeadTime, resolve_horizon
from presage_scaler.engine.past_forecasts import BAND_LEVELS, CalibrationState, answered, answered_together
from presage_scaler.engine.policy import PolicyState
from presage_scaler.series.timegrid import align_down, steps_for

CHUNK = 1024
"""Decisions whose forecasts are requested together, at most. Their hindcasts (the last day's
forecasts, for calibration) repeat from one decision to the next and are computed once per chunk, so a
chunk near a day of one-minute decisions computes each about twice; 256 cost a quarter more CPU, 4,096
no less (the CPU per scaler of ``benchmarks/bench_tune.py``)."""

FORECAST_VALUE_BYTES = 24
"""Bytes a chunk takes per forecast value (one step of the point forecast or of one quantile): the
backend's answer and what calibration reads of it. Above the slope of ``presage tune``'s peak over a
chunk's values with a two-hour horizon at one-second resolution (about 21)."""


def quantile_levels(spec: PredictiveScalerSpec, levels: Sequence[float]) -> tuple[float, ...]:
    """The quantile levels a decision's forecast carries: the spec's targetQuantile and
    scaleDownQuantile, the forecast band's and ``levels``, in order."""
    policy = spec.policy
    return tuple(sorted({policy.target_quantile, policy.scale_down_quantile, *BAND_LEVELS, *levels}))


def decisions_per_chunk(
    spec: PredictiveScalerSpec,
    signal_spec: SignalSpec,
    lead: timedelta,
    max_horizon: int | None,
    levels: Sequence[float],
) -> int:
    """How many decisions a chunk holds: :data:`CHUNK`, or as many as fit :data:`CHUNK_BYTES` (at
    least one)."""
    horizon = resolve_horizon(spec.forecast, lead, spec.interval, signal_spec.resolution, max_horizon)
    per_decision = horizon * (len(quantile_levels(spec, levels)) + 1) * FORECAST_VALUE_BYTES
    return max(1, min(CHUNK, CHUNK_BYTES // per_decision))


class Forecaster(Protocol):
    """Makes the forecasts for a batch of requests, in order; request ``i``'s history is
    ``series[begin:end]`` for ``spans[i] = (begin, end)``."""

    def __call__(
        self, series: np.ndarray, spans: Sequence[tuple[int, int]], requests: Sequence[ForecastRequest]
    ) -> list[Forecast]: ...


@dataclass(frozen=True)
class DirectForecaster:
    """SeasonalNaive without the async wrapper, forecasting a whole batch of windows of the signal in
    one vectorised pass (:meth:`SeasonalNaive.forecast_windows`)."""

    backend: SeasonalNaive

    def __call__(
        self, series: np.ndarray, spans: Sequence[tuple[int, int]], requests: Sequence[ForecastRequest]
    ) -> list[Forecast]:
        return self.backend.forecast_windows(series, spans, requests)


REQUESTS_PER_CALL = 256
"""The most requests in one ``backend.forecast`` call of a backtest: the series a presage-forecaster
takes in one request by default (``max_series_per_request``; more are refused with 413)."""


@dataclass(frozen=True)
class BatchedForecaster:
    """Any backend, one ``await backend.forecast(...)`` per REQUESTS_PER_CALL requests of a batch, on
    one event loop for the whole run (a client's connection pool is bound to the loop it was created on)."""

    backend: Backend
    loop: asyncio.Runner

    def __call__(
        self, series: np.ndarray, spans: Sequence[tuple[int, int]], requests: Sequence[ForecastRequest]
    ) -> list[Forecast]:
        forecasts: list[Forecast] = []
        for first in range(0, len(requests), REQUESTS_PER_CALL):
            forecasts += self.loop.run(self.backend.forecast(requests[first : first + REQUESTS_PER_CALL]))
        return forecasts


def forecaster_for(backend: Backend, loop: asyncio.Runner) -> Forecaster:
    """The fastest way to call ``backend``."""
    return DirectForecaster(backend) if isinstance(backend, SeasonalNaive) else BatchedForecaster(backend, loop)


def history_points(signal: SignalSpec, backend: Backend) -> int:
    """The most signal points a decision reads: the same window as production's range query
    (``prometheus.history_window``), capped at what the backend takes."""
    return min(max(1, signal.history // signal.resolution), context_points(backend.max_context))


@dataclass(frozen=True)
class PresageRecord:
    """What presage did at each decision, for decisions.csv and the report."""

    steps: np.ndarray
    replicas: np.ndarray
    upper: np.ndarray
    """The calibrated targetQuantile forecast of the sizing window's highest demand."""
    lower: np.ndarray
    """The calibrated scaleDownQuantile forecast of the sizing window's highest demand."""
    forecast_steps: np.ndarray
    """The trace step of the lead time after each decision (where the band is drawn)."""
    window_starts: np.ndarray
    """The signal point each sizing window starts at (the first one after the decision's history)."""
    window: int
    """Signal points in the sizing window."""
    calibrated: np.ndarray
    """Whether each decision's window forecast was calibrated (else the backend's own band)."""
    constraints: tuple[str, ...]


@dataclass(frozen=True)
class _Chunk:
    """Consecutive decisions of a feed, and the forecasts they are made from."""

    steps: list[int]
    data: list[SignalData]
    spans: list[tuple[int, int]]
    forecasts: list[Forecast]


@dataclass
class DecisionFeed:
    """What each decision of a trace is made from, in ``decisions`` order: its step, the signal data it
    sees, the backend's forecast and, when every forecast of its chunk came with its hindcasts, the
    calibrated sizing (None otherwise: the decision calibrates from the state the previous one left).

    ``signal`` is the trace at the signal's resolution, ``ratio`` trace steps per signal point.
    ``levels`` are quantile levels to forecast and calibrate besides the spec's targetQuantile and
    scaleDownQuantile: a level's numbers do not depend on which others are asked for, so one feed can
    size policies with different targetQuantiles (``presage tune``). ``chunk_size`` sets how many
    decisions a chunk holds, at most :func:`decisions_per_chunk`'s (None: that many): a caller that
    forecasts a run of decisions in pieces gives each piece chunks it can make again alike.
    """

    spec: PredictiveScalerSpec
    signal_spec: SignalSpec
    signal: Trace
    ratio: int
    backend: Backend
    forecaster: Forecaster
    lead: LeadTime
    decisions: range
    levels: tuple[float, ...] = ()
    chunk_size: int | None = None
    window: int = field(init=False)
    """Signal points in the sizing window."""
    _pending: deque[tuple[int, SignalData, Forecast, Sizing | None]] = field(
        default_factory=deque, init=False, repr=False
    )
    _upcoming: Iterator[int] = field(init=False, repr=False)
    _gaps: np.ndarray = field(init=False, repr=False)
    _points: int = field(init=False, repr=False)
    _levels: tuple[float, ...] = field(init=False, repr=False)
    _chunk_size: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._upcoming = iter(self.decisions)
        self._gaps = np.concatenate([[0], np.cumsum(self.signal.gaps)])
        self._points = history_points(self.signal_spec, self.backend)
        self.window = sizing_window(self.spec, self.lead.value, self.signal_spec)
        self._levels = quantile_levels(self.spec, self.levels)
        most = decisions_per_chunk(self.spec, self.signal_spec, self.lead.value, self.backend.max_horizon, self.levels)
        if self.chunk_size is not None and not 1 <= self.chunk_size <= most:
            raise ValueError(f"a chunk holds 1 to {most} decisions here, not {self.chunk_size}")
        self._chunk_size = most if self.chunk_size is None else self.chunk_size

    def _span(self, step: int) -> tuple[int, int]:
        """The signal points a decision at trace step ``step`` sees: ``[begin, end)``."""
        end = step // self.ratio
        return max(0, end - self._points), end

    def _data(self, step: int) -> SignalData:
        begin, end = self._span(step)
        return SignalData(
            spec=self.signal_spec,
            history=History(values=self.signal.values[begin:end], step=self.signal.step),
            gap_steps=int(self._gaps[end] - self._gaps[begin]),
            capacity=self.signal_spec.per_replica,
        )

    def _chunk(self) -> _Chunk | None:
        """The next chunk's decisions' data and forecasts (None after the last decision)."""
        steps = [step for _, step in zip(range(self._chunk_size), self._upcoming, strict=False)]
        if not steps:
            return None
        data = [self._data(step) for step in steps]
        requests = forecast_requests(self.spec, data, self.lead.value, self.backend.max_horizon, self.levels)
        spans = [self._span(step) for step in steps]
        return _Chunk(steps, data, spans, self.forecaster(self.signal.values, spans, requests))

    def _fill(self) -> None:
        if (chunk := self._chunk()) is None:
            return
        windows = self._calibrated(chunk)
        sizings: list[Sizing | None] = [None] * len(chunk.steps)
        if windows is not None:
            sizings = [Sizing(windows=(w,), calibration=CalibrationState()) for w in windows.forecasts()]
        self._pending.extend(zip(chunk.steps, chunk.data, chunk.forecasts, sizings, strict=True))

    def _calibrated(self, chunk: _Chunk) -> CalibratedWindows | None:
        """The chunk's sizing windows, calibrated at once when every forecast came with its hindcasts."""
        if any(f.hindcast is None for f in chunk.forecasts):
            return None
        return calibrated_windows(
            self.signal.values,
            self.signal.step,
            chunk.spans,
            chunk.forecasts,
            self.window,
            self._levels,
            answered_together(chunk.forecasts, self.window) or [answered(f, self.window) for f in chunk.forecasts],
        )

    def calibrated(self) -> Iterator[CalibratedWindows | None]:
        """The calibrated sizing windows of the decisions, a chunk at a time, as arrays (None for a
        chunk with a forecast that came without its hindcasts): what :meth:`__next__` yields, without
        the per-decision objects. Not to be mixed with iterating the feed."""
        while (chunk := self._chunk()) is not None:
            yield self._calibrated(chunk)

    def __iter__(self) -> Iterator[tuple[int, SignalData, Forecast, Sizing | None]]:
        return self

    def __next__(self) -> tuple[int, SignalData, Forecast, Sizing | None]:
        if not self._pending:
            self._fill()
        if not self._pending:
            raise StopIteration
        return self._pending.popleft()


@dataclass
class PresagePolicy:
    """presage's decisions for one trace. ``signal`` is the trace at the signal's resolution,
    ``ratio`` trace steps per signal point; decisions must be asked for in ``decisions`` order, and
    the decision at trace step ``k`` happens at ``start + k·step``."""

    spec: PredictiveScalerSpec
    signal_spec: SignalSpec
    signal: Trace
    ratio: int
    backend: Backend
    forecaster: Forecaster
    lead: LeadTime
    decisions: range
    start: datetime
    step: timedelta
    state: PolicyState = field(default_factory=PolicyState)
    """What the next decision starts from, as the controller keeps it in ``.status``: a spec that takes
    over from another mid-trace is given the other's, as a spec change keeps the status."""
    last: Recommendation | None = field(default=None, init=False, repr=False)
    """The last decision's recommendation: what an evaluation hands on to the steps after it (the shadow
    and the advice scored beside it)."""
    _feed: DecisionFeed = field(init=False, repr=False)
    _calibration: CalibrationState = field(default_factory=CalibrationState, init=False, repr=False)
    _clock: datetime = field(init=False, repr=False)
    _lead_index: int = field(init=False, repr=False)
    _replicas: list[int] = field(default_factory=list, init=False, repr=False)
    _upper: list[float] = field(default_factory=list, init=False, repr=False)
    _lower: list[float] = field(default_factory=list, init=False, repr=False)
    _calibrated: list[bool] = field(default_factory=list, init=False, repr=False)
    _constraints: list[str] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self._feed = DecisionFeed(
            self.spec,
            self.signal_spec,
            self.signal,
            self.ratio,
            self.backend,
            self.forecaster,
            self.lead,
            self.decisions,
        )
        self._lead_index = steps_for(self.lead.value, self.signal_spec.resolution) - 1
        self._clock = align_down(self.start, self.signal_spec.resolution)

    def decide(self, step: int, current: int) -> int:
        planned, data, forecast, sizing = next(self._feed)
        if planned != step:
            raise ValueError(f"decisions must follow the schedule: expected step {planned}, got {step}")
        now = self._clock + step * self.step
        if sizing is None:
            sizing = size(self.spec, [data], [forecast], self.lead, now, self._calibration)
        recommendation = decide(
            self.spec, [data], [forecast], self.backend.identity, self.lead, current, self.state, now, sizing
        )
        self.state, self._calibration = recommendation.state, recommendation.calibration
        self.last = recommendation
        policy = self.spec.policy
        window = recommendation.windows[0]
        self._replicas.append(recommendation.replicas)
        self._upper.append(window.quantiles[policy.target_quantile])
        self._lower.append(window.lower(policy.target_quantile, policy.scale_down_quantile))
        self._calibrated.append(window.calibrated)
        self._constraints.append(recommendation.decision.constraint)
        return recommendation.replicas

    def record(self) -> PresageRecord:
        """The decisions made so far."""
        steps = np.array(self.decisions[: len(self._replicas)], dtype=np.int64)
        return PresageRecord(
            steps=steps,
            replicas=np.array(self._replicas, dtype=np.int64),
            upper=np.array(self._upper, dtype=np.float64),
            lower=np.array(self._lower, dtype=np.float64),
            forecast_steps=(steps // self.ratio + self._lead_index) * self.ratio,
            window_starts=steps // self.ratio,
            window=self._feed.window,
            calibrated=np.array(self._calibrated, dtype=bool),
            constraints=tuple(self._constraints),
        )
