"""The PredictiveScaler controller: evaluate each scaler every ``interval``, write what it found.

Every replica watches PredictiveScalers and fills the recommendation store from their status, so
every replica can answer KEDA and Agones. Only the leader evaluates and writes status.

Failures never lower a recommendation: an evaluation that fails leaves ``recommendedReplicas`` and
``lastForecast`` as they were, marks the scaler ``Degraded`` with the failure's reason, and keeps
``Ready`` true only while that last good recommendation is younger than the staleness bound KEDA
is served under. Policy state (the scale-down window) is read back from status on every
evaluation, so a restarted or newly elected controller continues the window instead of starting it
over.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pydantic import ValidationError

from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.types import API_VERSION, Condition, PredictiveScalerSpec, PredictiveScalerStatus
from presage_scaler.backends.base import BackendError
from presage_scaler.calibration import CalibrationState
from presage_scaler.controller.backends import BackendController, BackendUnusable
from presage_scaler.controller.conditions import (
    CONSUMED,
    DEGRADED,
    READY,
    ConditionUpdate,
    ScaledObjectConsumers,
    consumed_condition,
    find,
    hides_known,
    merge_conditions,
    spec_adjusted_condition,
    unconsumed_warning_due,
)
from presage_scaler.controller.secrets import SecretTokens
from presage_scaler.controller.targets import TargetReader
from presage_scaler.evaluator import EvaluationError, Recommendation, evaluate
from presage_scaler.keda import StalenessBound
from presage_scaler.kube.client import JSON, ApiError, Conflict, KubeClient, NotFound, Resource
from presage_scaler.kube.events import EventRecorder
from presage_scaler.leadtime import HorizonError, spec_adjustments
from presage_scaler.metrics import ScalerMetrics, TimedBackend, TimedSignalSource
from presage_scaler.policy import PolicyState
from presage_scaler.prometheus import PrometheusClientPool, PrometheusError
from presage_scaler.reasons import Reason
from presage_scaler.shadow import ShadowLedger
from presage_scaler.signals import PrometheusSignalSource
from presage_scaler.store import RecommendationStore, StoredRecommendation, TargetRef

log = logging.getLogger(__name__)

PREDICTIVE_SCALERS = Resource(*API_VERSION.split("/"), "predictivescalers", True, "PredictiveScaler")
DEFAULT_BACKEND = "default"
STATUS_WRITE_ATTEMPTS = 4
SCALED_OBJECT_SYNC_GRACE = 30.0
"""Seconds after a start during which a ScaledObject cache still listing leaves ``Consumed`` as it was."""

Key = tuple[str, str]


@dataclass(frozen=True)
class Failure:
    reason: Reason
    message: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", Reason(self.reason))


@dataclass
class _Entry:
    obj: JSON
    generation: int
    scheduled_generation: int | None = None  # generation the last evaluation started from
    running: bool = False
    ticket: int = -1  # the one heap entry that counts; older ones are skipped when popped


def _parse_spec(obj: JSON) -> PredictiveScalerSpec:
    try:
        return parse(PredictiveScalerSpec, obj.get("spec") or {})
    except SpecError as exc:
        raise EvaluationError(Reason.INVALID_SPEC, str(exc)) from exc


class SpecCache:
    """Parsed specs by (uid, generation): status updates arrive every interval, spec changes rarely."""

    def __init__(self) -> None:
        self._items: dict[str, tuple[int, PredictiveScalerSpec | EvaluationError]] = {}

    def get(self, obj: JSON) -> PredictiveScalerSpec:
        meta = obj["metadata"]
        uid, generation = meta.get("uid", meta["name"]), int(meta.get("generation") or 0)
        cached = self._items.get(uid)
        if cached is None or cached[0] != generation:
            try:
                parsed: PredictiveScalerSpec | EvaluationError = _parse_spec(obj)
            except EvaluationError as exc:
                parsed = exc
            cached = self._items[uid] = (generation, parsed)
        if isinstance(cached[1], EvaluationError):
            raise cached[1]
        return cached[1]

    def forget(self, obj: JSON) -> None:
        self._items.pop(obj["metadata"].get("uid", obj["metadata"]["name"]), None)


def _status_of(obj: JSON) -> PredictiveScalerStatus:
    try:
        return PredictiveScalerStatus.model_validate(obj.get("status") or {})
    except (ValidationError, RecursionError):
        meta = obj["metadata"]
        log.warning("ignoring unreadable status scaler=%s/%s", meta.get("namespace"), meta["name"])
        return PredictiveScalerStatus()


def stored_recommendation(obj: JSON, specs: SpecCache) -> StoredRecommendation | None:
    """The store's view of a PredictiveScaler, from its spec and the status the leader wrote.

    Reads the three status fields it needs straight from the object: this runs on every watch
    event, and validating the whole status each time was a measurable share of controller CPU.
    """
    status = obj.get("status")
    if not isinstance(status, dict):
        return None
    recommended, current = status.get("recommendedReplicas"), status.get("currentReplicas")
    last_forecast = status.get("lastForecast")
    generated_at = last_forecast.get("generatedAt") if isinstance(last_forecast, dict) else None
    if not isinstance(recommended, int) or not isinstance(generated_at, str):
        return None
    try:
        spec = specs.get(obj)
        generated = datetime.fromisoformat(generated_at)
    except (EvaluationError, ValueError):
        return None
    target = spec.scale_target_ref
    return StoredRecommendation(
        namespace=obj["metadata"]["namespace"],
        name=obj["metadata"]["name"],
        mode=spec.mode,
        target=TargetRef(api_version=target.api_version, kind=target.kind, name=target.name),
        recommended_replicas=recommended,
        current_replicas=current if isinstance(current, int) else None,
        generated_at=generated if generated.tzinfo else generated.replace(tzinfo=UTC),
        interval=spec.interval,
        min_replicas=spec.policy.min_replicas,
        max_replicas=spec.policy.max_replicas,
        agones_max_age=target.agones.max_recommendation_age if target.agones and target.is_agones_fleet else None,
    )


def _newer_or_same(candidate: JSON, cached: JSON) -> bool:
    """Whether ``candidate`` is at least as new as ``cached`` (etcd versions are integers)."""
    a, b = candidate["metadata"].get("resourceVersion", ""), cached["metadata"].get("resourceVersion", "")
    return not (a.isdigit() and b.isdigit()) or int(a) >= int(b)


def _failure_of(exc: Exception) -> Failure:
    if isinstance(exc, TimeoutError):
        return Failure(Reason.EVALUATION_TIMEOUT, "the evaluation did not finish within its deadline")
    message = getattr(exc, "message", None) or str(exc)
    return Failure(getattr(exc, "reason", Reason.INTERNAL_ERROR), str(message))


def _ready_condition(status: PredictiveScalerStatus, interval: timedelta, now: datetime) -> ConditionUpdate:
    """Ready while a recommendation exists and is fresh enough to be served."""
    if status.recommended_replicas is None or status.last_forecast is None:
        return ConditionUpdate(READY, "False", Reason.NO_RECOMMENDATION, "no successful evaluation yet")
    age = now - status.last_forecast.generated_at
    bound = StalenessBound().max_age(interval)
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
        f"{status.last_forecast.generated_at.isoformat()} while degraded",
    )


def _explain(rec: Recommendation) -> str:
    b = rec.breakdown
    return (
        f"recommended {rec.replicas} replicas: signal {b.binding_signal} binds, "
        f"forecast {rec.last_forecast.point:g} at lead time {rec.last_forecast.lead_time_seconds}s, "
        f"predictive {b.predictive}, reactive {b.reactive}, constraint {b.constraint or 'none'}"
    )


class ScalerController:
    """Schedules and runs evaluations; writes status, conditions and events; feeds the store."""

    def __init__(
        self,
        client: KubeClient,
        store: RecommendationStore,
        backends: BackendController,
        prometheus: PrometheusClientPool,
        events: EventRecorder,
        metrics: ScalerMetrics,
        *,
        concurrency: int = 32,
        leading: Callable[[], bool] = lambda: True,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        scaled_objects: ScaledObjectConsumers | None = None,
    ) -> None:
        """Without ``scaled_objects`` (tests, benchmarks) no ``Consumed`` condition is written."""
        self._client = client
        self._store = store
        self._backends = backends
        self._prometheus = prometheus
        self._events = events
        self._metrics = metrics
        self._targets = TargetReader(client)
        self._secrets = SecretTokens(client)
        self._leading = leading
        self._clock = clock
        self._scaled_objects = scaled_objects
        self._started = time.monotonic()
        self._semaphore = asyncio.Semaphore(concurrency)
        self._entries: dict[Key, _Entry] = {}
        self._specs = SpecCache()
        self._heap: list[tuple[float, int, Key]] = []
        self._sequence = itertools.count()
        self._wake = asyncio.Event()
        self.evaluations = 0  # completed evaluations, for benchmarks and logs

    # -- informer side (every replica)

    async def on_event(self, kind: str, obj: JSON) -> None:
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        if kind == "delete":
            self._entries.pop(key, None)
            self._events.forget(meta.get("uid", ""))
            self._specs.forget(obj)
            self._metrics.forget(*key)
            await self._store.remove(*key)
            return
        entry = self._entries.get(key)
        if entry is not None and entry.obj["metadata"].get("resourceVersion") == meta.get("resourceVersion"):
            return  # the echo of our own status write, already applied
        item = stored_recommendation(obj, self._specs)
        if item is not None:
            await self._store.put(item)
        generation = int(meta.get("generation") or 0)
        if entry is None:
            entry = self._entries[key] = _Entry(obj=obj, generation=generation)
            self._schedule(key, self._initial_delay(obj))
        else:
            entry.obj = obj
            if generation != entry.generation:
                entry.generation = generation
                self._schedule(key, 0.0)  # a spec change is evaluated at once

    def on_leadership(self, leading: bool) -> None:
        """Wake the scheduler when leadership is gained (the heap is kept while standing by).

        A replica that stops leading stops exporting per-scaler figures: the new leader owns them.
        """
        if leading:
            self._wake.set()
        else:
            self._metrics.forget_all()

    def _initial_delay(self, obj: JSON) -> float:
        """Continue the schedule from status: due one interval after the last forecast."""
        status = _status_of(obj)
        try:
            interval = self._specs.get(obj).interval
        except EvaluationError:
            return 0.0
        if status.last_forecast is None or status.observed_generation != obj["metadata"].get("generation"):
            return 0.0
        due = status.last_forecast.generated_at + interval - self._clock()
        return min(max(due.total_seconds(), 0.0), interval.total_seconds())

    def _schedule(self, key: Key, delay: float) -> None:
        entry = self._entries.get(key)
        if entry is None:
            return
        entry.ticket = next(self._sequence)
        heapq.heappush(self._heap, (time.monotonic() + delay, entry.ticket, key))
        self._wake.set()

    # -- scheduler (acts only while leading)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            while True:
                self._wake.clear()
                if not self._leading() or not self._heap:
                    await self._wake.wait()
                    continue
                due, ticket, key = self._heap[0]
                wait = due - time.monotonic()
                if wait > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), wait)
                    continue
                heapq.heappop(self._heap)
                entry = self._entries.get(key)
                if entry is None or entry.ticket != ticket or entry.running:
                    continue  # deleted, superseded, or running (that run reschedules it)
                entry.running = True
                await self._semaphore.acquire()
                group.create_task(self._run_one(key, entry))

    async def _run_one(self, key: Key, entry: _Entry) -> None:
        try:
            interval = await self.reconcile(entry)
        except Exception:
            log.exception("evaluation crashed scaler=%s/%s", *key)
            interval = 60.0
        finally:
            entry.running = False
            self._semaphore.release()
        if self._entries.get(key) is entry:
            evaluated = entry.scheduled_generation
            self._schedule(key, 0.0 if evaluated != entry.generation else interval)

    # -- one evaluation

    async def reconcile(self, entry: _Entry) -> float:
        """Evaluate one scaler and write its status; returns seconds until the next evaluation."""
        obj = entry.obj
        meta = obj["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        generation = int(meta.get("generation") or 0)
        entry.scheduled_generation = generation
        now = self._clock()
        started = time.perf_counter()
        status = _status_of(obj)
        interval = timedelta(minutes=1)
        current: int | None = None
        recommendation: Recommendation | None = None
        failure: Failure | None = None
        shadow: JSON | None = None
        conditions: list[ConditionUpdate] = []  # beside Ready and Degraded
        warning: ConditionUpdate | None = None  # Consumed, when it calls for a Warning Event
        try:
            spec = self._specs.get(obj)
            interval = spec.interval
            was_consumed = find(status.conditions, CONSUMED)
            consumed = self._consumed(spec, namespace, name, was_consumed, generation)
            if consumed is not None:
                conditions.append(consumed)
                if spec.mode == "Enforce" and unconsumed_warning_due(was_consumed, consumed, generation):
                    warning = consumed
            backend_name = spec.forecast.backend_ref or DEFAULT_BACKEND
            backend = TimedBackend(self._backends.backend_for(backend_name), backend_name, self._metrics)
            current = await self._targets.current_replicas(namespace, spec.scale_target_ref)
            state = PolicyState(status.scale_down_candidate_since, status.last_scale_time)
            source = TimedSignalSource(
                PrometheusSignalSource(self._prometheus, self._secrets.for_namespace(namespace)), self._metrics
            )
            deadline = min(max(interval.total_seconds(), 10.0), 300.0)
            calibration = CalibrationState.from_status(status.calibration)
            recommendation = await asyncio.wait_for(
                evaluate(spec, backend, source, current, state, now, calibration), deadline
            )
        except (EvaluationError, BackendUnusable, BackendError, PrometheusError, HorizonError, TimeoutError) as exc:
            failure = _failure_of(exc)
        except Exception as exc:
            # A bug or an input nobody foresaw: this scaler goes Degraded with the error, keeps its last
            # recommendation, and every other scaler goes on.
            log.exception("evaluation failed unexpectedly scaler=%s/%s", namespace, name)
            failure = Failure(Reason.INTERNAL_ERROR, f"unexpected {type(exc).__name__}: {exc}"[:1024])
        duration = time.perf_counter() - started
        if recommendation is not None:
            assert current is not None
            ledger = ShadowLedger.from_status(status.shadow)
            ledger.observe(recommendation, spec.policy)
            shadow = ledger.status_patch()
            self._metrics.observe_evaluation(namespace, name, recommendation, current, duration)
            self._metrics.observe_shadow(namespace, name, ledger.summary())
            adjustments = spec_adjustments(spec, recommendation.lead_time, backend.max_horizon)
            conditions.append(spec_adjusted_condition(adjustments))
            log.info(
                "evaluated scaler=%s/%s current=%s recommended=%d binding=%s constraint=%s lead_s=%d duration_ms=%.1f",
                namespace,
                name,
                current,
                recommendation.replicas,
                recommendation.breakdown.binding_signal,
                recommendation.breakdown.constraint or "-",
                recommendation.last_forecast.lead_time_seconds,
                duration * 1000,
            )
        else:
            assert failure is not None
            self._metrics.observe_error(namespace, name, failure.reason)
            log.warning("degraded scaler=%s/%s reason=%s message=%s", namespace, name, failure.reason, failure.message)
        await self._write(
            entry,
            status,
            lambda status: self._status_patch(
                status, generation, current, recommendation, failure, shadow, interval, now, conditions
            ),
            recommendation,
            failure,
            warning,
        )
        self.evaluations += 1
        return interval.total_seconds()

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

    def _status_patch(
        self,
        status: PredictiveScalerStatus,
        generation: int,
        current: int | None,
        recommendation: Recommendation | None,
        failure: Failure | None,
        shadow: JSON | None,
        interval: timedelta,
        now: datetime,
        conditions: list[ConditionUpdate],
    ) -> JSON:
        fields: JSON = {"observedGeneration": generation}
        if current is not None:
            fields["currentReplicas"] = current
        if recommendation is not None:
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
            fields["shadow"] = shadow
            updates = [
                ConditionUpdate(READY, "True", Reason.RECOMMENDED, _explain(recommendation)),
                ConditionUpdate(DEGRADED, "False", Reason.EVALUATION_SUCCEEDED, "the last evaluation succeeded"),
            ]
        else:
            assert failure is not None
            updates = [
                _ready_condition(status, interval, now),
                ConditionUpdate(DEGRADED, "True", failure.reason, failure.message),
            ]
        merged = merge_conditions(status.conditions, [*updates, *conditions], generation, now)
        fields["conditions"] = [c.model_dump(by_alias=True, exclude_none=True, mode="json") for c in merged]
        return fields

    async def _write(
        self,
        entry: _Entry,
        previous: PredictiveScalerStatus,
        status_patch: Callable[[PredictiveScalerStatus], JSON],
        recommendation: Recommendation | None,
        failure: Failure | None,
        warning: ConditionUpdate | None,
    ) -> None:
        """Patch status to ``status_patch`` of the status read (``previous``, parsed from ``entry.obj``),
        conditionally on its resourceVersion; on conflict re-read and retry on the fresh object."""
        obj = entry.obj
        namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        status = previous
        for attempt in range(STATUS_WRITE_ATTEMPTS):
            if not self._leading():
                # Lost the Lease mid-evaluation or mid-retry: the new leader owns status now, and a
                # write from here could overwrite what it has written.
                log.info("status not written scaler=%s/%s: no longer the leader", namespace, name)
                return
            patch = {
                "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
                "status": status_patch(status),
            }
            try:
                updated = await self._client.merge_patch(PREDICTIVE_SCALERS, namespace, name, patch, "status")
                break
            except Conflict:
                try:
                    obj = await self._client.get(PREDICTIVE_SCALERS, namespace, name)
                except NotFound:
                    return
                status = _status_of(obj)
                log.info(
                    "status conflict scaler=%s/%s attempt=%d; retrying on the fresh object",
                    namespace,
                    name,
                    attempt + 1,
                )
            except NotFound:
                return
            except ApiError as exc:
                log.warning("status not written scaler=%s/%s error=%s", namespace, name, exc)
                return
        else:
            log.warning(
                "status not written scaler=%s/%s: %d conflicts in a row", namespace, name, STATUS_WRITE_ATTEMPTS
            )
            return
        if _newer_or_same(updated, entry.obj):
            entry.obj = updated
        item = stored_recommendation(updated, self._specs)
        if item is not None:
            await self._store.put(item)
        await self._emit_events(updated, previous, recommendation, failure, warning)

    async def _emit_events(
        self,
        obj: JSON,
        previous: PredictiveScalerStatus,
        recommendation: Recommendation | None,
        failure: Failure | None,
        warning: ConditionUpdate | None,
    ) -> None:
        """``warning``: a condition written that calls for a Warning Event of its reason (``Consumed``
        False in Enforce, the first time at this generation)."""
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
