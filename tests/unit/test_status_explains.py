"""What one evaluation writes to status is enough to say why it recommends its count: each number
comes from the backend or from a named step of presage's, in its own field, as the API reference
says (issue: "why 26 replicas?")."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.prometheus_query import PrometheusQuery
from presage_scaler.api.reasons import Reason
from presage_scaler.backends.base import Forecast, ForecastRequest, History, ModelIdentity
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.engine.evaluator import (
    STALE_STEPS,
    EvaluationError,
    Recommendation,
    SignalRead,
    SignalSpec,
    evaluate,
    forecast_requests,
    signal_specs,
)
from presage_scaler.engine.past_forecasts import BAND_LEVELS
from presage_scaler.engine.policy import PolicyState

STEP = timedelta(minutes=5)
DAY = 288  # steps of 5m
START = datetime(2026, 10, 1, tzinfo=UTC)


def sine_with_noise(days: int, seed: int = 7) -> np.ndarray:
    """A daily sine between 50 and 150 with Gaussian noise (sd 8), at 5-minute steps."""
    steps = np.arange(days * DAY)
    curve = 100.0 + 50.0 * np.sin(2 * np.pi * steps / DAY)
    return np.maximum(curve + np.random.default_rng(seed).normal(0.0, 8.0, len(steps)), 0.0)


class TraceSource:
    """Production's query window over a trace at 5m, a sample at t being the step that ends at t; the
    newest ``stale`` steps are reported as filled with the value before them."""

    def __init__(self, values: np.ndarray, stale: int = 0) -> None:
        self.values = values
        self.stale = stale

    async def range(self, signal: SignalSpec, now: datetime, max_points: int | None) -> SignalRead:
        end = (now - START) // STEP
        points = signal.history // signal.resolution
        history = self.values[max(0, end - points) : end].copy()
        if self.stale:
            history[-self.stale :] = history[-self.stale - 1]
        return SignalRead(History(history, STEP), gap_steps=self.stale, stale_steps=self.stale)

    async def instant(self, query: PrometheusQuery, now: datetime) -> float:
        raise AssertionError("no instant queries in these specs")


def spec(signal: dict[str, Any] | None = None, **top: Any) -> PredictiveScalerSpec:
    raw = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "signal": {"prometheus": {"address": "http://p:9090", "query": "rate(requests[5m])"}, **(signal or {})},
        "capacity": {"perReplica": 10},
        "policy": {"maxReplicas": 100},
        "interval": "10m",
        **top,
    }
    return parse(PredictiveScalerSpec, raw)


def run(
    s: PredictiveScalerSpec,
    source: TraceSource,
    now: datetime,
    backend: Any = None,
    current: int = 10,
) -> Recommendation:
    return asyncio.run(evaluate(s, backend or SeasonalNaive(), source, current, PolicyState(), now))


# --- lastForecast says what the backend said; calibration has fields of its own ------------------------


def test_last_forecast_model_is_the_backends_identifier_and_its_method_has_a_field_of_its_own():
    """The default history (336h) holds two of SeasonalNaive's default three 168h seasons."""
    now = START + 15 * DAY * STEP
    recommendation = run(spec(), TraceSource(sine_with_noise(16)), now)
    forecast = recommendation.last_forecast
    assert forecast.model == "seasonal-naive/168hx3"
    assert forecast.method == "seasonal-naive (2 of 3 cycles)"
    [status] = recommendation.signal_statuses
    assert status.calibration is not None
    assert status.calibration.scored_forecasts == 145  # a day every 10 minutes, and the same time yesterday
    assert status.sized_by in ("Forecast", "RecentPeak", "Blend")
    assert status.calibration.noise is not None and status.calibration.noise > 0
    assert status.calibration.reference is not None
    assert status.sized_to is not None and status.sized_to >= status.calibration.reference


class PointOnly:
    """A backend that forecasts the last value and reports no band and no hindcast (a TimesFM
    without its quantile head, in its first evaluation)."""

    identity = ModelIdentity(backend="timesfm", model="google/timesfm-2.5-200m-pytorch")
    max_context = None
    max_horizon = None

    async def forecast(self, requests: list[ForecastRequest]) -> list[Forecast]:
        out = []
        for request in requests:
            point = np.full(request.horizon, float(request.history.values[-1]))
            quantiles = {level: point.copy() for level in request.quantiles}
            out.append(Forecast(point=point, quantiles=quantiles, method="point forecast only"))
        return out


def test_an_uncalibrated_forecast_is_named_in_its_own_fields_not_in_the_model():
    now = START + 15 * DAY * STEP
    recommendation = run(spec(), TraceSource(sine_with_noise(16)), now, PointOnly())
    assert recommendation.last_forecast.model == "google/timesfm-2.5-200m-pytorch"
    assert recommendation.last_forecast.method == "point forecast only"
    [status] = recommendation.signal_statuses
    assert status.sized_by == "Uncalibrated"
    assert status.calibration is not None and status.calibration.scored_forecasts == 0
    assert status.calibration.reference is None


def test_every_forecast_is_asked_for_the_backends_band_whatever_the_policys_levels():
    s = spec(policy={"maxReplicas": 100, "targetQuantile": "0.95", "scaleDownQuantile": "0.3"})
    data = asyncio.run(_data(s))
    [request] = forecast_requests(s, data, timedelta(minutes=2), None)
    assert set(BAND_LEVELS) <= set(request.quantiles)
    assert {0.3, 0.95} <= set(request.quantiles)
    assert request.hindcast is not None and request.hindcast.band == BAND_LEVELS


async def _data(s: PredictiveScalerSpec) -> list[Any]:
    from presage_scaler.engine.evaluator import SignalData

    [signal] = signal_specs(s)
    read = await TraceSource(sine_with_noise(16)).range(signal, START + 15 * DAY * STEP, None)
    return [SignalData(signal, read.history, read.gap_steps, signal.per_replica)]


# --- the reference's untested clause: scaleDownQuantile never sets the target ----------------------------


@pytest.mark.parametrize("days", [8, 15])
def test_scale_down_quantile_never_sets_the_target(days: int):
    """Only the guard reads scaleDownQuantile: what each signal is sized to, and the count the forecast
    implies, are the same whatever it is."""
    now = START + days * DAY * STEP
    source = TraceSource(sine_with_noise(16))
    sized = set()
    for lower in ("0.05", "0.3", "0.5", "0.8", "0.9"):
        s = spec(policy={"maxReplicas": 100, "scaleDownQuantile": lower, "reactiveFloor": {"enabled": False}})
        recommendation = run(s, source, now, current=1)
        [status] = recommendation.signal_statuses
        sized.add((status.sized_to, recommendation.breakdown.predictive, recommendation.replicas))
    assert len(sized) == 1


# --- the uncertainty guard measures even when yesterday's miss is expected again ------------------------


def test_yesterdays_miss_never_closes_the_guards_spread():
    """A day of evaluations every 10 minutes on a sine with noise: where the forecast made at that time
    yesterday missed by a top-10 % error, the targetQuantile value is raised to that miss; the
    scaleDownQuantile value is raised as much, so the guard's spread stays the calibrated band's and
    is never 0."""
    values = sine_with_noise(16)
    s = spec(policy={"maxReplicas": 100, "reactiveFloor": {"enabled": False}})
    source = TraceSource(values)
    spreads = []
    for k in range(144):
        recommendation = run(s, source, START + (14 * DAY + 2 * k) * STEP)
        spreads.append(recommendation.decision.relative_spread)
    assert min(spreads) > 0.0


# --- a signal that stops is stale ------------------------------------------------------------------------


def test_a_signal_whose_newest_sample_is_older_than_the_bound_is_stale():
    """Lead time 2m plus interval 10m is 12 minutes, under 3 steps of 5m: the bound is 15 minutes."""
    assert STALE_STEPS == 3
    now = START + 15 * DAY * STEP
    values = sine_with_noise(16)
    assert run(spec(), TraceSource(values, stale=3), now).replicas >= 1  # 15 minutes: at the bound
    with pytest.raises(EvaluationError) as raised:
        run(spec(), TraceSource(values, stale=4), now)
    assert raised.value.reason == Reason.SIGNAL_STALE
    assert raised.value.message.startswith("signal demand: its newest sample is 20m old")
    assert "over the 15m bound" in raised.value.message


def test_the_staleness_bound_is_at_least_the_sizing_window():
    """Lead time 10m plus interval 10m is 20 minutes, over 3 steps of 5m: 4 stale steps pass, 5 do not."""
    s = spec({"resolution": "5m"}, leadTime={"static": "10m"})
    now = START + 15 * DAY * STEP
    values = sine_with_noise(16)
    assert run(s, TraceSource(values, stale=4), now).replicas >= 1  # 20 minutes
    with pytest.raises(EvaluationError, match="over the 20m bound"):
        run(s, TraceSource(values, stale=5), now)
