"""presage tune's pieces: knobs to specs and back, the split, the search on a known landscape, and
the replay from prepared forecasts against the backtest's own decision path."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from presage_scaler.api.quantities import Amount
from presage_scaler.backtest.config import Overrides, backend_spec, make_backend, scaler_spec
from presage_scaler.backtest.runner import Setup, plan, run_presage
from presage_scaler.backtest.trace import Trace
from presage_scaler.tune.errors import TuneError
from presage_scaler.tune.knobs import ForecasterKnobs, Knobs, history_for, knobs_of
from presage_scaler.tune.output import judged
from presage_scaler.tune.prepared import forecast, prepare
from presage_scaler.tune.replay import replay
from presage_scaler.tune.report import frontier
from presage_scaler.tune.search import CONFIDENCE, Dimension, Figures, Slo, rate_bound, search, spells
from presage_scaler.tune.space import TARGET_QUANTILES, forecasters
from presage_scaler.tune.split import split

STEP = timedelta(minutes=5)
START = datetime(2026, 1, 5, tzinfo=UTC)
DAY = 288


def daily_trace(days: int, seed: int = 0) -> Trace:
    rng = np.random.default_rng(seed)
    steps = days * DAY
    phase = np.arange(steps) / DAY
    values = 200 + 120 * np.sin(2 * np.pi * phase) + rng.normal(0, 20, steps)
    values[rng.integers(DAY, steps, 6)] += 300  # bursts no forecast sees coming
    return Trace(np.maximum(values, 0.0), STEP, START, np.zeros(steps, dtype=bool), "daily.csv")


def default_spec(trace: Trace):
    return scaler_spec(trace, None, Overrides(per_replica=20.0, lead_time=timedelta(minutes=10), max_replicas=200))


# --- knobs ---------------------------------------------------------------------------------------


def test_the_default_spec_is_a_point_of_the_search_and_comes_back_unchanged():
    spec = default_spec(daily_trace(2))
    knobs = knobs_of(spec, backend_spec(None))
    assert knobs.as_dict() == {
        "targetQuantile": "0.9",
        "headroom": "10%",
        "guard": "0.25",
        "scaleDownWindow": "15m",
        "maxScaleDownRate": "20%",
        "season": "168h",
        "cycles": 3,
        "history": "336h",
    }
    assert knobs.spec(spec.to_wire()) == spec


@pytest.mark.parametrize("guard", [None, 0.5])
def test_knobs_set_on_a_spec_read_back_as_the_same_knobs(guard):
    spec = default_spec(daily_trace(2))
    knobs = Knobs(
        target_quantile=0.975,
        headroom=Amount(0.0, percent=True),
        max_relative_spread=guard,
        scale_down_window=timedelta(0),
        max_scale_down_rate=Amount(100.0, percent=True),
        forecaster=ForecasterKnobs(timedelta(hours=24), 7, timedelta(hours=336)),
    )
    tuned = knobs.spec(spec.to_wire())
    assert knobs_of(tuned, knobs.forecaster.backend_spec()) == knobs
    # Everything the knobs do not name is the user's.
    assert tuned.scale_target_ref == spec.scale_target_ref
    assert tuned.capacity == spec.capacity
    assert tuned.policy.max_replicas == spec.policy.max_replicas
    assert tuned.policy.reactive_floor == spec.policy.reactive_floor


def test_a_forecaster_reads_the_history_its_cycles_need():
    assert history_for(timedelta(hours=168), 3, timedelta(hours=336)) == timedelta(hours=528)
    assert history_for(timedelta(hours=24), 7, timedelta(hours=336)) == timedelta(hours=336)


def test_seasons_longer_than_the_trace_are_not_tried():
    base = ForecasterKnobs(timedelta(hours=168), 3, timedelta(hours=336))
    short = forecasters(base, daily_trace(5))
    assert [f.season for f in short] == [timedelta(hours=168), timedelta(hours=24), timedelta(hours=24)]


# --- split ---------------------------------------------------------------------------------------


def test_a_long_trace_holds_out_its_last_seven_days():
    parts = split(30 * DAY, START, STEP, 7 * DAY)
    assert parts.held_out == timedelta(days=7)
    assert parts.in_sample == timedelta(days=16)
    assert parts.end == 30 * DAY


def test_a_short_trace_keeps_two_days_to_choose_on():
    parts = split(12 * DAY, START, STEP, 7 * DAY)
    assert (parts.in_sample, parts.held_out) == (timedelta(days=2), timedelta(days=3))


def test_an_in_sample_part_longer_than_a_week_is_also_judged_on_its_last_week():
    parts = split(30 * DAY, START, STEP, 7 * DAY)
    assert parts.recent_from == parts.held_out_from - 7 * DAY
    assert split(12 * DAY, START, STEP, 7 * DAY).recent_from is None  # two days: the whole part is recent
    assert split(21 * DAY, START, STEP, 7 * DAY).recent_from is None  # exactly a week


def test_holdout_can_be_set():
    assert split(30 * DAY, START, STEP, 7 * DAY, timedelta(days=10)).held_out == timedelta(days=10)


@pytest.mark.parametrize(
    ("length", "holdout"), [(9 * DAY, None), (30 * DAY, timedelta(hours=12)), (10 * DAY, timedelta(days=3))]
)
def test_too_short_to_hold_out_is_refused_with_what_to_change(length, holdout):
    with pytest.raises(TuneError, match=r"too short to hold out.*shorter --warmup"):
        split(length, START, STEP, 7 * DAY + DAY // 2, holdout)


# --- meeting the service level with confidence ---------------------------------------------------


def poisson_cdf(count: int, rate: float) -> float:
    return sum(math.exp(k * math.log(rate) - rate - math.lgamma(k + 1)) for k in range(count + 1))


@given(count=st.integers(min_value=0, max_value=2000))
def test_property_the_rate_bound_is_the_poisson_upper_confidence_bound(count):
    """At the bound, seeing ``count`` or fewer events is as unlikely as 1 − CONFIDENCE (to within the
    Wilson–Hilferty approximation's error)."""
    assert poisson_cdf(count, rate_bound(count)) == pytest.approx(1 - CONFIDENCE, abs=0.01)
    assert rate_bound(count + 1) > rate_bound(count) > count


def test_spells_are_runs_of_short_steps():
    assert spells(np.array([], dtype=bool)) == 0
    assert spells(np.array([False, False])) == 0
    assert spells(np.array([True, True, False, True, False, False, True])) == 3


def test_few_spells_need_a_margin_that_many_do_not():
    slo = Slo(1.0)
    # 0.8 % of the time short, in 5 spells: the rate could well be 1.58× that (1.26 %): not met.
    assert not slo.met(Figures(under_pct=0.8, unserved_pct=0.1, replica_hours=1.0, cost_vs_oracle=1.0, spells=5))
    # The same share in 500 spells is known to within 4 %: met.
    assert slo.met(Figures(under_pct=0.8, unserved_pct=0.1, replica_hours=1.0, cost_vs_oracle=1.0, spells=500))
    # Uncounted figures are taken as they are; so is a part without a short step.
    assert slo.met(Figures(under_pct=0.8, unserved_pct=0.1, replica_hours=1.0, cost_vs_oracle=1.0))
    assert Figures(under_pct=0.0, unserved_pct=0.0, replica_hours=1.0, cost_vs_oracle=1.0, spells=0).margin == 1.0
    # The unserved-demand bound is scaled alike.
    strict = Slo(2.0, unserved_pct=0.1)
    assert not strict.met(Figures(under_pct=0.5, unserved_pct=0.09, replica_hours=1.0, cost_vs_oracle=1.0, spells=9))


def test_a_part_without_a_spell_is_judged_as_if_short_for_the_bound_of_none_seen():
    slo = Slo(1.0)
    never = Figures(under_pct=0.0, unserved_pct=0.0, replica_hours=1.0, cost_vs_oracle=1.0, spells=0)
    # Two days of minutes: 1.6 one-step spells in 2,880 steps is 0.056 %: met.
    assert replace(never, steps=2880).under_bound_pct == pytest.approx(100 * 1.6 / 2880, rel=0.01)
    assert slo.met(replace(never, steps=2880))
    # A day of half-hours cannot show 1 %: 1.6 of 48 steps is 3.3 %.
    assert replace(never, steps=48).under_bound_pct == pytest.approx(3.33, abs=0.01)
    assert not slo.met(replace(never, steps=48))
    assert judged(replace(never, steps=48)) == (
        "never under-provisioned in-sample: judged at 3.33 % (1.6 one-step spells, what the rate could be with "
        "80% confidence)"
    )
    # Where the steps are not known the bound of no spell stays 0, as before.
    assert never.under_bound_pct == 0.0
    assert judged(never) == "never under-provisioned in-sample"


def test_a_part_that_meets_the_service_level_but_not_over_its_last_week_does_not():
    slo = Slo(1.0)
    months = Figures(under_pct=0.5, unserved_pct=0.05, replica_hours=1.0, cost_vs_oracle=1.0, spells=400)
    # The last week: 1.5 % short in 12 spells, over the level even before its margin.
    drifted = Figures(under_pct=1.5, unserved_pct=0.1, replica_hours=0.1, cost_vs_oracle=1.0, spells=12)
    assert slo.met(months)
    assert not slo.met(replace(months, recent=drifted))
    # 0.6 % in 2 spells: under the level as seen, over it with the margin two spells need (×2.14).
    assert not slo.met(replace(months, recent=replace(drifted, under_pct=0.6, spells=2)))
    assert slo.met(replace(months, recent=replace(drifted, under_pct=0.2, spells=2)))
    assert replace(months, recent=drifted).as_dict()["recent"]["under_provisioned_pct"] == 1.5


# --- search --------------------------------------------------------------------------------------


def landscape(knobs: Knobs) -> Figures:
    """A known landscape: a higher targetQuantile costs more and is short less; disabling the guard
    saves 20 % at +0.3 points of under-provisioning; headroom 0 saves 5 % at +0.4 points."""
    q = knobs.target_quantile
    cost, under = 1.0 + 2.0 * q, 3.0 * (1.0 - q)
    if knobs.max_relative_spread is None:
        cost, under = cost * 0.8, under + 0.3
    if knobs.headroom.value == 0:
        cost, under = cost * 0.95, under + 0.4
    return Figures(under_pct=under, unserved_pct=under / 10, replica_hours=cost, cost_vs_oracle=cost)


START_KNOBS = Knobs(
    target_quantile=0.9,
    headroom=Amount(10.0, percent=True),
    max_relative_spread=0.25,
    scale_down_window=timedelta(minutes=15),
    max_scale_down_rate=Amount(20.0, percent=True),
    forecaster=ForecasterKnobs(timedelta(hours=168), 3, timedelta(hours=336)),
)
DIMENSIONS = (
    Dimension("guard", (0.25, None), "max_relative_spread"),
    Dimension("headroom", (Amount(10.0, percent=True), Amount(0.0, percent=True)), "headroom"),
)


def brute_force(slo: Slo) -> Knobs:
    every = [
        replace(START_KNOBS, target_quantile=q, max_relative_spread=g, headroom=h)
        for q in TARGET_QUANTILES
        for g in DIMENSIONS[0].values
        for h in DIMENSIONS[1].values
    ]
    return min((k for k in every if slo.met(landscape(k))), key=lambda k: landscape(k).replica_hours)


@pytest.mark.parametrize("slo", [Slo(1.0), Slo(0.5), Slo(2.0), Slo(1.0, unserved_pct=0.05)])
def test_search_finds_the_cheapest_candidate_meeting_the_service_level(slo):
    tried: list[Knobs] = []

    def evaluate(knobs: Knobs) -> Figures:
        tried.append(knobs)
        return landscape(knobs)

    found = search(START_KNOBS, TARGET_QUANTILES, DIMENSIONS, evaluate, slo)
    assert found == brute_force(slo)
    assert len(tried) == len(set(tried)), "a candidate was replayed twice"
    assert len(tried) < 4 * len(TARGET_QUANTILES)


def test_with_nothing_feasible_search_returns_the_least_under_provisioned():
    found = search(START_KNOBS, TARGET_QUANTILES, DIMENSIONS, landscape, Slo(0.001))
    assert found.target_quantile == max(TARGET_QUANTILES)
    assert found.max_relative_spread == 0.25 and found.headroom.value == 10.0


def test_search_reports_its_progress_pass_by_pass():
    heard: list[tuple[str, int, int]] = []
    search(START_KNOBS, TARGET_QUANTILES, DIMENSIONS, landscape, Slo(1.0), lambda *a: heard.append(a))
    assert heard[0] == ("search, pass 1", 1, 4)
    assert heard[-1][1:] == (4, 4)


def test_frontier_keeps_the_points_nothing_beats_on_both():
    points = [(1.0, 5.0), (1.2, 1.0), (1.1, 6.0), (1.5, 0.5), (1.6, 0.9), (2.0, 0.0)]
    assert frontier(points) == [(1.0, 5.0), (1.2, 1.0), (1.5, 0.5), (2.0, 0.0)]


# --- forecast once, replay many ------------------------------------------------------------------


@pytest.mark.parametrize(
    "knobs",
    [
        START_KNOBS,
        replace(START_KNOBS, target_quantile=0.6, max_relative_spread=None, scale_down_window=timedelta(0)),
        replace(START_KNOBS, target_quantile=0.99, headroom=Amount(0.0, percent=True)),
    ],
)
def test_a_replay_from_prepared_forecasts_decides_as_the_backtest_does(knobs):
    trace = daily_trace(6)
    knobs = replace(knobs, forecaster=ForecasterKnobs(timedelta(hours=24), 2, timedelta(hours=336)))
    spec = knobs.spec(default_spec(trace).to_wire())
    the_plan = plan(
        trace, Setup(spec=spec, backend=make_backend(knobs.forecaster.backend_spec()), warmup=timedelta(days=1))
    )
    # Prepared at every level of the dial: each level's numbers are the same as when asked alone.
    prepared = prepare(the_plan, forecast(the_plan, TARGET_QUANTILES))
    simulation, constraints = replay(prepared, spec)
    expected, record = run_presage(the_plan)
    np.testing.assert_array_equal(simulation.desired, expected.desired)
    np.testing.assert_array_equal(simulation.ready, expected.ready)
    assert tuple(constraints) == record.constraints
