"""The backtest's pod lifecycle and metrics on tiny hand-made traces with known answers."""

from __future__ import annotations

import itertools
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presage_scaler.backtest.baselines import OraclePolicy, oracle_targets
from presage_scaler.backtest.scoring import measure
from presage_scaler.backtest.simulator import Schedule, Simulation, simulate

HOUR = timedelta(hours=1)


class Scripted:
    """Wants the given count at each decision step; remembers the ``current`` it was shown."""

    def __init__(self, wanted: dict[int, int]) -> None:
        self.wanted = wanted
        self.seen: list[tuple[int, int]] = []

    def decide(self, step: int, current: int) -> int:
        self.seen.append((step, current))
        return self.wanted.get(step, current)


def run(wanted: dict[int, int], *, steps: int = 8, lead: int = 3, every: int = 1, initial: int = 2) -> Simulation:
    return simulate(steps, Schedule(first=0, every=every, lead=lead), Scripted(wanted), initial)


def test_added_pods_become_ready_after_the_lead_time_and_cost_while_booting():
    sim = run({1: 5}, lead=3)
    assert sim.ready.tolist() == [2, 2, 2, 2, 5, 5, 5, 5]
    assert sim.desired.tolist() == [2, 5, 5, 5, 5, 5, 5, 5]


def test_booting_pods_are_cancelled_first_newest_first():
    # +3 at step 0 (ready at 3), +2 at step 1 (ready at 4), then down to 4 at step 2: the two newest
    # go, then one of the older batch; the two ready pods stay.
    sim = run({0: 5, 1: 7, 2: 4}, lead=3)
    assert sim.ready.tolist() == [2, 2, 2, 4, 4, 4, 4, 4]
    assert sim.desired.tolist() == [5, 7, 4, 4, 4, 4, 4, 4]


def test_ready_pods_are_removed_at_once_once_no_pod_is_booting():
    sim = run({1: 6, 2: 1}, lead=3, initial=3)
    # Step 2 cancels the 3 booting pods and removes 2 of the 3 ready ones immediately.
    assert sim.ready.tolist() == [3, 3, 1, 1, 1, 1, 1, 1]
    assert sim.desired.tolist() == [3, 6, 1, 1, 1, 1, 1, 1]


def test_the_policy_sees_ready_plus_booting_as_current():
    policy = Scripted({0: 4})
    simulate(3, Schedule(first=0, every=1, lead=5), policy, 1)
    assert policy.seen == [(0, 1), (1, 4), (2, 4)]


def test_decisions_follow_the_interval():
    policy = Scripted({})
    simulate(7, Schedule(first=1, every=3, lead=1), policy, 1)
    assert [step for step, _ in policy.seen] == [1, 4]


def test_steps_before_the_first_decision_hold_the_initial_count():
    sim = simulate(5, Schedule(first=2, every=1, lead=1), Scripted({2: 4}), 3)
    assert sim.ready.tolist() == [3, 3, 3, 4, 4]
    assert sim.desired.tolist() == [3, 3, 4, 4, 4]


def test_a_negative_count_is_a_bug():
    with pytest.raises(ValueError, match="-1 replicas"):
        run({0: -1})


# --- metrics ----------------------------------------------------------------------------------


def sim_of(desired: list[int], ready: list[int]) -> Simulation:
    return Simulation(desired=np.array(desired), ready=np.array(ready), first=0)


def test_under_provisioning_and_unserved_arithmetic():
    demand = np.array([10.0, 30.0, 20.0, 50.0])
    # capacity 20, 20, 30, 40 -> shortfalls 0, 10, 0, 10
    metrics = measure(demand, sim_of([2, 3, 4, 4], [2, 2, 3, 4]), 10.0, HOUR, 0)
    assert metrics.under_provisioned_pct == 50.0
    assert metrics.unserved_pct == pytest.approx(100 * 20 / 110)
    assert metrics.largest_shortfall == 10.0


def test_demand_equal_to_capacity_is_served():
    # 3 × 0.3 is 0.8999999999999999 in floating point: not a shortfall.
    metrics = measure(np.array([0.9, 0.3]), sim_of([3, 1], [3, 1]), 0.3, HOUR, 0)
    assert metrics.under_provisioned_pct == 0.0


def test_replica_hours_count_booting_pods():
    # 2 ready + 3 booting for two 30-minute steps, then 5 ready: 5 pods the whole time.
    metrics = measure(np.zeros(3), sim_of([5, 5, 5], [2, 2, 5]), 1.0, timedelta(minutes=30), 0)
    assert metrics.replica_hours == pytest.approx(7.5)


def test_warmup_steps_are_excluded():
    demand = np.array([100.0, 100.0, 10.0, 10.0])
    metrics = measure(demand, sim_of([1, 1, 2, 2], [1, 1, 2, 2]), 10.0, HOUR, 2)
    assert metrics.under_provisioned_pct == 0.0
    assert metrics.unserved_pct == 0.0
    assert metrics.replica_hours == 4.0
    # The change from 1 to 2 at the first reported step counts; earlier ones do not.
    assert metrics.changes == 1


def test_changes_count_every_change_of_the_desired_count():
    metrics = measure(np.zeros(5), sim_of([2, 2, 3, 3, 1], [2, 2, 3, 3, 1]), 1.0, HOUR, 0)
    assert metrics.changes == 2


def test_reported_steps_must_be_simulated():
    sim = Simulation(desired=np.ones(4, dtype=int), ready=np.ones(4, dtype=int), first=2)
    with pytest.raises(ValueError, match="outside"):
        measure(np.zeros(4), sim, 1.0, HOUR, 1)


# --- the oracle -------------------------------------------------------------------------------


def test_oracle_targets_cover_the_lead_window():
    demand = np.array([0.0, 0.0, 50.0, 0.0, 0.0, 11.0])
    assert oracle_targets(demand, 10.0, 3).tolist() == [5, 5, 5, 2, 2, 2]


def oracle_run(demand: np.ndarray, per_replica: float, lead: int, every: int) -> Simulation:
    targets = oracle_targets(demand, per_replica, lead + every)
    schedule = Schedule(first=0, every=every, lead=lead)
    return simulate(len(demand), schedule, OraclePolicy(targets, 0, 10**6), int(targets[0]))


@settings(max_examples=200, deadline=None)
@given(
    demand=st.lists(st.floats(0, 1000, allow_nan=False), min_size=2, max_size=60),
    per_replica=st.floats(0.5, 100),
    lead=st.integers(1, 6),
    every=st.integers(1, 4),
)
def test_the_oracle_never_under_provisions(demand, per_replica, lead, every):
    values = np.array(demand)
    sim = oracle_run(values, per_replica, lead, every)
    assert measure(values, sim, per_replica, HOUR, 0).under_provisioned_pct == 0.0


@pytest.mark.parametrize("every", [1, 2])
def test_no_policy_without_under_provisioning_is_cheaper_than_the_oracle(every):
    demand = np.array([5.0, 12.0, 31.0, 8.0, 25.0, 3.0, 17.0])
    per_replica, lead, top = 10.0, 2, 4
    oracle = measure(demand, oracle_run(demand, per_replica, lead, every), per_replica, HOUR, 0)
    initial = int(oracle_targets(demand, per_replica, lead + every)[0])
    schedule = Schedule(first=0, every=every, lead=lead)
    decisions = list(schedule.decisions(len(demand)))
    feasible = 0
    for counts in itertools.product(range(top + 1), repeat=len(decisions)):
        sim = simulate(len(demand), schedule, Scripted(dict(zip(decisions, counts, strict=True))), initial)
        metrics = measure(demand, sim, per_replica, HOUR, 0)
        if metrics.under_provisioned_pct == 0.0:
            feasible += 1
            assert metrics.replica_hours >= oracle.replica_hours
    assert feasible > 0
