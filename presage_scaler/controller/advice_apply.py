"""``spec.advice.apply: WhenProven``: the controller applies a Proven advice itself, watches the applied
spec for one ``spec.advice.every``, and restores the previous policy if it misses the service level there.

Only while ``apply`` is ``WhenProven`` does presage change a spec, and then only the advised fields
(:data:`ADVISED_FIELDS`): a patch reaching any other field is refused. Three steps, each at an
evaluation of a scaler whose status this replica writes (the leader, or its shard's owner):

* **Count** (:func:`counted`, part of the evaluation's own status write, so that the counts are held
  and written with the shadow ledger they come from and a restart can never count a moment twice):
  the decisions the live spec made after the apply and ``status.shadow`` scored within ``every`` of it,
  and those short of demand, in ``status.advice.applied.samples``/``misses``. The shadow's hourly
  buckets cannot say which of their moments were decided after the apply; these counters can.
* **Apply** (:func:`apply_plan`): a ``Proven`` advice whose patch was never applied here
  (``status.advice.applied`` absent or for another patch), made for the spec as it is
  (``status.advice.observedGeneration`` is ``metadata.generation``: an advice for an older spec is
  stale), while no earlier apply is still watched. The SeasonalNaive ForecastBackend the advice names
  is created first when it does not exist (one of that name with other settings refuses the apply).
* **Roll back** (:func:`rollback_reason`): by :func:`~presage_scaler.engine.advice_proof.rollback_due`
  on the counts, while the spec is still the one applied (``metadata.generation`` is
  ``applied.generation``: after any other change to the spec, by a person or a GitOps tool, the watch
  ends and nothing is restored over it). The window is judged up to the first evaluation after it ends,
  never later. A rolled-back patch is never applied again, and the advice becomes ``FailedLive``.

Both spec writes are JSON merge patches under the field manager :data:`FIELD_MANAGER`, conditional on
the resourceVersion they were computed from, fenced like status writes. A merge patch, not server-side
apply: it is exactly what the documented one-liner applies by hand and ``applied.restore`` records, it
sets exactly the fields it names and removes a field restored to absent (with server-side apply, taking
a field from ``kubectl apply``'s manager needs ``force``, and giving one back removes it only when no
other manager also holds it), and the field manager still names presage in ``managedFields`` for every
field it set. An apply patches the spec before it records ``applied``: a process stopped between the two
leaves an apply that is not watched (the advice is then stale, so it is not applied twice). A rollback
writes FailedLive before it restores the spec (:meth:`AdviceApplier._roll_back` says why).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from presage_scaler.api.advice_patch import merge_patch, patch_digest
from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.api.kinds import API_VERSION, FORECAST_BACKEND
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import AdviceSpec, PredictiveScalerSpec
from presage_scaler.api.predictive_scaler_status import AdviceApplied, AdviceStatus, AdvisedBackend
from presage_scaler.api.quantities import format_duration
from presage_scaler.api.reasons import Reason
from presage_scaler.clients.kube.client import JSON, ApiError, Conflict, Fenced, Forbidden, KubeClient, NotFound
from presage_scaler.clients.kube.events import EventRecorder
from presage_scaler.clients.kube.presage_resources import FORECAST_BACKENDS, PREDICTIVE_SCALERS
from presage_scaler.controller.advice_saving import holds_patch
from presage_scaler.controller.predictive_scaler_objects import Key, ScalerEntry, status_of
from presage_scaler.controller.status_writer import StatusWriter
from presage_scaler.engine.advice_proof import moments_in, parse_service_level, rollback_due, watch_over
from presage_scaler.engine.shadow import Score

log = logging.getLogger(__name__)

WHEN_PROVEN = "WhenProven"
INVALID = 422
"""The API server's answer to a patch its schema refuses: said in an Event, since trying again cannot help."""
FIELD_MANAGER = "presage-advice"
ADVISED_FIELDS = (
    ("policy", "targetQuantile"),
    ("policy", "headroom"),
    ("policy", "scaleDownUncertaintyGuard"),
    ("policy", "stabilization", "scaleDownWindow"),
    ("policy", "stabilization", "maxScaleDownRate"),
    ("signal", "history"),
    ("forecast", "backendRef"),
)
"""The spec fields an advice may change (``status.advice.changes``, and the ForecastBackend it refers to),
as paths: an applied patch sets these or fields within them, nothing else."""


@dataclass(frozen=True)
class Apply:
    """An advice to apply: ``changes`` (the merge patch of the spec), and the backend to create first."""

    patch: str
    """``status.advice.patch`` as written: what ``applied.patch`` records."""
    changes: JSON
    backend: AdvisedBackend | None


@dataclass(frozen=True)
class Refusal:
    """Why a Proven advice is not applied (a Warning Event of :attr:`Reason.ADVICE_NOT_APPLIED`)."""

    message: str


def restore_patch(spec: JSON, changes: JSON) -> JSON:
    """The merge patch of ``spec`` that undoes ``changes`` (a merge patch of it): for each field the
    changes alter, and only those, its value in ``spec``, or null where ``spec`` lacks it."""
    return _restore(spec, merge_patch(spec, changes), changes)


def _restore(before: JSON, after: JSON, changes: JSON) -> JSON:
    restore: JSON = {}
    for key, change in changes.items():
        was, now = before.get(key), after.get(key)
        if was == now:
            continue
        if isinstance(change, dict) and isinstance(was, dict) and isinstance(now, dict):
            restore[key] = _restore(was, now, change)
        else:
            restore[key] = was
    return restore


def _paths(changes: JSON, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The leaf paths a merge patch sets or removes."""
    paths: list[tuple[str, ...]] = []
    for key, value in changes.items():
        path = (*prefix, str(key))
        paths.extend(_paths(value, path) if isinstance(value, dict) and value else [path])
    return paths


def _advised(path: tuple[str, ...]) -> bool:
    return any(path[: len(field)] == field for field in ADVISED_FIELDS)


def spec_changes(patch: str) -> JSON | Refusal:
    """The spec part of ``status.advice.patch``, or why it is not one presage applies: unreadable, or
    reaching beyond :data:`ADVISED_FIELDS`."""
    try:
        parsed = json.loads(patch)
    except ValueError:
        return Refusal("status.advice.patch is not JSON")
    changes = parsed.get("spec") if isinstance(parsed, dict) and set(parsed) == {"spec"} else None
    if not isinstance(changes, dict) or not changes:
        return Refusal('status.advice.patch is not a merge patch of the spec alone ({"spec": {...}})')
    beyond = [".".join(path) for path in _paths(changes) if not _advised(path)]
    if beyond:
        return Refusal(f"status.advice.patch changes spec.{beyond[0]}, which advice never changes")
    return changes


def apply_plan(advice: AdviceStatus | None, generation: int, spec: JSON) -> Apply | Refusal | None:
    """What to do with ``advice`` on the scaler at ``generation`` whose stored spec is ``spec``: an
    :class:`Apply`, a :class:`Refusal`, or None (nothing to apply: not Proven, stale, applied here
    before, or already held by the spec)."""
    if advice is None or advice.verdict != "Proven" or advice.patch is None:
        return None
    if advice.observed_generation != generation:
        return None
    if advice.applied is not None and advice.applied.patch == advice.patch:
        return None
    changes = spec_changes(advice.patch)
    if isinstance(changes, Refusal):
        return changes
    if holds_patch(spec, advice.patch):
        return None
    return Apply(advice.patch, changes, advice.forecast_backend)


def watching(applied: AdviceApplied | None, generation: int, now: datetime, every: timedelta) -> bool:
    """Whether ``applied`` is watched at ``now``: not rolled back, the spec still the one applied, and
    within ``every`` of the apply."""
    return (
        applied is not None
        and applied.rolled_back is None
        and applied.generation == generation
        and not watch_over(applied.time, now, every)
    )


def applying(spec: PredictiveScalerSpec | None) -> AdviceSpec | None:
    """The scaler's ``spec.advice`` when it asks presage to apply its advice (``apply: WhenProven``)."""
    advice = spec.advice if spec is not None else None
    return advice if advice is not None and advice.enabled and advice.apply == WHEN_PROVEN else None


def counted(
    advice: AdviceStatus | None,
    scores: Sequence[Score],
    spec: PredictiveScalerSpec | None,
    generation: int,
    now: datetime,
) -> JSON | None:
    """The merge patch of ``status.advice`` that adds ``scores`` (an evaluation's of the spec ``spec`` at
    ``generation``, at ``now``) to the counts of the apply it watches: those of decisions made after the
    apply (in whole seconds, as shadow keeps them: a decision in the apply's own second is not counted).
    None when no apply is watched or none of ``scores`` counts (a failed evaluation writes the counts a
    held status carries: ``status_cadence.replacing``)."""
    settings = applying(spec)
    applied = advice.applied if advice is not None else None
    if settings is None or applied is None or not watching(applied, generation, now, settings.every):
        return None
    after = [score for score in scores if score.prediction.at > applied.time]
    if not after:
        return None
    counts = {
        "samples": (applied.samples or 0) + len(after),
        "misses": (applied.misses or 0) + sum(not score.covered for score in after),
    }
    return {"applied": counts}


def rollback_reason(
    applied: AdviceApplied, advice: AdviceSpec, interval: timedelta, now: datetime, previous: datetime | None
) -> str | None:
    """Why ``applied`` is to be rolled back at ``now``, or None. ``previous``: when the evaluation before
    this one was made (None: none); the window is judged at every evaluation within it and at the first
    after it, never later."""
    if applied.rolled_back is not None or (previous is not None and watch_over(applied.time, previous, advice.every)):
        return None
    misses, samples = applied.misses or 0, applied.samples or 0
    level = parse_service_level(advice.service_level)
    every = advice.every
    if not rollback_due(misses, samples, applied.time, now, every=every, interval=interval, level=level):
        return None
    window = format_duration(every)
    if now - applied.time >= every:
        share = 100 * misses / samples
        return (
            f"under-provisioned {share:.1f}% of the first {window} after the apply ({misses} of {samples} "
            f"moments scored), over the {advice.service_level} service level"
        )
    return (
        f"under-provisioned at {misses} of the {samples} moments scored since the apply, more than the "
        f"{advice.service_level} service level allows in its first {window} (at most "
        f"{int(level * moments_in(every, interval))} of {moments_in(every, interval)} decisions)"
    )


class AdviceApplier:
    """Applies a Proven advice and rolls it back, for the scalers whose status this replica writes."""

    def __init__(
        self, client: KubeClient, writer: StatusWriter, events: EventRecorder, clock: Callable[[], datetime]
    ) -> None:
        self._client = client
        self._writer = writer
        self._events = events
        self._clock = clock

    async def act(self, entry: ScalerEntry, spec: PredictiveScalerSpec, previous: datetime | None) -> None:
        """Apply or roll back the advice of the scaler ``entry`` holds (its spec ``spec``, its status as
        this evaluation wrote or held it); ``previous``: when the evaluation before this one was made."""
        advice_spec = applying(spec)
        meta = entry.obj["metadata"]
        key: Key = (meta["namespace"], meta["name"])
        if advice_spec is None or not self._writer.may_write(key):
            return
        advice = entry.status().advice
        if advice is None:
            return
        generation = int(meta.get("generation") or 0)
        now = self._clock().replace(microsecond=0)
        applied = advice.applied
        if applied is not None and applied.generation == generation:
            reason = rollback_reason(applied, advice_spec, spec.interval, now, previous)
            if reason is not None:
                await self._roll_back(entry, key, advice, applied, reason, now)
                return
        if watching(applied, generation, now, advice_spec.every):
            return  # never apply over an apply still watched: its restore would be lost
        plan = apply_plan(advice, generation, entry.spec_json())
        if isinstance(plan, Refusal):
            await self._events.record(entry.obj, "Warning", Reason.ADVICE_NOT_APPLIED, plan.message)
        elif plan is not None:
            await self._apply(entry, key, plan, advice_spec, now)

    async def _apply(self, entry: ScalerEntry, key: Key, plan: Apply, advice: AdviceSpec, now: datetime) -> None:
        """The spec patched first, then ``applied`` recorded over the object that patch returned."""
        refusal = await self._backend_ready(plan.backend) if plan.backend is not None else None
        if refusal is not None:
            await self._events.record(entry.obj, "Warning", Reason.ADVICE_NOT_APPLIED, refusal)
            return
        restore = {"spec": restore_patch(entry.spec_json(), plan.changes)}
        updated = await self._patch_spec(entry.obj, key, plan.changes, "apply")
        if updated is None:
            return
        record = AdviceApplied(
            generation=int(updated["metadata"].get("generation") or 0),
            patch=plan.patch,
            restore=json.dumps(restore, separators=(",", ":"), sort_keys=True),
            time=now,
            samples=0,
            misses=0,
        )
        if await self._write(updated, {"applied": record.to_wire()}) is None:
            log.warning("advice applied but not recorded scaler=%s/%s: its apply is not watched", *key)
        message = (
            f"applied the Proven advice {plan.patch}; restores {record.restore} if the spec is under-provisioned "
            f"for more than {advice.service_level} of the time over the next {format_duration(advice.every)}"
        )
        log.info("advice applied scaler=%s/%s patch=%s", *key, plan.patch)
        await self._events.record(updated, "Normal", Reason.ADVICE_APPLIED, message)

    async def _roll_back(
        self, entry: ScalerEntry, key: Key, advice: AdviceStatus, applied: AdviceApplied, why: str, now: datetime
    ) -> None:
        """The verdict first (:func:`failed_live`), then the spec restored, then ``applied`` marked rolled
        back: an evaluation that the restored spec sets off starts from a status that already says
        FailedLive, so that nothing it writes can say Proven again. A restore not made (the spec changed
        meanwhile, or this replica no longer writes) leaves the apply unmarked, to be tried again while
        its window is judged."""
        restore = _restore_of(applied)
        if restore is None:
            await self._events.record(
                entry.obj, "Warning", Reason.ADVICE_NOT_APPLIED, "status.advice.applied.restore is unreadable"
            )
            return
        obj: JSON | None = entry.obj
        verdict = failed_live(advice, applied, why)
        if verdict:
            obj = await self._write(entry.obj, verdict)
        if obj is not None and restore:
            obj = await self._patch_spec(obj, key, restore, "roll back")
        if obj is None:
            return
        marked = applied.model_copy(update={"rolled_back": why, "rolled_back_time": now})
        await self._write(obj, {"applied": marked.to_wire()})
        log.warning("advice rolled back scaler=%s/%s why=%s", *key, why)
        await self._events.record(obj, "Warning", Reason.ADVICE_ROLLED_BACK, f"restored {applied.restore}: {why}")

    async def _patch_spec(self, obj: JSON, key: Key, changes: JSON, what: str) -> JSON | None:
        """The scaler as patched with ``changes`` (a merge patch of its spec), conditional on the version
        ``obj`` is; None when not patched (a newer version exists, or no longer this replica's)."""
        body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "spec": changes}
        try:
            return await self._client.merge_patch(
                PREDICTIVE_SCALERS,
                key[0],
                key[1],
                body,
                field_manager=FIELD_MANAGER,
                fence=lambda: self._writer.may_write(key),
            )
        except (Conflict, NotFound, Fenced) as exc:
            log.info("advice %s deferred scaler=%s/%s: %s", what, *key, exc.reason)
        except Forbidden as exc:
            await self._events.record(
                obj,
                "Warning",
                Reason.ADVICE_NOT_APPLIED,
                f"may not patch the PredictiveScaler to {what} the advice (patch on predictivescalers, "
                f"docs/security.md): {exc.message}"[:1024],
            )
        except ApiError as exc:
            if exc.status != INVALID:
                log.warning("advice %s failed scaler=%s/%s error=%s", what, *key, exc)
                return None
            await self._events.record(
                obj,
                "Warning",
                Reason.ADVICE_NOT_APPLIED,
                f"the API server refused the patch to {what} the advice: {exc.message}"[:1024],
            )
        return None

    async def _backend_ready(self, backend: AdvisedBackend) -> str | None:
        """Create the advised SeasonalNaive ForecastBackend unless it exists; why the apply cannot go
        on, or None."""
        name = backend.name
        try:
            existing = await self._backend(name)
            if existing is None:
                await self._client.create(FORECAST_BACKENDS, None, _backend_object(backend))
                return None
        except Conflict:
            existing = await self._backend(name)  # created meanwhile
            if existing is None:
                return f"ForecastBackend {name!r} was deleted as it was created: tried again at the next evaluation"
        except Forbidden:
            return (
                f"may not create the advised ForecastBackend {name!r} (create on forecastbackends, "
                "docs/security.md): create it from status.advice.forecastBackend"
            )
        except ApiError as exc:
            return f"could not read or create ForecastBackend {name!r}: {exc}"
        return _same_backend(existing, backend)

    async def _backend(self, name: str) -> JSON | None:
        try:
            return await self._client.get(FORECAST_BACKENDS, None, name)
        except NotFound:
            return None

    async def _write(self, obj: JSON, advice: JSON) -> JSON | None:
        """Merge ``advice`` into ``status.advice`` of ``obj`` (fenced, with conflict retry); the object as
        written, or None."""
        return await self._writer.write(obj, status_of(obj), lambda base: {"advice": advice})


def failed_live(advice: AdviceStatus, applied: AdviceApplied, why: str) -> JSON:
    """The merge patch of ``status.advice`` that marks the advice rolled back FailedLive, so that the
    next advice does not advise its patch again: the verdict, and the verdict of its live record (which
    would otherwise restore Proven); nothing when the advice is no longer the one applied or already
    says so."""
    if advice.patch != applied.patch or advice.verdict == "FailedLive":
        return {}
    fields: JSON = {"verdict": "FailedLive", "message": f"FailedLive: applied, then rolled back: {why}"}
    if advice.live is not None and advice.live.patch_digest == patch_digest(applied.patch):
        fields["live"] = {"verdict": "FailedLive"}
    return fields


def _restore_of(applied: AdviceApplied) -> JSON | None:
    """The spec part of ``applied.restore``; None when it is not one."""
    try:
        restore = json.loads(applied.restore)
    except ValueError:
        return None
    spec = restore.get("spec") if isinstance(restore, dict) else None
    return spec if isinstance(spec, dict) else None


def _backend_object(backend: AdvisedBackend) -> JSON:
    return {
        "apiVersion": API_VERSION,
        "kind": FORECAST_BACKEND.name,
        "metadata": {"name": backend.name},
        "spec": {
            "type": "SeasonalNaive",
            "seasonalNaive": {"season": format_duration(backend.season), "cycles": backend.cycles},
        },
    }


def _same_backend(existing: JSON, advised: AdvisedBackend) -> str | None:
    """None when ``existing`` is the advised SeasonalNaive backend; else why the apply cannot use it."""
    try:
        spec = parse(ForecastBackendSpec, existing.get("spec") or {})
    except SpecError:
        spec = None
    settings = spec.seasonal_naive_or_default if spec is not None and spec.type == "SeasonalNaive" else None
    if settings is not None and (settings.season, settings.cycles) == (advised.season, advised.cycles):
        return None
    return (
        f"ForecastBackend {advised.name!r} exists with other settings than the advised SeasonalNaive "
        f"(season {format_duration(advised.season)}, cycles {advised.cycles}): rename or remove it"
    )
