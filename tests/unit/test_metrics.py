"""ScalerMetrics: what each call exports, what it removes, and how many series it can make."""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Sequence
from datetime import datetime, timedelta
from itertools import pairwise

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

import presage_scaler
from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.prometheus_query import PrometheusQuery
from presage_scaler.api.reasons import FAILURES, Reason
from presage_scaler.backends.base import (
    BackendError,
    BackendUnavailable,
    Forecast,
    ForecastRequest,
    History,
    ModelIdentity,
)
from presage_scaler.clients.prometheus import NoData, PrometheusError
from presage_scaler.controller.instruments import (
    TimedBackend,
    TimedSignalSource,
    projected_steps,
    record_evaluation,
    record_shadow,
)
from presage_scaler.engine.evaluator import (
    EvaluationError,
    Recommendation,
    SignalRead,
    SignalSpec,
    decide,
    signal_specs,
)
from presage_scaler.engine.leadtime import HorizonError
from presage_scaler.engine.policy import PolicyState
from presage_scaler.engine.shadow import ShadowSummary
from presage_scaler.observability.metrics import (
    CONSTRAINT_LABELS,
    ERROR_REASONS,
    MAX_PROJECTED_OFFSETS,
    MAX_SHARED_LAYOUTS,
    ScalerMetrics,
)
from presage_scaler.serving.store import RecommendationStore, StoredRecommendation, TargetRef
from presage_scaler.serving.store_metrics import served_metrics
from tests.harness.evaluation import NOW, PROM, SPEC, evaluate, flat_forecast

NS, NAME = "shop", "web"


@pytest.fixture
def metrics() -> ScalerMetrics:
    return ScalerMetrics(CollectorRegistry())


def value(m: ScalerMetrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def scaler(**labels: str) -> dict[str, str]:
    return {"namespace": NS, "scaler": NAME, **labels}


def series_of(m: ScalerMetrics, name: str) -> list[dict[str, str]]:
    return [s.labels for family in m.registry.collect() for s in family.samples if s.name == name]


def test_evaluation_gauges(metrics: ScalerMetrics) -> None:
    rec = evaluate(rps=100.0, cpu=4.0)  # rps binds: ⌈110 × 1.1 / 10⌉ = 13 replicas
    record_evaluation(metrics, NS, NAME, rec, current_replicas=10, duration_s=0.42)
    assert rec.breakdown.binding_signal == "rps"
    assert value(metrics, "presage_recommended_replicas", **scaler()) == rec.replicas
    assert value(metrics, "presage_predictive_replicas", **scaler()) == 13
    assert value(metrics, "presage_reactive_replicas", **scaler()) == rec.breakdown.reactive
    assert value(metrics, "presage_current_replicas", **scaler()) == 10
    assert value(metrics, "presage_lead_time_seconds", **scaler()) == 180
    assert value(metrics, "presage_forecast_point", **scaler(signal="rps")) == 100.0
    assert value(metrics, "presage_forecast_quantile", **scaler(signal="rps", quantile="0.9")) == pytest.approx(110)
    assert value(metrics, "presage_forecast_quantile", **scaler(signal="rps", quantile="0.5")) == pytest.approx(90)
    assert value(metrics, "presage_signal_observed", **scaler(signal="cpu")) == 4.0
    assert value(metrics, "presage_signal_capacity_per_replica", **scaler(signal="cpu")) == 2.0
    assert value(metrics, "presage_signal_replicas", **scaler(signal="rps")) == 13
    # The forecast at the lead time (as lastForecast has it) and what the signal was sized to, each as status says.
    [rps, cpu] = rec.signal_statuses
    assert value(metrics, "presage_signal_forecast", **scaler(signal="rps")) == pytest.approx(110)
    assert value(metrics, "presage_signal_sized_to", **scaler(signal="rps")) == rps.sized_to
    assert value(metrics, "presage_signal_sized_to", **scaler(signal="cpu")) == cpu.sized_to
    assert value(metrics, "presage_signal_gap_steps", **scaler(signal="rps")) == 1
    assert value(metrics, "presage_binding_signal", **scaler(signal="rps")) == 1
    assert value(metrics, "presage_binding_signal", **scaler(signal="cpu")) == 0
    assert value(metrics, "presage_evaluation_duration_seconds_count", **scaler()) == 1
    assert value(metrics, "presage_evaluation_duration_seconds_sum", **scaler()) == pytest.approx(0.42)


@pytest.mark.parametrize(("rps", "cpu"), [(100.0, 4.0), (20.0, 30.0), (0.0, 0.0)])
def test_status_explains_the_number(rps: float, cpu: float) -> None:
    # A reader of status can recompute breakdown.predictive: ⌈(sizedTo + headroom) / capacity⌉, largest signal.
    rec = evaluate(rps=rps, cpu=cpu)
    capacity = {"rps": 10.0, "cpu": 2.0}
    implied = {
        s.name: max(0, math.ceil(float(s.sized_to) * 1.1 / capacity[s.name] - 1e-9)) for s in rec.signal_statuses
    }
    assert {s.name: s.replicas for s in rec.signal_statuses} == implied
    assert rec.breakdown.predictive == max(implied.values())
    # signalStatuses[].forecast is the lead-time value at targetQuantile: the binding one is lastForecast's.
    binding = next(s for s in rec.signal_statuses if s.name == rec.breakdown.binding_signal)
    assert binding.forecast == rec.last_forecast.quantiles["0.9"]


def test_binding_constraint_is_one_hot(metrics: ScalerMetrics) -> None:
    rec = evaluate(rps=100.0, cpu=4.0, current=10)
    record_evaluation(metrics, NS, NAME, rec, 10, 0.1)
    constraint = rec.breakdown.constraint or "Forecast"
    values = {c: value(metrics, "presage_binding_constraint", **scaler(constraint=c)) for c in CONSTRAINT_LABELS}
    assert values == {c: float(c == constraint) for c in CONSTRAINT_LABELS}
    # A scale-up beyond maxScaleUpRate from 2 replicas is capped.
    record_evaluation(metrics, NS, NAME, evaluate(rps=100.0, cpu=4.0, current=2), 2, 0.1)
    assert value(metrics, "presage_binding_constraint", **scaler(constraint="MaxScaleUpRate")) == 1
    assert (
        sum(value(metrics, "presage_binding_constraint", **scaler(constraint=c)) or 0 for c in CONSTRAINT_LABELS) == 1
    )


def test_a_signal_that_stops_binding_loses_its_forecast_series(metrics: ScalerMetrics) -> None:
    record_evaluation(metrics, NS, NAME, evaluate(rps=100.0, cpu=4.0), 10, 0.1)
    record_evaluation(metrics, NS, NAME, evaluate(rps=10.0, cpu=40.0), 10, 0.1)  # cpu binds now
    assert {s["signal"] for s in series_of(metrics, "presage_forecast_point")} == {"cpu"}
    assert {s["signal"] for s in series_of(metrics, "presage_forecast_quantile")} == {"cpu"}
    assert {s["signal"] for s in series_of(metrics, "presage_forecast_projected")} == {"cpu"}
    assert value(metrics, "presage_binding_signal", **scaler(signal="rps")) == 0


def projected(m: ScalerMetrics) -> dict[tuple[str, int, str], float]:
    """The exported projected curve: (signal, offset seconds, quantile) → value."""
    return {
        (s.labels["signal"], int(s.labels["offset_seconds"]), s.labels["quantile"]): s.value
        for family in m.registry.collect()
        for s in family.samples
        if s.name == "presage_forecast_projected"
    }


def with_rps_forecast(forecast: Forecast) -> Recommendation:
    """``evaluate(rps=100, cpu=4)`` decided again with the rps signal forecast as ``forecast``."""
    base = evaluate(rps=100.0, cpu=4.0)
    forecasts = (forecast, flat_forecast(4.0))
    return decide(SPEC, base.data, forecasts, base.identity, base.lead_time, 10, PolicyState(), NOW)


def ramp(steps: int) -> Forecast:
    """A forecast whose every step differs: the point 100, 101, …; its quantiles 10% either side."""
    point = 100.0 + np.arange(steps)
    return Forecast(point=point, quantiles={0.5: point * 0.9, 0.9: point * 1.1})


def test_a_short_horizon_is_projected_whole(metrics: ScalerMetrics) -> None:
    record_evaluation(metrics, NS, NAME, evaluate(rps=100.0, cpu=4.0), 10, 0.1)  # ten 1m steps, rps binds
    curve = projected(metrics)
    assert {offset for _, offset, _ in curve} == {60 * k for k in range(1, 11)}
    assert {(signal, quantile) for signal, _, quantile in curve} == {("rps", "point"), ("rps", "0.5"), ("rps", "0.9")}
    assert curve[("rps", 180, "point")] == 100.0
    assert curve[("rps", 600, "0.9")] == pytest.approx(110)
    assert curve[("rps", 60, "0.5")] == pytest.approx(90)


def test_a_long_horizon_is_thinned_keeping_the_lead_time_and_the_last_step(metrics: ScalerMetrics) -> None:
    forecast = ramp(1000)
    rec = with_rps_forecast(forecast)
    assert rec.breakdown.binding_signal == "rps"
    record_evaluation(metrics, NS, NAME, rec, 10, 0.1)
    curve = projected(metrics)
    offsets = sorted({offset for _, offset, _ in curve})
    assert len(offsets) == MAX_PROJECTED_OFFSETS
    assert {60, 180, 60_000} <= set(offsets)  # the first step, the 3m lead time, the last of 1000 steps
    # Apart from the lead-time step, evenly spaced: 999 steps in 62 gaps of 16 or 17 steps.
    spaced = [offset // 60 for offset in offsets if offset != 180]
    assert {b - a for a, b in pairwise(spaced)} == {16, 17}
    assert len(curve) == 3 * MAX_PROJECTED_OFFSETS
    for (_, offset, quantile), exported in curve.items():
        step = offset // 60 - 1  # offset k (0-based) is (k + 1) resolutions ahead
        values = forecast.point if quantile == "point" else forecast.quantiles[float(quantile)]
        assert exported == pytest.approx(values[step]), (offset, quantile)
    assert curve[("rps", 180, "point")] == rec.last_forecast.point  # the step lastForecast reports


def test_a_shorter_horizon_removes_the_offsets_beyond_it_and_forget_removes_the_rest(metrics: ScalerMetrics) -> None:
    record_evaluation(metrics, NS, NAME, with_rps_forecast(ramp(1000)), 10, 0.1)
    record_evaluation(metrics, NS, NAME, evaluate(rps=100.0, cpu=4.0), 10, 0.1)
    curve = projected(metrics)
    assert {offset for _, offset, _ in curve} == {60 * k for k in range(1, 11)}
    assert sorted(curve.values()) == pytest.approx([90.0] * 10 + [100.0] * 10 + [110.0] * 10)
    metrics.forget(NS, NAME)
    assert projected(metrics) == {}


@pytest.mark.parametrize("horizon", [1, 3, 63, 64, 65, 127, 1000, 20_000])
def test_projected_steps_are_bounded_and_keep_the_lead_time_and_the_last_step(horizon: int) -> None:
    for lead_step in {0, min(2, horizon - 1), horizon // 3, horizon - 1}:
        steps = projected_steps(horizon, lead_step)
        assert steps == sorted(set(steps))
        if horizon <= MAX_PROJECTED_OFFSETS:
            assert steps == list(range(horizon))
        else:  # 63 evenly spaced, and the lead-time step unless it is one of them
            assert MAX_PROJECTED_OFFSETS - 1 <= len(steps) <= MAX_PROJECTED_OFFSETS
        assert {0, lead_step, horizon - 1} <= set(steps) <= set(range(horizon))


def test_reactive_gauge_is_absent_when_the_floor_is_disabled(metrics: ScalerMetrics) -> None:
    record_evaluation(metrics, NS, NAME, evaluate(rps=100.0, cpu=4.0), 10, 0.1)
    wire = SPEC.to_wire()
    wire["policy"]["reactiveFloor"] = {"enabled": False}
    no_floor = parse(PredictiveScalerSpec, wire)
    record_evaluation(metrics, NS, NAME, evaluate(rps=100.0, cpu=4.0, spec=no_floor), 10, 0.1)
    assert series_of(metrics, "presage_reactive_replicas") == []


def test_errors_use_a_closed_set_of_reasons(metrics: ScalerMetrics) -> None:
    metrics.observe_error(NS, NAME, "NoData")
    metrics.observe_error(NS, NAME, "NoData")
    metrics.observe_error(NS, NAME, "SomethingFromTheFuture")
    assert value(metrics, "presage_evaluation_errors_total", **scaler(reason="NoData")) == 2
    assert value(metrics, "presage_evaluation_errors_total", **scaler(reason="Other")) == 1
    assert value(metrics, "presage_evaluation_errors_total", **scaler(reason="SomethingFromTheFuture")) is None


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    return found.union(*(_subclasses(c) for c in found)) if found else found


def test_every_error_reason_is_a_failure_of_the_vocabulary_and_exported_as_itself() -> None:
    """Errors carry their reason as a type: every error class presage raises names a Reason that is a
    failure, and the metric exports each failure as itself (any other value counts as Other)."""
    for module in pkgutil.walk_packages(presage_scaler.__path__, "presage_scaler."):
        if "proto_gen" not in module.name:
            importlib.import_module(module.name)
    carriers = {c for c in _subclasses(Exception) if c.__module__.startswith("presage_scaler") and "reason" in vars(c)}
    assert {PrometheusError, NoData, BackendError, HorizonError} <= carriers  # the walk finds them
    for carrier in carriers:
        assert isinstance(carrier.reason, Reason) and carrier.reason in FAILURES, carrier
    assert {str(r) for r in FAILURES} == ERROR_REASONS


def test_a_reason_outside_the_vocabulary_is_refused_where_it_is_written() -> None:
    with pytest.raises(ValueError, match="'NoSuchReason' is not a valid Reason"):
        EvaluationError("NoSuchReason", "made up")  # type: ignore[arg-type]
    assert EvaluationError("NoData", "from a string").reason is Reason.NO_DATA


def test_shadow_summary(metrics: ScalerMetrics) -> None:
    summary = ShadowSummary(
        samples=120,
        pending=3,
        coverage=0.99,
        reactive_coverage=0.9,
        over_provisioning=0.2,
        reactive_over_provisioning=0.05,
        window_start=NOW,
        last_scored_time=NOW,
        quantile_coverage=0.88,
    )
    record_shadow(metrics, NS, NAME, summary)
    assert value(metrics, "presage_shadow_quantile_coverage_ratio", **scaler()) == 0.88
    assert value(metrics, "presage_shadow_coverage_ratio", **scaler(policy="presage")) == 0.99
    assert value(metrics, "presage_shadow_coverage_ratio", **scaler(policy="reactive")) == 0.9
    assert value(metrics, "presage_shadow_overprovisioning_ratio", **scaler(policy="presage")) == 0.2
    assert value(metrics, "presage_shadow_overprovisioning_ratio", **scaler(policy="reactive")) == 0.05
    assert value(metrics, "presage_shadow_scored_predictions", **scaler()) == 120
    assert value(metrics, "presage_shadow_pending_predictions", **scaler()) == 3
    empty = ShadowSummary(0, 1, None, None, None, None, None, None)
    record_shadow(metrics, NS, NAME, empty)
    assert series_of(metrics, "presage_shadow_coverage_ratio") == []
    assert series_of(metrics, "presage_shadow_quantile_coverage_ratio") == []
    assert value(metrics, "presage_shadow_pending_predictions", **scaler()) == 1


def test_forget_removes_every_series_of_the_scaler(metrics: ScalerMetrics) -> None:
    for name in (NAME, "api"):
        record_evaluation(metrics, NS, name, evaluate(rps=100.0, cpu=4.0), 10, 0.1)
        metrics.observe_error(NS, name, "NoData")
        record_shadow(metrics, NS, name, ShadowSummary(1, 0, 1.0, 1.0, 0.0, 0.0, NOW, NOW))
    metrics.forget(NS, NAME)
    remaining = {
        (s.labels.get("namespace"), s.labels.get("scaler"))
        for family in metrics.registry.collect()
        for s in family.samples
        if "scaler" in s.labels
    }
    assert remaining == {(NS, "api")}
    metrics.forget_all()
    assert not any("scaler" in s.labels for family in metrics.registry.collect() for s in family.samples)


async def test_recommendation_age_is_computed_at_scrape_time() -> None:
    store = RecommendationStore()
    now = [NOW]
    metrics = served_metrics(ScalerMetrics(CollectorRegistry()), store, lambda: now[0])
    target = TargetRef("agones.dev/v1", "Fleet", "arena")
    await store.put(
        StoredRecommendation(NS, NAME, "Shadow", target, 3, 2, NOW - timedelta(seconds=30), timedelta(minutes=1), 1, 9)
    )
    assert value(metrics, "presage_recommendation_age_seconds", **scaler()) == 30
    now[0] += timedelta(minutes=2)
    assert value(metrics, "presage_recommendation_age_seconds", **scaler()) == 150
    info = scaler(mode="Shadow", target_kind="Fleet", target_name="arena")
    assert value(metrics, "presage_scaler_info", **info) == 1
    await store.remove(NS, NAME)
    assert series_of(metrics, "presage_recommendation_age_seconds") == []


def test_request_metrics(metrics: ScalerMetrics) -> None:
    metrics.observe_grpc_request("GetMetrics", "OK", 0.001)
    metrics.observe_grpc_request("StreamIsActive", "CANCELLED", None)
    metrics.observe_webhook_request(503, 0.002)
    assert value(metrics, "presage_grpc_requests_total", method="GetMetrics", code="OK") == 1
    assert value(metrics, "presage_grpc_requests_total", method="StreamIsActive", code="CANCELLED") == 1
    assert value(metrics, "presage_grpc_request_duration_seconds_count", method="GetMetrics") == 1
    assert value(metrics, "presage_grpc_request_duration_seconds_count", method="StreamIsActive") is None
    assert value(metrics, "presage_webhook_requests_total", code="503") == 1
    assert value(metrics, "presage_webhook_request_duration_seconds_count") == 1


class _Backend:
    """A backend that fails on demand: enough to see what TimedBackend records."""

    identity = ModelIdentity("SeasonalNaive", "m", "r")
    max_context = 100
    max_horizon = 10

    def __init__(self) -> None:
        self.fail = False

    async def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        if self.fail:
            raise BackendUnavailable("down")
        return [flat_forecast(1.0) for _ in requests]


async def test_timed_backend(metrics: ScalerMetrics) -> None:
    inner = _Backend()
    timed = TimedBackend(inner, "default", metrics)
    assert (timed.identity, timed.max_context, timed.max_horizon) == (inner.identity, 100, 10)
    request = ForecastRequest(History(np.ones(5), timedelta(minutes=1)), 3, (0.5, 0.9))
    assert len(await timed.forecast([request, request])) == 2
    inner.fail = True
    with pytest.raises(BackendUnavailable):
        await timed.forecast([request])
    labels = {"backend": "default"}
    assert value(metrics, "presage_forecast_request_duration_seconds_count", **labels, outcome="success") == 1
    assert value(metrics, "presage_forecast_request_duration_seconds_count", **labels, outcome="error") == 1


class _Source:
    async def range(self, signal: SignalSpec, now: datetime, max_points: int | None) -> SignalRead:
        return SignalRead(History(np.ones(3), signal.resolution))

    async def instant(self, query: PrometheusQuery, now: datetime) -> float:
        raise OSError("connection refused")


async def test_timed_signal_source(metrics: ScalerMetrics) -> None:
    timed = TimedSignalSource(_Source(), metrics)
    read = await timed.range(signal_specs(SPEC)[0], NOW, None)
    assert len(read.history.values) == 3 and read.gap_steps == 0
    with pytest.raises(OSError):
        await timed.instant(PrometheusQuery(**PROM), NOW)
    assert value(metrics, "presage_prometheus_request_duration_seconds_count", query_type="range", outcome="success")
    assert value(metrics, "presage_prometheus_request_duration_seconds_count", query_type="instant", outcome="error")


def test_label_names_are_bounded() -> None:
    """Only these labels exist; each is bounded by the scalers, their specs, or a closed set."""
    allowed = {"namespace", "scaler", "signal", "quantile", "offset_seconds", "constraint", "policy", "reason"}
    allowed |= {"backend", "outcome", "query_type", "method", "code", "le", "mode", "target_kind", "target_name"}
    metrics = served_metrics(ScalerMetrics(CollectorRegistry()), RecommendationStore())
    record_evaluation(metrics, NS, NAME, evaluate(rps=100.0, cpu=4.0), 10, 0.1)
    labels = {name for family in metrics.registry.collect() for s in family.samples for name in s.labels}
    assert labels <= allowed
    for family in metrics.registry.collect():
        assert family.name.startswith("presage_"), family.name


def test_evaluation_durations_fill_cumulative_buckets(metrics: ScalerMetrics) -> None:
    for seconds in (0.07, 0.1, 2.0, 100.0):
        metrics.observe_duration(NS, NAME, seconds)
    bucket = "presage_evaluation_duration_seconds_bucket"
    assert value(metrics, bucket, **scaler(le="0.05")) == 0
    assert value(metrics, bucket, **scaler(le="0.1")) == 2  # a bound holds what equals it
    assert value(metrics, bucket, **scaler(le="2.5")) == 3
    assert value(metrics, bucket, **scaler(le="60.0")) == 3
    assert value(metrics, bucket, **scaler(le="+Inf")) == 4
    assert value(metrics, "presage_evaluation_duration_seconds_count", **scaler()) == 4
    assert value(metrics, "presage_evaluation_duration_seconds_sum", **scaler()) == pytest.approx(102.17)
    metrics.forget(NS, NAME)
    assert value(metrics, "presage_evaluation_duration_seconds_count", **scaler()) is None


def test_scalers_of_one_shape_share_a_layout_and_many_shapes_stay_correct(metrics: ScalerMetrics) -> None:
    rec = evaluate(rps=100.0, cpu=4.0)
    record_evaluation(metrics, NS, "a", rec, 10, 0.1)
    record_evaluation(metrics, NS, "b", rec, 11, 0.1)
    assert len(metrics._layouts) == 1
    for k in range(MAX_SHARED_LAYOUTS + 5):  # a layout per scaler: the table starts over, values stay
        metrics.replace((NS, f"s{k}"), "extra", {(metrics.signal_observed, (NS, f"s{k}", f"signal{k}")): float(k)})
    assert len(metrics._layouts) <= MAX_SHARED_LAYOUTS
    assert value(metrics, "presage_current_replicas", namespace=NS, scaler="b") == 11
    last = MAX_SHARED_LAYOUTS + 4
    assert value(metrics, "presage_signal_observed", namespace=NS, scaler=f"s{last}", signal=f"signal{last}") == last
    assert value(metrics, "presage_signal_observed", namespace=NS, scaler="s7", signal="signal7") == 7
