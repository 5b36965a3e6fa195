"""A PredictiveScaler with two signals, evaluated by the production decision code.

For tests of what an evaluation exports (metrics, and the series the dashboard reads): flat
history and flat forecasts at the levels asked for, a static 3m lead time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.backends.base import Forecast, History, ModelIdentity
from presage_scaler.engine.evaluator import Recommendation, SignalData, decide, signal_specs
from presage_scaler.engine.leadtime import LeadTime
from presage_scaler.engine.policy import PolicyState

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
PROM = {"address": "http://prometheus:9090", "query": "q"}
SPEC = parse(
    PredictiveScalerSpec,
    {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "policy": {"maxReplicas": 40},
        "leadTime": {"static": "3m"},
        "signals": [
            {"name": "rps", "prometheus": PROM, "capacity": {"perReplica": 10}, "resolution": "1m"},
            {"name": "cpu", "prometheus": PROM, "capacity": {"perReplica": 2}, "resolution": "1m"},
        ],
    },
)


def flat_forecast(level: float) -> Forecast:
    """Ten steps at ``level``; the 0.5 quantile 10% below it, the 0.9 quantile 10% above."""
    return Forecast(point=np.full(10, level), quantiles={0.5: np.full(10, level * 0.9), 0.9: np.full(10, level * 1.1)})


def evaluate(
    rps: float, cpu: float, *, current: int = 10, spec: PredictiveScalerSpec = SPEC, now: datetime = NOW
) -> Recommendation:
    """One evaluation of ``spec`` with the rps and cpu signals flat at these levels."""
    data = [
        SignalData(s, History(np.array([level] * 5), s.resolution), gap_steps=1, capacity=s.per_replica)
        for s, level in zip(signal_specs(spec), (rps, cpu), strict=False)
    ]
    forecasts = [flat_forecast(level) for level in (rps, cpu)][: len(data)]
    lead = LeadTime(timedelta(minutes=3), "Static")
    return decide(spec, data, forecasts, ModelIdentity("SeasonalNaive"), lead, current, PolicyState(), now)
