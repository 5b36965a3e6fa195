"""presage in the backtest is production's evaluator on a simulated clock: causality, equivalence
with :func:`presage_scaler.engine.evaluator.evaluate`, and the whole comparison on a small trace."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from presage_scaler.api.predictive_scaler_status import PredictiveScalerStatus
from presage_scaler.api.prometheus_query import PrometheusQuery
from presage_scaler.backends.base import Forecast, ForecastRequest, History
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.backtest.config import Overrides, scaler_spec
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.backtest.replay import CHUNK, REQUESTS_PER_CALL
from presage_scaler.backtest.runner import Setup, plan, run_backtest, run_presage
from presage_scaler.backtest.trace import Trace
from presage_scaler.clients.prometheus import history_window
from presage_scaler.engine.evaluator import SignalRead, SignalSpec, evaluate
from presage_scaler.engine.past_forecasts import MAX_RECORDS, CalibrationState
from presage_scaler.engine.policy import PolicyState

STEP = timedelta(minutes=5)
START = datetime(2026, 1, 5, tzinfo=UTC)  # a multiple of every resolution used here since the epoch
BACKEND = SeasonalNaive(season=timedelta(hours=24), cycles=2)


def daily_trace(days: int = 3, seed: int = 0) -> Trace:
    steps = days * 288
    rng = np.random.default_rng(seed)
    phase = np.arange(steps) / 288
    values = 200 + 120 * np.sin(2 * np.pi * phase) + rng.normal(0, 20, steps)
    values[400:404] += 250  # a burst no forecast sees coming
    return Trace(np.maximum(values, 0.0), STEP, START, np.zeros(steps, dtype=bool), "daily.csv")


def spec_for(trace: Trace, **overrides: object):
    flags = {"per_replica": 20.0, "lead_time": timedelta(minutes=10), "max_replicas": 200, **overrides}
    return scaler_spec(trace, None, Overrides(**flags))  # type: ignore[arg-type]


def setup_for(trace: Trace, **overrides: object) -> Setup:
    return Setup(spec=spec_for(trace, **overrides), backend=BACKEND, warmup=timedelta(0))


# --- causality ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cut", [40, 290, 401, 600, 800])
def test_cutting_the_trace_after_t_changes_no_decision_at_or_before_t(cut):
    trace = daily_trace()
    setup = setup_for(trace)
    _, full = run_presage(plan(trace, setup))
    short_trace = replace(trace, values=trace.values[: cut + 1], gaps=trace.gaps[: cut + 1])
    _, short = run_presage(plan(short_trace, setup))
    # Decisions at or before t = the start of step `cut` (the point at `cut` is not complete then).
    kept = full.steps <= cut
    assert short.steps.tolist() == full.steps[kept].tolist()
    assert short.replicas.tolist() == full.replicas[kept].tolist()
    np.testing.assert_array_equal(short.upper, full.upper[kept])
    np.testing.assert_array_equal(short.lower, full.lower[kept])


@pytest.mark.parametrize("cut", [100, 500])
def test_a_different_future_changes_no_earlier_decision(cut):
    trace = daily_trace()
    setup = setup_for(trace)
    _, honest = run_presage(plan(trace, setup))
    future = trace.values.copy()
    future[cut:] = 1e6
    _, poisoned = run_presage(plan(replace(trace, values=future), setup))
    kept = honest.steps <= cut
    assert poisoned.replicas[kept].tolist() == honest.replicas[kept].tolist()
    assert poisoned.replicas[~kept].max() > honest.replicas[~kept].max()


# --- the same decision path as production --------------------------------------------------------


class TraceSource:
    """A production SignalSource over a trace: production's query window, a sample at τ being
    the step that ends at τ."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    async def range(self, signal: SignalSpec, now: datetime, max_points: int | None) -> SignalRead:
        start, end = history_window(signal.history, signal.resolution, max_points, now)
        last = (end - self.trace.start) // self.trace.step - 1
        first = max(0, (start - self.trace.start) // self.trace.step - 1)
        return SignalRead(History(self.trace.values[first : last + 1], self.trace.step))

    async def instant(self, query: PrometheusQuery, now: datetime) -> float:
        raise AssertionError("no instant queries in this spec")


def test_every_decision_is_what_production_evaluate_would_return():
    trace = daily_trace()
    setup = setup_for(trace, lead_time=timedelta(minutes=15))
    the_plan = plan(trace, setup)
    simulation, record = run_presage(the_plan)
    source = TraceSource(trace)
    state = PolicyState()
    with asyncio.Runner() as loop:
        for step, replicas in zip(record.steps.tolist(), record.replicas.tolist(), strict=True):
            current = int(simulation.desired[step - 1])  # in force before this decision
            now = trace.time_at(step)
            recommendation = loop.run(evaluate(the_plan.spec, BACKEND, source, current, state, now))
            assert recommendation.replicas == replicas, f"step {step}"
            state = recommendation.state
    assert len(set(record.constraints)) > 2  # the run exercised several constraints


class CountingBackend:
    """Any Backend that is not SeasonalNaive: served through batched ``await forecast(...)`` calls."""

    def __init__(self, inner: SeasonalNaive) -> None:
        self.inner = inner
        self.batches: list[int] = []
        self.identity = inner.identity
        self.max_context = 500
        self.max_horizon = inner.max_horizon

    async def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        self.batches.append(len(requests))
        assert all(len(r.history.values) <= self.max_context for r in requests)
        return await self.inner.forecast(requests)


def test_a_generic_backend_gets_batches_and_the_same_decisions():
    trace = daily_trace()
    backend = CountingBackend(BACKEND)
    setup = setup_for(trace)
    _, direct = run_presage(plan(trace, replace(setup, backend=SeasonalNaive(timedelta(hours=24), 2))))
    _, batched = run_presage(plan(trace, replace(setup, backend=backend)))
    decisions = len(batched.steps)
    # A chunk of decisions at a time, in calls of at most REQUESTS_PER_CALL requests (one per decision).
    chunks = [CHUNK] * (decisions // CHUNK) + [decisions % CHUNK] * bool(decisions % CHUNK)
    calls = [min(REQUESTS_PER_CALL, size - first) for size in chunks for first in range(0, size, REQUESTS_PER_CALL)]
    assert backend.batches == calls and max(calls) == REQUESTS_PER_CALL
    # max_context 500 caps the history (the direct run used up to 4 days), which only matters later.
    same = batched.steps < 500
    assert batched.replicas[same].tolist() == direct.replicas[same].tolist()


class ForgetfulBackend(CountingBackend):
    """A backend that does not hindcast (like TimesFM): calibration runs on recorded forecasts."""

    async def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        return [replace(f, hindcast=None) for f in await super().forecast(requests)]


def through_status(calibration: CalibrationState) -> CalibrationState:
    """The calibration state as a restarted controller reads it back from ``.status``."""
    written = PredictiveScalerStatus(calibration=calibration.to_status()).model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )
    return CalibrationState.from_status(PredictiveScalerStatus.model_validate(written).calibration)


def test_recorded_calibration_carried_between_evaluations_makes_the_backtests_decisions():
    """The backtest carries the recorded forecasts from decision to decision in memory; production's
    evaluate, reading them back from status at every evaluation (as after a restart), decides the same."""
    trace = daily_trace()
    backend = ForgetfulBackend(BACKEND)
    the_plan = plan(trace, replace(setup_for(trace, lead_time=timedelta(minutes=15)), backend=backend))
    simulation, record = run_presage(the_plan)
    assert record.calibrated[-1] and not record.calibrated[0]
    source, state, calibration = TraceSource(trace), PolicyState(), CalibrationState()
    with asyncio.Runner() as loop:
        for step, replicas in zip(record.steps.tolist(), record.replicas.tolist(), strict=True):
            current = int(simulation.desired[step - 1])
            now = trace.time_at(step)
            recommendation = loop.run(evaluate(the_plan.spec, backend, source, current, state, now, calibration))
            assert recommendation.replicas == replicas, f"step {step}"
            state, calibration = recommendation.state, through_status(recommendation.calibration)
    assert calibration.signals and len(calibration.signals[0].forecasts) <= MAX_RECORDS


# --- the whole comparison ------------------------------------------------------------------------


def test_the_static_count_covers_the_warmups_peak_and_never_changes():
    trace = daily_trace(days=4)
    result = run_backtest(trace, replace(setup_for(trace), warmup=timedelta(days=1)))
    peak = trace.values[: result.plan.report_from].max()
    assert result.plan.static == math.ceil(peak / result.plan.per_replica)
    static = result.policies["static"]
    assert set(static.simulation.desired.tolist()) == {result.plan.static}
    assert static.metrics.changes == 0


def test_the_four_policies_on_a_small_trace():
    trace = daily_trace(days=4)
    result = run_backtest(trace, replace(setup_for(trace), warmup=timedelta(days=1)))
    oracle = result.policies["oracle"].metrics
    assert oracle.under_provisioned_pct == 0.0
    assert result.cost_vs_oracle("oracle") == 1.0
    for name in ("presage", "reactive", "reactive_cost_matched"):
        metrics = result.policies[name].metrics
        assert metrics.under_provisioned_pct > 0.0 or metrics.replica_hours >= oracle.replica_hours
    assert result.cost_match.matched
    presage_hours = result.policies["presage"].metrics.replica_hours
    matched_hours = result.policies["reactive_cost_matched"].metrics.replica_hours
    assert matched_hours == pytest.approx(presage_hours, rel=1e-3)
    assert str(result.policies["reactive"].headroom) == "10%"
    assert result.plan.report_from == 288


def test_the_seasonal_trigger_scales_up_for_last_weeks_burst_and_is_cost_matched():
    trace = daily_trace(days=9)  # a burst at steps 400-403 of the first week, none in the second
    result = run_backtest(trace, replace(setup_for(trace), warmup=timedelta(days=8)))
    week, ahead = 7 * 288, 6  # a week and 30 minutes of 5-minute steps
    trigger = result.policies["seasonal_trigger"]
    assert trigger.utilization == 0.75
    # A decision at step j sees up to step j - 1, a week ago up to j - 1 - week + 30 minutes: the burst's
    # first step (400) enters its window at the decision 30 minutes less one step before it recurs.
    asked = math.ceil(trace.values[400] / (0.75 * result.plan.per_replica) - 1e-9)
    desired = trigger.simulation.desired
    assert desired[week + 401 - ahead] >= asked > desired[week + 400 - ahead]
    # The HPA on the current demand alone does not see it coming.
    assert result.policies["reactive"].simulation.desired[week + 401 - ahead] < asked
    # Cost-matched: one day measured moves in steps of a replica for 5 minutes, so it comes within 1 %.
    match = result.trigger_cost_match
    assert match.target == result.policies["presage"].metrics.replica_hours
    matched = result.policies["seasonal_trigger_cost_matched"]
    assert matched.metrics.replica_hours == match.replica_hours == pytest.approx(match.target, rel=0.01)
    assert matched.utilization == round(100 / (1 + match.headroom), 4) / 100
    # Cheaper than the trigger as set is a higher utilization.
    assert (matched.utilization > trigger.utilization) == (match.target < trigger.metrics.replica_hours)


def test_a_coarser_signal_resolution_averages_the_trace():
    trace = daily_trace(days=2)
    spec = spec_for(trace)
    data = spec.to_wire()
    data["signal"]["resolution"] = "15m"
    coarse = scaler_spec(trace, data, Overrides())
    the_plan = plan(trace, Setup(spec=coarse, backend=BACKEND, warmup=timedelta(0)))
    assert the_plan.ratio == 3
    assert the_plan.schedule.first == 3
    assert the_plan.signal.values[0] == pytest.approx(trace.values[:3].mean())
    # A decision at step 7 sees the two 15-minute points that are complete by then.
    assert the_plan.observed[7] == pytest.approx(trace.values[3:6].mean())


def test_a_resolution_that_is_not_a_multiple_of_the_step_is_refused():
    trace = daily_trace(days=1)
    data = spec_for(trace).to_wire()
    data["signal"]["resolution"] = "7m"
    with pytest.raises(BacktestError, match="not a whole multiple"):
        plan(trace, Setup(spec=scaler_spec(trace, data, Overrides()), backend=BACKEND, warmup=timedelta(0)))


def test_an_observed_lead_time_needs_the_boot_delay():
    trace = daily_trace(days=1)
    data = spec_for(trace).to_wire()
    data["leadTime"] = {"source": "Observed", "observed": {"address": "http://p:9090", "query": "x"}}
    setup = Setup(spec=scaler_spec(trace, data, Overrides()), backend=BACKEND, warmup=timedelta(0))
    with pytest.raises(BacktestError, match="Observed"):
        plan(trace, setup)
    the_plan = plan(trace, replace(setup, boot_delay=timedelta(minutes=20)))
    assert the_plan.lead.value == timedelta(minutes=15)  # the observed value, clamped to leadTime.max
    assert the_plan.schedule.lead == 4


def test_a_trace_shorter_than_the_warmup_is_refused():
    trace = daily_trace(days=1)
    with pytest.raises(BacktestError, match="warm-up"):
        plan(trace, replace(setup_for(trace), warmup=timedelta(days=2)))


def test_a_day_without_traffic_after_a_normal_week_releases_most_of_the_capacity():
    """An upstream outage: presage used to hold its peak count all day (the uncertainty guard never
    saw a narrow band). Now the level follows the outage within the hour and the calibrated band lets
    the guard release: on average over the quiet day presage keeps under half of the previous day's
    peak, and a third of it at the end of the day."""
    day = 1440
    minutes = np.arange(9 * day)
    values = np.random.default_rng(1).poisson(200 * (1 + 0.7 * np.sin(2 * np.pi * minutes / day))).astype(float)
    values[8 * day :] = 0.0
    trace = Trace(values, timedelta(minutes=1), START, np.zeros(len(values), dtype=bool), "outage.csv")
    spec = scaler_spec(trace, None, Overrides(per_replica=20.0, lead_time=timedelta(minutes=5), max_replicas=100))
    simulation, _ = run_presage(plan(trace, Setup(spec=spec, backend=SeasonalNaive(), warmup=timedelta(days=7))))
    peak = simulation.desired[7 * day : 8 * day].max()
    quiet = simulation.desired[8 * day :]
    assert quiet.mean() < peak / 2
    assert quiet[-60:].max() <= peak / 3
