"""presage tune's replay of every candidate at once, against production's policy one decision at a
time (engine.policy.decide in the backtest's simulator) and against the backtest itself; and the
forecasts it replays from, made once per history actually read."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PolicySpec
from presage_scaler.api.quantities import Amount
from presage_scaler.backtest.config import make_backend
from presage_scaler.backtest.replay import CHUNK
from presage_scaler.backtest.runner import Setup, plan, run_presage
from presage_scaler.backtest.simulator import Schedule, Simulation, simulate
from presage_scaler.engine.policy import PolicyState, SignalInput, decide
from presage_scaler.tune.knobs import ForecasterKnobs, Knobs
from presage_scaler.tune.measure import Part, Served, measure
from presage_scaler.tune.prepared import Forecasts, forecast, points_read, shared_decisions
from presage_scaler.tune.replay import Decisions, in_force, ready, replay
from presage_scaler.tune.space import TARGET_QUANTILES, forecasters, points_seen
from presage_scaler.tune.tuner import _figures
from tests.unit.test_tune_parts import START_KNOBS, STEP, daily_trace, default_spec

LEVELS = (0.5, 0.7, 0.9, 0.95)
CLOCK = datetime(2026, 1, 5, tzinfo=UTC)
DAY = timedelta(days=1)
FORECASTER = ForecasterKnobs(timedelta(hours=24), 2, timedelta(hours=336))


@dataclass
class OneByOne:
    """Production's policy for one candidate, one decision at a time, as the simulator asks."""

    policy: PolicySpec
    upper: np.ndarray
    lower: np.ndarray
    observed: np.ndarray
    per_replica: float
    steps: range
    state: PolicyState = field(default_factory=PolicyState)

    def decide(self, step: int, current: int) -> int:
        index = self.steps.index(step)
        signal = SignalInput(
            "default", self.upper[index], self.lower[index], 0.0, self.observed[index], self.per_replica
        )
        decision = decide([signal], current, self.policy, self.state, CLOCK + step * STEP)
        self.state = decision.state
        return decision.replicas


def amounts(percent_values: list[float], absolute_values: list[float]) -> st.SearchStrategy[Amount]:
    return st.one_of(
        st.sampled_from([Amount(v, percent=True) for v in percent_values]),
        st.sampled_from([Amount(v, percent=False) for v in absolute_values]),
    )


def wire(amount: Amount) -> int | str:
    text = f"{amount.value:g}"
    return f"{text}%" if amount.percent else int(amount.value)


candidate_knobs = st.builds(
    Knobs,
    target_quantile=st.sampled_from(LEVELS),
    headroom=amounts([0.0, 5.0, 10.0, 50.0], [0.0, 3.0]),
    max_relative_spread=st.sampled_from([None, 0.1, 0.25, 0.5]),
    scale_down_window=st.sampled_from([timedelta(0), timedelta(minutes=5), timedelta(minutes=7), timedelta(hours=1)]),
    max_scale_down_rate=amounts([0.0, 20.0, 50.0, 100.0], [0.0, 1.0, 3.0]),
    forecaster=st.just(FORECASTER),
)


@st.composite
def base_policies(draw: st.DrawFn) -> dict[str, Any]:
    low = draw(st.integers(0, 3))
    return {
        "minReplicas": low,
        "maxReplicas": draw(st.integers(max(low, 1), 40)),
        "scaleDownQuantile": "0.5",
        "reactiveFloor": {
            "enabled": draw(st.booleans()),
            "bufferSize": wire(draw(amounts([0.0, 10.0, 25.0], [0.0, 2.0]))),
        },
        "stabilization": {"maxScaleUpRate": wire(draw(amounts([0.0, 50.0, 100.0], [0.0, 1.0, 4.0])))},
    }


def policy_of(base: dict[str, Any], knobs: Knobs | None = None) -> PolicySpec:
    data = {**base, "stabilization": dict(base["stabilization"])}
    if knobs is not None:
        data |= {"targetQuantile": f"{knobs.target_quantile:g}", "headroom": wire(knobs.headroom)}
        data["scaleDownUncertaintyGuard"] = {"enabled": knobs.max_relative_spread is not None}
        if knobs.max_relative_spread is not None:
            data["scaleDownUncertaintyGuard"]["maxRelativeSpread"] = f"{knobs.max_relative_spread:g}"
        data["stabilization"] |= {
            "scaleDownWindow": f"{int(knobs.scale_down_window.total_seconds())}s",
            "maxScaleDownRate": wire(knobs.max_scale_down_rate),
        }
    return parse(PolicySpec, data, path="policy")


@settings(max_examples=300, deadline=None)
@given(
    base=base_policies(),
    candidates=st.lists(candidate_knobs, min_size=1, max_size=6),
    decisions=st.integers(1, 60),
    first=st.integers(1, 3),
    every=st.integers(1, 3),
    lead=st.integers(1, 4),
    per_replica=st.sampled_from([0.7, 1.0, 20.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_every_candidate_at_once_decides_as_production_one_at_a_time(
    base, candidates, decisions, first, every, lead, per_replica, seed
):
    rng = np.random.default_rng(seed)
    # Forecasts that wander between calm and bursty, with levels that may cross and go negative.
    windows = np.sort(
        rng.gamma(2.0, 20.0, (decisions, len(LEVELS))) * rng.choice([0.2, 1.0, 3.0], (decisions, 1)), axis=1
    )
    windows -= rng.choice([0.0, 0.0, 30.0], (decisions, 1))
    # Yesterday's miss raised some decisions' levels above their calibrated band, each by its own amount.
    bands = windows - rng.choice([0.0, 0.0, 0.0, 1.0], (decisions, 1)) * rng.uniform(0.0, 40.0, windows.shape)
    observed = rng.gamma(2.0, 20.0, decisions) - rng.choice([0.0, 50.0], decisions, p=[0.9, 0.1])
    schedule = Schedule(first=first, every=every, lead=lead)
    steps = range(first, first + decisions * every, every)
    shared = policy_of(base)
    initial = int(rng.integers(shared.min_replicas, shared.max_replicas + 1))
    counts = replay(
        candidates,
        {FORECASTER: Forecasts(LEVELS, windows, bands)},
        shared,
        Decisions(steps, observed, per_replica, STEP, initial),
    )
    # Decisions replayed for their state only leave the same counts after them.
    later = replay(
        candidates,
        {FORECASTER: Forecasts(LEVELS, windows, bands)},
        shared,
        Decisions(steps, observed, per_replica, STEP, initial),
        kept_from=decisions // 2,
    )
    np.testing.assert_array_equal(later, counts[decisions // 2 :])
    length = steps.stop
    for column, knobs in enumerate(candidates):
        one = OneByOne(
            policy_of(base, knobs),
            windows[:, LEVELS.index(knobs.target_quantile)],
            # The guard's lower value: the band's, raised as much as the target's.
            bands[:, LEVELS.index(0.5)]
            + windows[:, LEVELS.index(knobs.target_quantile)]
            - bands[:, LEVELS.index(knobs.target_quantile)],
            observed,
            per_replica,
            steps,
        )
        expected = simulate(length, schedule, one, initial)
        desired = in_force(counts[:, [column]], schedule, initial, -lead, length)
        np.testing.assert_array_equal(desired[0, lead:], expected.desired)
        np.testing.assert_array_equal(ready(desired, lead)[0], expected.ready)


def test_every_candidate_measured_at_once_has_the_figures_of_its_own_simulation():
    trace = daily_trace(6)
    spec = START_KNOBS.spec(default_spec(trace).to_wire())
    the_plan = plan(trace, Setup(spec=spec, backend=make_backend(START_KNOBS.forecaster.backend_spec()), warmup=DAY))
    schedule = the_plan.schedule
    rng = np.random.default_rng(4)
    counts = rng.integers(1, 30, (len(schedule.decisions(len(trace))), 5))
    served = Served(trace.values, the_plan.per_replica, STEP, schedule, the_plan.initial)
    parts = [Part(2 * 288, 4 * 288, 7.0), Part(4 * 288, len(trace), 11.0)]
    found = measure(counts, served, parts)
    for column in range(counts.shape[1]):
        desired = in_force(counts[:, [column]], schedule, the_plan.initial, -schedule.lead, len(trace))
        simulation = Simulation(desired[0, schedule.lead :], ready(desired, schedule.lead)[0], schedule.first)
        for part, figures in zip(parts, found, strict=True):
            assert figures[column] == _figures(the_plan, simulation, part.begin, part.end, part.oracle_hours)


@pytest.mark.parametrize(
    "knobs",
    [
        START_KNOBS,
        replace(START_KNOBS, target_quantile=0.6, max_relative_spread=None, scale_down_window=timedelta(0)),
        replace(START_KNOBS, target_quantile=0.99, headroom=Amount(0.0, percent=True)),
    ],
)
def test_a_replay_from_forecasts_made_once_decides_as_the_backtest_does(knobs):
    trace = daily_trace(6)
    knobs = replace(knobs, forecaster=FORECASTER)
    spec = knobs.spec(default_spec(trace).to_wire())
    the_plan = plan(trace, Setup(spec=spec, backend=make_backend(FORECASTER.backend_spec()), warmup=DAY))
    # Made at every level of the dial: each level's numbers are the same as when asked alone.
    made = forecast(the_plan, TARGET_QUANTILES)
    steps = the_plan.schedule.decisions(len(trace))
    decisions = Decisions(steps, the_plan.observed[list(steps)], the_plan.per_replica, STEP, the_plan.initial)
    counts = replay([knobs], {FORECASTER: made}, spec.policy, decisions)
    expected, _ = run_presage(the_plan)
    np.testing.assert_array_equal(counts[:, 0], expected.desired[list(steps)])


# --- forecasts made once per history actually read -----------------------------------------------


def test_a_history_longer_than_the_trace_is_not_forecast_twice():
    """Every history setting exceeds a five-day trace: the starting 336h and the 528h that 168h x 3
    reads read the same points, so one forecast serves both."""
    trace = daily_trace(5)
    base = ForecasterKnobs(timedelta(hours=168), 3, timedelta(hours=336))
    the_plan = plan(trace, Setup(spec=default_spec(trace), backend=make_backend(base.backend_spec()), warmup=DAY))
    found = forecasters(base, the_plan)
    assert [(f.season, f.cycles) for f in found] == [(timedelta(hours=168), 3), (timedelta(hours=24), 7),
                                                      (timedelta(hours=24), 3)]  # fmt: skip
    assert points_seen(the_plan, timedelta(hours=336)) == points_seen(the_plan, timedelta(hours=528))


def test_a_history_outgrown_late_in_the_trace_shares_the_decisions_before():
    """A trace two steps longer than the starting history: only its last decision has seen more than
    336h (one point more) and reads differently with 528h; the decisions before are forecast once."""
    steps = 336 * 12 + 2
    trace = replace(daily_trace(15), values=daily_trace(15).values[:steps], gaps=np.zeros(steps, dtype=bool))
    wire = default_spec(trace).to_wire()
    short = ForecasterKnobs(timedelta(hours=24), 2, timedelta(hours=336))
    long = replace(short, history=timedelta(hours=528))
    plans = [
        plan(
            trace,
            Setup(
                spec=replace(START_KNOBS, forecaster=f).spec(wire), backend=make_backend(f.backend_spec()), warmup=DAY
            ),
        )
        for f in (short, long)
    ]
    assert points_seen(plans[0], timedelta(hours=528)) == points_seen(plans[0], timedelta(hours=336)) + 1
    total = len(plans[1].schedule.decisions(steps))
    shared = shared_decisions(plans[1], points_read(plans[1]), points_read(plans[0]))
    assert shared == total - 1
    skip = shared // CHUNK * CHUNK
    whole = forecast(plans[1], (0.9,))
    joined = forecast(plans[0], (0.9,)).head(skip).then(forecast(plans[1], (0.9,), skip))
    np.testing.assert_array_equal(joined.windows, whole.windows)
