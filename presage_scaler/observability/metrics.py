"""The scaler's Prometheus metrics: :class:`ScalerMetrics` owns every family on one registry.

Label cardinality is bounded by construction: ``namespace``/``scaler`` by the PredictiveScalers
that exist (a deleted scaler's series are removed by :meth:`ScalerMetrics.forget`), ``signal`` by
each spec (at most 16), ``quantile`` by each spec's two quantiles (and ``point``),
``offset_seconds`` by :data:`MAX_PROJECTED_OFFSETS` per scaler, and every other label by a closed
set declared here. Nothing taken from a request (a Fleet name, a ScaledObject) becomes a
label.

Per-evaluation gauges are set by the leader and replaced as a whole on every evaluation, so a
signal or constraint that stopped applying disappears instead of lingering.

This module declares the families and imports no domain code: the controller records evaluations
into them (:mod:`presage_scaler.controller.instruments`), and serving adds the scrape-time families
of the recommendation store it serves from (:mod:`presage_scaler.serving.store_metrics`).
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from presage_scaler.api.binding_constraints import FORECAST, Constraint
from presage_scaler.api.reasons import FAILURES

SCALER = ("namespace", "scaler")
CONSTRAINT_LABELS = (FORECAST, *Constraint)
"""The ``constraint`` label values of ``presage_binding_constraint``."""
ERROR_REASONS: frozenset[str] = frozenset(FAILURES)
"""Evaluation error reasons exported as themselves; any other reason is counted as ``Other``."""
OTHER_REASON = "Other"
MAX_PROJECTED_OFFSETS = 64
"""The most forecast offsets ``presage_forecast_projected`` exports per scaler (see
:func:`presage_scaler.controller.instruments.projected_steps`): a horizon may be up to 20,000
steps, each a series per quantile."""
POINT_QUANTILE = "point"
"""The ``quantile`` label value of the point forecast in ``presage_forecast_projected``."""
Outcome = Literal["success", "error"]
QueryType = Literal["range", "instant"]

_EVALUATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# KEDA and Agones are answered from memory: anything slower than a few milliseconds is a problem.
_REQUEST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

Key = tuple[str, str]


@dataclass(frozen=True, eq=False)
class ScalerGauge:
    """A per-scaler gauge family. Its values live in :class:`ScalerMetrics`' table, a few plain
    tuples per scaler, and become samples only when Prometheus scrapes: a prometheus_client Gauge
    child (a lock and a value object per series) cost ~0.9 KiB per series, ~50 MiB per 1,000
    scalers at 55 series each."""

    name: str
    documentation: str
    labels: tuple[str, ...]
    """Label names after ``namespace`` and ``scaler``."""


Series = tuple[ScalerGauge, tuple[str, ...]]
"""A per-scaler gauge and its label values (``namespace``, ``scaler``, then the gauge's own)."""
_Layout = tuple[tuple[ScalerGauge, tuple[str, ...]], ...]
"""Which series one group of a scaler has: each gauge and its own label values (after namespace and
scaler). Scalers of the same shape (signal names, quantiles, horizon) share one."""
_Values = tuple[_Layout, array]
"""One group's series and their values, in the same order."""
MAX_SHARED_LAYOUTS = 4096
"""Distinct layouts kept for sharing; beyond it the table starts over (sharing lost, nothing else)."""


class _Durations:
    """One scaler's evaluation-duration histogram: a count per bucket and the sum (a prometheus_client
    Histogram child holds a lock and a value object per bucket, ~3 KiB per scaler)."""

    __slots__ = ("counts", "total")

    def __init__(self, buckets: int) -> None:
        self.counts = array("Q", bytes(8 * (buckets + 1)))  # the last counts what exceeds every bound
        self.total = 0.0


class ScalerMetrics:
    """Every metric family of the scaler, and the calls that update them.

    The families are declared by concern, in the order a scrape lists them: the per-scaler gauges
    (replicas, forecast, signals, shadow), then the cumulative families (evaluation, serving), then
    the collector that turns the per-scaler tables into samples.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._gauges: list[ScalerGauge] = []
        self._declare_replica_gauges()
        self._declare_forecast_gauges()
        self._declare_signal_gauges()
        self._declare_shadow_gauges()
        self._declare_evaluation_families()
        self._declare_serving_families()
        self._values: dict[Key, dict[str, _Values]] = {}
        self._layouts: dict[_Layout, _Layout] = {}
        self._durations: dict[Key, _Durations] = {}
        self._cumulative: dict[Key, set[tuple[Counter | Histogram, tuple[str, ...]]]] = {}
        self.registry.register(_ScalerSeries(self._gauges, self._values, self._durations))

    # --- declarations ---------------------------------------------------------------------------

    def _gauge(self, name: str, documentation: str, *labels: str) -> ScalerGauge:
        """Declare a per-scaler gauge family (labels after ``namespace`` and ``scaler``)."""
        self._gauges.append(ScalerGauge(name, documentation, labels))
        return self._gauges[-1]

    def _declare_replica_gauges(self) -> None:
        """What the last evaluation recommended, what each policy alone implies, and the lead time."""
        gauge = self._gauge
        self.recommended = gauge("presage_recommended_replicas", "Replicas presage recommends (what Enforce applies).")
        self.predictive = gauge("presage_predictive_replicas", "Replicas the forecast alone implies.")
        self.reactive = gauge(
            "presage_reactive_replicas", "Replicas the reactive floor would choose (absent when it is disabled)."
        )
        self.current = gauge("presage_current_replicas", "Replicas last read from the target.")
        self.lead_time = gauge("presage_lead_time_seconds", "Lead time used by the last evaluation.")

    def _declare_forecast_gauges(self) -> None:
        """The binding signal's forecast: at the lead time, and projected up to the horizon."""
        gauge = self._gauge
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

    def _declare_signal_gauges(self) -> None:
        """Each signal's figures, and which signal and which constraint bound the recommendation."""
        gauge = self._gauge
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

    def _declare_shadow_gauges(self) -> None:
        """The shadow ledger's scores: how presage and the reactive policy would have covered demand."""
        gauge = self._gauge
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

    def _declare_evaluation_families(self) -> None:
        """What evaluating costs and how it fails: errors, fenced writes, backend and Prometheus calls."""
        r = self.registry
        self.evaluation_errors = Counter(
            "presage_evaluation_errors", "Evaluations that failed, by reason.", (*SCALER, "reason"), registry=r
        )
        self.status_writes_fenced = Counter(
            "presage_status_writes_fenced",
            "Status writes not sent because, as each was about to leave, this replica could no longer be "
            "certain it held the Lease (its renew deadline had passed), by kind.",
            ("kind",),
            registry=r,
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

    def _declare_serving_families(self) -> None:
        """How KEDA's calls and Agones' webhook requests were answered."""
        r = self.registry
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

    # --- per scaler ----------------------------------------------------------------------------

    def observe_duration(self, namespace: str, name: str, seconds: float) -> None:
        """Count one evaluation's duration in ``presage_evaluation_duration_seconds``."""
        durations = self._durations.get((namespace, name))
        if durations is None:
            durations = self._durations[(namespace, name)] = _Durations(len(_EVALUATION_BUCKETS))
        durations.counts[bisect.bisect_left(_EVALUATION_BUCKETS, seconds)] += 1
        durations.total += seconds

    def observe_error(self, namespace: str, name: str, reason: str) -> None:
        """Count a failed evaluation; reasons outside :data:`ERROR_REASONS` count as ``Other``."""
        labels = (namespace, name, reason if reason in ERROR_REASONS else OTHER_REASON)
        self.evaluation_errors.labels(*labels).inc()
        self.track((namespace, name), self.evaluation_errors, labels)

    def forget(self, namespace: str, name: str) -> None:
        """Remove every series of a scaler (deleted, or no longer evaluated here)."""
        self._values.pop((namespace, name), None)
        self._durations.pop((namespace, name), None)
        for metric, labels in self._cumulative.pop((namespace, name), set()):
            metric.remove(*labels)

    def forget_all(self) -> None:
        """Remove every per-scaler series, e.g. when this replica stops being the leader."""
        for namespace, name in {*self._values, *self._durations, *self._cumulative}:
            self.forget(namespace, name)

    def replace(self, key: Key, group: str, values: dict[Series, float]) -> None:
        """Set the scaler's gauges of ``group`` to ``values``; the group's series not in it are gone."""
        layout = tuple((gauge, labels[len(SCALER) :]) for gauge, labels in values)
        if len(self._layouts) >= MAX_SHARED_LAYOUTS and layout not in self._layouts:
            self._layouts.clear()
        layout = self._layouts.setdefault(layout, layout)
        self._values.setdefault(key, {})[group] = (layout, array("d", values.values()))

    def track(self, key: Key, metric: Counter | Histogram, labels: tuple[str, ...]) -> None:
        """Remember a cumulative series of the scaler, so :meth:`forget` removes it."""
        self._cumulative.setdefault(key, set()).add((metric, labels))

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


class _ScalerSeries(Collector):
    """The per-scaler gauge families and the evaluation-duration histogram, built from the tables
    at scrape time."""

    def __init__(
        self, gauges: list[ScalerGauge], values: dict[Key, dict[str, _Values]], durations: dict[Key, _Durations]
    ) -> None:
        self._gauges = gauges
        self._values = values
        self._durations = durations

    def describe(self) -> list[Metric]:
        return [*self._gauge_families().values(), self._duration_family()]

    def collect(self) -> Iterator[Metric]:
        families = self._gauge_families()
        for (namespace, name), groups in list(self._values.items()):
            for layout, values in tuple(groups.values()):
                for (gauge, labels), value in zip(layout, values, strict=True):
                    families[gauge].add_metric((namespace, name, *labels), value)
        yield from families.values()
        durations = self._duration_family()
        bounds = [*(str(float(b)) for b in _EVALUATION_BUCKETS), "+Inf"]
        for (namespace, name), histogram in list(self._durations.items()):
            cumulative, buckets = 0, []
            for bound, count in zip(bounds, histogram.counts, strict=True):
                cumulative += count
                buckets.append((bound, cumulative))
            durations.add_metric((namespace, name), buckets, histogram.total)
        yield durations

    def _gauge_families(self) -> dict[ScalerGauge, GaugeMetricFamily]:
        return {g: GaugeMetricFamily(g.name, g.documentation, labels=(*SCALER, *g.labels)) for g in self._gauges}

    @staticmethod
    def _duration_family() -> HistogramMetricFamily:
        return HistogramMetricFamily(
            "presage_evaluation_duration_seconds",
            "Time one evaluation took (queries, forecast, policy).",
            labels=SCALER,
        )
