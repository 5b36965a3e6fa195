"""What ``spec.advice`` can advise, as the API reference says: a single-signal scaler whose backend is
SeasonalNaive. ``advice`` beside ``signals`` is refused by the API (the CRD's rule and presage's
parser); a TimesFM backend is refused before anything is tuned, the reason ``presage advise`` writes
to ``status.advice.error``. Which scalers are advised: every Shadow scaler unless it opts out (a
multi-signal one without ``spec.advice`` is skipped), an Enforce scaler only with ``spec.advice``."""

from __future__ import annotations

from datetime import timedelta

import pytest

from presage_scaler.api.advice_scope import DEFAULTS, NOT_SINGLE_SIGNAL, Skipped, advice_settings
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import AdviceSpec, PredictiveScalerSpec
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


SINGLE = {"signal": QUERY}
SEVERAL = {"signals": [{"name": "requests", **QUERY}]}


@pytest.mark.parametrize(
    ("spec", "advised"),
    [
        ({**SINGLE}, DEFAULTS),
        ({**SINGLE, "mode": "Shadow"}, DEFAULTS),
        ({**SINGLE, "advice": {}}, DEFAULTS),
        ({**SINGLE, "advice": {"enabled": False}}, None),
        ({**SINGLE, "advice": {"enabled": False, "lookback": "14d"}}, None),
        ({**SINGLE, "mode": "Enforce"}, None),
        ({**SINGLE, "mode": "Enforce", "advice": {"enabled": False}}, None),
        ({**SEVERAL}, Skipped(NOT_SINGLE_SIGNAL)),
        ({**SEVERAL, "advice": {"enabled": False}}, None),
        ({**SEVERAL, "mode": "Enforce"}, None),
        ({}, Skipped(NOT_SINGLE_SIGNAL)),
        (None, Skipped(NOT_SINGLE_SIGNAL)),
    ],
)
def test_which_scalers_are_advised_and_with_what(spec: object, advised: object) -> None:
    assert advice_settings(spec) == advised


def test_defaults_are_the_declared_ones_and_a_set_advice_is_its_own() -> None:
    assert (DEFAULTS.every, DEFAULTS.lookback, DEFAULTS.prove_for) == (
        timedelta(hours=24),
        timedelta(days=28),
        timedelta(days=7),
    )
    assert (DEFAULTS.service_level, DEFAULTS.enabled, DEFAULTS.apply) == ("1%", True, "Never")
    enforced = advice_settings({**SINGLE, "mode": "Enforce", "advice": {"lookback": "14d", "serviceLevel": "0.5%"}})
    assert isinstance(enforced, AdviceSpec)
    assert (enforced.lookback, enforced.service_level, enforced.every) == (
        timedelta(days=14),
        "0.5%",
        timedelta(hours=24),
    )
    with pytest.raises(SpecError, match="serviceLevel"):
        advice_settings({**SINGLE, "advice": {"serviceLevel": "often"}})
