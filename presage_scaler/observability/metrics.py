"""The scaler's Prometheus metrics: :class:`ScalerMetrics` owns every family on one registry.

Label cardinality is bounded by construction: ``namespace``/``scaler`` by the PredictiveScalers
that exist (a deleted scaler's series are removed by :meth:`ScalerMetrics.forget`), ``signal`` by
each spec (at most 16), ``quantile`` by each spec's two quantiles (and ``point``),
``offset_seconds`` by :data:`MAX_PROJECTED_OFFSETS` per scaler, and every other label by a closed
set declared here. Nothing taken from a request (a Fleet name, a ScaledObject) becomes a
label.

Per-evaluation gauges are set by the leader and replaced as a whole on every evaluation, so a
signal or constraint that stopped applying disappears instead of lingering. Recommendation age is
computed from the store at scrape time, on every replica: each replica answers KEDA and Agones
from its own store, so its own age is the one that matters.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from presage_scaler.api.quantities import plain_number
from presage_scaler.api.reasons import FAILURES
from presage_scaler.api.types import CONSTRAINTS, PrometheusQuery
from presage_scaler.backends.base import Backend, Forecast, ForecastRequest, History, ModelIdentity
from presage_scaler.engine.evaluator import Recommendation, SignalSource, SignalSpec
from presage_scaler.engine.leadtime import steps_for
from presage_scaler.engine.shadow import ShadowSummary
from presage_scaler.serving.store import RecommendationStore

SCALER = ("namespace", "scaler")
FORECAST_CONSTRAINT = "Forecast"
"""The ``constraint`` label value when the forecast itself bound (``breakdown.constraint == ""``)."""
CONSTRAINT_LABELS = (FORECAST_CONSTRAINT, *CONSTRAINTS)
ERROR_REASONS: frozenset[str] = frozenset(FAILURES)
"""Evaluation error reasons exported as themselves; any other reason is counted as ``Other``."""
OTHER_REASON = "Other"
MAX_PROJECTED_OFFSETS = 64
"""The most forecast offsets ``presage_forecast_projected`` exports per scaler (see
:func:`projected_steps`): a horizon may be up to 20,000 steps, each a series per quantile."""
POINT_QUANTILE = "point"
"""The ``quantile`` label value of the point forecast in ``presage_forecast_projected``."""
Outcome = Literal["success", "error"]
QueryType = Literal["range", "instant"]

_EVALUATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# KEDA and Agones are answered from memory: anything slower than a few milliseconds is a problem.
_REQUEST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

Key = tuple[str, str]
Series = tuple[Gauge | Counter | Histogram, tuple[str, ...]]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class ScalerMetrics:
    """Every metric family of the scaler, and the calls that update them.

    ``store`` (optional) adds the scrape-time families computed from the recommendation store:
    ``presage_recommendation_age_seconds`` and ``presage_scaler_info``.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        store: RecommendationStore | None = None,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry

        def gauge(name: str, doc: str, *labels: str) -> Gauge:
            return Gauge(name, doc, (*SCALER, *labels), registry=r)

        self.recommended = gauge("presage_recommended_replicas", "Replicas presage recommends (what Enforce applies).")
        self.predictive = gauge("presage_predictive_replicas", "Replicas the forecast alone implies.")
        self.reactive = gauge(
            "presage_reactive_replicas", "Replicas the reactive floor would choose (absent when it is disabled)."
        )
        self.current = gauge("presage_current_replicas", "Replicas last read from the target.")
        self.lead_time = gauge("presage_lead_time_seconds", "Lead time used by the last evaluation.")
        self.forecast_point = gauge(
            "presage_forecast_point", "Point forecast at the lead time, of the binding signal.", "signal"
        )
        self.forecast_quantile = gauge(
            "presage_forecast_quantile",
            "Forecast quantiles at the lead time, of the binding signal.",
            "signal",
            "quantile",
        )
        self.forecast_projected = gauge(
            "presage_forecast_projected",
            "The binding signal's forecast offset_seconds after its last observed step, up to the horizon "
            f"(quantile: point, or each forecast quantile). At most {MAX_PROJECTED_OFFSETS} offsets: every step "
            f"of a horizon of up to {MAX_PROJECTED_OFFSETS} steps; otherwise {MAX_PROJECTED_OFFSETS - 1} evenly "
            "spaced steps from the first to the last, plus the lead-time step.",
            "signal",
            "offset_seconds",
            "quantile",
        )
        self.signal_observed = gauge("presage_signal_observed", "Latest observed value of each signal.", "signal")
        self.signal_forecast = gauge(
            "presage_signal_forecast", "Each signal's forecast at the lead time, at the target quantile.", "signal"
        )
        self.signal_sized_to = gauge(
            "presage_signal_sized_to",
            "What each signal is sized to: the calibrated target-quantile forecast of the sizing window's "
            "highest demand.",
            "signal",
        )
        self.signal_replicas = gauge("presage_signal_replicas", "Replicas each signal alone requires.", "signal")
        self.signal_capacity = gauge(
            "presage_signal_capacity_per_replica", "Units of each signal one replica serves.", "signal"
        )
        self.signal_gap_steps = gauge(
            "presage_signal_gap_steps", "Steps of each signal's query window that were gap-filled.", "signal"
        )
        self.binding_signal = gauge(
            "presage_binding_signal", "1 for the signal that required the most replicas, 0 for the others.", "signal"
        )
        self.binding_constraint = gauge(
            "presage_binding_constraint",
            "1 for the constraint that set the recommendation (Forecast when none did), 0 for the others.",
            "constraint",
        )
        self.shadow_coverage = gauge(
            "presage_shadow_coverage_ratio",
            "Fraction of scored moments whose demand the recommendation covered (policy: presage or reactive).",
            "policy",
        )
        self.shadow_over_provisioning = gauge(
            "presage_shadow_overprovisioning_ratio",
            "Mean excess replicas over what demand required, as a fraction of it (policy: presage or reactive).",
            "policy",
        )
        self.shadow_quantile_coverage = gauge(
            "presage_shadow_quantile_coverage_ratio",
            "Fraction of scored sizing windows whose highest demand the targetQuantile forecast covered.",
        )
        self.shadow_samples = gauge("presage_shadow_scored_predictions", "Recommendations scored in the shadow window.")
        self.shadow_pending = gauge("presage_shadow_pending_predictions", "Recommendations waiting to be scored.")
        self.evaluation_duration = Histogram(
            "presage_evaluation_duration_seconds",
            "Time one evaluation took (queries, forecast, policy).",
            SCALER,
            buckets=_EVALUATION_BUCKETS,
            registry=r,
        )
        self.evaluation_errors = Counter(
            "presage_evaluation_errors", "Evaluations that failed, by reason.", (*SCALER, "reason"), registry=r
        )
        self.forecast_calls = Histogram(
            "presage_forecast_request_duration_seconds",
            "Forecast backend calls, by ForecastBackend and outcome.",
            ("backend", "outcome"),
            buckets=_CALL_BUCKETS,
            registry=r,
        )
        self.prometheus_calls = Histogram(
            "presage_prometheus_request_duration_seconds",
            "Prometheus queries, by query type and outcome.",
            ("query_type", "outcome"),
            buckets=_CALL_BUCKETS,
            registry=r,
        )
        self.grpc_requests = Counter(
            "presage_grpc_requests",
            "KEDA external scaler calls, by method and gRPC status.",
            ("method", "code"),
            registry=r,
        )
        self.grpc_duration = Histogram(
            "presage_grpc_request_duration_seconds",
            "Time to answer a unary KEDA call, by method.",
            ("method",),
            buckets=_REQUEST_BUCKETS,
            registry=r,
        )
        self.webhook_requests = Counter(
            "presage_webhook_requests", "Agones webhook requests, by HTTP status.", ("code",), registry=r
        )
        self.webhook_duration = Histogram(
            "presage_webhook_request_duration_seconds",
            "Time to answer an Agones webhook request.",
            buckets=_REQUEST_BUCKETS,
            registry=r,
        )
        if store is not None:
            r.register(StoreCollector(store, clock))
        self._series: dict[Key, dict[str, set[Series]]] = {}

    # --- per scaler ----------------------------------------------------------------------------

    def observe_evaluation(
        self, namespace: str, name: str, recommendation: Recommendation, current_replicas: int, duration_s: float
    ) -> None:
        """Record one successful evaluation; replaces every per-evaluation gauge of the scaler."""
        rec = recommendation
        values: dict[Series, float] = {}

        def put(metric: Gauge, value: float, *labels: str) -> None:
            values[(metric, (namespace, name, *labels))] = float(value)

        put(self.recommended, rec.replicas)
        put(self.predictive, rec.breakdown.predictive)
        if rec.breakdown.reactive is not None:
            put(self.reactive, rec.breakdown.reactive)
        put(self.current, current_replicas)
        put(self.lead_time, rec.lead_time.value.total_seconds())
        binding = rec.breakdown.binding_signal or ""
        put(self.forecast_point, rec.last_forecast.point, binding)
        for quantile, value in (rec.last_forecast.quantiles or {}).items():
            put(self.forecast_quantile, value, binding, quantile)
        for offset, quantile, value in projected_curve(rec):
            put(self.forecast_projected, value, binding, offset, quantile)
        for signal in rec.signal_statuses:
            put(self.signal_observed, signal.observed, signal.name)
            put(self.signal_forecast, signal.forecast, signal.name)
            if signal.sized_to is not None:
                put(self.signal_sized_to, signal.sized_to, signal.name)
            put(self.signal_replicas, signal.replicas, signal.name)
            put(self.signal_gap_steps, signal.gap_steps or 0, signal.name)
            put(self.binding_signal, signal.name == binding, signal.name)
        for data in rec.data:
            put(self.signal_capacity, data.capacity, data.spec.name)
        constraint = rec.breakdown.constraint or FORECAST_CONSTRAINT
        for label in CONSTRAINT_LABELS:
            put(self.binding_constraint, label == constraint, label)
        self._replace((namespace, name), "evaluation", values)
        self.evaluation_duration.labels(namespace, name).observe(duration_s)
        self._track((namespace, name), self.evaluation_duration, (namespace, name))

    def observe_error(self, namespace: str, name: str, reason: str) -> None:
        """Count a failed evaluation; reasons outside :data:`ERROR_REASONS` count as ``Other``."""
        labels = (namespace, name, reason if reason in ERROR_REASONS else OTHER_REASON)
        self.evaluation_errors.labels(*labels).inc()
        self._track((namespace, name), self.evaluation_errors, labels)

    def observe_shadow(self, namespace: str, name: str, summary: ShadowSummary) -> None:
        """Publish the scaler's shadow summary (the same numbers as ``.status.shadow``)."""
        values: dict[Series, float] = {}
        values[(self.shadow_samples, (namespace, name))] = summary.samples
        values[(self.shadow_pending, (namespace, name))] = summary.pending
        for policy, coverage, over in (
            ("presage", summary.coverage, summary.over_provisioning),
            ("reactive", summary.reactive_coverage, summary.reactive_over_provisioning),
        ):
            if coverage is not None:
                values[(self.shadow_coverage, (namespace, name, policy))] = coverage
            if over is not None:
                values[(self.shadow_over_provisioning, (namespace, name, policy))] = over
        if summary.quantile_coverage is not None:
            values[(self.shadow_quantile_coverage, (namespace, name))] = summary.quantile_coverage
        self._replace((namespace, name), "shadow", values)

    def forget(self, namespace: str, name: str) -> None:
        """Remove every series of a scaler (deleted, or no longer evaluated here)."""
        for series in self._series.pop((namespace, name), {}).values():
            for metric, labels in series:
                metric.remove(*labels)

    def forget_all(self) -> None:
        """Remove every per-scaler series, e.g. when this replica stops being the leader."""
        for namespace, name in list(self._series):
            self.forget(namespace, name)

    def _replace(self, key: Key, group: str, values: dict[Series, float]) -> None:
        groups = self._series.setdefault(key, {})
        for metric, labels in groups.get(group, set()) - values.keys():
            metric.remove(*labels)
        for (metric, labels), value in values.items():
            metric.labels(*labels).set(value)  # type: ignore[union-attr]
        groups[group] = set(values)

    def _track(self, key: Key, metric: Counter | Histogram, labels: tuple[str, ...]) -> None:
        self._series.setdefault(key, {}).setdefault("cumulative", set()).add((metric, labels))

    # --- process wide -------------------------------------------------------------------------

    def observe_backend_call(self, backend: str, seconds: float, outcome: Outcome) -> None:
        """One call to a forecast backend; ``backend`` is the ForecastBackend's name."""
        self.forecast_calls.labels(backend, outcome).observe(seconds)

    def observe_prometheus_call(self, query_type: QueryType, seconds: float, outcome: Outcome) -> None:
        self.prometheus_calls.labels(query_type, outcome).observe(seconds)

    def observe_grpc_request(self, method: str, code: str, seconds: float | None) -> None:
        """One KEDA call; ``seconds`` is None for streams, whose lifetime is not a latency."""
        self.grpc_requests.labels(method, code).inc()
        if seconds is not None:
            self.grpc_duration.labels(method).observe(seconds)

    def observe_webhook_request(self, status: int, seconds: float) -> None:
        self.webhook_requests.labels(str(status)).inc()
        self.webhook_duration.observe(seconds)


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


class StoreCollector(Collector):
    """Scrape-time families from the recommendation store: nothing to keep fresh, nothing to go stale."""

    def __init__(self, store: RecommendationStore, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.clock = clock

    def describe(self) -> list[Metric]:
        return list(self._families())

    def collect(self) -> Iterator[Metric]:
        return self._families(self.clock())

    def _families(self, now: datetime | None = None) -> Iterator[Metric]:
        age = GaugeMetricFamily(
            "presage_recommendation_age_seconds",
            "Age of the recommendation this replica serves to KEDA and Agones.",
            labels=SCALER,
        )
        info = InfoMetricFamily("presage_scaler", "The PredictiveScaler's mode and target.", labels=SCALER)
        if now is not None:
            for rec in self.store.items():
                age.add_metric([rec.namespace, rec.name], rec.age(now).total_seconds())
                info.add_metric(
                    [rec.namespace, rec.name],
                    {"mode": rec.mode, "target_kind": rec.target.kind, "target_name": rec.target.name},
                )
        yield age
        yield info


# --- instrumented edges -------------------------------------------------------------------------


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

    async def range(self, signal: SignalSpec, now: datetime, max_points: int | None) -> tuple[History, int]:
        with _timed(partial(self._metrics.observe_prometheus_call, "range")):
            return await self._source.range(signal, now, max_points)

    async def instant(self, query: PrometheusQuery, now: datetime) -> float:
        with _timed(partial(self._metrics.observe_prometheus_call, "instant")):
            return await self._source.instant(query, now)
