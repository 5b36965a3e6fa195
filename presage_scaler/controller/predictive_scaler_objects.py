"""Reading PredictiveScaler objects: the spec (parsed once per generation), the status, and the
recommendation store's view of both."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime

from pydantic import ValidationError

from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.predictive_scaler_status import PredictiveScalerStatus
from presage_scaler.api.reasons import Reason
from presage_scaler.clients.kube.client import JSON
from presage_scaler.controller.status_cadence import WrittenStatus, degraded, forecast_time
from presage_scaler.engine.evaluator import EvaluationError
from presage_scaler.serving.store import StoredRecommendation, TargetRef

log = logging.getLogger(__name__)

Key = tuple[str, str]
"""A scaler's (namespace, name)."""


UNREAD_METADATA = frozenset({"managedFields", "annotations"})
"""Metadata the controller never reads: server-side apply's field owners (~12 KiB of JSON per
object) and annotations (kubectl's last-applied copy of the whole spec, among others)."""


def compact(obj: JSON) -> JSON:
    """``obj`` without :data:`UNREAD_METADATA`, which the controller would otherwise keep for every
    scaler (the object itself is not changed)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and not UNREAD_METADATA.isdisjoint(meta):
        return {**obj, "metadata": {k: v for k, v in meta.items() if k not in UNREAD_METADATA}}
    return obj


class ScalerEntry:
    """The controller's copy of one PredictiveScaler: the newest object seen (:func:`compact`, its
    spec and status kept apart as compact JSON: a status holds up to 32 pending shadow predictions,
    ~15 KiB as parsed JSON and ~4 KiB as text, and a spec, parsed once per generation by
    :class:`SpecCache`, is read as JSON only then) and its generation.

    The status it reads is the written one, or a newer one an evaluation held instead of writing
    (:mod:`~presage_scaler.controller.status_cadence`); a held status is dropped when the watch brings
    a status other than the one it was computed on (another replica wrote since).
    """

    __slots__ = (
        "_held",
        "_spec_json",
        "_status_json",
        "_written",
        "_written_hash",
        "generation",
        "obj",
        "scheduled_generation",
        "vouched",
    )

    def __init__(self, obj: JSON, generation: int) -> None:
        self.generation = generation
        self.scheduled_generation: int | None = None  # generation the last evaluation started from
        self._held = False
        self.vouched: datetime | None = None
        """When the latest held evaluation started: the written status's visible outcome was confirmed
        then (None when none was held since the status was written)."""
        self.keep(obj)

    def keep(self, obj: JSON) -> None:
        """Keep ``obj``, a newer version from the watch."""
        head = compact(obj)
        status = head.get("status")
        status_json = _compact_json(status)
        self._spec_json = _compact_json(head.get("spec"))
        self.obj: JSON = {k: v for k, v in head.items() if k not in ("spec", "status")}
        if self._held and hash(status_json) == self._written_hash:
            return  # the status the held one was computed on: keep the held one
        self._held = False
        self.vouched = None
        self._status_json = status_json
        self._written_hash: int = hash(status_json)
        self._written: WrittenStatus | None = None  # read when first needed: only the scaler's evaluator does

    def accept(self, written: JSON) -> None:
        """Keep ``written`` (a status write's answer) unless a newer object has arrived meanwhile."""
        if newer_or_same(written, self.obj):
            self._held = False
            self.keep(written)

    def hold(self, status: JSON, evaluated: datetime) -> None:
        """Keep ``status``, from the evaluation started at ``evaluated``, as this scaler's status without
        writing it (the written one stays :attr:`written`, its visible outcome confirmed then)."""
        self._written = self.written
        self._status_json = json.dumps(status, separators=(",", ":")).encode()
        self._held = True
        self.vouched = evaluated

    def confirmed(self) -> datetime | None:
        """When the written status's visible outcome was last confirmed: by a held evaluation, or by
        the evaluation that wrote it."""
        return self.vouched or self.written.generated_at

    @property
    def written(self) -> WrittenStatus:
        """What the status last written shows."""
        if self._written is None:  # not holding: the kept status is the written one
            self._written = WrittenStatus.of(self.status_json())
        return self._written

    @property
    def holding(self) -> bool:
        """Whether the status kept is newer than the one written."""
        return self._held

    def status_json(self) -> JSON:
        """The kept status as JSON (the held one if any)."""
        loaded = json.loads(self._status_json)
        return loaded if isinstance(loaded, dict) else {}

    def spec_json(self) -> JSON:
        """The kept spec as JSON (what :class:`SpecCache` parses when the generation is new to it)."""
        loaded = json.loads(self._spec_json)
        return loaded if isinstance(loaded, dict) else {}

    def spec(self, specs: SpecCache) -> PredictiveScalerSpec:
        """The spec, parsed once per generation by ``specs``; :class:`EvaluationError` when invalid."""
        return specs.parsed(self.obj["metadata"], self.spec_json)

    def status(self) -> PredictiveScalerStatus:
        """The kept status (the held one if any), as :func:`status_of` reads it."""
        try:
            return PredictiveScalerStatus.model_validate_json(self._status_json)
        except (ValidationError, RecursionError):
            return _unreadable(self.obj)


def _compact_json(value: object) -> bytes:
    """``value`` (an object, or None for an empty one) as compact JSON text; JSON ``null`` when it is
    nested past what JSON text may be, which reads back as unreadable (as in :func:`status_of`)."""
    try:
        return json.dumps(value or {}, separators=(",", ":")).encode()
    except (RecursionError, ValueError):
        return b"null"


def _parse_spec(spec: object) -> PredictiveScalerSpec:
    try:
        return parse(PredictiveScalerSpec, spec or {})
    except SpecError as exc:
        raise EvaluationError(Reason.INVALID_SPEC, str(exc)) from exc


class SpecCache:
    """Parsed specs by (uid, generation): status updates arrive every interval, spec changes rarely."""

    def __init__(self) -> None:
        self._items: dict[str, tuple[int, PredictiveScalerSpec | EvaluationError]] = {}

    def get(self, obj: JSON) -> PredictiveScalerSpec:
        return self.parsed(obj["metadata"], lambda: obj.get("spec"))

    def parsed(self, meta: JSON, spec: Callable[[], object]) -> PredictiveScalerSpec:
        """The spec of the object ``meta`` describes, ``spec()`` parsed when its generation is new here."""
        name: str = meta["name"]
        uid: str = meta.get("uid", name)
        generation = int(meta.get("generation") or 0)
        cached = self._items.get(uid)
        if cached is None or cached[0] != generation:
            try:
                parsed: PredictiveScalerSpec | EvaluationError = _parse_spec(spec())
            except EvaluationError as exc:
                parsed = exc
            cached = self._items[uid] = (generation, parsed)
        if isinstance(cached[1], EvaluationError):
            raise cached[1]
        return cached[1]

    def forget(self, obj: JSON) -> None:
        self._items.pop(obj["metadata"].get("uid", obj["metadata"]["name"]), None)


def status_of(obj: JSON) -> PredictiveScalerStatus:
    """The object's status; an unreadable one (written by hand, or by a newer version) reads as empty."""
    try:
        return PredictiveScalerStatus.model_validate(obj.get("status") or {})
    except (ValidationError, RecursionError):
        return _unreadable(obj)


def _unreadable(obj: JSON) -> PredictiveScalerStatus:
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
    generated = forecast_time(status)
    if not isinstance(recommended, int) or generated is None:
        return None
    try:
        spec = specs.get(obj)
    except EvaluationError:
        return None
    target = spec.scale_target_ref
    return StoredRecommendation(
        namespace=obj["metadata"]["namespace"],
        name=obj["metadata"]["name"],
        mode=spec.mode,
        target=TargetRef(api_version=target.api_version, kind=target.kind, name=target.name),
        recommended_replicas=recommended,
        current_replicas=current if isinstance(current, int) else None,
        generated_at=generated,
        interval=spec.interval,
        min_replicas=spec.policy.min_replicas,
        max_replicas=spec.policy.max_replicas,
        agones_max_age=target.agones.max_recommendation_age if target.agones and target.is_agones_fleet else None,
        degraded=degraded(status),
    )


def newer_or_same(candidate: JSON, cached: JSON) -> bool:
    """Whether ``candidate`` is at least as new as ``cached`` (etcd versions are integers)."""
    a, b = candidate["metadata"].get("resourceVersion", ""), cached["metadata"].get("resourceVersion", "")
    return not (a.isdigit() and b.isdigit()) or int(a) >= int(b)
