"""The PredictiveScaler controller: evaluate each scaler every ``interval``, write what it found.

Every replica watches PredictiveScalers and fills the recommendation store from their status, so
every replica can answer KEDA and Agones. Only the leader evaluates and writes status.

Three parts with one job each do the work: :class:`~presage_scaler.controller.schedule.Scheduler`
says when each scaler is due, :class:`~presage_scaler.controller.reconcile.ScalerReconciler`
evaluates one scaler, and :class:`~presage_scaler.controller.status_writer.StatusWriter` writes its
status with conflict retry. This module keeps the watched objects and joins the three.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from presage_scaler.api.serving_contract import StalenessBound
from presage_scaler.clients.kube.client import JSON, KubeClient
from presage_scaler.clients.kube.events import EventRecorder
from presage_scaler.clients.prometheus import PrometheusClientPool
from presage_scaler.controller.condition_updates import ScaledObjectConsumers
from presage_scaler.controller.forecast_backend_controller import BackendController
from presage_scaler.controller.predictive_scaler_objects import Key, ScalerEntry, SpecCache, stored_recommendation
from presage_scaler.controller.reconcile import ScalerReconciler, served_within
from presage_scaler.controller.replica_counts import WatchedReplicas
from presage_scaler.controller.schedule import Scheduler
from presage_scaler.controller.status_cadence import LeaseVouch
from presage_scaler.controller.status_writer import StatusWriter
from presage_scaler.engine.evaluator import EvaluationError
from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.serving.freshness import FreshnessRecord
from presage_scaler.serving.store import RecommendationStore

log = logging.getLogger(__name__)

CRASHED_RETRY = 60.0
"""Seconds from the start of an evaluation that crashed outside its own error handling until the scaler
is tried again."""


class ScalerController:
    """Keeps every watched PredictiveScaler, feeds the store, and evaluates them when due."""

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
        owns: Callable[[Key], bool] = lambda key: True,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        scaled_objects: ScaledObjectConsumers | None = None,
        staleness: StalenessBound | None = None,
        replicas: WatchedReplicas | None = None,
        vouch: Callable[[Key], LeaseVouch | None] = lambda key: None,
    ) -> None:
        """``leading``: whether this replica evaluates at all; ``owns``: whether it evaluates that
        scaler (sharded: whether it owns its shard). Without ``scaled_objects`` (tests, benchmarks)
        no ``Consumed`` condition is written; without ``replicas`` every evaluation reads its
        target's scale subresource; ``vouch``: what the scaler's Lease vouches for
        (:meth:`lateness`, published), None where there is no Lease."""
        self._store = store
        self._events = events
        self._metrics = metrics
        self._clock = clock
        self._entries: dict[Key, ScalerEntry] = {}
        self._specs = SpecCache()
        self._staleness = staleness or StalenessBound()
        self._scheduler: Scheduler[Key] = Scheduler(concurrency=concurrency, leading=leading, may_run=owns)
        self._reconciler = ScalerReconciler(
            client,
            store,
            self._specs,
            backends,
            prometheus,
            events,
            metrics,
            StatusWriter(
                client,
                lambda key: leading() and owns(key),
                lambda: metrics.status_writes_fenced.labels("PredictiveScaler").inc(),
            ),
            clock=clock,
            scaled_objects=scaled_objects,
            staleness=self._staleness,
            replicas=replicas,
            vouch=vouch,
        )
        self.evaluations = 0  # completed evaluations, for benchmarks and logs

    @property
    def started_late(self) -> tuple[int, float]:
        """Evaluations started, and the seconds they started after they were due, in all: a controller
        that keeps up starts each when due, one that cannot later and later."""
        return self._scheduler.started, self._scheduler.started_late

    @property
    def status_writes(self) -> int:
        """Status writes attempted: fewer than evaluations, since most statuses are held for the next."""
        return self._reconciler.writes

    # -- informer side (every replica)

    async def on_event(self, kind: str, obj: JSON) -> None:
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        if kind == "delete":
            self._entries.pop(key, None)
            self._scheduler.forget(key)
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
            entry = self._entries[key] = ScalerEntry(obj=obj, generation=generation)
            self._scheduler.schedule(key, self._initial_delay(entry))
        else:
            entry.keep(obj)
            if generation != entry.generation:
                entry.generation = generation
                self._scheduler.schedule(key, 0.0)  # a spec change is evaluated at once

    def on_leadership(self, leading: bool) -> None:
        """Wake the scheduler when leadership is gained (the schedule is kept while standing by).

        A replica that stops leading stops exporting per-scaler figures: the new leader owns them.
        """
        if leading:
            self._scheduler.wake()
        else:
            self._metrics.forget_all()

    def on_ownership(self, selects: Callable[[Key], bool], owned: bool) -> None:
        """Sharded: a shard was gained (its scalers are scheduled, each due one interval after its last
        forecast) or lost (their per-scaler figures are dropped: the new owner exports them);
        ``selects`` picks the shard's scalers."""
        for key, entry in list(self._entries.items()):
            if not selects(key):
                continue
            if owned:
                self._scheduler.schedule(key, self._initial_delay(entry))
            else:
                self._metrics.forget(*key)

    def lateness(self, selects: Callable[[Key], bool], record: FreshnessRecord | None, now: datetime) -> float:
        """The lateness to publish for the scalers ``selects`` picks (those of one Lease): over those
        whose written status a Lease may vouch for, the largest time since its visible outcome was
        confirmed, as a share of its bound (:mod:`~presage_scaler.serving.freshness`). ``record``: the
        Lease's current record, whoever published it; what it vouched for is confirmed at least then."""
        worst = 0.0
        for key, entry in self._entries.items():
            if not selects(key) or not entry.written.vouchable:
                continue
            try:
                bound = served_within(entry.spec(self._specs), self._staleness).total_seconds()
            except EvaluationError:
                continue
            confirmed = entry.confirmed()
            assert confirmed is not None  # vouchable: the written status has a forecast time
            if record is not None:
                confirmed = max(confirmed, record.confirmed_at(bound))
            worst = max(worst, (now - confirmed).total_seconds() / bound)
        return worst

    @property
    def evaluating(self) -> int:
        """Evaluations running now: at ``concurrency``, the controller waits for a free slot."""
        return len(self._scheduler.running)

    def in_flight(self, selects: Callable[[Key], bool]) -> bool:
        """Whether an evaluation of a scaler ``selects`` picks is running."""
        return any(selects(key) for key in self._scheduler.running)

    def _initial_delay(self, entry: ScalerEntry) -> float:
        """Continue the schedule from status: due one interval after the last forecast."""
        status = entry.status()
        try:
            interval = entry.spec(self._specs).interval
        except EvaluationError:
            return 0.0
        if status.last_forecast is None or status.observed_generation != entry.obj["metadata"].get("generation"):
            return 0.0
        due = status.last_forecast.generated_at + interval - self._clock()
        return min(max(due.total_seconds(), 0.0), interval.total_seconds())

    # -- evaluations (only while leading)

    async def run(self) -> None:
        await self._scheduler.run(self._evaluate)

    async def reconcile(self, entry: ScalerEntry) -> float:
        """Evaluate one scaler and write its status; returns its interval in seconds: the next evaluation is due
        that long after this one started."""
        interval = await self._reconciler.reconcile(entry)
        self.evaluations += 1
        return interval

    async def _evaluate(self, key: Key) -> float | None:
        """The scheduler's work: seconds from this run's start until ``key`` is due again, None once it is
        deleted."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        try:
            interval = await self.reconcile(entry)
        except Exception:
            log.exception("evaluation crashed scaler=%s/%s", *key)
            interval = CRASHED_RETRY
        now = self._entries.get(key)
        if now is None:
            return None
        if now is not entry or entry.scheduled_generation != entry.generation:
            return 0.0  # re-created, or its spec changed while it ran
        return interval
