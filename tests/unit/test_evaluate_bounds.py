"""A spec the API server accepts cannot make one evaluation cost unbounded memory or time.

Durations are bounded (at most 99999h) but their ratio to the resolution is not: ``horizon: 99999h``
at ``resolution: 1s`` is 360 million forecast steps, ``history: 99999h`` 360 million points. Each such
spec is evaluated by the production code (evaluate, the real SeasonalNaive, calibration, the policy)
from a source that serves whatever it is asked for; the evaluation must succeed or fail with a
reason, asking for no more than presage's caps and staying within a bounded peak allocation.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.prometheus_query import PrometheusQuery
from presage_scaler.backends.base import History
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.engine.evaluator import MAX_HISTORY_POINTS, Recommendation, SignalRead, SignalSpec, evaluate
from presage_scaler.engine.leadtime import HorizonError
from presage_scaler.engine.policy import PolicyState

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
PEAK_LIMIT = 256 * 2**20
"""Bytes one evaluation may allocate at its peak: 200,000 points of history are a few MiB each copy."""


class AnyLengthSource:
    """Serves exactly the length asked for of a daily pattern: 100 with Poisson noise, and 400 from
    12:04 to 13:00 every day. Records the largest request."""

    def __init__(self) -> None:
        self.largest = 0

    async def range(self, signal: SignalSpec, now: datetime, max_points: int | None) -> SignalRead:
        wanted = max(1, signal.history // signal.resolution)
        points = wanted if max_points is None else min(wanted, max_points)
        self.largest = max(self.largest, points)
        step = signal.resolution.total_seconds()
        seconds_of_day = (now.timestamp() // step * step - step * np.arange(points)[::-1]) % 86400
        busy = (seconds_of_day >= 12 * 3600 + 240) & (seconds_of_day < 13 * 3600)
        noise = np.random.default_rng(1).poisson(5, points)
        return SignalRead(History((100 + 300 * busy + noise).astype(float), signal.resolution))

    async def instant(self, query: PrometheusQuery, now: datetime) -> float:
        return 300.0


def _spec(signal: dict[str, Any], **top: Any) -> PredictiveScalerSpec:
    raw = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "signal": {"prometheus": {"address": "http://p:9090", "query": "q"}, **signal},
        "capacity": {"perReplica": 10},
        "policy": {"maxReplicas": 100},
        **top,
    }
    return parse(PredictiveScalerSpec, raw)


HOSTILE = {
    "horizon 99999h at 1s": _spec({"resolution": "1s", "history": "1h"}, forecast={"horizon": "99999h"}),
    "history 99999h at 1s": _spec({"resolution": "1s", "history": "99999h"}),
    "interval 99999h at 1s": _spec({"resolution": "1s", "history": "1h"}, interval="99999h"),
    "lead time 99999h at 1s": _spec(
        {"resolution": "1s", "history": "1h"}, leadTime={"static": "99999h", "max": "99999h"}
    ),
    "observed lead 99999h at 1s": _spec(
        {"resolution": "1s", "history": "1h"},
        leadTime={
            "source": "Observed",
            "observed": {"address": "http://p:9090", "query": "boot_seconds"},
            "max": "99999h",
        },
    ),
}


@pytest.mark.parametrize("spec", HOSTILE.values(), ids=HOSTILE.keys())
def test_an_accepted_spec_evaluates_within_bounds_or_fails_with_a_reason(spec: PredictiveScalerSpec) -> None:
    source = AnyLengthSource()
    tracemalloc.start()
    try:
        try:
            recommendation = asyncio.run(evaluate(spec, SeasonalNaive(), source, 3, PolicyState(), NOW))
        except HorizonError as error:  # the controller marks the scaler Degraded with this reason
            assert error.reason == "HorizonTooShort" and "presage forecasts at most 20000 steps" in str(error)
        else:
            assert 1 <= recommendation.replicas <= 100
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert source.largest <= MAX_HISTORY_POINTS
    assert peak < PEAK_LIMIT, f"peak allocation {peak / 2**20:.0f} MiB"


@pytest.mark.parametrize("horizon", [None, "2m", "3m", "6m", "7m", "1h", "99999h"])
def test_the_horizon_never_changes_the_recommendation(horizon: str | None) -> None:
    # Lead 2m + interval 5m at 1m is a 7-step sizing window, and the daily rush starts 4 steps ahead: a
    # horizon of 2m (the lead time), 3m or 6m used to cut the window before it and change the count.
    forecast = {"horizon": horizon} if horizon else {}
    spec = _spec({"resolution": "1m", "history": "72h"}, interval="5m", leadTime={"static": "2m"}, forecast=forecast)
    base = _spec({"resolution": "1m", "history": "72h"}, interval="5m", leadTime={"static": "2m"})

    def run(scaler: PredictiveScalerSpec) -> Recommendation:
        backend = SeasonalNaive(timedelta(hours=24), 2)
        return asyncio.run(evaluate(scaler, backend, AnyLengthSource(), 3, PolicyState(), NOW))

    tried, default = run(spec), run(base)
    assert tried.decision.predictive == default.decision.predictive
    assert tried.replicas == default.replicas
    assert [w.quantiles for w in tried.windows] == [w.quantiles for w in default.windows]
