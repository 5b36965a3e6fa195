"""presage tune's pieces: knobs to specs and back, the split, judging the in-sample figures with
confidence, and the choice among the candidates."""

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
from presage_scaler.backtest.runner import Setup, plan
from presage_scaler.backtest.trace import Trace
from presage_scaler.tune.errors import HistoryTooShort, TuneError
from presage_scaler.tune.knobs import ForecasterKnobs, Knobs, history_for, knobs_of
from presage_scaler.tune.output import judged
from presage_scaler.tune.report import frontier
from presage_scaler.tune.search import ALIKE, CONFIDENCE, Figures, Slo, choose, rate_bound, spells
from presage_scaler.tune.space import forecasters
from presage_scaler.tune.split import split
from presage_scaler.tune.tuner import TuneSetup, tune

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


START_KNOBS = Knobs(
    target_quantile=0.9,
    headroom=Amount(10.0, percent=True),
    max_relative_spread=0.25,
    scale_down_window=timedelta(minutes=15),
    max_scale_down_rate=Amount(20.0, percent=True),
    forecaster=ForecasterKnobs(timedelta(hours=168), 3, timedelta(hours=336)),
)
"""The API's defaults."""


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
    trace = daily_trace(5)
    short = forecasters(
        base,
        plan(
            trace, Setup(spec=default_spec(trace), backend=make_backend(base.backend_spec()), warmup=timedelta(days=1))
        ),
    )
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


@given(count=st.integers(min_value=0, max_value=2000), confidence=st.sampled_from([CONFIDENCE, 0.5, 0.6, 0.9]))
def test_property_the_rate_bound_is_the_poisson_upper_confidence_bound(count, confidence):
    """At the bound, seeing ``count`` or fewer events is as unlikely as 1 − confidence (to within the
    Wilson–Hilferty approximation's error); CONFIDENCE is the default."""
    assert poisson_cdf(count, rate_bound(count, confidence)) == pytest.approx(1 - confidence, abs=0.01)
    assert rate_bound(count + 1, confidence) > rate_bound(count, confidence) > count
    assert rate_bound(count) == rate_bound(count, CONFIDENCE)


def test_a_service_level_asked_with_less_confidence_needs_less_margin():
    """Five spells making 0.8 % of the time: the rate could be 1.26 % at CONFIDENCE (not met), but only
    0.91 % at 0.5 (met); tune asks CONFIDENCE unless told otherwise."""
    few = Figures(under_pct=0.8, unserved_pct=0.1, replica_hours=1.0, cost_vs_oracle=1.0, spells=5)
    assert Slo(1.0).confidence == CONFIDENCE and not Slo(1.0).met(few)
    assert Slo(1.0, confidence=0.5).met(few)
    assert few.under_bound_at(0.5) == pytest.approx(0.8 * rate_bound(5, 0.5) / 5)
    assert few.under_bound_at(0.5) == pytest.approx(0.91, abs=0.005)
    assert few.under_bound_at(CONFIDENCE) == few.under_bound_pct


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


# --- the report ---------------------------------------------------------------------------------


def test_frontier_keeps_the_points_nothing_beats_on_both():
    points = [(1.0, 5.0), (1.2, 1.0), (1.1, 6.0), (1.5, 0.5), (1.6, 0.9), (2.0, 0.0)]
    assert frontier(points) == [(1.0, 5.0), (1.2, 1.0), (1.5, 0.5), (2.0, 0.0)]


def test_a_short_part_says_how_much_longer_the_trace_must_be():
    # Five days after the warm-up: two to choose on, three held out of the seven asked.
    short = split(12 * DAY, START, STEP, 7 * DAY)
    assert short.missing(timedelta(days=7)) == timedelta(days=4 + 5)
    assert split(30 * DAY, START, STEP, 7 * DAY).missing(timedelta(days=7)) == timedelta(0)
    # A held-out part asked shorter is already as long as asked: only the part chosen on grows.
    asked = split(12 * DAY, START, STEP, 7 * DAY, timedelta(days=3))
    assert asked.missing(timedelta(days=7)) == timedelta(days=5)


# --- the choice ----------------------------------------------------------------------------------


def figures(hours: float, under: float = 0.5) -> Figures:
    return Figures(under_pct=under, unserved_pct=under / 10, replica_hours=hours, cost_vs_oracle=hours, spells=200)


def test_the_choice_is_the_cheapest_candidate_meeting_the_service_level():
    cheap, dear = replace(START_KNOBS, target_quantile=0.8), replace(START_KNOBS, target_quantile=0.95)
    short = replace(START_KNOBS, target_quantile=0.6)
    candidates = [(START_KNOBS, figures(120.0)), (dear, figures(110.0, under=0.3)), (cheap, figures(100.0)),
                  (short, figures(50.0, under=3.0))]  # fmt: skip
    assert choose(candidates, START_KNOBS, Slo(1.0)) == cheap
    assert choose(candidates, START_KNOBS, Slo(0.1)) == dear  # nothing meets it: the least short


def test_equal_costs_go_to_the_fewest_changes_from_the_start():
    one = replace(START_KNOBS, max_relative_spread=0.5)
    two = replace(one, scale_down_window=timedelta(0))
    candidates = [(START_KNOBS, figures(120.0)), (two, figures(100.0)), (one, figures(100.0))]
    assert choose(candidates, START_KNOBS, Slo(1.0)) == one


def test_the_start_stays_when_it_meets_the_level_for_at_most_alike_more():
    cheap = replace(START_KNOBS, target_quantile=0.8)
    close = [(START_KNOBS, figures(100.0 * (1 + ALIKE))), (cheap, figures(100.0))]
    assert choose(close, START_KNOBS, Slo(1.0)) == START_KNOBS
    further = [(START_KNOBS, figures(100.0 * (1 + ALIKE) + 0.01)), (cheap, figures(100.0))]
    assert choose(further, START_KNOBS, Slo(1.0)) == cheap
    # A start that misses the level is no reason to stay.
    missing = [(START_KNOBS, figures(101.0, under=3.0)), (cheap, figures(100.0))]
    assert choose(missing, START_KNOBS, Slo(1.0)) == cheap


def test_a_history_no_longer_than_the_warm_up_is_waiting_for_history_not_a_failure():
    """A scaler advised from its first day has less history than the warm-up for a week: that is
    HistoryTooShort, which presage advise counts as waiting, never a failed advice."""
    trace = daily_trace(2)
    spec = default_spec(trace).to_wire()
    setup = TuneSetup(
        spec=spec, overrides=Overrides(), backend=backend_spec(None), slo=Slo(1.0), warmup=timedelta(days=2)
    )
    with pytest.raises(HistoryTooShort, match=r"history \(48h\) is not longer than the warm-up \(48h\)"):
        tune(trace, setup)
