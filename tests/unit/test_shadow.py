"""Shadow scoring on replayed series whose answer is worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.predictive_scaler_status import SHADOW_MAX_PENDING, PredictiveScalerStatus, ShadowStatus
from presage_scaler.api.prometheus_query import PrometheusQuery
from presage_scaler.backends.base import Forecast, History, ModelIdentity
from presage_scaler.clients.prometheus import history_window
from presage_scaler.engine.evaluator import SignalData, SignalSpec, decide
from presage_scaler.engine.leadtime import LeadTime
from presage_scaler.engine.policy import PolicyState
from presage_scaler.engine.shadow import (
    Prediction,
    ShadowLedger,
    over_provisioning,
    prediction_from,
    required_replicas,
)
from presage_scaler.series.timegrid import align_down

MIN = timedelta(minutes=1)
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
LEAD = timedelta(minutes=2)
QUERY = PrometheusQuery(address="http://prometheus:9090", query="sum(rate(requests_total[1m]))")

# Demand per minute from 12:00, 10 units per replica: required replicas [1, 1, 2, 4, 4, 3, 2, 2, 1, 1].
DEMAND = [10.0, 10.0, 20.0, 40.0, 40.0, 30.0, 20.0, 20.0, 10.0, 10.0]
# Evaluation k runs at 12:0k:30 and provisions for 12:0k:30 + 2m, scored at the next sample: minute k + 3.
PRESAGE = [4, 4, 2, 2, 2, 3]  # required there: [4, 4, 3, 2, 2, 1]
REACTIVE = [2, 2, 3, 5, 5, 4]  # ⌈demand at minute k × 1.1 / 10⌉: one lead time late


def signal(values: list[float], *, step: timedelta = MIN, capacity: float = 10.0, name: str = "default") -> SignalData:
    spec = SignalSpec(
        name=name, query=QUERY, history=timedelta(hours=6), resolution=step, per_replica=capacity, capacity_query=None
    )
    return SignalData(
        spec=spec, history=History(values=np.array(values, dtype=float), step=step), gap_steps=0, capacity=capacity
    )


def evaluation_time(k: int) -> datetime:
    return T0 + k * MIN + timedelta(seconds=30)


def replay(ledger: ShadowLedger, steps: range) -> dict[int, list[int]]:
    """Run evaluations ``steps`` (settle, then record); which predictions each one scored."""
    scored = {}
    for j in steps:
        now = evaluation_time(j)
        scores = ledger.settle([signal(DEMAND[: j + 1])], now)
        scored[j] = [int((s.prediction.at - T0) // MIN) for s in scores]
        if j < len(PRESAGE):
            ledger.record(Prediction(at=now, replicas=PRESAGE[j], reactive=REACTIVE[j], lead=LEAD))
    return scored


def test_replayed_series_known_answer() -> None:
    ledger = ShadowLedger()
    scored = replay(ledger, range(len(DEMAND)))
    # Prediction k needs the sample at minute k + 3, first seen by the evaluation at 12:(k+3):30.
    assert scored == {0: [], 1: [], 2: [], 3: [0], 4: [1], 5: [2], 6: [3], 7: [4], 8: [5], 9: []}
    summary = ledger.summary()
    assert summary.samples == 6 and summary.pending == 0
    # presage: short only at minute 5 (2 < 3); 3 replicas for 1 required at minute 8 is +200%.
    assert summary.coverage == pytest.approx(5 / 6)
    assert summary.over_provisioning == pytest.approx(2 / 6)
    # reactive: short at minutes 3 and 4 (2 < 4); +150%, +150% and +300% at minutes 6, 7 and 8.
    assert summary.reactive_coverage == pytest.approx(4 / 6)
    assert summary.reactive_over_provisioning == pytest.approx((1.5 + 1.5 + 3.0) / 6)
    assert summary.last_scored_time == T0 + 7 * MIN + timedelta(seconds=30)
    assert summary.window_start == T0


def test_restart_from_status_gives_the_same_answer() -> None:
    uninterrupted = ShadowLedger()
    replay(uninterrupted, range(len(DEMAND)))

    first = ShadowLedger()
    replay(first, range(5))  # five recorded, two scored
    wire = PredictiveScalerStatus(shadow=first.to_status()).to_wire()
    assert len(wire["shadow"]["pending"]) == 3 and wire["shadow"]["samples"] == 2
    restored = ShadowLedger.from_status(PredictiveScalerStatus.model_validate(wire).shadow)
    replay(restored, range(5, len(DEMAND)))

    assert restored.summary() == uninterrupted.summary()


def test_status_fields() -> None:
    ledger = ShadowLedger()
    replay(ledger, range(len(DEMAND)))
    wire = ledger.to_status().to_wire()
    assert wire["coverage"] == "0.8333" and wire["reactiveCoverage"] == "0.6667"
    assert wire["overProvisioning"] == "0.3333" and wire["reactiveOverProvisioning"] == "1"
    assert wire["samples"] == 6 and wire["windowStart"] == "2025-03-01T12:00:00Z"
    assert wire["lastScoredTime"] == "2025-03-01T12:07:30Z"
    assert "pending" not in wire
    assert wire["buckets"] == [
        {
            "covered": 5,
            "overProvisioning": "0.3333",
            "reactiveCovered": 4,
            "reactiveOverProvisioning": "1",
            "samples": 6,
            "start": "2025-03-01T12:00:00Z",
        }
    ]


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as the API server applies it."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def test_status_patch_leaves_nothing_stale_behind() -> None:
    ledger = ShadowLedger()
    replay(ledger, range(5))
    before = ledger.to_status().to_wire()
    assert before["pending"] and before["coverage"]
    restored = ShadowLedger.from_status(ShadowStatus.model_validate(before))
    # A day and more later the pending moments are out of the history and the hours out of the window.
    restored.settle([signal([1.0])], T0 + timedelta(hours=30))
    merged = _merge_patch({"shadow": before}, {"shadow": restored.status_patch()})["shadow"]
    assert merged == restored.to_status().to_wire()
    assert merged == {"samples": 0, "lastScoredTime": "2025-03-01T12:03:30Z"}


def test_empty_ledger_has_no_ratios() -> None:
    status = ShadowLedger().to_status()
    assert status.to_wire() == {"samples": 0}
    assert ShadowLedger.from_status(None).summary().coverage is None


def test_required_is_the_largest_signal_each_on_its_own_grid() -> None:
    due = T0 + timedelta(minutes=2, seconds=30)  # scored at 12:03 (1m grid) and 12:05 (5m grid)
    fast = [5.0, 5.0, 5.0, 35.0]  # 12:00..12:03 at 1m, capacity 10 -> 4 replicas at 12:03
    slow_before = [50.0]  # 12:00 at 5m: 12:05 not seen yet
    assert required_replicas([signal(fast), signal(slow_before, step=5 * MIN, name="b")], due, T0 + 3 * MIN) is None
    fast_later = [*fast, 5.0, 5.0]  # up to 12:05
    slow = [50.0, 51.0]  # 12:05: 51 / 10 -> 6 replicas
    data = [signal(fast_later), signal(slow, step=5 * MIN, name="b")]
    assert required_replicas(data, due, T0 + timedelta(minutes=5, seconds=10)) == 6
    data = [signal(fast_later), signal([50.0, 12.0], step=5 * MIN, name="b")]
    assert required_replicas(data, due, T0 + timedelta(minutes=5, seconds=10)) == 4


def test_a_moment_on_the_grid_is_scored_on_that_sample() -> None:
    due = T0 + 3 * MIN
    assert required_replicas([signal([0.0, 0.0, 0.0, 30.0, 90.0])], due, T0 + 4 * MIN) == 3
    # 30.0000000001 units at 10 per replica is still 3 replicas; negative demand needs none.
    assert required_replicas([signal([30.0000000001])], T0, T0) == 3
    assert required_replicas([signal([-5.0])], T0, T0) == 0


def test_over_provisioning_definition() -> None:
    assert over_provisioning(6, 4) == 0.5
    assert over_provisioning(3, 4) == 0.0  # a shortfall is not negative over-provisioning
    assert over_provisioning(2, 0) == 2.0  # relative to at least one replica


def test_pending_is_bounded() -> None:
    ledger = ShadowLedger()
    for i in range(SHADOW_MAX_PENDING):
        assert ledger.record(Prediction(T0 + i * MIN, 3, 3, LEAD))
    assert not ledger.record(Prediction(T0 + 100 * MIN, 3, 3, LEAD))
    assert len(ledger.pending) == SHADOW_MAX_PENDING
    assert len(ledger.to_status().pending or ()) == SHADOW_MAX_PENDING


def test_predictions_the_history_no_longer_holds_are_dropped() -> None:
    ledger = ShadowLedger()
    ledger.record(Prediction(T0, 3, 3, LEAD))  # due 12:02
    # A later evaluation whose history starts at 12:10 can never see 12:02.
    assert ledger.settle([signal([1.0] * 5)], T0 + 14 * MIN) == []
    assert ledger.pending == ()


def test_hours_older_than_the_window_are_dropped() -> None:
    ledger = ShadowLedger(hours=3)
    for hour in range(5):
        at = T0 + hour * timedelta(hours=1)
        ledger.record(Prediction(at, 1, 1, LEAD))
        ledger.settle([signal([10.0] * 5)], at + 4 * MIN)
    status = ledger.to_status()
    assert [b.start.hour for b in status.buckets or ()] == [14, 15, 16]
    assert status.samples == 3


def test_align_down_matches_the_range_query_grid() -> None:
    now = datetime(2025, 3, 1, 12, 7, 42, 123456, tzinfo=UTC)
    for step in (timedelta(seconds=15), MIN, 5 * MIN, timedelta(hours=1)):
        assert align_down(now, step) == history_window(step, step, None, now)[1]


def _spec(reactive_floor: bool) -> PredictiveScalerSpec:
    return parse(
        PredictiveScalerSpec,
        {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "policy": {"minReplicas": 2, "maxReplicas": 5, "reactiveFloor": {"enabled": reactive_floor}},
            "leadTime": {"static": "2m"},
            "signal": {"prometheus": {"address": QUERY.address, "query": QUERY.query}, "resolution": "1m"},
            "capacity": {"perReplica": 10},
        },
    )


@pytest.mark.parametrize("reactive_floor", [True, False])
def test_observe_takes_both_figures_from_the_evaluation(reactive_floor: bool) -> None:
    spec = _spec(reactive_floor)
    now = evaluation_time(4)
    data = [signal(DEMAND[:5])]  # observed 40 -> floor ⌈44 / 10⌉ = 5, within [2, 5]
    forecast = Forecast(point=np.full(8, 12.0), quantiles={0.5: np.full(8, 12.0), 0.9: np.full(8, 15.0)})
    rec = decide(
        spec, data, [forecast], ModelIdentity("SeasonalNaive"), LeadTime(LEAD, "Static"), 3, PolicyState(), now
    )
    prediction = prediction_from(rec, spec.policy)
    # The floor's figure is there even when the floor is off, and is what it would have chosen.
    assert rec.breakdown.reactive == (5 if reactive_floor else None)
    assert prediction.reactive == 5
    assert (prediction.replicas, prediction.lead, prediction.at) == (rec.replicas, LEAD, now)
    for observed, reactive in ((60.0, 5), (0.0, 2)):  # the floor's figure within [minReplicas, maxReplicas]
        other = decide(
            spec, [signal([observed])], [forecast], ModelIdentity("x"), LeadTime(LEAD, "Static"), 3, PolicyState(), now
        )
        assert prediction_from(other, spec.policy).reactive == reactive

    ledger = ShadowLedger()
    assert ledger.observe(rec, spec.policy) == []
    assert ledger.pending == (prediction,)
    # The evaluation at 12:07:30 has seen minute 7 (20 units: 2 replicas required).
    later = signal(DEMAND[:8])
    scores = ledger.settle([later], evaluation_time(7))
    assert [(s.required, s.covered, s.reactive_covered) for s in scores] == [(2, True, True)]


def test_status_schema_bounds_match_the_ledger() -> None:
    from presage_scaler.api.introspect import fields_of

    bounds = {f.wire_name: f.extra.openapi.get("maxItems") for f in fields_of(ShadowStatus)}
    assert bounds["pending"] == SHADOW_MAX_PENDING
    assert bounds["buckets"] == ShadowLedger().hours


def test_quantile_coverage_scores_each_sizing_window_once_it_is_observed() -> None:
    """Each prediction's window (the 3 minutes after its newest point) against a forecast of 25: the
    windows after minutes 0-4 held 30 or 40, those after 5 and 6 held 20; later ones are not observed
    yet. The ledger keeps it all through status."""
    ledger = ShadowLedger()
    for j in range(len(DEMAND)):
        now = evaluation_time(j)
        ledger.settle([signal(DEMAND[: j + 1])], now)
        ledger.record(Prediction(at=now, replicas=4, reactive=4, lead=LEAD, forecasts=(25.0,), window=3 * MIN))
    summary = ledger.summary()
    assert summary.samples == 7
    assert summary.quantile_coverage == pytest.approx(2 / 7)
    status = ledger.to_status()
    assert status.quantile_coverage == pytest.approx(2 / 7, abs=1e-4)
    assert status.pending is not None and status.pending[0].window_forecasts == [25.0]
    assert status.pending[0].window_seconds == 180
    restored = ShadowLedger.from_status(PredictiveScalerStatus.model_validate({"shadow": ledger.status_patch()}).shadow)
    assert restored.summary().quantile_coverage == summary.quantile_coverage  # kept as counts, exactly
    assert restored.pending == ledger.pending


def test_a_prediction_waits_for_its_whole_window() -> None:
    ledger = ShadowLedger()
    ledger.record(
        Prediction(at=evaluation_time(0), replicas=4, reactive=4, lead=LEAD, forecasts=(50.0,), window=5 * MIN)
    )
    # Its moment (minute 3) is observed at 12:03:30, its window (minutes 1-5) only at 12:05:30.
    assert ledger.settle([signal(DEMAND[:4])], evaluation_time(3)) == []
    [score] = ledger.settle([signal(DEMAND[:6])], evaluation_time(5))
    assert (score.quantile_covered, score.quantile_samples) == (1, 1)


def _recommendation(now: datetime, lead: timedelta = LEAD, demand: list[float] | None = None) -> Any:
    spec = _spec(True)
    forecast = Forecast(point=np.full(8, 12.0), quantiles={0.5: np.full(8, 12.0), 0.9: np.full(8, 15.0)})
    data = [signal(demand or DEMAND[:5])]
    return spec, decide(spec, data, [forecast], ModelIdentity("x"), LeadTime(lead, "Static"), 3, PolicyState(), now)


def test_evaluations_within_one_signal_step_are_scored_once() -> None:
    """An interval shorter than the resolution: every evaluation in the minute saw the same data and
    would be scored on the same samples, so only the first is kept."""
    ledger = ShadowLedger()
    minute = T0 + 4 * MIN
    for seconds in (5, 20, 35, 50):
        spec, rec = _recommendation(minute + timedelta(seconds=seconds))
        ledger.observe(rec, spec.policy)
    assert [p.at for p in ledger.pending] == [minute + timedelta(seconds=5)]
    # The next minute's evaluation is scored on the next sample: kept.
    spec, rec = _recommendation(minute + MIN + timedelta(seconds=5), demand=DEMAND[:6])
    ledger.observe(rec, spec.policy)
    assert [p.at for p in ledger.pending] == [minute + timedelta(seconds=5), minute + MIN + timedelta(seconds=5)]


def test_a_different_lead_time_is_scored_on_its_own_moment() -> None:
    ledger = ShadowLedger()
    now = T0 + 4 * MIN + timedelta(seconds=5)
    for lead in (LEAD, LEAD + 2 * MIN):
        spec, rec = _recommendation(now, lead)
        ledger.observe(rec, spec.policy)
    assert [p.lead for p in ledger.pending] == [LEAD, LEAD + 2 * MIN]
    # A lead that lands on the same moment's sample within the step, but a different lead, is kept too.
    spec, rec = _recommendation(now + timedelta(seconds=10), LEAD + timedelta(seconds=20))
    ledger.observe(rec, spec.policy)
    assert len(ledger.pending) == 3
