"""End to end: a PredictiveScaler evaluated against a real Prometheus, forecast by the real forecaster."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import aiohttp
import httpx
import pytest

from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.backends.timesfm import TimesFMClient
from presage_scaler.clients.prometheus import PrometheusClientPool
from presage_scaler.controller.prometheus_signals import PrometheusSignalSource
from presage_scaler.engine.evaluator import evaluate
from presage_scaler.engine.policy import PolicyState
from tests.harness.forecaster import metric
from tests.harness.prometheus import Series

pytestmark = pytest.mark.integration

START = datetime(2026, 11, 20, tzinfo=UTC)
NOW = START + timedelta(hours=51)
MINUTE = timedelta(minutes=1)


def demand(at: datetime, base: float = 100.0) -> float:
    seconds = (at - START).total_seconds()
    return base + 0.5 * base * math.sin(2 * math.pi * seconds / 86400)


def samples(base: float = 100.0) -> list[tuple[datetime, float]]:
    return [(START + k * MINUTE, demand(START + k * MINUTE, base)) for k in range(int((NOW - START) / MINUTE) + 1)]


def scaler(address: str, **policy) -> PredictiveScalerSpec:
    def signal(name: str, query: str, per_replica: float) -> dict:
        return {
            "name": name,
            "prometheus": {"address": address, "query": query},
            "history": "48h",
            "resolution": "5m",
            "capacity": {"perReplica": per_replica},
        }

    return parse(
        PredictiveScalerSpec,
        {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "signals": [signal("rps", "app_rps", 10), signal("queue", "app_queue", 50)],
            "leadTime": {"static": "10m"},
            "forecast": {"backendRef": "timesfm-small"},
            "policy": {"maxReplicas": 200, **policy},
        },
    )


def backend_spec(url: str) -> ForecastBackendSpec:
    return parse(
        ForecastBackendSpec,
        {"type": "TimesFM", "timesFM": {"endpoint": url, "maxContext": 512, "maxHorizon": 64, "timeout": "20s"}},
    )


async def test_recommendation_through_the_forecaster(prometheus_factory, forecaster_factory):
    prometheus = prometheus_factory(Series("app_rps", {"job": "web"}, samples()), Series("app_queue", {}, samples(20)))
    forecaster = forecaster_factory("--max-context", "512", "--max-horizon", "64")
    spec = scaler(prometheus.url, targetQuantile="0.95")
    pool = PrometheusClientPool()
    async with aiohttp.ClientSession() as http:
        backend = TimesFMClient("timesfm-small", backend_spec(forecaster.url).times_fm, http)
        before = httpx.get(f"{forecaster.url}/metrics").text
        try:
            recommendation = await evaluate(spec, backend, PrometheusSignalSource(pool), 10, PolicyState(), NOW)
        finally:
            await pool.aclose()
    after = httpx.get(f"{forecaster.url}/metrics").text

    # One request carried both signals.
    ok = {"path": "/v1/forecast", "code": "200"}
    assert (
        metric(after, "presage_forecaster_requests_total", **ok)
        - metric(before, "presage_forecaster_requests_total", **ok)
        == 1
    )
    assert metric(after, "presage_forecaster_series_total") - metric(before, "presage_forecaster_series_total") == 2
    # 48h at 5m is 577 points; the backend's maxContext keeps the last 512, so nothing is cut server-side.
    assert metric(after, "presage_forecaster_series_truncated_total") == 0

    assert 1 <= recommendation.replicas <= 200
    forecast = recommendation.last_forecast
    assert forecast.backend == "timesfm-small"
    # A first evaluation has no past forecasts to calibrate from: the backend's own band is used, and
    # said in fields of their own; the model is the server's identifier alone.
    assert forecast.model == "presage-testing/timesfm-2.5-tiny-random"
    assert forecast.method == "q0.95 extrapolated from deciles"
    assert {s.sized_by for s in recommendation.signal_statuses} == {"Uncalibrated"}
    assert all(
        s.calibration is not None and s.calibration.scored_forecasts == 0 for s in recommendation.signal_statuses
    )
    assert forecast.revision == "seed-0" and forecast.lead_time_seconds == 600
    # The policy's levels, and the model's band (its median to 0.9) that calibration weighs.
    assert set(forecast.quantiles) == {"0.5", "0.9", "0.95"}
    assert forecast.quantiles["0.95"] >= forecast.quantiles["0.5"]
    assert {s.name for s in recommendation.signal_statuses} == {"rps", "queue"}
    assert all(math.isfinite(s.forecast) and s.replicas >= 0 for s in recommendation.signal_statuses)
    # The reactive floor sizes for what is observed now, whatever the random weights forecast.
    assert recommendation.replicas >= math.ceil(demand(NOW) * 1.1 / 10)
