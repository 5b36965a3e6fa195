"""What ``spec.advice`` can advise, as the API reference says: a single-signal scaler whose backend is
SeasonalNaive. ``advice`` beside ``signals`` is refused by the API (the CRD's rule and presage's
parser); a TimesFM backend is refused before anything is tuned, the reason ``presage advise`` writes
to ``status.advice.error``."""

from __future__ import annotations

import pytest

from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.backtest.config import backend_spec
from presage_scaler.tune.errors import TuneError
from presage_scaler.tune.tuner import tune
from tests.unit.test_tune import setup_for
from tests.unit.test_tune_parts import daily_trace

QUERY = {"prometheus": {"address": "http://prometheus.monitoring:9090", "query": "sum(rate(requests[5m]))"}}


def test_advice_beside_several_signals_is_refused_by_the_api() -> None:
    spec = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "signals": [{"name": "requests", **QUERY, "capacity": {"perReplica": 10}}],
        "policy": {"maxReplicas": 10},
        "advice": {"serviceLevel": "1%"},
    }
    with pytest.raises(SpecError, match=r"advice applies only to the single-signal form \(signal\)"):
        parse(PredictiveScalerSpec, spec)
    del spec["advice"]
    parse(PredictiveScalerSpec, spec)  # the same scaler without advice is valid


def test_a_timesfm_backend_is_refused_before_anything_is_tuned() -> None:
    backend = backend_spec({"type": "TimesFM", "timesFM": {"endpoint": "http://presage-forecaster:8080"}})
    with pytest.raises(TuneError, match=r"needs a backend that answers hindcasts \(SeasonalNaive\)"):
        tune(daily_trace(9), setup_for(backend=backend))
