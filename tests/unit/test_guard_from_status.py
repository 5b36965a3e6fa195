"""A ForecastUncertainty hold is derivable from status alone, following docs/concepts.md ("Reading a
guard hold from status"): evaluations by the production evaluator, their status written as the
controller writes it, and the hold read back from that JSON and the spec only."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.predictive_scaler_status import PredictiveScalerStatus
from presage_scaler.api.prometheus_query import PrometheusQuery
from presage_scaler.api.quantities import format_decimal, plain_number
from presage_scaler.backends.base import History
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.engine.evaluator import Recommendation, SignalRead, SignalSpec, evaluate
from presage_scaler.engine.policy import PolicyState
from tests.harness.guard_reading import forecast_uncertainty_named, guard_held, guard_held_at

STEP = timedelta(minutes=5)
DAY = 288  # steps of 5m
START = datetime(2026, 10, 1, tzinfo=UTC)
VALUES = np.maximum(
    100.0 + 50.0 * np.sin(2 * np.pi * np.arange(16 * DAY) / DAY) + np.random.default_rng(3).normal(0, 8, 16 * DAY),
    0.0,
)


class TraceSource:
    """The query window over a 5m trace, a sample at t being the step that ends at t."""

    async def range(self, signal: SignalSpec, now: datetime, max_points: int | None) -> SignalRead:
        end = (now - START) // STEP
        return SignalRead(History(VALUES[max(0, end - signal.history // signal.resolution) : end].copy(), STEP))

    async def instant(self, query: PrometheusQuery, now: datetime) -> float:
        raise AssertionError("no instant queries in these specs")


def spec_json(policy: dict[str, Any]) -> dict[str, Any]:
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "signal": {"prometheus": {"address": "http://p:9090", "query": "rate(requests[5m])"}},
        "capacity": {"perReplica": 10},
        "interval": "10m",
        "policy": {"maxReplicas": 100, **policy},
    }


def evaluated(spec: dict[str, Any], current: int, now: datetime) -> tuple[Recommendation, dict[str, Any]]:
    """One evaluation, and the status fields the controller writes from it, as JSON."""
    parsed = parse(PredictiveScalerSpec, spec)
    recommendation = asyncio.run(evaluate(parsed, SeasonalNaive(), TraceSource(), current, PolicyState(), now))
    status = PredictiveScalerStatus(
        current_replicas=current,
        recommended_replicas=recommendation.replicas,
        breakdown=recommendation.breakdown,
        signal_statuses=list(recommendation.signal_statuses),
    )
    return recommendation, status.model_dump(by_alias=True, exclude_none=True, mode="json")


POLICIES = [
    {},
    {"scaleDownUncertaintyGuard": {"maxRelativeSpread": "0"}},
    {"scaleDownUncertaintyGuard": {"maxRelativeSpread": "0.05"}},
    {"scaleDownUncertaintyGuard": {"maxRelativeSpread": "5"}},
    {"scaleDownUncertaintyGuard": {"enabled": False, "maxRelativeSpread": "0"}},
    {"reactiveFloor": {"enabled": False}, "scaleDownUncertaintyGuard": {"maxRelativeSpread": "0"}},
    {"minReplicas": 40, "scaleDownUncertaintyGuard": {"maxRelativeSpread": "0"}},
    {"maxReplicas": 20, "scaleDownUncertaintyGuard": {"maxRelativeSpread": "0"}},
]


def test_the_derivation_from_status_matches_the_policy_on_every_case():
    """Scale-downs and not, the guard enabled or not, below and above its spread, a floor or none, and
    minReplicas and maxReplicas each deciding: wherever the guard held, status alone says so, and
    nowhere else."""
    named = []
    for policy, current, hour in itertools.product(POLICIES, (1, 12, 30, 150), (3, 15)):
        now = START + 14 * DAY * STEP + timedelta(hours=hour)
        spec = spec_json(policy)
        recommendation, status = evaluated(spec, current, now)
        held = recommendation.decision.constraint == "ForecastUncertainty"
        assert forecast_uncertainty_named(status, spec) == held, (policy, current, status["breakdown"])
        named.append(held)
        # Where it held, what it held at is the recommendation written: status alone says both.
        held_at = guard_held_at(status, spec)
        assert (held_at is not None) == guard_held(status, spec)
        if held_at is not None:
            assert held_at == status["recommendedReplicas"] == recommendation.replicas
        # Above maxReplicas the guard holds and the bound is named after it.
        if guard_held(status, spec) and not held:
            assert current > parse(PredictiveScalerSpec, spec).policy.max_replicas
            assert recommendation.decision.constraint == "MaxReplicas"
    assert any(named) and not all(named)  # both outcomes were derived


def test_guard_fields_are_the_policys_numbers():
    """guardSpread reads back as the very number the policy compared; guardLower is rounded like sizedTo."""
    now = START + 14 * DAY * STEP + timedelta(hours=3)
    recommendation, status = evaluated(spec_json({}), 30, now)
    decision = recommendation.decision
    assert float(status["breakdown"]["guardSpread"]) == decision.relative_spread
    assert status["breakdown"]["guardLower"] == format_decimal(decision.guard_lower)
    [signal] = status["signalStatuses"]
    upper, lower = float(signal["sizedTo"]), float(status["breakdown"]["guardLower"])
    assert (upper - lower) / max(lower, 1.0) == pytest.approx(decision.relative_spread, abs=1e-3)


def test_the_derivation_holds_at_the_boundary():
    """maxRelativeSpread set to the spread itself (not above it: the guard releases) and to its
    4-decimal rounding below it (above it: the guard holds). Read at 4 decimals, guardSpread would
    equal that rounding and say the guard released: written to every digit, it says what the policy did."""
    now = START + 14 * DAY * STEP + timedelta(hours=3)
    _, first = evaluated(spec_json({}), 30, now)
    spread = float(first["breakdown"]["guardSpread"])
    rounded = float(format_decimal(spread))
    assert 0 < rounded < spread  # a spread whose 4-decimal reading is below it: the boundary case
    for maximum, holds in ((plain_number(spread), False), (format_decimal(spread), True)):
        spec = spec_json({"scaleDownUncertaintyGuard": {"maxRelativeSpread": maximum}})
        recommendation, status = evaluated(spec, 30, now)
        assert float(status["breakdown"]["guardSpread"]) == spread  # the same data, the same spread
        assert (recommendation.decision.constraint == "ForecastUncertainty") is holds
        assert forecast_uncertainty_named(status, spec) is holds
