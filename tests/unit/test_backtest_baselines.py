"""The reactive HPA baseline (tolerance, 300 s stabilization) and the cost match."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pytest

from presage_scaler.api.quantities import Amount
from presage_scaler.backtest.baselines import ReactivePolicy, match_cost, observed_demand

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
