"""One evaluation of one PredictiveScaler: read the target and the signals, forecast, decide, and
write what it found (status, conditions, Events, metrics, the store).

Failures never lower a recommendation: an evaluation that fails leaves ``recommendedReplicas`` and
``lastForecast`` as they were, marks the scaler ``Degraded`` with the failure's reason, and keeps
``Ready`` true only while that last good recommendation is younger than the staleness bound KEDA
is served under. Policy state (the scale-down window) is read back from status on every
evaluation, so a restarted or newly elected controller continues the window instead of starting it
over.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from presage_scaler.api.advice_patch import merge_patch
from presage_scaler.api.conditions import Condition
from presage_scaler.api.predictive_scaler import AgonesFleetTarget, PredictiveScalerSpec
from presage_scaler.api.predictive_scaler_status import PredictiveScalerStatus
from presage_scaler.api.reasons import Reason
from presage_scaler.api.serving_contract import StalenessBound
from presage_scaler.backends.base import BackendError
from presage_scaler.clients.kube.client import JSON, KubeClient
from presage_scaler.clients.kube.events import EventRecorder
from presage_scaler.clients.kube.secrets import Secrets
from presage_scaler.clients.prometheus import PrometheusClientPool, PrometheusError
from presage_scaler.controller.advice_apply import AdviceApplier, counted
from presage_scaler.controller.advice_saving import advice_saving
from presage_scaler.controller.condition_updates import (
    CONSUMED,
    DEGRADED,
    READY,
    ConditionUpdate,
    ScaledObjectConsumers,
    consumed_condition,
    consumed_warning_due,
    find,
    hides_known,
    merge_conditions,
    spec_adjusted_condition,
)
from presage_scaler.controller.forecast_backend_controller import BackendController, BackendUnusable
from presage_scaler.controller.instruments import TimedBackend, TimedSignalSource, record_evaluation, record_shadow
from presage_scaler.controller.live_advice import (
    AdvisedSpecs,
    LiveAdvice,
    live_fields,
    observe_advice,
    record_live_event,
)
from presage_scaler.controller.predictive_scaler_objects import Key, ScalerEntry, SpecCache, stored_recommendation
from presage_scaler.controller.prometheus_signals import PrometheusSignalSource
from presage_scaler.controller.replica_counts import WatchedReplicas
from presage_scaler.controller.status_cadence import LeaseVouch, replacing, write_due
from presage_scaler.controller.status_writer import StatusWriter
from presage_scaler.controller.targets import TargetReader
from presage_scaler.engine.adjustments import spec_adjustments
from presage_scaler.engine.decided_by import DecidedByLedger
from presage_scaler.engine.evaluator import EvaluationError, Recommendation, evaluate
from presage_scaler.engine.leadtime import HorizonError
from presage_scaler.engine.past_forecasts import CalibrationState
from presage_scaler.engine.policy import PolicyState
from presage_scaler.engine.shadow import Score, ShadowLedger
from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.serving.store import RecommendationStore

log = logging.getLogger(__name__)

DEFAULT_BACKEND = "default"
SCALED_OBJECT_SYNC_GRACE = 30.0
"""Seconds after a start during which a ScaledObject cache still listing leaves ``Consumed`` as it was."""


@dataclass(frozen=True)
class Failure:
    reason: Reason
    message: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", Reason(self.reason))


def _failure_of(exc: Exception, backend_name: str | None) -> Failure:
    """The condition an evaluation's error reports; a backend's own error names the ForecastBackend,
    as the registry's refusals do (a scaler's message must say which backend to look at)."""
    if isinstance(exc, TimeoutError):
        return Failure(Reason.EVALUATION_TIMEOUT, "the evaluation did not finish within its deadline")
    message = str(getattr(exc, "message", None) or exc)
    if isinstance(exc, BackendError) and backend_name is not None:
        message = f"ForecastBackend {backend_name!r}: {message}"
    return Failure(getattr(exc, "reason", Reason.INTERNAL_ERROR), message)


def served_within(spec: PredictiveScalerSpec, staleness: StalenessBound) -> timedelta:
    """The age past which this scaler's written recommendation is refused: KEDA's staleness bound, or
    an Agones Fleet's maximum recommendation age where that is shorter."""
    target = spec.scale_target_ref
    agones = (target.agones or AgonesFleetTarget()).max_recommendation_age if target.is_agones_fleet else None
    return staleness.served_within(spec.interval, agones)


def _ready_condition(
    status: PredictiveScalerStatus,
    served_at: datetime | None,
    interval: timedelta,
    staleness: StalenessBound,
    now: datetime,
) -> ConditionUpdate:
    """Ready while a recommendation exists and the one served (written at ``served_at``: the status
    may hold a newer evaluation not yet written) is fresh enough to be served."""
    if status.recommended_replicas is None or served_at is None:
        return ConditionUpdate(READY, "False", Reason.NO_RECOMMENDATION, "no successful evaluation yet")
    age = now - served_at
    bound = staleness.max_age(interval)
    if age > bound:
        return ConditionUpdate(
            READY,
            "False",
            Reason.RECOMMENDATION_STALE,
            f"the last recommendation ({status.recommended_replicas}) is {int(age.total_seconds())}s old, "
            f"over the {int(bound.total_seconds())}s bound; KEDA falls back, Agones falls through",
        )
    return ConditionUpdate(
        READY,
        "True",
        Reason.LAST_RECOMMENDATION_HELD,
        f"serving the last good recommendation ({status.recommended_replicas}) from "
        f"{served_at.isoformat()} while degraded",
    )


def _explain(rec: Recommendation) -> str:
    b = rec.breakdown
    binding = next(s for s in rec.signal_statuses if s.name == b.binding_signal)
    calibration = binding.calibration
    scored = calibration.scored_forecasts if calibration is not None else 0
    return (
        f"recommended {rec.replicas} replicas: signal {b.binding_signal} binds, "
        f"forecast {rec.last_forecast.point:g} at lead time {rec.last_forecast.lead_time_seconds}s, "
        f"sized to {binding.sized_to:g} ({binding.sized_by}, {scored} past forecasts scored), "
        f"predictive {b.predictive}, reactive {b.reactive}, constraint {b.constraint or 'none'}"
    )


@dataclass
class _Outcome:
    """What one evaluation of one scaler found: everything the record and write steps need.

    Exactly one of ``recommendation`` and ``failure`` is set once the evaluate step returns, and
    ``shadow`` and ``decided_by`` (the ledgers, the recommendation observed) with a recommendation.
    """

    obj: JSON
    """The scaler as the evaluation started (its metadata: what the status write is checked against)."""
    namespace: str
    name: str
    generation: int
    now: datetime
    status: PredictiveScalerStatus
    """The status the evaluation started from (policy state, calibration, shadow ledger)."""
    interval: timedelta = timedelta(minutes=1)
    """The spec's interval; a minute where the spec could not be read."""
    spec: PredictiveScalerSpec | None = None
    """None where the spec could not be read."""
    current: int | None = None
    recommendation: Recommendation | None = None
    failure: Failure | None = None
    shadow: ShadowLedger | None = None
    scores: list[Score] = field(default_factory=list)
    """What the shadow ledger scored at this evaluation (an apply's watch counts them)."""
    decided_by: DecidedByLedger | None = None
    live: LiveAdvice | None = None
    """The advice's live record, where an advice is scored (:mod:`~presage_scaler.controller.live_advice`)."""
    duration: float = 0.0
    conditions: list[ConditionUpdate] = field(default_factory=list)
    """Conditions to write beside Ready and Degraded."""
    warning: ConditionUpdate | None = None
    """``Consumed``, when it calls for a Warning Event."""


class ScalerReconciler:
    """Evaluates one scaler and writes the outcome: status through :class:`StatusWriter`, then the
    store, the metrics and the Events it calls for."""

    def __init__(
        self,
        client: KubeClient,
        store: RecommendationStore,
        specs: SpecCache,
        backends: BackendController,
        prometheus: PrometheusClientPool,
        events: EventRecorder,
        metrics: ScalerMetrics,
        writer: StatusWriter,
        *,
        clock: Callable[[], datetime],
        scaled_objects: ScaledObjectConsumers | None,
        staleness: StalenessBound,
        replicas: WatchedReplicas | None = None,
        vouch: Callable[[Key], LeaseVouch | None] = lambda key: None,
    ) -> None:
        """Without ``scaled_objects`` (tests, benchmarks) no ``Consumed`` condition is written;
        ``staleness``: the bound KEDA is served under (a status is held only within it); ``replicas``:
        targets' counts known from watches (None: every evaluation reads the scale subresource);
        ``vouch``: what the scaler's Lease vouches for (None: no Lease, or nothing published yet)."""
        self._store = store
        self._specs = specs
        self._advised_specs = AdvisedSpecs()
        self._backends = backends
        self._prometheus = prometheus
        self._events = events
        self._metrics = metrics
        self._writer = writer
        self._advice = AdviceApplier(client, writer, events, clock)
        self._targets = TargetReader(client, replicas)
        self._secrets = Secrets(client)
        self._clock = clock
        self._scaled_objects = scaled_objects
        self._started = time.monotonic()
        self._staleness = staleness
        self._vouch = vouch
        self.writes = 0  # status writes attempted (an evaluation whose status was held makes none)

    async def reconcile(self, entry: ScalerEntry) -> float:
        """Evaluate one scaler, record what it found, and write its status; returns its interval in
        seconds (counted by the scheduler from this evaluation's start)."""
        outcome = await self._evaluate(entry)
        self._record(outcome)
        await self._write(entry, outcome)
        if outcome.spec is not None:  # spec.advice.apply: WhenProven, from the status just written or held
            previous = outcome.status.last_forecast
            await self._advice.act(entry, outcome.spec, previous.generated_at if previous else None)
        return outcome.interval.total_seconds()

    async def _evaluate(self, entry: ScalerEntry) -> _Outcome:
        """Read the target and the signals, forecast and decide, within a deadline of the interval
        (10 s to 5 min). A failure is kept as the outcome's ``failure``: an unforeseen one is logged
        with its traceback, and this scaler alone goes Degraded."""
        obj = entry.obj
        meta = obj["metadata"]
        generation = int(meta.get("generation") or 0)
        entry.scheduled_generation = generation
        outcome = _Outcome(obj, meta["namespace"], meta["name"], generation, self._clock(), entry.status())
        status = outcome.status
        started = time.perf_counter()
        backend_name: str | None = None
        try:
            spec = outcome.spec = entry.spec(self._specs)
            outcome.interval = spec.interval
            self._check_consumed(outcome, spec)
            backend_name = spec.forecast.backend_ref or DEFAULT_BACKEND
            backend = TimedBackend(self._backends.backend_for(backend_name), backend_name, self._metrics)
            outcome.current = await self._targets.current_replicas(outcome.namespace, spec.scale_target_ref)
            state = PolicyState(status.scale_down_candidate_since, status.last_scale_time)
            source = TimedSignalSource(
                PrometheusSignalSource(self._prometheus, self._secrets.for_namespace(outcome.namespace)), self._metrics
            )
            deadline = min(max(outcome.interval.total_seconds(), 10.0), 300.0)
            calibration = CalibrationState.from_status(status.calibration)
            async with asyncio.timeout(deadline):
                outcome.recommendation = await evaluate(
                    spec, backend, source, outcome.current, state, outcome.now, calibration
                )
        except (EvaluationError, BackendUnusable, BackendError, PrometheusError, HorizonError, TimeoutError) as exc:
            outcome.failure = _failure_of(exc, backend_name)
        except Exception as exc:
            # A bug or an input nobody foresaw: this scaler goes Degraded with the error, keeps its last
            # recommendation, and every other scaler goes on.
            log.exception("evaluation failed unexpectedly scaler=%s/%s", outcome.namespace, outcome.name)
            outcome.failure = Failure(Reason.INTERNAL_ERROR, f"unexpected {type(exc).__name__}: {exc}"[:1024])
        outcome.duration = time.perf_counter() - started
        if outcome.recommendation is not None:
            outcome.shadow = ShadowLedger.from_status(status.shadow)
            outcome.scores = outcome.shadow.observe(outcome.recommendation, spec.policy)
            outcome.decided_by = DecidedByLedger.from_status(status.decided_by)
            outcome.decided_by.observe(outcome.recommendation.decision.constraint, outcome.now)
            assert outcome.current is not None
            outcome.live = await observe_advice(
                spec,
                entry.spec_json(),
                status.advice,
                outcome.recommendation,
                outcome.current,
                backend,
                calibration,
                f"{outcome.namespace}/{outcome.name}",
                specs=self._advised_specs,
            )
            adjustments = spec_adjustments(spec, outcome.recommendation.lead_time, backend.max_horizon)
            outcome.conditions.append(spec_adjusted_condition(adjustments))
        return outcome

    def _check_consumed(self, outcome: _Outcome, spec: PredictiveScalerSpec) -> None:
        """Add the ``Consumed`` condition to the outcome's conditions, and as its warning where it
        calls for a Warning Event."""
        was = find(outcome.status.conditions, CONSUMED)
        consumed = self._consumed(spec, outcome.namespace, outcome.name, was, outcome.generation)
        if consumed is not None:
            outcome.conditions.append(consumed)
            if consumed_warning_due(spec.mode, was, consumed, outcome.generation):
                outcome.warning = consumed

    def _record(self, outcome: _Outcome) -> None:
        """Export the outcome's metrics and log it, one line per evaluation."""
        namespace, name, recommendation = outcome.namespace, outcome.name, outcome.recommendation
        if recommendation is None:
            assert outcome.failure is not None
            self._metrics.observe_error(namespace, name, outcome.failure.reason)
            log.warning(
                "degraded scaler=%s/%s reason=%s message=%s",
                namespace,
                name,
                outcome.failure.reason,
                outcome.failure.message,
            )
            return
        assert outcome.current is not None and outcome.shadow is not None
        record_evaluation(self._metrics, namespace, name, recommendation, outcome.current, outcome.duration)
        record_shadow(self._metrics, namespace, name, outcome.shadow.summary())
        log.info(
            "evaluated scaler=%s/%s current=%s recommended=%d binding=%s constraint=%s lead_s=%d duration_ms=%.1f",
            namespace,
            name,
            outcome.current,
            recommendation.replicas,
            recommendation.breakdown.binding_signal,
            recommendation.breakdown.constraint or "-",
            recommendation.last_forecast.lead_time_seconds,
            outcome.duration * 1000,
        )

    async def _write(self, entry: ScalerEntry, outcome: _Outcome) -> None:
        """Write the status the outcome calls for, unless a successful evaluation's may be held
        (:func:`~presage_scaler.controller.status_cadence.write_due`); then put what was written in
        the store and emit the Events it calls for.

        A failure writes a held evaluation with it: its recommendation is the one served, and judged
        fresh or stale, from now on, and nothing it held is lost.
        """
        status = outcome.status

        def patch_of(base: PredictiveScalerStatus) -> JSON:
            served_at = base.last_forecast.generated_at if base.last_forecast else None
            patched = {
                **self._status_patch(base, served_at, outcome),
                "adviceSaving": advice_saving(base.advice, entry.spec_json()),
                **live_fields(base.advice, outcome.live),
            }
            counts = counted(base.advice, outcome.scores, outcome.spec, outcome.generation, outcome.now)
            return patched if counts is None else {**patched, "advice": {**patched.get("advice", {}), **counts}}

        fields = patch_of(status)
        if outcome.recommendation is not None:
            if self._held(entry, outcome, fields):
                return
        elif entry.holding:
            fields = {**replacing(entry.status_json()), **fields}
        updated = await self._writer.write(
            outcome.obj, status, lambda base: fields if base is status else patch_of(base)
        )
        self.writes += 1
        if updated is not None:
            entry.accept(updated)
            item = stored_recommendation(updated, self._specs)
            if item is not None:
                await self._store.put(item)
            await self._emit_events(updated, status, outcome.recommendation, outcome.failure, outcome.warning)
            await record_live_event(self._events, updated, outcome.live)

    def _held(self, entry: ScalerEntry, outcome: _Outcome, fields: JSON) -> bool:
        """Whether the evaluated status (the written one with ``fields`` merged over it) is held in
        the entry instead of written: what is served stays fresh enough without it."""
        assert outcome.spec is not None
        evaluated = merge_patch(entry.status_json(), fields)
        bound = served_within(outcome.spec, self._staleness)
        vouch = self._vouch((outcome.namespace, outcome.name))
        if write_due(entry.written, evaluated, outcome.interval, bound, outcome.now, entry.vouched, vouch):
            return False
        entry.hold(evaluated, outcome.now)
        return True

    def _consumed(
        self, spec: PredictiveScalerSpec, namespace: str, name: str, was: Condition | None, generation: int
    ) -> ConditionUpdate | None:
        """The ``Consumed`` condition to write, or None to leave it as it is.

        Just after a start the ScaledObject cache is still listing: its Unknown would overwrite what
        the previous leader knew at this generation, and warn again once known. So for
        :data:`SCALED_OBJECT_SYNC_GRACE` that Unknown is not written over a known status.
        """
        if self._scaled_objects is None:
            return None
        consumed = consumed_condition(spec, namespace, name, self._scaled_objects)
        starting = time.monotonic() - self._started < SCALED_OBJECT_SYNC_GRACE
        return None if starting and hides_known(consumed, was, generation) else consumed

    def _status_patch(self, status: PredictiveScalerStatus, served_at: datetime | None, outcome: _Outcome) -> JSON:
        """The status fields to write over ``status``. ``served_at``: when the forecast of ``status``,
        the one served after a failure, was made (a failure writes no forecast of its own)."""
        fields: JSON = {"observedGeneration": outcome.generation}
        if outcome.current is not None:
            fields["currentReplicas"] = outcome.current
        recommendation = outcome.recommendation
        if recommendation is not None:
            assert outcome.shadow is not None and outcome.decided_by is not None
            fresh = PredictiveScalerStatus(
                recommended_replicas=recommendation.replicas,
                last_forecast=recommendation.last_forecast,
                signal_statuses=list(recommendation.signal_statuses),
                breakdown=recommendation.breakdown,
                scale_down_candidate_since=recommendation.state.scale_down_candidate_since,
                last_scale_time=recommendation.state.last_scale_time,
                calibration=recommendation.calibration.to_status(),
            )
            fields.update(fresh.model_dump(by_alias=True, exclude_none=True, mode="json"))
            # Merge patch: an explicit null clears a window that is no longer open, and recorded
            # forecasts a backend that now hindcasts no longer needs.
            fields.setdefault("scaleDownCandidateSince", None)
            fields.setdefault("calibration", None)
            fields["shadow"] = outcome.shadow.status_patch()
            fields["decidedBy"] = outcome.decided_by.status_patch()
            guard_note = outcome.decided_by.guard_note()
            explained = f"{_explain(recommendation)}; {guard_note}" if guard_note else _explain(recommendation)
            updates = [
                ConditionUpdate(READY, "True", Reason.RECOMMENDED, explained),
                ConditionUpdate(DEGRADED, "False", Reason.EVALUATION_SUCCEEDED, "the last evaluation succeeded"),
            ]
        else:
            assert outcome.failure is not None
            updates = [
                _ready_condition(status, served_at, outcome.interval, self._staleness, outcome.now),
                ConditionUpdate(DEGRADED, "True", outcome.failure.reason, outcome.failure.message),
            ]
        merged = merge_conditions(status.conditions, [*updates, *outcome.conditions], outcome.generation, outcome.now)
        fields["conditions"] = [c.model_dump(by_alias=True, exclude_none=True, mode="json") for c in merged]
        return fields

    async def _emit_events(
        self,
        obj: JSON,
        previous: PredictiveScalerStatus,
        recommendation: Recommendation | None,
        failure: Failure | None,
        warning: ConditionUpdate | None,
    ) -> None:
        """``warning``: a condition written that calls for a Warning Event of its reason (``Consumed``
        False in Enforce, or ScalingModifiers in Shadow, the first time at this generation)."""
        if warning is not None:
            await self._events.record(obj, "Warning", warning.reason, warning.message)
        was: Condition | None = find(previous.conditions, DEGRADED)
        was_degraded = was is not None and was.status == "True"
        if failure is not None:
            if not was_degraded or (was is not None and was.reason != failure.reason):
                await self._events.record(obj, "Warning", failure.reason, failure.message)
            return
        assert recommendation is not None
        if was_degraded:
            message = f"evaluations succeed again; {_explain(recommendation)}"
            await self._events.record(obj, "Normal", Reason.RECOVERED, message)
        if previous.recommended_replicas != recommendation.replicas:
            before = previous.recommended_replicas if previous.recommended_replicas is not None else "none"
            await self._events.record(
                obj, "Normal", Reason.RECOMMENDATION_CHANGED, f"{before} -> {_explain(recommendation)}"
            )
