"""presage itself as a simulated policy: production's evaluator on a simulated clock.

For every decision the replay gathers what the controller would (the signal's history up to the
last complete point, capped to ``spec.signal.history`` and the backend's ``max_context``; the
per-replica capacity), builds the requests with :func:`presage_scaler.evaluator.forecast_requests`,
and decides with :func:`presage_scaler.evaluator.decide`, carrying the policy state from one
decision to the next. There is no second implementation of the decision.

Forecasts depend only on history, never on the policy's state, so they are made ahead in chunks of
upcoming decisions: one backend call per chunk (a model server sees batches, not single requests),
and each window in a chunk still ends at its own decision.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

import numpy as np

from presage_scaler.api.types import PredictiveScalerSpec
from presage_scaler.backends.base import Backend, Forecast, ForecastRequest, History
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.backtest.trace import Trace
from presage_scaler.evaluator import SignalData, SignalSpec, decide, forecast_requests
from presage_scaler.leadtime import LeadTime, steps_for
from presage_scaler.policy import PolicyState

CHUNK = 256
"""Decisions whose forecasts are requested together."""


class Forecaster(Protocol):
    """Makes the forecasts for a batch of requests, in order."""

    def __call__(self, requests: Sequence[ForecastRequest]) -> list[Forecast]: ...


@dataclass(frozen=True)
class DirectForecaster:
    """SeasonalNaive without the async wrapper: its synchronous ``forecast_one`` per request."""

    backend: SeasonalNaive

    def __call__(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        return [self.backend.forecast_one(r.history, r.horizon, r.quantiles) for r in requests]


@dataclass(frozen=True)
class BatchedForecaster:
    """Any backend, one ``await backend.forecast(...)`` per batch, on one event loop for the whole
    run (a client's connection pool is bound to the loop it was created on)."""

    backend: Backend
    loop: asyncio.Runner

    def __call__(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        return self.loop.run(self.backend.forecast(requests))


def forecaster_for(backend: Backend, loop: asyncio.Runner) -> Forecaster:
    """The fastest way to call ``backend``."""
    return DirectForecaster(backend) if isinstance(backend, SeasonalNaive) else BatchedForecaster(backend, loop)


@dataclass(frozen=True)
class PresageRecord:
    """What presage did at each decision, for decisions.csv and the report."""

    steps: np.ndarray
    replicas: np.ndarray
    upper: np.ndarray
    """The targetQuantile forecast at the lead-time step."""
    lower: np.ndarray
    """The scaleDownQuantile forecast at the lead-time step."""
    forecast_steps: np.ndarray
    """The trace step the lead-time forecast is for (where the band is drawn)."""
    constraints: tuple[str, ...]


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
    _pending: deque[tuple[int, SignalData, Forecast]] = field(default_factory=deque, init=False, repr=False)
    _upcoming: Iterator[int] = field(init=False, repr=False)
    _state: PolicyState = field(default_factory=PolicyState, init=False, repr=False)
    _gaps: np.ndarray = field(init=False, repr=False)
    _points: int = field(init=False, repr=False)
    _lead_index: int = field(init=False, repr=False)
    _replicas: list[int] = field(default_factory=list, init=False, repr=False)
    _upper: list[float] = field(default_factory=list, init=False, repr=False)
    _lower: list[float] = field(default_factory=list, init=False, repr=False)
    _constraints: list[str] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self._upcoming = iter(self.decisions)
        self._gaps = np.concatenate([[0], np.cumsum(self.signal.gaps)])
        # The same window as production's range query (prometheus.history_window).
        points = max(1, self.signal_spec.history // self.signal_spec.resolution)
        self._points = min(points, self.backend.max_context or points)
        self._lead_index = steps_for(self.lead.value, self.signal_spec.resolution) - 1

    def _data(self, step: int) -> SignalData:
        end = step // self.ratio
        begin = max(0, end - self._points)
        return SignalData(
            spec=self.signal_spec,
            history=History(values=self.signal.values[begin:end], step=self.signal.step),
            gap_steps=int(self._gaps[end] - self._gaps[begin]),
            capacity=self.signal_spec.per_replica,
        )

    def _fill(self) -> None:
        steps = [step for _, step in zip(range(CHUNK), self._upcoming, strict=False)]
        data = [self._data(step) for step in steps]
        requests = [
            request
            for d in data
            for request in forecast_requests(self.spec, [d], self.lead.value, self.backend.max_horizon)
        ]
        self._pending.extend(zip(steps, data, self.forecaster(requests), strict=True))

    def decide(self, step: int, current: int) -> int:
        if not self._pending:
            self._fill()
        planned, data, forecast = self._pending.popleft()
        if planned != step:
            raise ValueError(f"decisions must follow the schedule: expected step {planned}, got {step}")
        now = self.start + step * self.step
        recommendation = decide(
            self.spec, [data], [forecast], self.backend.identity, self.lead, current, self._state, now
        )
        self._state = recommendation.state
        policy = self.spec.policy
        self._replicas.append(recommendation.replicas)
        self._upper.append(forecast.at(self._lead_index, policy.target_quantile))
        self._lower.append(forecast.at(self._lead_index, policy.scale_down_quantile))
        self._constraints.append(recommendation.breakdown.constraint or "")
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
            constraints=tuple(self._constraints),
        )
