"""A PredictiveScaler evaluated end to end against a real, backfilled Prometheus."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from presage_scaler.api.forecast_backend import SeasonalNaiveBackend
from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.clients.prometheus import PrometheusClientPool, TooManySeries
from presage_scaler.controller.prometheus_signals import PrometheusSignalSource
from presage_scaler.engine.evaluator import evaluate
from presage_scaler.engine.policy import PolicyState
from tests.harness.prometheus import Series

pytestmark = pytest.mark.integration

START = datetime(2026, 11, 20, tzinfo=UTC)
NOW = START + timedelta(hours=51)  # three hours into a rising daily phase
MINUTE = timedelta(minutes=1)


def demand(at: datetime) -> float:
    seconds = (at - START).total_seconds()
    return 100.0 + 50.0 * math.sin(2 * math.pi * seconds / 86400)


def samples(until: datetime, skip=lambda at: False, nan_at: datetime | None = None):
    at, out = START, []
    while at <= until:
        if not skip(at):
            out.append((at, float("nan") if at == nan_at else demand(at)))
        at += MINUTE
    return out


def scaler(address: str, query: str, **policy) -> PredictiveScalerSpec:
    return parse(
        PredictiveScalerSpec,
        {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "signal": {"prometheus": {"address": address, "query": query}, "history": "48h", "resolution": "5m"},
            "capacity": {"perReplica": 10},
            "leadTime": {"static": "10m"},
            "policy": {"maxReplicas": 50, **policy},
        },
    )


BACKEND = SeasonalNaive.from_settings(SeasonalNaiveBackend(season="24h", cycles=2))


async def run(spec: PredictiveScalerSpec, current: int):
    pool = PrometheusClientPool()
    try:
        return await evaluate(spec, BACKEND, PrometheusSignalSource(pool), current, PolicyState(), NOW)
    finally:
        await pool.aclose()


async def test_end_to_end_recommendation(prometheus_factory):
    server = prometheus_factory(Series("app_demand", {"job": "web"}, samples(NOW)))
    # A perfectly periodic series: the forecast is the pattern itself. 10m of lead plus the 1m
    # interval spans the next three 5m steps.
    upper = max(demand(NOW + k * timedelta(minutes=5)) for k in (1, 2, 3))
    expected = math.ceil(upper * 1.1 / 10)
    recommendation = await run(scaler(server.url, "app_demand"), current=expected)

    assert recommendation.replicas == expected
    assert recommendation.breakdown.predictive == expected
    assert recommendation.breakdown.reactive == math.ceil(demand(NOW) * 1.1 / 10)
    assert recommendation.breakdown.binding_signal == "demand"
    assert recommendation.breakdown.constraint == ""
    [status] = recommendation.signal_statuses
    assert status.name == "demand" and status.gap_steps == 0 and status.replicas == expected
    assert status.observed == pytest.approx(demand(NOW))
    # Sized to the window's highest demand; the forecast at the lead time is what lastForecast reports.
    assert status.sized_to == pytest.approx(upper, rel=1e-6)
    forecast = recommendation.last_forecast
    assert forecast.backend == "default" and forecast.lead_time_seconds == 600
    assert forecast.point == pytest.approx(demand(NOW + timedelta(minutes=10)), rel=1e-6)
    assert set(forecast.quantiles) == {"0.5", "0.9"}
    assert status.forecast == forecast.quantiles["0.9"]


async def test_scale_down_is_held_by_the_window(prometheus_factory):
    server = prometheus_factory(Series("app_demand", {"job": "web"}, samples(NOW)))
    recommendation = await run(scaler(server.url, "app_demand", reactiveFloor={"enabled": False}), current=40)
    assert recommendation.replicas == 40
    assert recommendation.breakdown.constraint == "ScaleDownWindow"
    assert recommendation.state.scale_down_candidate_since == NOW


async def test_two_series_is_a_typed_error_naming_the_query(prometheus_factory):
    server = prometheus_factory(
        Series("app_demand", {"pod": "a"}, samples(NOW)), Series("app_demand", {"pod": "b"}, samples(NOW))
    )
    with pytest.raises(TooManySeries) as caught:
        await run(scaler(server.url, "app_demand"), current=10)
    assert "app_demand" in str(caught.value) and "2" in str(caught.value)
    assert caught.value.reason == "TooManySeries"


async def test_gap_and_nan_are_filled_and_counted(prometheus_factory):
    gap_start = NOW - timedelta(hours=3)
    in_gap = lambda at: gap_start <= at < gap_start + timedelta(hours=1)  # noqa: E731
    nan_at = NOW - timedelta(hours=1)
    server = prometheus_factory(Series("app_demand", {"job": "web"}, samples(NOW, in_gap, nan_at)))
    recommendation = await run(scaler(server.url, "app_demand"), current=10)
    [status] = recommendation.signal_statuses
    # 11 five-minute steps inside the hour find no sample within the lookback; one step reads the NaN.
    assert status.gap_steps == 12
    assert np.isfinite(status.forecast) and recommendation.replicas >= 1


def gauge(name: str, value: float, hours: float = 51) -> Series:
    """A constant gauge sampled every minute up to NOW."""
    return Series(name, {}, [(NOW - k * MINUTE, value) for k in range(int(hours * 60), -1, -1)])


async def test_observed_lead_time_and_capacity_query(prometheus_factory):
    server = prometheus_factory(
        Series("app_demand", {"job": "web"}, samples(NOW)),
        gauge("pod_ready_p95_seconds", 420),
        gauge("rps_per_pod", 20),
    )
    spec = scaler(server.url, "app_demand").model_dump(by_alias=True, mode="json", exclude_none=True)
    spec["leadTime"] = {"source": "Observed", "observed": {"address": server.url, "query": "pod_ready_p95_seconds"}}
    spec["capacity"] = {"query": {"address": server.url, "query": "rps_per_pod"}}
    recommendation = await run(parse(PredictiveScalerSpec, spec), current=10)
    assert recommendation.last_forecast.lead_time_seconds == 420
    upper = max(demand(NOW + k * timedelta(minutes=5)) for k in (1, 2))  # 7m lead + 1m interval: two 5m steps
    assert recommendation.breakdown.predictive == math.ceil(upper * 1.1 / 20)


async def test_observed_lead_time_is_clamped(prometheus_factory):
    server = prometheus_factory(
        Series("app_demand", {"job": "web"}, samples(NOW)), gauge("pod_ready_p95_seconds", 7200)
    )
    spec = scaler(server.url, "app_demand").model_dump(by_alias=True, mode="json", exclude_none=True)
    spec["leadTime"] = {
        "source": "Observed",
        "max": "10m",
        "observed": {"address": server.url, "query": "pod_ready_p95_seconds"},
    }
    recommendation = await run(parse(PredictiveScalerSpec, spec), current=10)
    assert recommendation.lead_time.clamped and recommendation.last_forecast.lead_time_seconds == 600


async def test_short_history_is_a_reported_cold_start(prometheus_factory):
    recent = [(NOW - k * MINUTE, 120.0) for k in range(20, -1, -1)]
    server = prometheus_factory(Series("app_demand", {"job": "web"}, recent))
    recommendation = await run(scaler(server.url, "app_demand"), current=5)
    # The backend's method has a field of its own; the model stays the backend's identifier.
    assert recommendation.last_forecast.method == "recent-level"
    assert recommendation.last_forecast.model == "seasonal-naive/24hx2"
    # Flat 120 units: the floor and the forecast agree on ceil(120 * 1.1 / 10) = 14 replicas.
    assert recommendation.replicas == 10  # +100% per evaluation from 5 replicas
    assert recommendation.breakdown.predictive == 14 and recommendation.breakdown.constraint == "MaxScaleUpRate"
