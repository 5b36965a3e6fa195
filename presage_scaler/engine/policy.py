"""How presage turns forecasts into a replica count. Pure: no I/O, the clock is an argument.

Order of application (each step sees the previous step's number; the last step that changed the
number is reported as ``breakdown.constraint``, ``""`` when the forecast alone decided):

1. **Forecast → replicas, per signal.** demand = the target-quantile forecast of the signal's highest
   demand over its sizing window, from the next step up to lead time + interval (calibrated; see
   :mod:`presage_scaler.engine.evaluator` and :mod:`presage_scaler.engine.calibration`) plus headroom
   (absolute signal units, or a percentage of that forecast); replicas =
   ⌈demand / per-replica capacity⌉. The largest requirement is ``breakdown.predictive`` (the first
   signal in spec order wins a tie), and its signal is ``bindingSignal``. targetQuantile sizes in
   both directions: a lower forecast lowers the number exactly as a higher one raises it.
2. **Reactive floor** (``ReactiveFloor``), when enabled: per signal ⌈observed × (1 + buffer%) /
   capacity⌉, or ⌈observed / capacity⌉ + buffer replicas (``signalStatuses[].reactive``); the
   largest, and at least one replica, is ``breakdown.reactive``, and the number becomes
   max(predictive, reactive). When the floor is above the forecast, ``bindingSignal`` becomes the
   signal whose floor it is: the signal that set the count. At least one: with the floor on presage
   never recommends 0, whatever minReplicas says (zero observed demand may be a workload with
   nothing running to observe). Disabled, nothing bounds the forecast from below, which is what
   allows scale-to-zero.
3. **Scale-down gates**, only when the number is below the current replica count; scale-up is
   never delayed here.
   a. Uncertainty guard (``ForecastUncertainty``): with the target-quantile value of the signal
      whose forecast requires the most replicas as *upper* and its scaleDownQuantile value as
      *lower*, a spread (upper − lower) / max(lower, 1) above maxRelativeSpread keeps the current
      count.
   b. Scale-down window (``ScaleDownWindow``): the number must have been below the current count
      continuously for scaleDownWindow. ``scaleDownCandidateSince`` is set when it first drops
      below and cleared whenever it is not below; the window is measured from it, so a restarted
      scaler that restores it from status continues the window instead of starting over.
4. **Rate limits.** An increase is capped at maxScaleUpRate (replicas, or a percentage of the
   current count, rounded up, at least one replica when the rate is positive): ``MaxScaleUpRate``.
   A decrease is capped at maxScaleDownRate (rounded down, at least one replica when the rate is
   positive): ``MaxScaleDownRate``. A rate of 0 forbids that direction.
5. **Bounds.** Clamp into [minReplicas, maxReplicas]: ``MinReplicas`` / ``MaxReplicas``.

MaxReplicas and MaxScaleUpRate apply after the floor, so they can hold the count below it: the
floor removes forecast error as a cause of under-provisioning, not operator-configured limits.

Monotonicity: for a fixed scaleDownQuantile value, a higher target-quantile forecast never yields
fewer replicas. Raising the *lower* quantile can: it narrows the spread and may release the
uncertainty guard, which is the guard's purpose.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from presage_scaler.api.binding_constraints import Constraint
from presage_scaler.api.predictive_scaler import PolicySpec
from presage_scaler.api.quantities import Amount

REPLICA_TOLERANCE = 1e-9
"""How far above a whole number a replica count may be and still be that number: forecasts and demand
are floats, and 3.0000000001 replicas' worth of demand is 3 replicas."""


def whole_replicas(replicas: float) -> int:
    """A fractional replica count (demand / per-replica capacity) rounded up to whole replicas, within
    :data:`REPLICA_TOLERANCE`, and never below 0. Every count presage or a backtest baseline derives
    from demand is rounded here, so they agree on what a given demand needs."""
    return max(0, math.ceil(replicas - REPLICA_TOLERANCE))


@dataclass(frozen=True)
class SignalInput:
    """One signal's numbers for one decision; all in the signal's own units."""

    name: str
    upper: float
    """The sizing window's highest demand forecast at targetQuantile: what capacity is sized to."""
    lower: float
    """The same at scaleDownQuantile: only feeds the uncertainty guard."""
    point: float
    observed: float
    """Latest observed demand: what the reactive floor sizes to."""
    capacity: float
    """Units one replica serves (> 0)."""


@dataclass(frozen=True)
class PolicyState:
    """What the policy remembers between decisions (persisted in ``.status``)."""

    scale_down_candidate_since: datetime | None = None
    last_scale_time: datetime | None = None


@dataclass(frozen=True)
class SignalDecision:
    """The per-signal view: what this signal alone requires."""

    name: str
    sized_to: float
    """The calibrated targetQuantile forecast of the sizing window's highest demand: what ``replicas``
    is ⌈(sized_to + headroom) / capacity⌉ of."""
    observed: float
    replicas: int
    reactive_replicas: int


@dataclass(frozen=True)
class Decision:
    """The outcome of one decision, with everything needed to explain it."""

    replicas: int
    predictive: int
    reactive: int | None
    binding_signal: str
    constraint: Constraint | Literal[""]
    """The constraint that bound, ``""`` when the forecast alone decided."""
    signals: tuple[SignalDecision, ...]
    relative_spread: float
    """The uncertainty guard's spread, (upper − lower) / max(lower, 1), of the signal whose forecast
    requires the most replicas: computed at every decision, compared only for a scale-down."""
    guard_lower: float
    """That signal's scaleDownQuantile value: the guard's *lower*."""
    state: PolicyState


def _forecast_replicas(signal: SignalInput, policy: PolicySpec) -> int:
    upper = max(signal.upper, 0.0)
    return whole_replicas((upper + policy.headroom.of(upper)) / signal.capacity)


def _reactive_replicas(signal: SignalInput, policy: PolicySpec) -> int:
    observed = max(signal.observed, 0.0)
    buffer = policy.reactive_floor.buffer_size
    if buffer.percent:
        return whole_replicas(observed * (1.0 + buffer.value / 100.0) / signal.capacity)
    return whole_replicas(observed / signal.capacity) + whole_replicas(buffer.value)


def relative_spread(upper: float, lower: float) -> float:
    """(upper − lower) / max(lower, 1): how uncertain a forecast is, relative to its size."""
    return (upper - lower) / max(lower, 1.0)


def _max_step(current: int, rate: Amount, *, round_up: bool) -> int:
    """Most replicas one decision may add (round_up) or remove (round down), from a rate."""
    if rate.value <= 0:
        return 0
    amount = rate.of(current)
    steps = whole_replicas(amount) if round_up else math.floor(amount + REPLICA_TOLERANCE)
    return max(1, steps)


def scale_up_ceiling(current_replicas: int, policy: PolicySpec) -> int:
    """The most replicas one decision may reach from ``current_replicas`` under maxScaleUpRate."""
    return current_replicas + _max_step(current_replicas, policy.stabilization.max_scale_up_rate, round_up=True)


def scale_down_floor(current_replicas: int, policy: PolicySpec) -> int:
    """The fewest replicas one decision may reach from ``current_replicas`` under maxScaleDownRate."""
    return current_replicas - _max_step(current_replicas, policy.stabilization.max_scale_down_rate, round_up=False)


def decide(
    signals: Sequence[SignalInput],
    current_replicas: int,
    policy: PolicySpec,
    state: PolicyState,
    now: datetime,
) -> Decision:
    """Decide the replica count for one evaluation. See the module docstring for the order."""
    if not signals:
        raise ValueError("decide() needs at least one signal")
    per_signal = [
        SignalDecision(
            name=s.name,
            sized_to=s.upper,
            observed=s.observed,
            replicas=_forecast_replicas(s, policy),
            reactive_replicas=_reactive_replicas(s, policy),
        )
        for s in signals
    ]
    forecast_index = max(range(len(per_signal)), key=lambda i: (per_signal[i].replicas, -i))
    binding_signal = per_signal[forecast_index].name
    predictive = per_signal[forecast_index].replicas
    number = predictive
    constraint: Constraint | Literal[""] = ""

    reactive = None
    if policy.reactive_floor.enabled:
        floor_index = max(range(len(per_signal)), key=lambda i: (per_signal[i].reactive_replicas, -i))
        reactive = max(1, per_signal[floor_index].reactive_replicas)
        if reactive > number:
            number, constraint = reactive, Constraint.REACTIVE_FLOOR
            binding_signal = per_signal[floor_index].name

    guarded = signals[forecast_index]
    spread = relative_spread(guarded.upper, guarded.lower)
    candidate_since = None
    # Candidacy looks at the bounded number: a count that minReplicas would lift back to the current
    # one is not a scale-down and must not leave a stale candidate time in status.
    if min(max(number, policy.min_replicas), policy.max_replicas) < current_replicas:
        candidate_since = state.scale_down_candidate_since or now
        guard = policy.scale_down_uncertainty_guard
        window = policy.stabilization.scale_down_window
        if guard.enabled and spread > guard.max_relative_spread:
            number, constraint = current_replicas, Constraint.FORECAST_UNCERTAINTY
        elif now - candidate_since < window:
            number, constraint = current_replicas, Constraint.SCALE_DOWN_WINDOW

    if number > (ceiling := scale_up_ceiling(current_replicas, policy)):
        number, constraint = ceiling, Constraint.MAX_SCALE_UP_RATE
    elif number < (floor := scale_down_floor(current_replicas, policy)):
        number, constraint = floor, Constraint.MAX_SCALE_DOWN_RATE

    if number > policy.max_replicas:
        number, constraint = policy.max_replicas, Constraint.MAX_REPLICAS
    if number < policy.min_replicas:
        number, constraint = policy.min_replicas, Constraint.MIN_REPLICAS

    new_state = replace(
        state,
        scale_down_candidate_since=candidate_since,
        last_scale_time=now if number != current_replicas else state.last_scale_time,
    )
    return Decision(
        replicas=number,
        predictive=predictive,
        reactive=reactive,
        binding_signal=binding_signal,
        constraint=constraint,
        signals=tuple(per_signal),
        relative_spread=spread,
        guard_lower=guarded.lower,
        state=new_state,
    )
