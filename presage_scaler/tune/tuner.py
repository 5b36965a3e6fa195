"""A whole tuning run: plan, split, baselines, every candidate's figures, and the choice.

The trace is planned as ``presage backtest`` plans it (:func:`presage_scaler.backtest.runner.plan`),
so the schedule, the warm-up, the boot delay and the oracle are the backtest's. Each forecaster
setting of the space is forecast once (:mod:`presage_scaler.tune.prepared`), every candidate is
replayed over the whole trace from those forecasts at once (:mod:`presage_scaler.tune.replay`), and
its in-sample figures go to the choice (:mod:`presage_scaler.tune.search`); its held-out figures are
kept aside for the report and the check.

Beside the candidates (unless asked not to, :attr:`TuneSetup.baselines`), the reactive HPA and the
seasonal trigger a KEDA user would write instead
(:class:`presage_scaler.backtest.baselines.SeasonalTriggerPolicy`) are replayed. The trigger has one
knob, its target utilization: every utilization of :data:`presage_scaler.tune.trigger.UTILIZATIONS` is replayed at once
and measured as the candidates are, the cheapest that meets the same service level in-sample with the
same confidence is its choice, and that is reported held out beside presage's.

The forecaster settings besides the starting one are forecast in worker processes while this one
forecasts the starting one (``jobs``); with one job everything runs in this process, with the same
result.

Given a :class:`~presage_scaler.tune.forecast_cache.ForecastStore`, each pass is forecast in chunks
along the clock's days (:mod:`presage_scaler.tune.chunk_reuse`): the chunks the store holds (an
earlier run's, or another pass's of this run) are taken, the rest are forecast and put there. The
figures are those of a run with an empty store, whatever the store held; they may differ from a run
without a store in the last digits, as its chunks are cut elsewhere.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import numpy as np

from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.quantities import format_duration
from presage_scaler.backtest.baselines import DEFAULT_TRIGGER_UTILIZATION
from presage_scaler.backtest.config import DEFAULT_WARMUP, Overrides, make_backend, scaler_spec
from presage_scaler.backtest.memory import DEFAULT_MEMORY_BUDGET, Footprint
from presage_scaler.backtest.replay import decisions_per_chunk
from presage_scaler.backtest.runner import Plan, Progress, Setup, plan, run_oracle, run_reactive
from presage_scaler.backtest.scoring import measure as measure_simulation
from presage_scaler.backtest.scoring import shortfall
from presage_scaler.backtest.simulator import Simulation
from presage_scaler.backtest.trace import Trace
from presage_scaler.tune.chunk_reuse import ChunkedPass
from presage_scaler.tune.days import Days
from presage_scaler.tune.errors import HistoryTooShort
from presage_scaler.tune.forecast_cache import ForecastStore
from presage_scaler.tune.knobs import ForecasterKnobs, Knobs, knobs_of, require_tunable
from presage_scaler.tune.measure import Part, Served, measure
from presage_scaler.tune.prepared import Forecasts, forecast, points_read, shared_decisions
from presage_scaler.tune.replay import Decisions, in_force, ready, replay
from presage_scaler.tune.search import ALIKE, Figures, Slo, choose, rank, spells
from presage_scaler.tune.space import space_for
from presage_scaler.tune.split import Split, split
from presage_scaler.tune.trigger import UTILIZATIONS, trigger_counts


@dataclass(frozen=True)
class TuneSetup:
    """What to tune besides the trace."""

    spec: dict[str, Any] | None
    """The starting point: the user's spec (wire form), or None for the API's defaults; completed
    by ``overrides`` as ``presage backtest`` completes it (:func:`presage_scaler.backtest.config.scaler_spec`)."""
    overrides: Overrides
    backend: ForecastBackendSpec
    slo: Slo
    boot_delay: timedelta | None = None
    warmup: timedelta = DEFAULT_WARMUP
    holdout: timedelta | None = None
    """How much of the trace's end to hold out (default: :mod:`presage_scaler.tune.split`)."""
    jobs: int = 1
    """Processes that may forecast at once (this one included)."""
    memory_budget: int = DEFAULT_MEMORY_BUDGET
    """Bytes the run may take at its peak: one estimated to take more is refused before it forecasts
    (:mod:`presage_scaler.backtest.memory`)."""
    trigger_utilization: float = DEFAULT_TRIGGER_UTILIZATION
    """The seasonal trigger's target utilization as set (a fraction): reported beside the tuned one."""
    baselines: bool = True
    """Whether to replay the reactive HPA and the seasonal trigger beside the candidates: ``presage
    tune``'s table, files and report show them; ``presage advise`` writes neither into status.advice."""


@dataclass(frozen=True)
class Outcome:
    """A policy's figures over both parts of the trace."""

    in_sample: Figures
    held_out: Figures


@dataclass(frozen=True)
class Trial(Outcome):
    """One candidate: its knobs and its figures."""

    knobs: Knobs


@dataclass(frozen=True)
class TriggerTrial(Outcome):
    """The seasonal trigger at one target utilization (a fraction), on both parts."""

    utilization: float


@dataclass(frozen=True)
class TunedTrigger:
    """The seasonal trigger as set and tuned."""

    asked: TriggerTrial
    """At the utilization asked for (``TuneSetup.trigger_utilization``)."""
    trials: tuple[TriggerTrial, ...]
    """At every utilization of :data:`~presage_scaler.tune.trigger.UTILIZATIONS`, the highest first."""
    chosen: TriggerTrial
    """The cheapest trial that met the service level in-sample, or, when none did, the least
    under-provisioned one there (:func:`presage_scaler.tune.search.rank`), as presage's choice."""
    met: bool
    """Whether ``chosen`` met the service level in-sample."""


@dataclass(frozen=True)
class Baselines:
    """What a KEDA user would run instead, on both parts."""

    reactive: Outcome
    trigger: TunedTrigger


@dataclass(frozen=True)
class OracleHours:
    """The oracle's replica-hours over each part the figures are measured on."""

    in_sample: float
    held_out: float
    recent: float | None
    """Over the in-sample part's last RECENT; None when the part is no longer than that."""


@dataclass(frozen=True)
class TuneResult:
    """Everything a tuning run found."""

    trace: Trace
    split: Split
    slo: Slo
    base_wire: dict[str, Any]
    """The starting spec's wire form: the chosen spec is it with the chosen knobs set."""
    trials: tuple[Trial, ...]
    """Every candidate of the space, the starting spec first."""
    chosen: Trial
    baselines: Baselines | None
    """The reactive HPA's and the seasonal trigger's figures; None when tuned without them
    (:attr:`TuneSetup.baselines`)."""
    oracle: OracleHours
    plan: Plan
    """The starting spec's plan (schedule, warm-up, boot delay, per-replica capacity)."""
    forecasts: int
    """Forecasting passes made: one per forecaster setting that reads the history differently."""
    held_out_capacity: dict[str, np.ndarray]
    """Ready capacity over the held-out part of the chosen spec, the starting spec, and with the
    baselines, the reactive HPA and the tuned seasonal trigger (for the report)."""
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def reactive(self) -> Outcome:
        """The reactive HPA's figures (with the starting spec's headroom)."""
        return self._baselines().reactive

    @property
    def trigger(self) -> TunedTrigger:
        """The seasonal trigger at the utilization asked for and tuned on the in-sample part."""
        return self._baselines().trigger

    def _baselines(self) -> Baselines:
        if self.baselines is None:
            raise ValueError("this run was tuned without the baselines (TuneSetup.baselines)")
        return self.baselines

    @property
    def default(self) -> Trial:
        """The starting spec's trial."""
        return self.trials[0]

    @property
    def met(self) -> bool:
        """Whether the chosen spec met the service level in-sample."""
        return self.slo.met(self.chosen.in_sample)

    @property
    def alike(self) -> tuple[Trial, ...]:
        """The candidates replayed, the chosen one among them, that met the service level in-sample for
        at most ALIKE more replica-hours than the chosen one (none when it did not meet it), one per
        outcome (knobs that cannot differ on this trace replay alike). What they did held out is how
        far the chosen spec's own held-out figures could as well have landed: the part chosen on ranks
        them by a few percent, on the few spells in which they are short."""
        if not self.met:
            return ()
        limit = self.chosen.in_sample.replica_hours * (1 + ALIKE)
        outcomes: dict[tuple[Figures, Figures], Trial] = {}
        for trial in self.trials:
            if self.slo.met(trial.in_sample) and trial.in_sample.replica_hours <= limit:
                outcomes.setdefault((trial.in_sample, trial.held_out), trial)
        return tuple(outcomes.values())

    def chosen_spec(self) -> PredictiveScalerSpec:
        return self.chosen.knobs.spec(self.base_wire)


def _figures(plan: Plan, simulation: Simulation, begin: int, end: int, oracle_hours: float) -> Figures:
    """The figures of steps ``[begin, end)``."""
    upto = Simulation(desired=simulation.desired[:end], ready=simulation.ready[:end], first=simulation.first)
    metrics = measure_simulation(plan.trace.values[:end], upto, plan.per_replica, plan.trace.step, begin)
    short = shortfall(plan.trace.values[begin:end], simulation.ready[begin:end], plan.per_replica) > 0
    return Figures(
        under_pct=metrics.under_provisioned_pct,
        unserved_pct=metrics.unserved_pct,
        replica_hours=metrics.replica_hours,
        cost_vs_oracle=metrics.replica_hours / oracle_hours if oracle_hours > 0 else float("inf"),
        spells=spells(short),
        steps=end - begin,
    )


def outcome(plan: Plan, simulation: Simulation, parts: Split, oracle: OracleHours) -> Outcome:
    """A simulated policy's figures on both parts: in-sample with those of its last RECENT when it is
    longer than that (as a candidate's are measured), and held out."""
    in_sample = _figures(plan, simulation, parts.report_from, parts.held_out_from, oracle.in_sample)
    if parts.recent_from is not None and oracle.recent is not None:
        recent = _figures(plan, simulation, parts.recent_from, parts.held_out_from, oracle.recent)
        in_sample = replace(in_sample, recent=recent)
    return Outcome(in_sample, _figures(plan, simulation, parts.held_out_from, parts.end, oracle.held_out))


def _plan(
    trace: Trace, spec: PredictiveScalerSpec, setup: TuneSetup, backend: ForecastBackendSpec | None = None
) -> Plan:
    """The backtest's plan of ``spec`` with ``backend`` (default: the starting one)."""
    return plan(
        trace,
        Setup(
            spec=spec,
            backend=make_backend(backend or setup.backend),
            boot_delay=setup.boot_delay,
            warmup=setup.warmup,
            trigger_utilization=setup.trigger_utilization,
        ),
    )


def trigger_utilizations(asked: float) -> list[float]:
    """The utilizations the trigger is replayed at: UTILIZATIONS from the highest, and the one asked for
    when it is not among them."""
    grid = sorted(UTILIZATIONS, reverse=True)
    return grid if asked in grid else [*grid, asked]


def tuned_trigger(outcomes: Sequence[Outcome], utilizations: Sequence[float], asked: float, slo: Slo) -> TunedTrigger:
    """The trigger at each of ``utilizations`` (:func:`trigger_utilizations`), with its ``outcomes``,
    and the choice among those of UTILIZATIONS from their in-sample figures alone."""
    found = [TriggerTrial(o.in_sample, o.held_out, u) for o, u in zip(outcomes, utilizations, strict=True)]
    trials = tuple(trial for trial in found if trial.utilization in UTILIZATIONS)
    chosen = min(trials, key=lambda trial: rank(trial.in_sample, slo))
    return TunedTrigger(
        asked=next(trial for trial in found if trial.utilization == asked),
        trials=trials,
        chosen=chosen,
        met=slo.met(chosen.in_sample),
    )


def _outcomes(counts: np.ndarray, served: Served, parts: Sequence[Part]) -> list[Outcome]:
    """Per column of ``counts``, its figures on ``parts`` (in-sample, held out and, when there is a
    third, the in-sample part's last RECENT, :func:`outcome`)."""
    found = measure(counts, served, parts)
    recent = found[2] if len(found) > 2 else [None] * counts.shape[1]
    return [
        Outcome(replace(in_sample, recent=last), held_out)
        for in_sample, held_out, last in zip(found[0], found[1], recent, strict=True)
    ]


@dataclass(frozen=True)
class _PassWire:
    """A pass as it travels to a worker process: wire forms and plain values, which pickle; the models
    are parsed again there (:meth:`plan`)."""

    trace: Trace
    spec_wire: dict[str, Any]
    backend_wire: dict[str, Any]
    boot_delay: timedelta | None
    warmup: timedelta

    @classmethod
    def of(cls, trace: Trace, setup: TuneSetup, each: _Pass) -> _PassWire:
        return cls(
            trace=replace(trace, step=_plain(trace.step)),
            spec_wire=each.spec_wire,
            backend_wire=each.forecaster.backend_wire(),
            boot_delay=None if setup.boot_delay is None else _plain(setup.boot_delay),
            warmup=_plain(setup.warmup),
        )

    def plan(self) -> Plan:
        spec = parse(PredictiveScalerSpec, self.spec_wire, path="spec")
        backend = parse(ForecastBackendSpec, self.backend_wire, path="spec")
        return plan(self.trace, Setup(spec, make_backend(backend), self.boot_delay, self.warmup))


def _forecast_elsewhere(wire: _PassWire, levels: Sequence[float], skip: int) -> Forecasts:
    """:func:`forecast` in a worker process."""
    return forecast(wire.plan(), levels, skip)


def _forecast_runs_elsewhere(
    wire: _PassWire, levels: Sequence[float], runs: Sequence[tuple[int, int, int]], size: int
) -> list[Forecasts]:
    """:meth:`ChunkedPass.forecast` of each of ``runs`` (``range`` arguments) in a worker process."""
    the_plan = wire.plan()
    return [forecast(the_plan, levels, decisions=range(*run), chunk=size) for run in runs]


def _plain(span: timedelta) -> timedelta:
    """A duration as a plain ``timedelta``, which pickles (the API's exact durations do not)."""
    return timedelta(span.days, span.seconds, span.microseconds)


@dataclass(frozen=True)
class _Pass:
    """One forecaster setting's forecasting pass: its decisions from the ``skip``-th on; the earlier
    ones are ``reuse``'s, an earlier setting that differs only in a history none of them has outgrown."""

    forecaster: ForecasterKnobs
    spec_wire: dict[str, Any]
    plan: Plan
    skip: int = 0
    reuse: ForecasterKnobs | None = None


def _passes(
    trace: Trace,
    setup: TuneSetup,
    start: Knobs,
    base_wire: dict[str, Any],
    forecasters: Sequence[ForecasterKnobs],
    levels: Sequence[float],
) -> list[_Pass]:
    passes: list[_Pass] = []
    for forecaster in forecasters:
        wire = replace(start, forecaster=forecaster).spec_wire(base_wire)
        the_plan = _plan(trace, parse(PredictiveScalerSpec, wire, path="spec"), setup, forecaster.backend_spec())
        found = _Pass(forecaster, wire, the_plan)
        total = len(the_plan.schedule.decisions(len(trace)))
        # The feed forecasts its decisions in chunks that must be the same as the whole run's: a
        # chunk's numbers depend on the order of additions over its members' histories.
        chunk = decisions_per_chunk(
            the_plan.spec, the_plan.signal_spec, the_plan.lead.value, the_plan.backend.max_horizon, levels
        )
        for earlier in passes:
            if (earlier.forecaster.season, earlier.forecaster.cycles) != (forecaster.season, forecaster.cycles):
                continue
            shared = shared_decisions(the_plan, points_read(the_plan), points_read(earlier.plan))
            skip = shared if shared == total else shared // chunk * chunk
            if skip > found.skip:
                found = replace(found, skip=skip, reuse=earlier.forecaster)
        passes.append(found)
    return passes


def _forecast(
    trace: Trace, setup: TuneSetup, passes: Sequence[_Pass], levels: Sequence[float], progress: Progress | None
) -> dict[ForecasterKnobs, Forecasts]:
    """Every pass's forecasts, the first in this process and the others in ``setup.jobs - 1`` workers."""
    made: dict[ForecasterKnobs, Forecasts] = {}
    pending: dict[ForecasterKnobs, Future[Forecasts]] = {}
    workers = min(len(passes) - 1, setup.jobs - 1)
    with contextlib.ExitStack() as stack:
        if workers > 0:
            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
            stack.callback(pool.shutdown, cancel_futures=True)
            for later in passes[1:]:
                wire = _PassWire.of(trace, setup, later)
                pending[later.forecaster] = pool.submit(_forecast_elsewhere, wire, tuple(levels), later.skip)
        for each in passes:
            if each.forecaster in pending:
                numbers = pending.pop(each.forecaster).result()
            else:
                total = len(each.plan.schedule.decisions(len(trace))) - each.skip
                report = None if progress is None else _reporter(progress, each.forecaster.label, total)
                numbers = forecast(each.plan, levels, each.skip, report)
            made[each.forecaster] = numbers if each.reuse is None else made[each.reuse].head(each.skip).then(numbers)
    return made


def _forecast_stored(
    trace: Trace,
    setup: TuneSetup,
    passes: Sequence[_Pass],
    levels: Sequence[float],
    days: Days,
    store: ForecastStore,
    progress: Progress | None,
) -> dict[ForecasterKnobs, Forecasts]:
    """Every pass's forecasts, chunk by chunk, taking what ``store`` holds and putting what is made there;
    the first pass's missing chunks in this process, the others' in ``setup.jobs - 1`` workers."""
    chunked = [ChunkedPass.of(each.plan, each.forecaster.backend_wire(), levels, days) for each in passes]
    pending: dict[int, tuple[list[range], Future[list[Forecasts]]]] = {}
    workers = min(len(passes) - 1, setup.jobs - 1)
    with contextlib.ExitStack() as stack:
        if workers > 0:
            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
            stack.callback(pool.shutdown, cancel_futures=True)
            for index in range(1, len(passes)):
                if runs := chunked[index].missing(store):
                    wire = _PassWire.of(trace, setup, passes[index])
                    ranges = [(run.start, run.stop, run.step) for run in runs]
                    future = pool.submit(_forecast_runs_elsewhere, wire, tuple(levels), ranges, chunked[index].size)
                    pending[index] = (runs, future)
        made: dict[ForecasterKnobs, Forecasts] = {}
        for index, (each, cut) in enumerate(zip(passes, chunked, strict=True)):
            if index in pending:
                runs, future = pending.pop(index)
                numbers = future.result()
            else:
                runs = cut.missing(store)  # after the passes before put theirs: a shared chunk is made once
                numbers = _forecast_runs(cut, runs, progress, each.forecaster.label)
            for run, found in zip(runs, numbers, strict=True):
                cut.fill(store, run, found)
            made[each.forecaster] = cut.assemble(store)
    return made


def _forecast_runs(cut: ChunkedPass, runs: Sequence[range], progress: Progress | None, label: str) -> list[Forecasts]:
    """``runs`` of ``cut`` forecast here, reporting them as one."""
    total, done, found = sum(len(run) for run in runs), 0, []
    for run in runs:
        report = None if progress is None else _reporter(progress, label, total, done)
        found.append(cut.forecast(run, report))
        done += len(run)
    return found


def _reporter(progress: Progress, label: str, total: int, before: int = 0) -> Callable[[int], None]:
    return lambda done: progress(f"forecasting {label}", before + done, total)


def _prefix(trace: Trace, steps: int) -> Trace:
    return replace(trace, values=trace.values[:steps], gaps=trace.gaps[:steps])


def _require_past_warmup(trace: Trace, warmup: timedelta) -> None:
    """A history no longer than the warm-up is one that has not recorded enough yet, as one too short to
    hold out a part is: :class:`HistoryTooShort`, which ``presage advise`` counts as waiting, not failed
    (a scaler advised by default from its first day would otherwise fail every run of its first week)."""
    if len(trace) * trace.step <= warmup:
        raise HistoryTooShort(
            f"the history ({format_duration(len(trace) * trace.step)}) is not longer than the warm-up "
            f"({format_duration(warmup)}): give a longer trace or a shorter --warmup"
        )


def _oracle_hours(before_plan: Plan, base_plan: Plan, parts: Split) -> OracleHours:
    """The oracle's replica-hours on each part; in-sample from ``before_plan``, the plan of the trace
    before the held-out part, so that nothing in-sample is derived from it."""
    oracle_before = run_oracle(before_plan)
    return OracleHours(
        in_sample=_figures(before_plan, oracle_before, parts.report_from, parts.held_out_from, 1.0).replica_hours,
        held_out=_figures(base_plan, run_oracle(base_plan), parts.held_out_from, parts.end, 1.0).replica_hours,
        recent=None
        if parts.recent_from is None
        else _figures(before_plan, oracle_before, parts.recent_from, parts.held_out_from, 1.0).replica_hours,
    )


def tune(
    trace: Trace, setup: TuneSetup, progress: Progress | None = None, store: ForecastStore | None = None
) -> TuneResult:
    """Replay every candidate of the space (:mod:`presage_scaler.tune.space`), choose one from their
    in-sample figures (:func:`presage_scaler.tune.search.choose`), and report every candidate on both
    parts. One call tunes one scaler, from its trace and starting spec; :func:`presage_scaler.tune.verdict.advise`
    says what to do with the result.

    Nothing in-sample is derived from the held-out part: the starting spec's defaults that come from
    the trace (maxReplicas) and the oracle the in-sample cost is measured against see only the trace
    before it.

    ``store``: forecasts to take where they are the ones this run makes, and where those it makes go
    (module docstring); ignored for a trace whose steps are off the clock's grid."""
    require_tunable(setup.backend)
    _require_past_warmup(trace, setup.warmup)
    began = time.perf_counter()
    # Where the warm-up ends depends on the spec's resolution, not on anything the trace sets.
    provisional = scaler_spec(trace, setup.spec, setup.overrides)
    parts = split(len(trace), trace.start, trace.step, _plan(trace, provisional, setup).report_from, setup.holdout)
    before = _prefix(trace, parts.held_out_from)
    spec = scaler_spec(before, setup.spec, setup.overrides)
    base_plan = _plan(trace, spec, setup)
    start = knobs_of(spec, setup.backend)
    base_wire = spec.to_wire()
    hours = _oracle_hours(_plan(before, spec, setup), base_plan, parts)
    utilizations = trigger_utilizations(setup.trigger_utilization)
    space = space_for(start, base_plan)
    candidates = space.candidates(start)
    decided = len(base_plan.schedule.decisions(len(trace)))
    replayed = len(candidates) + len(utilizations)
    Footprint(len(trace), trace.step, setup.jobs, decided, replayed).check(setup.memory_budget)
    passes = _passes(trace, setup, start, base_wire, space.forecasters, space.dial)
    if store is not None and (days := Days.of(trace)) is not None:
        forecasts = _forecast_stored(trace, setup, passes, space.dial, days, store, progress)
    else:
        forecasts = _forecast(trace, setup, passes, space.dial, progress)
    seconds = {"forecasting": time.perf_counter() - began}

    replaying = time.perf_counter()
    schedule = base_plan.schedule
    steps = schedule.decisions(len(trace))
    decisions = Decisions(
        steps, base_plan.observed[np.asarray(steps)], base_plan.per_replica, trace.step, base_plan.initial
    )
    report = None if progress is None else (lambda done: progress("replaying", done, len(steps)))
    # Only the counts in force from the lead before the first step measured on are kept.
    kept_from = max(0, (parts.report_from - schedule.lead - schedule.first) // schedule.every)
    counts = replay(candidates, forecasts, spec.policy, decisions, kept_from, report)
    served = Served(trace.values, base_plan.per_replica, trace.step, schedule, base_plan.initial, kept_from)
    measured = [
        Part(parts.report_from, parts.held_out_from, hours.in_sample),
        Part(parts.held_out_from, parts.end, hours.held_out),
    ]
    if parts.recent_from is not None and hours.recent is not None:
        measured.append(Part(parts.recent_from, parts.held_out_from, hours.recent))
    trials = tuple(
        Trial(knobs=knobs, in_sample=found.in_sample, held_out=found.held_out)
        for knobs, found in zip(candidates, _outcomes(counts, served, measured), strict=True)
    )
    chosen = candidates.index(choose([(t.knobs, t.in_sample) for t in trials], start, setup.slo))

    def held_out_capacity(replayed: np.ndarray, column: int) -> np.ndarray:
        begin = parts.held_out_from - schedule.lead
        desired = in_force(replayed[:, [column]], schedule, base_plan.initial, begin, parts.end, kept_from)
        return ready(desired, schedule.lead)[0] * base_plan.per_replica

    capacity = {"chosen": held_out_capacity(counts, chosen), "starting spec": held_out_capacity(counts, 0)}
    baselines = None
    if setup.baselines:
        reactive = run_reactive(base_plan, base_plan.reactive_headroom)
        triggered = trigger_counts(base_plan, utilizations, kept_from)
        outcomes = _outcomes(triggered, served, measured)
        trigger = tuned_trigger(outcomes, utilizations, setup.trigger_utilization, setup.slo)
        baselines = Baselines(outcome(base_plan, reactive, parts, hours), trigger)
        capacity["reactive HPA"] = reactive.ready[parts.held_out_from : parts.end] * base_plan.per_replica
        tuned = utilizations.index(trigger.chosen.utilization)
        capacity["seasonal trigger, tuned"] = held_out_capacity(triggered, tuned)
    seconds["replaying"] = time.perf_counter() - replaying
    seconds["total"] = time.perf_counter() - began
    return TuneResult(
        trace=trace,
        split=parts,
        slo=setup.slo,
        base_wire=base_wire,
        trials=trials,
        chosen=trials[chosen],
        baselines=baselines,
        oracle=hours,
        plan=base_plan,
        forecasts=sum(1 for each in passes if each.skip < len(steps)),
        held_out_capacity=capacity,
        seconds=seconds,
    )
