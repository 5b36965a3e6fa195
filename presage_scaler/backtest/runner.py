"""A whole backtest: presage, the reactive HPA, the seasonal trigger (each as set and cost-matched),
a static count and the oracle on one trace.

:func:`plan` turns a trace and a parsed spec into the numbers every policy shares (signal,
schedule, lead time, warm-up, initial count); ``run_*`` simulate one policy each;
:func:`run_backtest` runs all seven, measures them, and says where presage's cost goes
(:mod:`presage_scaler.backtest.explain`).
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.quantities import Amount, format_duration
from presage_scaler.backends.base import Backend
from presage_scaler.backtest.baselines import (
    DEFAULT_TRIGGER_UTILIZATION,
    CostMatch,
    OraclePolicy,
    ReactivePolicy,
    SeasonalTriggerPolicy,
    StaticPolicy,
    clamp,
    match_cost,
    observed_demand,
    oracle_targets,
    static_count,
    week_ago_peaks,
)
from presage_scaler.backtest.config import DEFAULT_WARMUP
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.backtest.explain import Coverage, constraint_shares, coverage
from presage_scaler.backtest.replay import PresagePolicy, PresageRecord, forecaster_for
from presage_scaler.backtest.scoring import Metrics, measure
from presage_scaler.backtest.simulator import Schedule, Simulation, simulate
from presage_scaler.backtest.trace import Trace
from presage_scaler.engine.evaluator import SignalSpec, signal_specs
from presage_scaler.engine.leadtime import LeadTime, resolve_lead_time
from presage_scaler.series.timegrid import steps_for

POLICIES = (
    "presage",
    "reactive",
    "reactive_cost_matched",
    "seasonal_trigger",
    "seasonal_trigger_cost_matched",
    "static",
    "oracle",
)

PRE_ROLL = timedelta(days=1)
"""How long before the measured part the policies start deciding. Decisions before that would never
be measured, and by then each policy's state (a scale-down window, a rate limit, the HPA's
stabilization) has long settled, and a calibration that scores its own forecasts (a model server's)
has a day of them, all it reads (:data:`presage_scaler.engine.past_forecasts.SPAN`). A forecast still sees
the whole history before it. ``benchmarks/bench_backtest.py`` measures the policies so started."""

Progress = Callable[[str, int, int], None]
"""Called with (phase, done, total) while a backtest runs."""


@dataclass(frozen=True)
class Setup:
    """What to backtest besides the trace."""

    spec: PredictiveScalerSpec
    backend: Backend
    boot_delay: timedelta | None = None
    """How long a new pod really takes to become ready. Defaults to the spec's lead time; required
    when the spec's lead time is Observed (it is then also the observed value)."""
    warmup: timedelta = DEFAULT_WARMUP
    reactive_headroom: Amount | None = None
    """The reactive HPA's headroom; defaults to the spec's ``policy.headroom``."""
    trigger_utilization: float = DEFAULT_TRIGGER_UTILIZATION
    """The seasonal trigger's target utilization, a fraction of each replica's capacity."""


@dataclass(frozen=True)
class Plan:
    """Everything the policies share for one trace."""

    trace: Trace
    signal: Trace
    """The trace at the signal's resolution."""
    ratio: int
    """Trace steps per signal point."""
    spec: PredictiveScalerSpec
    signal_spec: SignalSpec
    backend: Backend
    lead: LeadTime
    """The lead time presage plans with (the spec's, resolved)."""
    boot_delay: timedelta
    schedule: Schedule
    report_from: int
    """The first step counted in the metrics (the end of the warm-up)."""
    warmup: timedelta
    initial: int
    observed: np.ndarray
    """Per step, the latest signal point a decision there sees."""
    reactive_headroom: Amount
    trigger_utilization: float

    @property
    def per_replica(self) -> float:
        return self.signal_spec.per_replica

    @functools.cached_property
    def oracle(self) -> np.ndarray:
        """Per step, the oracle's replica count: made when the oracle first runs, so that plans that never
        run it (a tuning run's forecasting passes) do not pay for it."""
        return oracle_targets(self.trace.values, self.per_replica, self.schedule.every + self.schedule.lead)

    @functools.cached_property
    def static(self) -> int:
        """The static baseline's count: the warm-up's peak demand over per-replica capacity (made when the
        static baseline first runs)."""
        policy = self.spec.policy
        demand = self.trace.values[: self.report_from]
        return static_count(demand, self.per_replica, policy.min_replicas, policy.max_replicas)

    @functools.cached_property
    def week_ago(self) -> np.ndarray:
        """Per step, what the seasonal trigger's week-ago query sees (NaN where a week ago is before the
        trace): made when a trigger first runs, so that plans that never run one do not hold it."""
        return week_ago_peaks(self.observed, self.trace.step)


def _signal(spec: PredictiveScalerSpec) -> SignalSpec:
    signals = signal_specs(spec)
    if len(signals) != 1:
        raise BacktestError(f"a backtest replays one trace, but the spec has {len(signals)} signals")
    if signals[0].capacity_query is not None:
        raise BacktestError("capacity.query cannot be replayed from a trace: give a constant per-replica capacity")
    return signals[0]


def _lead(setup: Setup) -> tuple[LeadTime, timedelta]:
    spec = setup.spec.lead_time
    if spec.source == "Observed":
        if setup.boot_delay is None:
            raise BacktestError("the spec's lead time is Observed: give the observed boot delay (--lead-time)")
        lead = resolve_lead_time(spec, setup.boot_delay.total_seconds())
    else:
        lead = resolve_lead_time(spec)
    return lead, lead.value if setup.boot_delay is None else setup.boot_delay


def plan(trace: Trace, setup: Setup) -> Plan:
    """Check the setup against the trace and derive the shared numbers."""
    spec = setup.spec
    signal_spec = _signal(spec)
    if signal_spec.resolution < trace.step:
        raise BacktestError(
            f"the signal resolution {format_duration(signal_spec.resolution)} is finer than the trace step "
            f"{format_duration(trace.step)}"
        )
    signal = trace.resample(signal_spec.resolution)
    ratio = steps_for(signal.step, trace.step)
    lead, boot_delay = _lead(setup)
    every = steps_for(spec.interval, trace.step)
    report_from = max(ratio, steps_for(setup.warmup, trace.step, at_least=0))
    if report_from >= len(trace):
        raise BacktestError(
            f"the trace ({format_duration(len(trace) * trace.step)}) is not longer than the warm-up "
            f"({format_duration(setup.warmup)}): shorten --warmup"
        )
    # The decisions lie on a grid from the first complete signal point (step ``ratio``); the first
    # made is the last of them at least PRE_ROLL before the measured part.
    skipped = max(0, report_from - steps_for(PRE_ROLL, trace.step) - ratio) // every
    schedule = Schedule(first=ratio + skipped * every, every=every, lead=steps_for(boot_delay, trace.step))
    # The oracle's count at the first decision: its window of demand alone (Plan.oracle holds them all).
    window = schedule.every + schedule.lead
    first = oracle_targets(trace.values[schedule.first : schedule.first + window], signal_spec.per_replica, window)
    policy = spec.policy
    return Plan(
        trace=trace,
        signal=signal,
        ratio=ratio,
        spec=spec,
        signal_spec=signal_spec,
        backend=setup.backend,
        lead=lead,
        boot_delay=boot_delay,
        schedule=schedule,
        report_from=report_from,
        warmup=setup.warmup,
        initial=clamp(int(first[0]), policy.min_replicas, policy.max_replicas),
        observed=observed_demand(signal.values, ratio, len(trace)),
        reactive_headroom=setup.reactive_headroom or policy.headroom,
        trigger_utilization=setup.trigger_utilization,
    )


def run_presage(plan: Plan, on_progress: Callable[[int], None] | None = None) -> tuple[Simulation, PresageRecord]:
    """presage's production decision path over the trace."""
    decisions = plan.schedule.decisions(len(plan.trace))
    with asyncio.Runner() as loop:
        policy = PresagePolicy(
            spec=plan.spec,
            signal_spec=plan.signal_spec,
            signal=plan.signal,
            ratio=plan.ratio,
            backend=plan.backend,
            forecaster=forecaster_for(plan.backend, loop),
            lead=plan.lead,
            decisions=decisions,
            start=plan.trace.start,
            step=plan.trace.step,
        )
        try:
            simulation = simulate(len(plan.trace), plan.schedule, policy, plan.initial, on_progress)
        finally:
            # A client backend (TimesFM) opened its connection pool on this loop: close it there.
            if (close := getattr(plan.backend, "aclose", None)) is not None:
                loop.run(close())
    return simulation, policy.record()


def run_oracle(plan: Plan) -> Simulation:
    policy = plan.spec.policy
    oracle = OraclePolicy(plan.oracle, policy.min_replicas, policy.max_replicas)
    return simulate(len(plan.trace), plan.schedule, oracle, plan.initial)


def run_static(plan: Plan) -> Simulation:
    return simulate(len(plan.trace), plan.schedule, StaticPolicy(plan.static), plan.static)


def run_reactive(plan: Plan, headroom: Amount) -> Simulation:
    policy = plan.spec.policy
    reactive = ReactivePolicy(
        observed=plan.observed,
        per_replica=plan.per_replica,
        headroom=headroom,
        step=plan.trace.step,
        min_replicas=policy.min_replicas,
        max_replicas=policy.max_replicas,
    )
    return simulate(len(plan.trace), plan.schedule, reactive, plan.initial)


def run_trigger(plan: Plan, utilization: float) -> Simulation:
    """The seasonal trigger at target ``utilization`` (a fraction)."""
    policy = plan.spec.policy
    trigger = SeasonalTriggerPolicy(
        observed=plan.observed,
        week_ago=plan.week_ago,
        per_replica=plan.per_replica,
        utilization=utilization,
        step=plan.trace.step,
        min_replicas=policy.min_replicas,
        max_replicas=policy.max_replicas,
    )
    return simulate(len(plan.trace), plan.schedule, trigger, plan.initial)


def metrics_of(plan: Plan, simulation: Simulation) -> Metrics:
    return measure(plan.trace.values, simulation, plan.per_replica, plan.trace.step, plan.report_from)


def percent(fraction: float) -> Amount:
    """A headroom fraction as the API's percentage amount."""
    return Amount(round(100.0 * fraction, 4), percent=True)


def cost_matched(
    plan: Plan, target_replica_hours: float, on_progress: Callable[[int], None] | None = None
) -> CostMatch:
    """The reactive headroom at which the HPA costs ``target_replica_hours``."""
    evaluations = 0

    def cost_of(fraction: float) -> float:
        nonlocal evaluations
        evaluations += 1
        if on_progress is not None:
            on_progress(evaluations)
        return metrics_of(plan, run_reactive(plan, percent(fraction))).replica_hours

    start = plan.reactive_headroom.value / 100.0 if plan.reactive_headroom.percent else 0.1
    return match_cost(cost_of, target_replica_hours, start=start)


def utilization_for(headroom: float) -> float:
    """The trigger's target utilization that asks for ``headroom`` (a fraction) above the demand it
    sees, to the digits a percentage with four decimals keeps (:func:`percent`)."""
    return round(100.0 / (1.0 + headroom), 4) / 100.0


def trigger_cost_matched(
    plan: Plan, target_replica_hours: float, on_progress: Callable[[int], None] | None = None
) -> CostMatch:
    """The seasonal trigger's headroom above the demand it sees (``1 / utilization − 1``) at which it
    costs ``target_replica_hours``: the trigger's cost grows as its utilization falls, so the HPA's
    cost match searches it as a headroom from 0 (100 % utilization) up."""
    evaluations = 0

    def cost_of(headroom: float) -> float:
        nonlocal evaluations
        evaluations += 1
        if on_progress is not None:
            on_progress(evaluations)
        return metrics_of(plan, run_trigger(plan, utilization_for(headroom))).replica_hours

    return match_cost(cost_of, target_replica_hours, start=1.0 / plan.trigger_utilization - 1.0)


@dataclass(frozen=True)
class PolicyResult:
    """One policy's simulation and metrics; ``headroom`` for the reactive ones, ``utilization`` (a
    fraction) for the seasonal triggers."""

    simulation: Simulation
    metrics: Metrics
    headroom: Amount | None = None
    utilization: float | None = None


@dataclass(frozen=True)
class BacktestResult:
    """All seven policies on one trace."""

    plan: Plan
    policies: dict[str, PolicyResult]
    presage: PresageRecord
    cost_match: CostMatch
    trigger_cost_match: CostMatch
    """The seasonal trigger's cost match, as a headroom above the demand it sees (:func:`trigger_cost_matched`)."""
    coverage: Coverage
    """How often presage's calibrated quantiles covered the sizing window's demand, after warm-up."""
    constraint_shares: dict[str, float]
    """The share of presage's decisions after warm-up that each constraint decided."""
    seconds: dict[str, float]
    """Wall time of each phase."""

    def cost_vs_oracle(self, name: str) -> float:
        oracle = self.policies["oracle"].metrics.replica_hours
        hours = self.policies[name].metrics.replica_hours
        return hours / oracle if oracle > 0 else math.inf


def run_backtest(trace: Trace, setup: Setup, progress: Progress | None = None) -> BacktestResult:
    """Plan, then simulate presage, the oracle, the reactive HPA and the seasonal trigger (each as set
    and cost-matched) and the static count."""
    seconds: dict[str, float] = {}
    began = time.perf_counter()
    the_plan = plan(trace, setup)
    decisions = len(the_plan.schedule.decisions(len(trace)))

    def report(phase: str, total: int) -> Callable[[int], None] | None:
        return None if progress is None else lambda done: progress(phase, done, total)

    presage_sim, record = run_presage(the_plan, report("presage", decisions))
    seconds["presage"] = time.perf_counter() - began

    began = time.perf_counter()
    oracle_sim = run_oracle(the_plan)
    reactive_sim = run_reactive(the_plan, the_plan.reactive_headroom)
    presage_metrics = metrics_of(the_plan, presage_sim)
    match = cost_matched(the_plan, presage_metrics.replica_hours, report("cost matching", 40))
    matched_headroom = percent(match.headroom)
    matched_sim = run_reactive(the_plan, matched_headroom)
    utilization = the_plan.trigger_utilization
    trigger_sim = run_trigger(the_plan, utilization)
    trigger_match = trigger_cost_matched(
        the_plan, presage_metrics.replica_hours, report("cost matching the trigger", 40)
    )
    matched_utilization = utilization_for(trigger_match.headroom)
    trigger_matched_sim = run_trigger(the_plan, matched_utilization)
    static_sim = run_static(the_plan)
    seconds["baselines"] = time.perf_counter() - began

    policies = {
        "presage": PolicyResult(presage_sim, presage_metrics),
        "reactive": PolicyResult(reactive_sim, metrics_of(the_plan, reactive_sim), the_plan.reactive_headroom),
        "reactive_cost_matched": PolicyResult(matched_sim, metrics_of(the_plan, matched_sim), matched_headroom),
        "seasonal_trigger": PolicyResult(trigger_sim, metrics_of(the_plan, trigger_sim), utilization=utilization),
        "seasonal_trigger_cost_matched": PolicyResult(
            trigger_matched_sim, metrics_of(the_plan, trigger_matched_sim), utilization=matched_utilization
        ),
        "static": PolicyResult(static_sim, metrics_of(the_plan, static_sim)),
        "oracle": PolicyResult(oracle_sim, metrics_of(the_plan, oracle_sim)),
    }
    return BacktestResult(
        plan=the_plan,
        policies=policies,
        presage=record,
        cost_match=match,
        trigger_cost_match=trigger_match,
        coverage=coverage(record, the_plan.signal.values, the_plan.report_from),
        constraint_shares=constraint_shares(record, the_plan.report_from),
        seconds=seconds,
    )
