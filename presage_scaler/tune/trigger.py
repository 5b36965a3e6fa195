"""The seasonal trigger at every target utilization at once: the counts
:class:`presage_scaler.backtest.baselines.SeasonalTriggerPolicy` decides, one column per utilization.

What the trigger sees at a decision — the higher of the current demand and last week's peak — is
the same whatever its utilization; what differs is the capacity it asks for (that demand over the
utilization) and the HPA's state, which is carried forward decision by decision for every
utilization at once, as array operations:

* the tolerance keeps the count in force where the usage ratio is within 10 % of 1;
* the scale-down stabilization makes the count the highest recommendation of the decisions made in
  the last 300 s: the decisions ``d'`` with ``(d − d') · every < window`` (in trace steps), the
  last ``⌈window / every⌉`` of them;
* the bounds clamp it into [minReplicas, maxReplicas].

The count in force is the simulator's current count, the previous decision's: a decision's count is
in force until the next one. ``tests/unit/test_tune_trigger.py`` replays random triggers through the
policy and the simulator and compares.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from presage_scaler.backtest.baselines import HPA_SCALE_DOWN_STABILIZATION, HPA_TOLERANCE
from presage_scaler.backtest.runner import Plan
from presage_scaler.engine.policy import REPLICA_TOLERANCE
from presage_scaler.series.timegrid import steps_for

BLOCK = 4096
"""Decisions whose requests are computed at once (a few MiB for every utilization)."""

UTILIZATIONS = tuple(percent / 100 for percent in range(30, 96))
"""The target utilizations tune tries for the seasonal trigger, 30 % to 95 % in steps of 1 %: below
30 % the trigger pays for more than three times the demand it sees, and at 100 % it leaves nothing
for a peak above last week's. Steps as fine as the trigger's cost moves, so that the trigger tuned
is at its best on the part chosen on (checked by ``benchmarks/bench_tune.py``, which tunes it)."""


def trigger_counts(plan: Plan, utilizations: Sequence[float], kept_from: int = 0) -> np.ndarray:
    """``(decisions − kept_from, len(utilizations))``: the count the trigger at each utilization (a
    fraction) has in force after each of the plan's decisions from the ``kept_from``-th on (the earlier
    ones are replayed for the state they leave, not kept)."""
    schedule, policy = plan.schedule, plan.spec.policy
    steps = np.asarray(schedule.decisions(len(plan.trace)))
    seen = np.maximum(plan.observed[steps], 0.0)
    week = plan.week_ago[steps]
    seen = np.where(week > seen, week, seen)  # False for NaN: no series a week ago
    divisors = np.asarray(utilizations, dtype=np.float64)
    recent = np.zeros((-(-steps_for(HPA_SCALE_DOWN_STABILIZATION, plan.trace.step) // schedule.every), len(divisors)))
    current = np.full(len(divisors), plan.initial, dtype=np.int64)
    top = max(plan.initial, policy.max_replicas)
    counts = np.empty((len(steps) - kept_from, len(divisors)), dtype=np.int16 if top <= 2**15 - 1 else np.int32)
    for block in range(0, len(steps), BLOCK):
        # What a block of decisions asks for, before the state: the same operations, a matrix at a time.
        wanted = seen[block : block + BLOCK, np.newaxis] / divisors
        fresh = np.maximum(np.ceil(wanted / plan.per_replica - REPLICA_TOLERANCE), 0.0)
        for row in range(len(wanted)):
            within = (current > 0) & (np.abs(wanted[row] / (current * plan.per_replica) - 1.0) <= HPA_TOLERANCE)
            index = block + row
            recent[index % len(recent)] = np.where(within, current, fresh[row])
            highest = np.maximum(recent.max(axis=0), policy.min_replicas)
            current = np.minimum(highest, policy.max_replicas, out=highest).astype(np.int64)
            if index >= kept_from:
                counts[index - kept_from] = current
    return counts
