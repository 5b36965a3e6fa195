"""Lead time resolution and forecast horizon."""

from __future__ import annotations

from datetime import timedelta

import pytest

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import ForecastSpec, LeadTimeSpec
from presage_scaler.engine.leadtime import (
    MAX_FORECAST_STEPS,
    HorizonError,
    resolve_horizon,
    resolve_lead_time,
)

OBSERVED = {"source": "Observed", "observed": {"address": "http://p:9090", "query": "lead_seconds"}}
M5 = timedelta(minutes=5)


def lead_spec(**data) -> LeadTimeSpec:
    return parse(LeadTimeSpec, data, path="spec.leadTime")


@pytest.mark.parametrize(
    ("spec", "observed", "expected", "clamped"),
    [
        ({}, None, timedelta(minutes=2), False),
        ({"static": "10s"}, None, timedelta(seconds=30), True),
        ({"static": "1h"}, None, timedelta(minutes=15), True),
        (OBSERVED, 420.0, timedelta(minutes=7), False),
        (OBSERVED, 3.0, timedelta(seconds=30), True),
        (OBSERVED, -50.0, timedelta(seconds=30), True),
        ({**OBSERVED, "max": "5m"}, 420.0, timedelta(minutes=5), True),
    ],
)
def test_resolve_lead_time(spec, observed, expected, clamped):
    lead = resolve_lead_time(lead_spec(**spec), observed)
    assert (lead.value, lead.clamped) == (expected, clamped)


def test_observed_without_a_value_is_an_error():
    with pytest.raises(ValueError, match="observed"):
        resolve_lead_time(lead_spec(**OBSERVED), None)


@pytest.mark.parametrize(
    ("horizon", "lead", "max_horizon", "expected"),
    [
        (None, timedelta(minutes=10), None, 8),  # 4 x 2 steps
        (None, timedelta(minutes=10), 5, 5),  # capped by the backend
        ("5m", timedelta(minutes=15), None, 4),  # never below the sizing window: 15m lead + 1m interval
        ("15m", timedelta(minutes=15), None, 4),
        ("16m", timedelta(minutes=15), None, 4),
        ("2h", timedelta(minutes=15), 64, 24),
        ("2h", timedelta(minutes=15), 3, 3),  # the backend's limit cuts the window; the lead time still fits
        ("99999h", timedelta(minutes=15), None, MAX_FORECAST_STEPS),  # never unbounded
    ],
)
def test_resolve_horizon(horizon, lead, max_horizon, expected):
    spec = parse(ForecastSpec, {"horizon": horizon} if horizon else {})
    assert resolve_horizon(spec, lead, timedelta(minutes=1), M5, max_horizon) == expected


def test_lead_time_beyond_the_backend_is_a_clear_error():
    with pytest.raises(HorizonError, match="lead time 2h needs 24 steps of 5m, but the backend forecasts at most 16"):
        resolve_horizon(parse(ForecastSpec, {}), timedelta(hours=2), timedelta(minutes=1), M5, 16)


def test_lead_time_beyond_presage_s_own_limit_is_a_clear_error():
    one_second = timedelta(seconds=1)
    with pytest.raises(HorizonError, match="needs 359996400 steps of 1s, but presage forecasts at most 20000 steps"):
        resolve_horizon(parse(ForecastSpec, {}), timedelta(hours=99999), one_second, one_second, None)
