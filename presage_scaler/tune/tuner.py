"""A whole tuning run: plan, split, baselines, the search, and every candidate's figures.

The trace is planned as ``presage backtest`` plans it (:func:`presage_scaler.backtest.runner.plan`),
so the schedule, the warm-up, the boot delay and the oracle are the backtest's. Each candidate is
replayed over the whole trace once; its in-sample figures go to the search, its held-out figures
are kept aside and only read once the search has chosen (:mod:`presage_scaler.tune.search`).

The other forecaster settings the search will try are forecast in worker processes while it works
on the starting one (``jobs``); with one job everything runs in this process, with the same result.
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
from presage_scaler.backtest.config import DEFAULT_WARMUP, Overrides, make_backend, scaler_spec
from presage_scaler.backtest.metrics import measure, shortfall
from presage_scaler.backtest.runner import Plan, Progress, Setup, plan, run_oracle, run_reactive
from presage_scaler.backtest.simulator import Simulation
from presage_scaler.backtest.trace import Trace
from presage_scaler.tune.errors import TuneError
from presage_scaler.tune.knobs import ForecasterKnobs, Knobs, knobs_of
from presage_scaler.tune.prepared import Forecasts, Prepared, forecast, prepare
from presage_scaler.tune.replay import replay
from presage_scaler.tune.search import Figures, Searcher, Slo, search, spells
from presage_scaler.tune.space import space_for
from presage_scaler.tune.split import Split, split


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


@dataclass(frozen=True)
class Outcome:
    """A policy's figures over both parts of the trace."""

    in_sample: Figures
    held_out: Figures


@dataclass(frozen=True)
class Trial(Outcome):
    """One candidate: its knobs and its figures."""

    knobs: Knobs


ALIKE = 0.05
"""Candidates that met the service level in-sample for at most this share more replica-hours than the
chosen one are reported beside it (:attr:`TuneResult.alike`)."""


@dataclass(frozen=True)
class TuneResult:
    """Everything a tuning run found."""

    trace: Trace
    split: Split
    slo: Slo
    base_wire: dict[str, Any]
    """The starting spec's wire form: the chosen spec is it with the chosen knobs set."""
    trials: tuple[Trial, ...]
    """Every candidate replayed, in the order it was tried; the first is the starting spec."""
    chosen: Trial
    reactive: Outcome
    """The reactive HPA's figures (with the starting spec's headroom)."""
    plan: Plan
    """The starting spec's plan (schedule, warm-up, boot delay, per-replica capacity)."""
    forecasts: int
    """Forecasting passes made: one per forecaster setting tried."""
    held_out_capacity: dict[str, np.ndarray]
    """Ready capacity over the held-out part of the chosen spec, the starting spec and the reactive
    HPA (for the report)."""
    seconds: dict[str, float] = field(default_factory=dict)

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
    metrics = measure(plan.trace.values[:end], upto, plan.per_replica, plan.trace.step, begin)
    short = shortfall(plan.trace.values[begin:end], simulation.ready[begin:end], plan.per_replica) > 0
    return Figures(
        under_pct=metrics.under_provisioned_pct,
        unserved_pct=metrics.unserved_pct,
        replica_hours=metrics.replica_hours,
        cost_vs_oracle=metrics.replica_hours / oracle_hours if oracle_hours > 0 else float("inf"),
        spells=spells(short),
        steps=end - begin,
    )


@dataclass(frozen=True)
class OracleHours:
    """The oracle's replica-hours over each part the figures are measured on."""

    in_sample: float
    held_out: float
    recent: float | None
    """Over the in-sample part's last RECENT; None when the part is no longer than that."""


def _in_sample(plan: Plan, simulation: Simulation, parts: Split, oracle: OracleHours) -> Figures:
    """The in-sample figures, with those of its last RECENT when it is longer than that."""
    figures = _figures(plan, simulation, parts.report_from, parts.held_out_from, oracle.in_sample)
    if parts.recent_from is None or oracle.recent is None:
        return figures
    recent = _figures(plan, simulation, parts.recent_from, parts.held_out_from, oracle.recent)
    return replace(figures, recent=recent)


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
        ),
    )


def _forecast_elsewhere(
    trace: Trace,
    spec_wire: dict[str, Any],
    backend_wire: dict[str, Any],
    boot_delay: timedelta | None,
    warmup: timedelta,
    levels: Sequence[float],
) -> Forecasts:
    """:func:`forecast` in a worker process: wire forms and plain values travel, the models are
    parsed again there."""
    spec = parse(PredictiveScalerSpec, spec_wire, path="spec")
    backend = parse(ForecastBackendSpec, backend_wire, path="spec")
    return forecast(plan(trace, Setup(spec, make_backend(backend), boot_delay, warmup)), levels)


def _plain(span: timedelta) -> timedelta:
    """A duration as a plain ``timedelta``, which pickles (the API's exact durations do not)."""
    return timedelta(span.days, span.seconds, span.microseconds)


@dataclass
class _Candidates:
    """Replays candidates, forecasting each forecaster setting once, and keeps every trial."""

    trace: Trace
    setup: TuneSetup
    base_wire: dict[str, Any]
    parts: Split
    oracle: OracleHours
    levels: Sequence[float]
    progress: Progress | None
    pending: dict[ForecasterKnobs, Future[Forecasts]] = field(default_factory=dict)
    trials: dict[Knobs, Trial] = field(default_factory=dict)
    prepared: dict[ForecasterKnobs, Prepared] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=lambda: {"forecasting": 0.0, "replaying": 0.0})

    def start(self, pool: ProcessPoolExecutor, forecasters: Sequence[ForecasterKnobs], template: Knobs) -> None:
        """Forecast ``forecasters`` in ``pool`` while this process goes on."""
        trace = replace(self.trace, step=_plain(self.trace.step))
        boot_delay = None if self.setup.boot_delay is None else _plain(self.setup.boot_delay)
        for forecaster in forecasters:
            self.pending[forecaster] = pool.submit(
                _forecast_elsewhere,
                trace,
                replace(template, forecaster=forecaster).spec_wire(self.base_wire),
                forecaster.backend_wire(),
                boot_delay,
                _plain(self.setup.warmup),
                tuple(self.levels),
            )

    def _prepared(self, knobs: Knobs) -> Prepared:
        forecaster = knobs.forecaster
        if forecaster not in self.prepared:
            began = time.perf_counter()
            the_plan = _plan(self.trace, knobs.spec(self.base_wire), self.setup, forecaster.backend_spec())
            if forecaster in self.pending:
                numbers = self.pending.pop(forecaster).result()
            else:
                decisions = len(the_plan.schedule.decisions(len(self.trace)))
                report = None if self.progress is None else _reporter(self.progress, forecaster.label, decisions)
                numbers = forecast(the_plan, self.levels, report)
            self.prepared[forecaster] = prepare(the_plan, numbers)
            self.seconds["forecasting"] += time.perf_counter() - began
        return self.prepared[forecaster]

    def simulation(self, knobs: Knobs) -> Simulation:
        """Replay ``knobs`` over the whole trace."""
        simulation, _ = replay(self._prepared(knobs), knobs.spec(self.base_wire))
        return simulation

    def in_sample(self, knobs: Knobs) -> Figures:
        """Replay ``knobs``; the search sees only the in-sample figures."""
        prepared = self._prepared(knobs)
        began = time.perf_counter()
        simulation = self.simulation(knobs)
        parts, the_plan = self.parts, prepared.plan
        self.trials[knobs] = Trial(
            knobs=knobs,
            in_sample=_in_sample(the_plan, simulation, parts, self.oracle),
            held_out=_figures(the_plan, simulation, parts.held_out_from, parts.end, self.oracle.held_out),
        )
        self.seconds["replaying"] += time.perf_counter() - began
        return self.trials[knobs].in_sample


def _reporter(progress: Progress, label: str, total: int) -> Callable[[int], None]:
    return lambda done: progress(f"forecasting {label}", done, total)


def _prefix(trace: Trace, steps: int) -> Trace:
    return replace(trace, values=trace.values[:steps], gaps=trace.gaps[:steps])


def tune(trace: Trace, setup: TuneSetup, progress: Progress | None = None, searcher: Searcher = search) -> TuneResult:
    """Search the knobs (:mod:`presage_scaler.tune.space`) for the cheapest spec meeting ``setup.slo``
    in-sample, and report every candidate on both parts. ``searcher`` is what moves through the space
    (a benchmark swaps in an exhaustive one to measure what the search misses).

    Nothing in-sample is derived from the held-out part: the starting spec's defaults that come from
    the trace (maxReplicas) and the oracle the in-sample cost is measured against see only the trace
    before it."""
    if setup.backend.type != "SeasonalNaive":  # the search tunes SeasonalNaive's settings, scored by its hindcasts
        raise TuneError(
            f"presage tune needs a backend that answers hindcasts (SeasonalNaive); a {setup.backend.type} "
            "backend does not"
        )
    began = time.perf_counter()
    # Where the warm-up ends depends on the spec's resolution, not on anything the trace sets.
    provisional = scaler_spec(trace, setup.spec, setup.overrides)
    parts = split(len(trace), trace.start, trace.step, _plan(trace, provisional, setup).report_from, setup.holdout)
    before = _prefix(trace, parts.held_out_from)
    spec = scaler_spec(before, setup.spec, setup.overrides)
    base_plan = _plan(trace, spec, setup)
    base = knobs_of(spec, setup.backend)
    base_wire = spec.to_wire()
    before_plan = _plan(before, spec, setup)
    oracle_before = run_oracle(before_plan)
    hours = OracleHours(
        in_sample=_figures(before_plan, oracle_before, parts.report_from, parts.held_out_from, 1.0).replica_hours,
        held_out=_figures(base_plan, run_oracle(base_plan), parts.held_out_from, parts.end, 1.0).replica_hours,
        recent=None
        if parts.recent_from is None
        else _figures(before_plan, oracle_before, parts.recent_from, parts.held_out_from, 1.0).replica_hours,
    )
    reactive = run_reactive(base_plan, base_plan.reactive_headroom)
    space = space_for(base, spec, trace)
    candidates = _Candidates(trace, setup, base_wire, parts, hours, space.dial, progress)
    others = [f for f in space.forecasters if f != base.forecaster]
    workers = min(len(others), setup.jobs - 1)
    with contextlib.ExitStack() as stack:
        if workers > 0:
            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
            stack.callback(pool.shutdown, cancel_futures=True)
            candidates.start(pool, others, base)
        chosen = searcher(base, space.dial, space.dimensions, candidates.in_sample, setup.slo, progress)
    held_out = slice(parts.held_out_from, parts.end)
    capacity = {
        "chosen": candidates.simulation(chosen).ready[held_out] * base_plan.per_replica,
        "starting spec": candidates.simulation(base).ready[held_out] * base_plan.per_replica,
        "reactive HPA": reactive.ready[held_out] * base_plan.per_replica,
    }
    seconds = {**candidates.seconds, "total": time.perf_counter() - began}
    return TuneResult(
        trace=trace,
        split=parts,
        slo=setup.slo,
        base_wire=base_wire,
        trials=tuple(candidates.trials.values()),
        chosen=candidates.trials[chosen],
        reactive=Outcome(
            in_sample=_in_sample(base_plan, reactive, parts, hours),
            held_out=_figures(base_plan, reactive, parts.held_out_from, parts.end, hours.held_out),
        ),
        plan=base_plan,
        forecasts=len(candidates.prepared),
        held_out_capacity=capacity,
        seconds=seconds,
    )
