"""The policies presage is compared with: the oracle, a reactive HPA, the seasonal trigger a KEDA
user would write by hand (each also cost-matched), and a static count.

All of them plug into :func:`presage_scaler.backtest.simulator.simulate`, like presage itself, and
all are clamped into the scaler's [minReplicas, maxReplicas]: those bounds are the operator's, not
a policy's choice.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from presage_scaler.api.quantities import Amount
from presage_scaler.engine.policy import REPLICA_TOLERANCE, whole_replicas
from presage_scaler.series.timegrid import steps_for

HPA_TOLERANCE = 0.1
"""The HPA leaves the count alone while the usage ratio is within 10 % of 1 (its default)."""

HPA_SCALE_DOWN_STABILIZATION = timedelta(seconds=300)
"""The HPA scales down to the highest recommendation of the last 300 s (its default)."""

MAX_HEADROOM = 100.0
"""The cost match gives up above 10,000 % headroom."""

WEEK_AGO = timedelta(days=7)
"""How far back the seasonal trigger reads: the same hour of the same weekday, the period of the daily
and weekly patterns it relies on."""

LOOK_AHEAD = timedelta(minutes=30)
"""How much of what followed, a week ago, the seasonal trigger covers: the highest demand of
``[t − WEEK_AGO, t − WEEK_AGO + LOOK_AHEAD]``. Grafana Mimir's predictive querier trigger
(``max_over_time(…[30m] offset 6d23h30m)``) looks 30 minutes ahead so that the pods for a rise that
recurs weekly are asked for, and ready, before it comes."""

DEFAULT_TRIGGER_UTILIZATION = 0.75
"""The seasonal trigger's target utilization by default, Mimir's: capacity for the demand it sees at
75 % of each replica's, room for peaks 33 % higher."""


def clamp(replicas: int, low: int, high: int) -> int:
    """``replicas`` within [low, high]."""
    return min(max(replicas, low), high)


def oracle_targets(demand: np.ndarray, per_replica: float, window: int) -> np.ndarray:
    """Per step ``j``, ⌈max(demand[j : j + window]) / per_replica⌉ (the window is cut at the end).

    A count decided at step ``j`` stays in force for ``every`` steps and the ready count at a step is
    the smallest count in force over the ``lead`` steps before it, so the count decided at ``j`` must
    cover steps ``j … j + every − 1 + lead``: ``window = every + lead`` (``[t, t + lead]`` when a
    decision is made every step). Anything less under-provisions a step; this is never more.
    """
    padded = np.concatenate([demand, np.full(window - 1, -np.inf)])
    peaks = np.maximum(sliding_window_view(padded, window).max(axis=1), 0.0)
    # whole_replicas of every element, with the same floating-point operations.
    whole = np.maximum(np.ceil(peaks / per_replica - REPLICA_TOLERANCE), 0.0)
    if not (whole < 2.0**63).all():  # as int() refuses an infinite or NaN count (or one past int64)
        raise OverflowError(f"a replica count of {whole.max()} is not a whole number of replicas")
    targets = whole.astype(np.int64)
    # Never under: where the tolerance (or a quotient rounded down, or one that underflowed to 0)
    # leaves a peak a rounding error above the count's capacity, one more replica covers it.
    targets += targets * per_replica < peaks
    return targets


@dataclass
class OraclePolicy:
    """The cheapest policy that never under-provisions: it knows the demand ahead."""

    targets: np.ndarray
    min_replicas: int
    max_replicas: int

    def decide(self, step: int, current: int) -> int:
        return clamp(int(self.targets[step]), self.min_replicas, self.max_replicas)


def static_count(demand: np.ndarray, per_replica: float, min_replicas: int, max_replicas: int) -> int:
    """The constant count that covers the peak of ``demand`` (the warm-up's): what a team without an
    autoscaler provisions."""
    return clamp(int(oracle_targets(demand, per_replica, 1).max()), min_replicas, max_replicas)


@dataclass(frozen=True)
class StaticPolicy:
    """The same count at every decision."""

    replicas: int

    def decide(self, step: int, current: int) -> int:
        return self.replicas


def observed_demand(signal: np.ndarray, ratio: int, steps: int) -> np.ndarray:
    """Per trace step, the latest complete signal point a decision at that step can see (NaN before
    the first one). ``ratio`` is trace steps per signal point."""
    seen = np.full(steps, np.nan)
    visible = np.arange(steps) // ratio - 1
    known = visible >= 0
    seen[known] = signal[visible[known]]
    return seen


@dataclass
class Hpa:
    """How a Kubernetes HPA turns the capacity a metric asks for into a count, at each decision.

    The wanted capacity over ``current × capacity`` is the usage ratio: within the 10 % tolerance of
    1 the count stays as it is, else it becomes ⌈wanted / capacity⌉; a scale-down goes only as low as
    the highest of the recommendations of the last 300 s (the HPA's default scale-down stabilization),
    and the result is clamped into [minReplicas, maxReplicas].
    """

    per_replica: float
    step: timedelta
    min_replicas: int
    max_replicas: int
    _recent: deque[tuple[int, int]] = field(default_factory=deque, init=False, repr=False)
    """The recommendations of the stabilization window that a later one may still fall to, as
    (step, count) with the counts decreasing: the first is the window's highest."""
    _window: int = field(init=False, repr=False)
    """Steps a recommendation stays in the stabilization window: the fewest ``k`` with
    ``k × step ≥ HPA_SCALE_DOWN_STABILIZATION``."""

    def __post_init__(self) -> None:
        self._window = steps_for(HPA_SCALE_DOWN_STABILIZATION, self.step)

    def scale(self, step: int, current: int, wanted: float) -> int:
        """The count at ``step`` for a metric that asks for ``wanted`` capacity, ``current`` in force."""
        if current > 0 and abs(wanted / (current * self.per_replica) - 1.0) <= HPA_TOLERANCE:
            raw = current
        else:
            raw = whole_replicas(wanted / self.per_replica)
        recent = self._recent
        while recent and recent[-1][1] <= raw:
            recent.pop()
        recent.append((step, raw))
        while step - recent[0][0] >= self._window:
            recent.popleft()
        return clamp(recent[0][1], self.min_replicas, self.max_replicas)


@dataclass
class ReactivePolicy:
    """A Kubernetes HPA on the same signal: it wants observed × (1 + headroom) of capacity
    (:class:`Hpa`). ``headroom`` is absolute signal units or a percentage, like the scaler's
    ``policy.headroom``.
    """

    observed: np.ndarray
    per_replica: float
    headroom: Amount
    step: timedelta
    min_replicas: int
    max_replicas: int
    _hpa: Hpa = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._hpa = Hpa(self.per_replica, self.step, self.min_replicas, self.max_replicas)

    def decide(self, step: int, current: int) -> int:
        seen = max(float(self.observed[step]), 0.0)
        return self._hpa.scale(step, current, seen + self.headroom.of(seen))


def forward_maxima(values: np.ndarray, width: int) -> np.ndarray:
    """Per index ``i``, the highest of ``values[i : i + width]`` (cut at the end), NaNs ignored: NaN
    only where all of them are. Doubling spans, so ``log2(width)`` passes whatever the width."""
    peaks = values.copy()
    span = 1
    while span < width:
        shift = min(span, width - span)
        # peaks[i] held the highest of `span` values from i; with peaks[i + shift] it holds span + shift.
        np.fmax(peaks[:-shift], peaks[shift:], out=peaks[:-shift])
        span += shift
    return peaks


def week_ago_peaks(observed: np.ndarray, step: timedelta) -> np.ndarray:
    """Per trace step, what the seasonal trigger's week-ago query sees: the highest of the demand seen
    (``observed``, :func:`observed_demand`) over ``[t − WEEK_AGO, t − WEEK_AGO + LOOK_AHEAD]``, both
    ends included, the part of it inside the trace where it starts before the trace does; NaN where
    all of it does, as that query returns no series there."""
    back = steps_for(WEEK_AGO, step)
    ahead = steps_for(LOOK_AHEAD, step, at_least=0)
    # Index p of `padded` is observed's p - ahead: the window of step j starts at p = j - back + ahead.
    padded = np.concatenate([np.full(ahead, np.nan), observed])
    reach = forward_maxima(padded, ahead + 1)
    peaks = np.full(len(observed), np.nan)
    first = min(max(0, back - ahead), len(observed))
    peaks[first:] = reach[first - back + ahead : len(observed) - back + ahead]
    return peaks


@dataclass
class SeasonalTriggerPolicy:
    """The seasonal trigger a KEDA user writes by hand (Grafana Mimir ships it): a Prometheus trigger
    on the current demand beside one on last week's (:func:`week_ago_peaks`), through the HPA
    (:class:`Hpa`) at a target ``utilization`` of each replica's capacity:
    ⌈max(current, week-ago peak) / (utilization × capacity)⌉.

    Two triggers of one ScaledObject or one ``max(…)`` query decide alike: the HPA takes the highest
    of the triggers' counts, and each count's tolerance keeps the count in force only where the
    highest one would too. Where the week-ago window lies before the trace (``week_ago`` NaN) the
    trigger sees the current demand alone, as ``max`` over a missing series does.
    """

    observed: np.ndarray
    week_ago: np.ndarray
    per_replica: float
    utilization: float
    step: timedelta
    min_replicas: int
    max_replicas: int
    _hpa: Hpa = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.utilization > 0.0:
            raise ValueError(f"a target utilization must be above 0, got {self.utilization}")
        self._hpa = Hpa(self.per_replica, self.step, self.min_replicas, self.max_replicas)

    def decide(self, step: int, current: int) -> int:
        seen = max(float(self.observed[step]), 0.0)
        week = float(self.week_ago[step])
        if week > seen:  # False for NaN: no series a week ago
            seen = week
        return self._hpa.scale(step, current, seen / self.utilization)


@dataclass(frozen=True)
class CostMatch:
    """The headroom (a fraction) at which the reactive policy costs what presage does."""

    headroom: float
    replica_hours: float
    target: float
    evaluations: int
    matched: bool
    """False when no headroom ≥ 0 came within the tolerance (e.g. even 0 % costs more)."""


def match_cost(
    cost_of: Callable[[float], float],
    target: float,
    *,
    start: float = 0.1,
    relative_tolerance: float = 1e-3,
    max_evaluations: int = 40,
) -> CostMatch:
    """Find a headroom ``h ≥ 0`` with ``cost_of(h)`` within ``relative_tolerance`` of ``target``.

    Bracket from ``[0, max(2·start, 1)]`` upwards by doubling, then bisect. Cost grows with headroom
    but in steps (replica counts are whole), so an exact match may not exist: the headroom whose
    cost came closest is returned, the smaller one on a tie.
    """
    costs: dict[float, float] = {}

    def cost(headroom: float) -> float:
        if headroom not in costs:
            costs[headroom] = cost_of(headroom)
        return costs[headroom]

    def close(headroom: float) -> bool:
        return abs(cost(headroom) - target) <= relative_tolerance * target

    low, high = 0.0, max(2.0 * start, 1.0)
    if cost(low) < target and not close(low):
        while cost(high) < target and not close(high) and high < MAX_HEADROOM:
            low, high = high, 2.0 * high
        while len(costs) < max_evaluations and not close(low) and not close(high):
            middle = (low + high) / 2.0
            if cost(middle) < target:
                low = middle
            else:
                high = middle
    best = min(costs, key=lambda h: (abs(costs[h] - target), h))
    return CostMatch(
        headroom=best,
        replica_hours=costs[best],
        target=target,
        evaluations=len(costs),
        matched=abs(costs[best] - target) <= relative_tolerance * target,
    )
