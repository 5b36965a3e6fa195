"""The reactive HPA and seasonal trigger baselines (tolerance, 300 s stabilization, the week-ago
window) and the cost match."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presage_scaler.api.quantities import Amount
from presage_scaler.backtest.baselines import (
    LOOK_AHEAD,
    WEEK_AGO,
    ReactivePolicy,
    SeasonalTriggerPolicy,
    forward_maxima,
    match_cost,
    observed_demand,
    week_ago_peaks,
)
from presage_scaler.backtest.runner import utilization_for

MINUTE = timedelta(minutes=1)
NO_HEADROOM = Amount(0.0)


def hpa(observed: list[float], headroom: Amount = NO_HEADROOM, step: timedelta = MINUTE) -> ReactivePolicy:
    return ReactivePolicy(
        observed=np.array(observed, dtype=np.float64),
        per_replica=10.0,
        headroom=headroom,
        step=step,
        min_replicas=1,
        max_replicas=1000,
    )


@pytest.mark.parametrize(
    ("observed", "current", "expected"),
    [
        (108.0, 10, 10),  # ratio 1.08: within the 10 % tolerance, no change
        (91.0, 10, 10),  # ratio 0.91: within tolerance
        (90.0, 10, 10),  # at the lower edge of the tolerance
        (112.0, 10, 12),  # ratio 1.12: scale to ⌈11.2⌉
        (50.0, 10, 5),  # outside: down to ⌈5⌉ at once, as no earlier recommendation holds it up
    ],
)
def test_tolerance(observed, current, expected):
    assert hpa([observed]).decide(0, current) == expected


def test_headroom_percent_and_absolute():
    assert hpa([100.0], Amount(50.0, percent=True)).decide(0, 1) == 15
    assert hpa([100.0], Amount(25.0)).decide(0, 1) == 13


def test_scale_up_is_immediate_and_scale_down_waits_300_seconds():
    observed = [100.0, 20.0, 20.0, 20.0, 20.0, 20.0, 20.0]
    policy = hpa(observed)
    current, counts = 10, []
    for step in range(len(observed)):
        current = policy.decide(step, current)
        counts.append(current)
    # The raw recommendation drops to 2 at step 1 but 10 stays in the window until step 5, when
    # the recommendation of step 0 is exactly 300 s old and no longer counts.
    assert counts == [10, 10, 10, 10, 10, 2, 2]


def test_stabilization_window_is_in_time_not_decisions():
    policy = hpa([100.0, 20.0, 20.0], step=timedelta(minutes=5))
    assert [policy.decide(0, 10), policy.decide(1, 10), policy.decide(2, 2)] == [10, 2, 2]


def test_bounds():
    policy = ReactivePolicy(
        observed=np.array([0.0, 10_000.0]),
        per_replica=10.0,
        headroom=Amount(0.0),
        step=MINUTE,
        min_replicas=2,
        max_replicas=50,
    )
    assert policy.decide(0, 5) == 2
    assert policy.decide(1, 2) == 50


def test_observed_demand_is_the_last_complete_signal_point():
    signal = np.array([1.0, 2.0, 3.0])
    seen = observed_demand(signal, 2, 7)
    assert np.isnan(seen[:2]).all()
    assert seen[2:].tolist() == [1.0, 1.0, 2.0, 2.0, 3.0]


# --- cost matching ----------------------------------------------------------------------------


def test_cost_match_converges_on_a_step_function():
    def cost_of(headroom: float) -> float:
        return float(math.floor(1000 * (1 + headroom)))

    match = match_cost(cost_of, 1873.0)
    assert match.matched
    assert abs(match.replica_hours - 1873.0) <= 1.873
    assert match.headroom == pytest.approx(0.873, abs=0.002)
    assert match.evaluations <= 40


def test_cost_match_brackets_upwards_for_a_large_target():
    match = match_cost(lambda h: 100.0 * (1 + h), 2000.0)
    assert match.matched
    assert match.headroom == pytest.approx(19.0, rel=1e-3)


def test_cost_match_reports_when_even_no_headroom_costs_more():
    match = match_cost(lambda h: 100.0 + h, 50.0)
    assert not match.matched
    assert match.headroom == 0.0


# --- the seasonal trigger -----------------------------------------------------------------------

WEEK = int(WEEK_AGO / MINUTE)
AHEAD = int(LOOK_AHEAD / MINUTE)


def trigger(
    observed: list[float], week_ago: list[float], utilization: float = 0.5, low: int = 1, high: int = 1000
) -> SeasonalTriggerPolicy:
    return SeasonalTriggerPolicy(
        observed=np.array(observed, dtype=np.float64),
        week_ago=np.array(week_ago, dtype=np.float64),
        per_replica=10.0,
        utilization=utilization,
        step=MINUTE,
        min_replicas=low,
        max_replicas=high,
    )


def test_the_recipe_is_a_week_back_and_thirty_minutes_ahead():
    """Mimir's: ``max_over_time(…[30m] offset 6d23h30m)``."""
    offset, lookback = WEEK_AGO - LOOK_AHEAD, LOOK_AHEAD
    assert (offset, lookback) == (timedelta(days=6, hours=23, minutes=30), timedelta(minutes=30))


def test_the_week_ago_window_is_the_highest_demand_seen_over_t_minus_7d_to_30m_later():
    observed = np.arange(WEEK + 100, dtype=np.float64)
    observed[:1] = np.nan  # before the first complete signal point
    peaks = week_ago_peaks(observed, MINUTE)
    j = WEEK + 50  # its window is observed[50 … 80], both ends included
    assert peaks[j] == observed[50 + AHEAD] == 80.0
    observed[50 + AHEAD + 1] = 1e9  # just after the window: not seen
    observed[50 - 1] = 1e9  # just before it: not seen
    assert week_ago_peaks(observed, MINUTE)[j] == 80.0
    observed[50] = 1e9  # its first point
    assert week_ago_peaks(observed, MINUTE)[j] == 1e9


def test_a_week_ago_before_the_trace_is_no_series_and_a_window_it_starts_in_is_cut():
    observed = np.full(WEEK + 10, 5.0)
    observed[:1] = np.nan
    observed[3] = 7.0
    peaks = week_ago_peaks(observed, MINUTE)
    assert np.isnan(peaks[: WEEK - AHEAD]).all()  # the whole window lies before the trace
    assert np.isnan(peaks[WEEK - AHEAD])  # its last point is the trace's first, before any signal point
    assert peaks[WEEK - AHEAD + 1] == 5.0  # the trace's second step, and the only one of its window seen
    assert np.isnan(week_ago_peaks(observed[: WEEK - AHEAD], MINUTE)).all()
    assert peaks[WEEK - AHEAD + 3] == 7.0 and peaks[WEEK + 3] == 7.0 and peaks[WEEK + 4] == 5.0


def test_the_window_counts_in_trace_steps_whatever_the_step():
    step = timedelta(minutes=30)  # a two-point window: t - 7d and t - 7d + 30m
    back = int(WEEK_AGO / step)
    observed = np.arange(back + 5, dtype=np.float64)
    peaks = week_ago_peaks(observed, step)
    assert peaks[back + 2] == 3.0
    assert np.isnan(peaks[: back - 1]).all() and peaks[back - 1] == 0.0


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.one_of(st.floats(-1e6, 1e6), st.just(float("nan"))), min_size=1, max_size=80),
    width=st.integers(1, 90),
)
def test_property_forward_maxima_is_each_windows_highest_ignoring_nans(values, width):
    array = np.array(values)
    expected = [np.fmax.reduce(array[i : i + width]) for i in range(len(array))]
    np.testing.assert_array_equal(forward_maxima(array, width), np.array(expected))


def test_the_trigger_sizes_the_higher_of_now_and_a_week_ago_at_its_utilization():
    # 100 at 50 % of 10 a replica is 20 replicas; 300 a week ago is 60.
    assert trigger([100.0], [np.nan]).decide(0, 1) == 20
    assert trigger([100.0], [50.0]).decide(0, 1) == 20
    assert trigger([100.0], [300.0]).decide(0, 1) == 60
    assert trigger([100.0], [300.0], utilization=0.75).decide(0, 1) == 40
    assert trigger([100.0], [300.0], utilization=1.0).decide(0, 1) == 30


def test_without_a_week_ago_the_trigger_is_the_hpa_on_the_current_demand():
    """PromQL's max over a missing series is the other one: the current demand alone. At 80 %
    utilization that is the HPA with 25 % headroom."""
    observed = [100.0, 180.0, 40.0, 40.0, 40.0, 40.0, 40.0, 300.0]
    alone = trigger(observed, [np.nan] * len(observed), utilization=0.8)
    hpa_25 = hpa(observed, Amount(25.0, percent=True))
    current_a = current_b = 1
    for step in range(len(observed)):
        current_a, current_b = alone.decide(step, current_a), hpa_25.decide(step, current_b)
        assert current_a == current_b


def test_the_trigger_has_the_hpas_tolerance_and_scale_down_stabilization():
    # 50 a week ago and now at 50 %: 10 replicas' capacity is 100, asked 100 → the ratio 1.0 keeps 10.
    assert trigger([52.0], [np.nan]).decide(0, 10) == 10  # ratio 1.04: within the tolerance
    assert trigger([56.0], [np.nan]).decide(0, 10) == 12  # ratio 1.12: outside
    week = [200.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0]
    policy = trigger([10.0] * len(week), week)
    current, counts = 1, []
    for step in range(len(week)):
        current = policy.decide(step, current)
        counts.append(current)
    # Last week's 200 asks for 40; the fall to 2 waits until that recommendation is 300 s old.
    assert counts == [40, 40, 40, 40, 40, 2, 2]


def test_the_trigger_is_clamped_into_the_bounds():
    assert trigger([0.0], [np.nan], low=3, high=50).decide(0, 5) == 3
    assert trigger([10.0], [1e6], low=3, high=50).decide(0, 5) == 50


def test_a_utilization_that_is_not_above_zero_is_refused():
    with pytest.raises(ValueError, match="above 0"):
        trigger([1.0], [1.0], utilization=0.0)


def test_the_trigger_cost_match_searches_utilization_as_headroom_above_the_demand_seen():
    assert utilization_for(0.0) == 1.0  # no headroom: every replica at its capacity
    assert utilization_for(1.0 / 3.0) == 0.75
    assert utilization_for(1.0) == 0.5
    assert utilization_for(0.0973) == 0.911328  # to four decimals of a percentage: 91.1328 %
