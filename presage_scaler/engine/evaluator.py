"""One evaluation of one PredictiveScaler, with no Kubernetes in sight.

Parsed spec, backend, a source of signal data, the current replica count, the persisted policy
state and the clock go in; a :class:`Recommendation` comes out with ``signalStatuses``,
``breakdown`` and ``lastForecast`` ready for ``.status``. The controller adds the Kubernetes edges
(reading replicas and Secrets, writing status); the backtest drives :func:`decide` with a
simulated clock and batched forecasts. Both run the same decision code.

Sizing window: a scale-down takes effect at once, capacity added now arrives one lead time later,
and the count then holds until the next evaluation's pods arrive one interval after that. So each
signal is sized to its calibrated forecast of the highest demand from the next step up to lead time
plus interval (:func:`sizing_window`, :mod:`presage_scaler.engine.calibration`), at targetQuantile (the
size) and scaleDownQuantile (the uncertainty guard's lower value). The horizon requested is never
shorter than the window (:func:`presage_scaler.engine.leadtime.resolve_horizon`), so ``forecast.horizon``
never changes what is sized; only a backend's ``maxHorizon`` below the window cuts the backend's
forecast, not the window: the forecast's maximum is read over the steps it covers, and calibration, which scores
past forecasts against the whole window, accounts for the rest. ``lastForecast`` still reports the
backend's own forecast at the lead-time step, its model and how it was made (``method``), as the
backend said; what calibration did with it is each signal's ``sizedBy`` and ``calibration``.

Staleness: a signal whose newest sample is older than :func:`staleness_bound` fails the evaluation
with ``SignalStale`` (:func:`check_fresh`), as any failure keeps the last good recommendation.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, Protocol

from presage_scaler.api.predictive_scaler import SINGLE_SIGNAL, CapacitySpec, PredictiveScalerSpec
from presage_scaler.api.predictive_scaler_status import (
    LastForecast,
    RecommendationBreakdown,
    SignalStatus,
    SizedBy,
    WindowCalibration,
)
from presage_scaler.api.prometheus_query import PrometheusQuery
from presage_scaler.api.quantities import format_duration
from presage_scaler.api.reasons import Reason
from presage_scaler.backends.base import Backend, Forecast, ForecastRequest, History, ModelIdentity
from presage_scaler.engine.calibration import calibrate
from presage_scaler.engine.calibration_blend import LEVEL, YESTERDAY
from presage_scaler.engine.calibration_windows import WindowForecast
from presage_scaler.engine.leadtime import LeadTime, resolve_horizon, resolve_lead_time
from presage_scaler.engine.past_forecasts import BAND_LEVELS, CalibrationState, SignalForecasts, hindcast_request
from presage_scaler.engine.policy import Decision, PolicyState, SignalInput
from presage_scaler.engine.policy import decide as policy_decide
from presage_scaler.series.timegrid import align_down, steps_for


class EvaluationError(Exception):
    """An evaluation that could not produce a recommendation; ``reason`` is its Degraded reason."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = Reason(reason)  # a reason outside the vocabulary fails here, where it is written
        self.message = message


@dataclass(frozen=True)
class SignalSpec:
    """One signal, whichever form it was declared in (``signal`` + ``capacity``, or ``signals[]``)."""

    name: str
    query: PrometheusQuery
    history: timedelta
    resolution: timedelta
    per_replica: float
    capacity_query: PrometheusQuery | None


def signal_specs(spec: PredictiveScalerSpec) -> list[SignalSpec]:
    """The scaler's signals in spec order; the single-signal form is named :data:`SINGLE_SIGNAL`."""
    if spec.signal is not None:
        assert spec.signal.prometheus is not None  # enforced by the API rules
        capacity = spec.capacity or CapacitySpec()
        return [
            SignalSpec(
                name=SINGLE_SIGNAL,
                query=spec.signal.prometheus,
                history=spec.signal.history,
                resolution=spec.signal.resolution,
                per_replica=capacity.per_replica.value,
                capacity_query=capacity.query,
            )
        ]
    return [
        SignalSpec(
            name=s.name,
            query=s.prometheus,
            history=s.history,
            resolution=s.resolution,
            per_replica=s.capacity.per_replica.value,
            capacity_query=s.capacity.query,
        )
        for s in spec.signals or ()
    ]


@dataclass(frozen=True)
class SignalData:
    """One signal's data for one evaluation, as the I/O edge gathered it."""

    spec: SignalSpec
    history: History
    gap_steps: int
    capacity: float


@dataclass(frozen=True)
class SignalRead:
    """One signal's range query: its gap-filled history, how many steps were filled, and how many of
    those are the newest (filled with the newest sample's value)."""

    history: History
    gap_steps: int = 0
    stale_steps: int = 0


class SignalSource(Protocol):
    """Where signal data comes from: Prometheus in production, a trace in the backtest."""

    async def range(self, signal: SignalSpec, now: datetime, max_points: int | None) -> SignalRead:
        """History of the signal up to ``now`` (at most ``max_points``) and its gaps."""
        ...

    async def instant(self, query: PrometheusQuery, now: datetime) -> float:
        """The single value an instant query returns."""
        ...


@dataclass(frozen=True)
class Recommendation:
    """What one evaluation recommends, and why.

    ``breakdown``, ``signal_statuses`` and ``lastForecast`` (the API objects written to ``.status``)
    are built from it when first read: a backtest, which makes tens of thousands of decisions and
    writes no status, never builds them.
    """

    replicas: int
    decision: Decision
    lead_time: LeadTime
    generated_at: datetime
    identity: ModelIdentity
    sizing_window: timedelta
    """The span each signal was sized for: from its next step up to the lead time plus the interval."""
    target_quantile: float
    """``policy.targetQuantile``: the level ``signal_statuses[].forecast`` is reported at."""
    windows: tuple[WindowForecast, ...] = ()
    """Per signal, in spec order: the calibrated forecast of the sizing window's highest demand."""
    calibration: CalibrationState = field(default_factory=CalibrationState)
    """The recorded forecasts to carry to the next evaluation (persisted in ``.status``)."""
    # The data and forecasts the decision was made from, for status and for consumers that look back
    # at it (shadow scoring). Not compared: they hold numpy arrays.
    data: tuple[SignalData, ...] = field(default=(), compare=False, repr=False)
    forecasts: tuple[Forecast, ...] = field(default=(), compare=False, repr=False)

    @property
    def state(self) -> PolicyState:
        return self.decision.state

    @functools.cached_property
    def breakdown(self) -> RecommendationBreakdown:
        decision = self.decision
        return RecommendationBreakdown(
            binding_signal=decision.binding_signal,
            constraint=decision.constraint,
            guard_lower=decision.guard_lower,
            guard_spread=decision.relative_spread,
            predictive=decision.predictive,
            reactive=decision.reactive,
        )

    @functools.cached_property
    def signal_statuses(self) -> tuple[SignalStatus, ...]:
        """Per signal: the backend's forecast at the lead time at targetQuantile (as ``lastForecast``
        reports it for the binding signal), the calibrated window maximum it was sized to, what set
        that and how it was calibrated, and the signal's reactive floor."""
        floor = self.decision.reactive is not None
        return tuple(
            SignalStatus(
                name=s.name,
                forecast=f.at(steps_for(self.lead_time.value, d.spec.resolution) - 1, self.target_quantile),
                sized_to=s.sized_to,
                sized_by=sized_by(w),
                calibration=window_calibration(w),
                observed=s.observed,
                replicas=s.replicas,
                reactive=s.reactive_replicas if floor else None,
                gap_steps=d.gap_steps,
            )
            for s, d, f, w in zip(self.decision.signals, self.data, self.forecasts, self.windows, strict=True)
        )

    @functools.cached_property
    def last_forecast(self) -> LastForecast:
        """The binding signal's forecast at its lead-time step, as the backend made it."""
        binding = next(i for i, s in enumerate(self.decision.signals) if s.name == self.decision.binding_signal)
        forecast = self.forecasts[binding]
        step = steps_for(self.lead_time.value, self.data[binding].spec.resolution) - 1
        return LastForecast(
            backend=self.identity.backend,
            generated_at=self.generated_at,
            lead_time_seconds=round(self.lead_time.value.total_seconds()),
            model=self.identity.model,
            method=forecast.method or None,
            revision=self.identity.revision,
            point=forecast.point_at(step),
            quantiles={f"{q:g}": forecast.at(step, q) for q in sorted(forecast.quantiles)},
        )


MAX_HISTORY_POINTS = 200_000
"""The most history points a signal is read with, whatever the spec says: ``history: 99999h`` at
``resolution: 1s`` is 360 million points, which would exhaust memory rather than fail."""


def context_points(max_context: int | None) -> int:
    """How many history points a signal is read with: the backend's maximum context, and never more
    than :data:`MAX_HISTORY_POINTS`."""
    return MAX_HISTORY_POINTS if max_context is None else min(max_context, MAX_HISTORY_POINTS)


def forecast_requests(
    spec: PredictiveScalerSpec,
    data: Sequence[SignalData],
    lead: timedelta,
    max_horizon: int | None,
    levels: Sequence[float] = (),
) -> list[ForecastRequest]:
    """One request per signal: horizon from the lead time at that signal's resolution, and the
    hindcasts that calibrate its sizing window (:mod:`presage_scaler.engine.calibration`); at the
    spec's quantile levels, and ``levels`` besides (what ``presage tune`` sizes other policies with)."""
    asked = tuple(sorted({spec.policy.target_quantile, spec.policy.scale_down_quantile, *BAND_LEVELS, *levels}))
    # Signals of one resolution share their horizon and sizing window (a backtest asks for many).
    shapes: dict[timedelta, tuple[int, int]] = {}
    requests = []
    for d in data:
        if (shape := shapes.get(d.spec.resolution)) is None:
            horizon = resolve_horizon(spec.forecast, lead, spec.interval, d.spec.resolution, max_horizon)
            shape = shapes[d.spec.resolution] = (horizon, sizing_window(spec, lead, d.spec))
        hindcast = hindcast_request(len(d.history.values), shape[1], d.history.step)
        requests.append(ForecastRequest(history=d.history, horizon=shape[0], quantiles=asked, hindcast=hindcast))
    return requests


def sizing_window(spec: PredictiveScalerSpec, lead: timedelta, signal: SignalSpec) -> int:
    """Steps of the sizing window: from the next step up to lead time + interval."""
    return steps_for(lead + spec.interval, signal.resolution)


def sized_by(window: WindowForecast) -> SizedBy:
    """What set a signal's ``sizedTo`` (``signalStatuses[].sizedBy``)."""
    if not window.calibrated:
        return "Uncalibrated"
    if window.weight < 1.0:
        return "Blend"
    return "RecentPeak" if window.held_at_peak else "Forecast"


_PARTNERS: dict[str, Literal["LastHour", "Yesterday"]] = {LEVEL: "LastHour", YESTERDAY: "Yesterday"}


def window_calibration(window: WindowForecast) -> WindowCalibration:
    """How a signal's window forecast was calibrated (``signalStatuses[].calibration``); only the
    scored count while it is not."""
    if not window.calibrated:
        return WindowCalibration(scored_forecasts=window.scores)
    return WindowCalibration(
        scored_forecasts=window.scores,
        reference=window.reference,
        recent_peak=window.recent_peak,
        held_at_recent_peak=window.held,
        backend_share=window.weight,
        blended_with=_PARTNERS[window.partner] if window.weight < 1.0 else None,
        noise=window.noise,
        band_ratio=window.band_ratio,
        band_saving=window.band_saving if window.band_known else None,
    )


@dataclass(frozen=True)
class Sizing:
    """What each signal is sized from: its calibrated window forecast, in spec order, and the
    calibration state to carry to the next evaluation."""

    windows: tuple[WindowForecast, ...]
    calibration: CalibrationState


def size(
    spec: PredictiveScalerSpec,
    data: Sequence[SignalData],
    forecasts: Sequence[Forecast],
    lead: LeadTime,
    now: datetime,
    calibration: CalibrationState | None = None,
) -> Sizing:
    """Calibrate every signal's sizing window (:mod:`presage_scaler.engine.calibration`). ``calibration`` is
    the previous evaluation's ``Recommendation.calibration``."""
    levels = (spec.policy.target_quantile, spec.policy.scale_down_quantile)
    recorded = calibration or CalibrationState()
    windows = []
    kept = []
    for d, forecast in zip(data, forecasts, strict=True):
        window, records = calibrate(
            d.history,
            forecast,
            sizing_window(spec, lead.value, d.spec),
            levels,
            recorded.of(d.spec.name, d.spec.resolution),
            align_down(now, d.spec.resolution),
        )
        windows.append(window)
        if records:
            kept.append(SignalForecasts(name=d.spec.name, step=d.spec.resolution, forecasts=records))
    return Sizing(windows=tuple(windows), calibration=CalibrationState(signals=tuple(kept)))


def decide(
    spec: PredictiveScalerSpec,
    data: Sequence[SignalData],
    forecasts: Sequence[Forecast],
    identity: ModelIdentity,
    lead: LeadTime,
    current_replicas: int,
    state: PolicyState,
    now: datetime,
    sizing: Sizing | None = None,
) -> Recommendation:
    """Turn gathered data and forecasts into a recommendation (pure; shared with the backtest).

    ``sizing`` is what :func:`size` made of the forecasts; without it, they are calibrated here with
    no recorded forecasts to go on.
    """
    policy = spec.policy
    sizing = sizing or size(spec, data, forecasts, lead, now)
    windows = sizing.windows
    inputs = []
    for d, forecast, window in zip(data, forecasts, windows, strict=True):
        lead_steps = steps_for(lead.value, d.spec.resolution)
        inputs.append(
            SignalInput(
                name=d.spec.name,
                upper=window.quantiles[policy.target_quantile],
                lower=window.lower(policy.target_quantile, policy.scale_down_quantile),
                point=forecast.point_at(lead_steps - 1),
                observed=float(d.history.values[-1]),
                capacity=d.capacity,
            )
        )
    decision = policy_decide(inputs, current_replicas, policy, state, now)
    return Recommendation(
        replicas=decision.replicas,
        decision=decision,
        lead_time=lead,
        generated_at=now,
        identity=identity,
        sizing_window=lead.value + spec.interval,
        target_quantile=policy.target_quantile,
        windows=windows,
        calibration=sizing.calibration,
        data=tuple(data),
        forecasts=tuple(forecasts),
    )


STALE_STEPS = 3
"""A signal is never stale before this many of its steps have passed without a sample: one missed
scrape, or a query that ran just before the newest one landed, is not a dead exporter."""


def staleness_bound(spec: PredictiveScalerSpec, lead: timedelta, signal: SignalSpec) -> timedelta:
    """How old a signal's newest sample may be: the sizing window (lead time + interval), whose demand a
    count decided from older data knows nothing about, and at least STALE_STEPS of its resolution."""
    return max(lead + spec.interval, STALE_STEPS * signal.resolution)


def check_fresh(signal: SignalSpec, read: SignalRead, bound: timedelta) -> None:
    """Refuse, with ``SignalStale``, a signal whose newest sample is older than ``bound``: filled with
    its last value indefinitely, a dead exporter would keep the scaler sized for demand nobody measures."""
    age = read.stale_steps * signal.resolution
    if age > bound:
        raise EvaluationError(
            Reason.SIGNAL_STALE,
            f"signal {signal.name}: its newest sample is {format_duration(age)} old (the last {read.stale_steps} "
            f"steps of {format_duration(signal.resolution)} had none), over the {format_duration(bound)} bound "
            "(the lead time plus the interval, and at least "
            f"{STALE_STEPS} steps); is the exporter behind {signal.query.query!r} still scraped?",
        )


async def _capacity(source: SignalSource, signal: SignalSpec, now: datetime) -> float:
    if signal.capacity_query is None:
        return signal.per_replica
    value = await source.instant(signal.capacity_query, now)
    if not math.isfinite(value) or value <= 0:
        raise EvaluationError(
            Reason.INVALID_CAPACITY,
            f"signal {signal.name}: capacity query returned {value}; per-replica capacity must be a positive number",
        )
    return value


async def evaluate(
    spec: PredictiveScalerSpec,
    backend: Backend,
    source: SignalSource,
    current_replicas: int,
    state: PolicyState,
    now: datetime,
    calibration: CalibrationState | None = None,
) -> Recommendation:
    """Evaluate a PredictiveScaler once: lead time, signals, one batched forecast, calibration, the
    policy. ``calibration`` is the previous evaluation's ``Recommendation.calibration``.

    Errors from the data source and the backend propagate with their own ``reason``; the caller
    keeps the last good recommendation and reports the scaler Degraded.
    """
    observed = None
    if spec.lead_time.source == "Observed":
        assert spec.lead_time.observed is not None  # enforced by the API rules
        observed = await source.instant(spec.lead_time.observed, now)
    lead = resolve_lead_time(spec.lead_time, observed)
    signals = signal_specs(spec)

    async def gather(signal: SignalSpec) -> SignalData:
        read, capacity = await asyncio.gather(
            source.range(signal, now, context_points(backend.max_context)), _capacity(source, signal, now)
        )
        check_fresh(signal, read, staleness_bound(spec, lead.value, signal))
        return SignalData(spec=signal, history=read.history, gap_steps=read.gap_steps, capacity=capacity)

    data = await asyncio.gather(*(gather(s) for s in signals))
    requests = forecast_requests(spec, data, lead.value, backend.max_horizon)
    forecasts = await backend.forecast(requests)
    sizing = size(spec, data, forecasts, lead, now, calibration)
    return decide(spec, data, forecasts, backend.identity, lead, current_replicas, state, now, sizing)
