"""What the controller records into the scaler's metric families: each evaluation, each shadow
summary, and the timing of every forecast and Prometheus call (:class:`TimedBackend`,
:class:`TimedSignalSource`, which wrap what the evaluation is handed)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from functools import partial

from presage_scaler.api.binding_constraints import FORECAST
from presage_scaler.api.prometheus_query import PrometheusQuery
from presage_scaler.api.quantities import plain_number
from presage_scaler.backends.base import Backend, Forecast, ForecastRequest, ModelIdentity
from presage_scaler.engine.evaluator import Recommendation, SignalRead, SignalSource, SignalSpec
from presage_scaler.engine.shadow import ShadowSummary
from presage_scaler.observability.metrics import (
    CONSTRAINT_LABELS,
    MAX_PROJECTED_OFFSETS,
    POINT_QUANTILE,
    Outcome,
    ScalerGauge,
    ScalerMetrics,
    Series,
)
from presage_scaler.series.timegrid import steps_for


def record_evaluation(
    metrics: ScalerMetrics,
    namespace: str,
    name: str,
    recommendation: Recommendation,
    current_replicas: int,
    duration_s: float,
) -> None:
    """Record one successful evaluation; replaces every per-evaluation gauge of the scaler."""
    rec = recommendation
    values: dict[Series, float] = {}

    def put(metric: ScalerGauge, value: float, *labels: str) -> None:
        values[(metric, (namespace, name, *labels))] = float(value)

    put(metrics.recommended, rec.replicas)
    put(metrics.predictive, rec.breakdown.predictive)
    if rec.breakdown.reactive is not None:
        put(metrics.reactive, rec.breakdown.reactive)
    put(metrics.current, current_replicas)
    put(metrics.lead_time, rec.lead_time.value.total_seconds())
    binding = rec.breakdown.binding_signal or ""
    put(metrics.forecast_point, rec.last_forecast.point, binding)
    for quantile, value in (rec.last_forecast.quantiles or {}).items():
        put(metrics.forecast_quantile, value, binding, quantile)
    for offset, quantile, value in projected_curve(rec):
        put(metrics.forecast_projected, value, binding, offset, quantile)
    for signal in rec.signal_statuses:
        put(metrics.signal_observed, signal.observed, signal.name)
        put(metrics.signal_forecast, signal.forecast, signal.name)
        if signal.sized_to is not None:
            put(metrics.signal_sized_to, signal.sized_to, signal.name)
        put(metrics.signal_replicas, signal.replicas, signal.name)
        put(metrics.signal_gap_steps, signal.gap_steps or 0, signal.name)
        put(metrics.binding_signal, signal.name == binding, signal.name)
    for data in rec.data:
        put(metrics.signal_capacity, data.capacity, data.spec.name)
    constraint = rec.breakdown.constraint or FORECAST
    for label in CONSTRAINT_LABELS:
        put(metrics.binding_constraint, label == constraint, label)
    metrics.replace((namespace, name), "evaluation", values)
    metrics.observe_duration(namespace, name, duration_s)


def record_shadow(metrics: ScalerMetrics, namespace: str, name: str, summary: ShadowSummary) -> None:
    """Publish the scaler's shadow summary (the same numbers as ``.status.shadow``)."""
    values: dict[Series, float] = {}
    values[(metrics.shadow_samples, (namespace, name))] = summary.samples
    values[(metrics.shadow_pending, (namespace, name))] = summary.pending
    for policy, coverage, over in (
        ("presage", summary.coverage, summary.over_provisioning),
        ("reactive", summary.reactive_coverage, summary.reactive_over_provisioning),
    ):
        if coverage is not None:
            values[(metrics.shadow_coverage, (namespace, name, policy))] = coverage
        if over is not None:
            values[(metrics.shadow_over_provisioning, (namespace, name, policy))] = over
    if summary.quantile_coverage is not None:
        values[(metrics.shadow_quantile_coverage, (namespace, name))] = summary.quantile_coverage
    metrics.replace((namespace, name), "shadow", values)


def projected_steps(horizon: int, lead_step: int, limit: int = MAX_PROJECTED_OFFSETS) -> list[int]:
    """The 0-based forecast steps the projected curve exports, in order.

    Every step when the horizon has at most ``limit``; otherwise ``limit - 1`` evenly spaced steps
    from the first to the last (step ``k * (horizon - 1) // (limit - 2)`` for each ``k``), plus
    ``lead_step``, the step the recommendation provisions for. Spaced at least one step apart, those
    are distinct, so at most ``limit`` steps.
    """
    if horizon <= limit:
        return list(range(horizon))
    spaced = {k * (horizon - 1) // (limit - 2) for k in range(limit - 1)}
    return sorted(spaced | {min(lead_step, horizon - 1)})


def projected_curve(rec: Recommendation) -> Iterator[tuple[str, str, float]]:
    """``(offset_seconds, quantile, value)`` of the binding signal's whole forecast, at
    :func:`projected_steps`: step ``k`` is ``(k + 1)`` resolutions after the last observed step.

    The decision reads only the sizing window; the rest of the horizon is exported for dashboards.
    """
    index = next(i for i, d in enumerate(rec.data) if d.spec.name == rec.decision.binding_signal)
    forecast, step = rec.forecasts[index], rec.data[index].spec.resolution
    levels = {POINT_QUANTILE: forecast.point} | {f"{q:g}": forecast.quantiles[q] for q in sorted(forecast.quantiles)}
    lead_step = steps_for(rec.lead_time.value, step) - 1
    for k in projected_steps(len(forecast.point), lead_step):
        offset = plain_number(((k + 1) * step).total_seconds())
        for quantile, values in levels.items():
            yield offset, quantile, float(values[k])


@contextlib.contextmanager
def _timed(record: Callable[[float, Outcome], None]) -> Iterator[None]:
    """Time the block and pass its seconds and outcome (``error`` when it raised) to ``record``."""
    started = time.perf_counter()
    outcome: Outcome = "error"
    try:
        yield
        outcome = "success"
    finally:
        record(time.perf_counter() - started, outcome)


class TimedBackend:
    """A :class:`Backend` whose forecast calls are timed into ``presage_forecast_request_duration_seconds``."""

    def __init__(self, backend: Backend, name: str, metrics: ScalerMetrics) -> None:
        self._backend = backend
        self._name = name
        self._metrics = metrics

    @property
    def identity(self) -> ModelIdentity:
        return self._backend.identity

    @property
    def max_context(self) -> int | None:
        return self._backend.max_context

    @property
    def max_horizon(self) -> int | None:
        return self._backend.max_horizon

    async def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        with _timed(partial(self._metrics.observe_backend_call, self._name)):
            return await self._backend.forecast(requests)


class TimedSignalSource:
    """A :class:`SignalSource` whose queries are timed into ``presage_prometheus_request_duration_seconds``."""

    def __init__(self, source: SignalSource, metrics: ScalerMetrics) -> None:
        self._source = source
        self._metrics = metrics

    async def range(self, signal: SignalSpec, now: datetime, max_points: int | None) -> SignalRead:
        with _timed(partial(self._metrics.observe_prometheus_call, "range")):
            return await self._source.range(signal, now, max_points)

    async def instant(self, query: PrometheusQuery, now: datetime) -> float:
        with _timed(partial(self._metrics.observe_prometheus_call, "instant")):
            return await self._source.instant(query, now)
