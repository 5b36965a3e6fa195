"""Replay many: one candidate policy over a prepared trace, through the backtest's simulator and
production's :func:`presage_scaler.engine.evaluator.decide`, exactly as ``presage backtest`` would decide
with that spec (the forecasts and sizings are the same numbers; only when they are made differs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.backtest.simulator import Simulation, simulate
from presage_scaler.engine.evaluator import decide
from presage_scaler.engine.policy import PolicyState
from presage_scaler.series.timegrid import align_down
from presage_scaler.tune.prepared import Prepared


@dataclass
class PreparedPolicy:
    """A :class:`presage_scaler.backtest.simulator.Policy` deciding with ``spec`` from ``prepared``;
    decisions must be asked for in the schedule's order, as :class:`PresagePolicy` requires."""

    spec: PredictiveScalerSpec
    prepared: Prepared
    constraints: list[str] = field(default_factory=list, init=False)
    _state: PolicyState = field(default_factory=PolicyState, init=False, repr=False)
    _clock: datetime = field(init=False, repr=False)

    def __post_init__(self) -> None:
        plan = self.prepared.plan
        self._clock = align_down(plan.trace.start, plan.signal_spec.resolution)

    def decide(self, step: int, current: int) -> int:
        plan, index = self.prepared.plan, len(self.constraints)
        recommendation = decide(
            self.spec,
            [self.prepared.data[index]],
            [self.prepared.forecasts[index]],
            plan.backend.identity,
            plan.lead,
            current,
            self._state,
            self._clock + step * plan.trace.step,
            self.prepared.sizings[index],
        )
        self._state = recommendation.state
        self.constraints.append(recommendation.decision.constraint)
        return recommendation.replicas


def replay(prepared: Prepared, spec: PredictiveScalerSpec) -> tuple[Simulation, list[str]]:
    """The simulation of ``spec``'s policy over the whole trace, and each decision's constraint."""
    plan = prepared.plan
    policy = PreparedPolicy(spec, prepared)
    return simulate(len(plan.trace), plan.schedule, policy, plan.initial), policy.constraints
