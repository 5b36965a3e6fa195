"""A scaler's life on a simulated clock, through production's code: what ``benchmarks/bench_lifecycle.py``
replays on each trace.

The simulated cluster holds one PredictiveScaler as the API server would (its spec, ``metadata.generation``
and ``status.advice``, in wire form) and the ForecastBackends by name. Time is the trace's; pods are the
backtest's (:func:`presage_scaler.backtest.simulator.simulate`): the life is one simulated policy, whose
live spec is whatever the stored spec is at each decision. At each decision, in production's order:

1. **presage advise**, when a run is due: the advise CronJob runs every :data:`ADVISOR_PERIOD` and advises
   the scaler when :func:`presage_scaler.tune.in_cluster_advisor.due` says so (never advised, its spec
   changed, its last attempt failed, or ``spec.advice.every`` has passed). It reads the signal over
   ``spec.advice.lookback`` before now and the history before it that the lookback's decisions read
   (:func:`presage_scaler.tune.in_cluster_advisor.read_span_of`; the trace up to the last complete
   point) and turns it into
   ``status.advice`` with :func:`presage_scaler.tune.in_cluster_advisor.advice_from`, the function a run
   in the cluster calls after its reads; the body is merged into ``status.advice`` as presage advise's
   merge patch is; a failed attempt writes its error (:func:`presage_scaler.tune.advice_body.failed_status`).
2. **the controller's evaluation** of the live spec (production's decision through
   :class:`presage_scaler.backtest.replay.PresagePolicy`, from the current count and the policy state the
   status carries, across spec changes), its shadow scores (:class:`presage_scaler.engine.shadow.ShadowLedger`),
   the advised spec decided beside it and scored (:func:`presage_scaler.controller.live_advice.observe_advice`),
   and what the evaluation writes of it (:func:`~presage_scaler.controller.live_advice.live_fields`,
   :func:`presage_scaler.controller.advice_apply.counted`);
3. **apply and roll back** (``spec.advice.apply: WhenProven``) as
   :meth:`presage_scaler.controller.advice_apply.AdviceApplier.act` decides, by its rules
   (:func:`~presage_scaler.controller.advice_apply.rollback_reason`, ``watching``, ``apply_plan``,
   ``restore_patch``, ``failed_live``): a spec patch raises the generation, and the next decision is the
   patched spec's.

The advisor is a parameter (:data:`Advisor`) so that the bookkeeping can be tested on a short trace
without tuning; the benchmark always runs production's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from presage_scaler.api.advice_patch import merge_patch
from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.predictive_scaler_status import AdviceApplied, AdviceStatus
from presage_scaler.api.quantities import format_duration
from presage_scaler.backtest.config import make_backend
from presage_scaler.backtest.replay import PresagePolicy, forecaster_for
from presage_scaler.backtest.runner import Plan, Setup, plan
from presage_scaler.backtest.simulator import Simulation, simulate
from presage_scaler.backtest.trace import Trace
from presage_scaler.controller.advice_apply import (
    Apply,
    Refusal,
    apply_plan,
    applying,
    counted,
    failed_live,
    restore_patch,
    rollback_reason,
    watching,
)
from presage_scaler.controller.live_advice import AdvisedSpecs, live_fields, observe_advice
from presage_scaler.engine.shadow import ShadowLedger
from presage_scaler.series.timegrid import align_down, steps_for
from presage_scaler.tune.advice_body import failed_status
from presage_scaler.tune.errors import HistoryTooShort
from presage_scaler.tune.in_cluster_advisor import AdviseOptions, advice_from, advice_spec, due, read_span_of

ADVISOR_PERIOD = timedelta(hours=1)
"""How often presage advise runs: the chart's ``advise.schedule`` (hourly)."""
NAMESPACE, NAME = "bench", "life"
WAITING = "WaitingForHistory"
"""An attempt that failed for want of history (:class:`~presage_scaler.tune.errors.HistoryTooShort`), which
presage advise counts as waiting rather than failed; any other failure is ``AdviceFailed``."""

Advisor = Callable[[Trace, dict[str, Any], dict[str, Any], datetime], dict[str, Any]]
"""What presage advise writes into ``status.advice`` for the scaler object (wire form) whose signal's
history recorded so far is the trace and whose ForecastBackend's spec is the dict, at the time given;
raises when the attempt fails."""


def production_advisor(options: AdviseOptions) -> Advisor:
    """presage advise's own read of a history and turn of it into ``status.advice``, with ``options`` (the
    run's flags)."""

    def advisor(recorded: Trace, obj: dict[str, Any], backend: dict[str, Any], now: datetime) -> dict[str, Any]:
        span = read_span_of(obj, backend, options.warmup)
        body, _ = advice_from(history_before(recorded, len(recorded), span), obj, backend, options, now)
        return body

    return advisor


@dataclass(frozen=True)
class Event:
    """Something the life did: an advice written (its verdict), a live verdict earned, an apply, a
    rollback, a refusal."""

    at: datetime
    what: str
    detail: str = ""
    same: str | None = None
    """What tells this event from the one before of the same kind (an advice's patch)."""


@dataclass
class Cluster:
    """What the API server holds: the PredictiveScaler (wire form) and the ForecastBackends' specs by name."""

    obj: dict[str, Any]
    backends: dict[str, dict[str, Any]]
    _advice: AdviceStatus | None = field(default=None, init=False, repr=False)
    _parsed: bool = field(default=False, init=False, repr=False)

    @classmethod
    def holding(cls, spec: dict[str, Any], backend: dict[str, Any]) -> Cluster:
        """A new scaler with the stored spec ``spec`` whose ForecastBackend ``default`` is ``backend``."""
        metadata = {"namespace": NAMESPACE, "name": NAME, "generation": 1, "resourceVersion": "1"}
        return cls({"metadata": metadata, "spec": spec, "status": {}}, {"default": backend})

    @property
    def generation(self) -> int:
        return int(self.obj["metadata"]["generation"])

    @property
    def spec(self) -> dict[str, Any]:
        return dict(self.obj["spec"])

    def backend_of(self, spec: PredictiveScalerSpec) -> dict[str, Any]:
        """The spec of the ForecastBackend ``spec`` refers to."""
        return self.backends[(spec.forecast.backend_ref if spec.forecast else None) or "default"]

    def advice(self) -> AdviceStatus | None:
        """``status.advice``, parsed (once per change)."""
        if not self._parsed:
            wire = self.obj["status"].get("advice")
            self._advice = None if wire is None else AdviceStatus.model_validate(wire)
            self._parsed = True
        return self._advice

    def patch_advice(self, fields: dict[str, Any]) -> None:
        """Merge ``fields`` into ``status.advice`` (a JSON merge patch)."""
        if fields:
            status = self.obj["status"]
            status["advice"] = merge_patch(status.get("advice") or {}, fields)
            self._parsed = False

    def patch_spec(self, changes: dict[str, Any]) -> None:
        """Merge ``changes`` into the spec: a new generation."""
        self.obj["spec"] = merge_patch(self.obj["spec"], changes)
        self.obj["metadata"]["generation"] += 1


def history_before(trace: Trace, step: int, span: timedelta) -> Trace:
    """The signal over ``span`` before trace step ``step``, up to the last complete point: what a read at
    ``step`` returns."""
    begin = max(0, step - steps_for(span, trace.step))
    return replace(trace, values=trace.values[begin:step], gaps=trace.gaps[begin:step], start=trace.time_at(begin))


@dataclass(frozen=True)
class Life:
    """What the scaler did over the trace: its pods, and what happened to its advice."""

    simulation: Simulation
    events: tuple[Event, ...]
    start: datetime
    advice_runs: int
    """presage advise's attempts (each tunes, unless it fails before)."""

    def first(self, what: str) -> datetime | None:
        return next((event.at for event in self.events if event.what == what), None)

    def day(self, at: datetime | None) -> float | None:
        """Days from the start of the trace to ``at``."""
        return None if at is None else (at - self.start) / timedelta(days=1)


class Lifecycle:
    """The life as one simulated policy (module docstring); :func:`live` runs it."""

    def __init__(self, trace: Trace, start: Plan, cluster: Cluster, advisor: Advisor, loop: asyncio.Runner) -> None:
        self._trace = trace
        self._plan = start
        self._cluster = cluster
        self._advisor = advisor
        self._loop = loop
        self._clock0 = align_down(trace.start, start.signal_spec.resolution)
        self._shadow = ShadowLedger()
        self._advised_specs = AdvisedSpecs()
        self._next_run = trace.start + ADVISOR_PERIOD
        self._previous: datetime | None = None
        self._generation = 0
        self._spec = start.spec
        self._track: PresagePolicy | None = None
        self.events: list[Event] = []
        self.advice_runs = 0

    def _now(self, step: int) -> datetime:
        return self._clock0 + step * self._trace.step

    def decide(self, step: int, current: int) -> int:
        """One decision (module docstring): presage advise when due, the evaluation, then apply or roll back."""
        now = self._now(step)
        if now >= self._next_run:
            self._next_run += ADVISOR_PERIOD * ((now - self._next_run) // ADVISOR_PERIOD + 1)
            self._advise(step, now)
        replicas = self._evaluate(step, current, now)
        self._act(now.replace(microsecond=0))
        self._previous = now
        return replicas

    def _advise(self, step: int, now: datetime) -> None:
        """One run of presage advise over the scaler (Advisor.run's steps for one object)."""
        settings = advice_spec(self._cluster.obj)
        if settings is None or not due(self._cluster.obj, settings.every, now):
            return
        self.advice_runs += 1
        recorded = history_before(self._trace, step, step * self._trace.step)
        backend = self._cluster.backend_of(self._spec)
        try:
            body = self._advisor(recorded, self._cluster.obj, backend, now)
        except Exception as exc:  # as presage advise: one failed attempt writes its error
            self._cluster.patch_advice(failed_status(str(exc)[:1024], now))
            self._note(now, WAITING if isinstance(exc, HistoryTooShort) else "AdviceFailed", str(exc))
            return
        self._cluster.patch_advice(body)
        patch = body.get("patch")
        self._note(now, str(body["verdict"]), body.get("message") or "", same=patch)

    def _note(self, at: datetime, what: str, detail: str, *, same: str | None = None) -> None:
        """Record an event, once per run of the same: the same ``what`` and ``same`` (an advice repeated
        daily, or attempts failing hourly, are one event)."""
        if not self.events or (self.events[-1].what, self.events[-1].same) != (what, same):
            self.events.append(Event(at, what, detail, same))

    def _live_track(self, step: int) -> PresagePolicy:
        """The live spec's decisions from ``step``: rebuilt when the stored spec changed, from the policy
        state the status carries."""
        if self._track is not None and self._generation == self._cluster.generation:
            return self._track
        spec = parse(PredictiveScalerSpec, self._cluster.spec, path="spec")
        backend = make_backend(parse(ForecastBackendSpec, self._cluster.backend_of(spec), path="spec"))
        replanned = plan(self._trace, Setup(spec=spec, backend=backend, warmup=self._plan.warmup))
        if replanned.schedule != self._plan.schedule or replanned.ratio != self._plan.ratio:
            raise ValueError(
                f"the spec changed the decisions' schedule: {replanned.schedule} from {self._plan.schedule}"
            )
        state = self._track.state if self._track is not None else None
        self._track = PresagePolicy(
            spec=replanned.spec,
            signal_spec=replanned.signal_spec,
            signal=replanned.signal,
            ratio=replanned.ratio,
            backend=replanned.backend,
            forecaster=forecaster_for(replanned.backend, self._loop),
            lead=replanned.lead,
            decisions=range(step, len(self._trace), self._plan.schedule.every),
            start=self._trace.start,
            step=self._trace.step,
        )
        if state is not None:
            self._track.state = state
        self._spec, self._generation = replanned.spec, self._cluster.generation
        return self._track

    def _evaluate(self, step: int, current: int, now: datetime) -> int:
        """The controller's evaluation (ScalerReconciler._evaluate and the status it writes)."""
        track = self._live_track(step)
        replicas = track.decide(step, current)
        recommendation = track.last
        assert recommendation is not None
        scores = self._shadow.observe(recommendation, self._spec.policy)
        advice = self._cluster.advice()
        live = self._loop.run(
            observe_advice(
                self._spec,
                self._cluster.spec,
                advice,
                recommendation,
                current,
                track.backend,
                None,
                NAME,
                specs=self._advised_specs,
            )
        )
        fields = live_fields(advice, live).get("advice", {})
        counts = counted(advice, scores, self._spec, self._cluster.generation, now)
        self._cluster.patch_advice({**fields, **(counts or {})})
        if live is not None and live.transition is not None:
            ledger = live.ledger
            self._note(
                now,
                live.transition,
                f"{ledger.under_provisioned:.2f} % of {ledger.samples} moments short, saving {ledger.saving}",
                same=ledger.digest,
            )
        return replicas

    def _act(self, now: datetime) -> None:
        """AdviceApplier.act: roll back a watched apply that missed, or apply a Proven advice."""
        settings = applying(self._spec)
        advice = self._cluster.advice()
        if settings is None or advice is None:
            return
        generation, applied = self._cluster.generation, advice.applied
        if applied is not None and applied.generation == generation:
            reason = rollback_reason(applied, settings, self._spec.interval, now, self._previous)
            if reason is not None:
                self._roll_back(advice, applied, reason, now)
                return
        if watching(applied, generation, now, settings.every):
            return
        found = apply_plan(advice, generation, self._cluster.spec)
        if isinstance(found, Refusal):
            self._note(now, "NotApplied", found.message)
        elif isinstance(found, Apply):
            self._apply(found, now)

    def _apply(self, found: Apply, now: datetime) -> None:
        if found.backend is not None:
            wire = {
                "type": "SeasonalNaive",
                "seasonalNaive": {"season": format_duration(found.backend.season), "cycles": found.backend.cycles},
            }
            self._cluster.backends.setdefault(found.backend.name, wire)
        restore = {"spec": restore_patch(self._cluster.spec, found.changes)}
        self._cluster.patch_spec(found.changes)
        record = AdviceApplied(
            generation=self._cluster.generation,
            patch=found.patch,
            restore=json.dumps(restore, separators=(",", ":"), sort_keys=True),
            time=now,
            samples=0,
            misses=0,
        )
        self._cluster.patch_advice({"applied": record.to_wire()})
        self._note(now, "Applied", found.patch, same=found.patch)

    def _roll_back(self, advice: AdviceStatus, applied: AdviceApplied, why: str, now: datetime) -> None:
        self._cluster.patch_advice(failed_live(advice, applied, why))
        self._cluster.patch_spec(json.loads(applied.restore)["spec"])
        marked = applied.model_copy(update={"rolled_back": why, "rolled_back_time": now})
        self._cluster.patch_advice({"applied": marked.to_wire()})
        self._note(now, "RolledBack", why, same=applied.patch)


def live(trace: Trace, start: Plan, cluster: Cluster, advisor: Advisor) -> Life:
    """The scaler's life over ``trace`` from the plan of its starting spec (its schedule and first count)."""
    with asyncio.Runner() as loop:
        life = Lifecycle(trace, start, cluster, advisor, loop)
        simulation = simulate(len(trace), start.schedule, life, start.initial)
    return Life(simulation, tuple(life.events), trace.start, life.advice_runs)
