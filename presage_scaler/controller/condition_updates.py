"""Building the conditions presage writes (:class:`ConditionUpdate`, merged into ``status.conditions``):
the ``Ready``/``Degraded`` pair every PredictiveScaler and ForecastBackend reports, and a
PredictiveScaler's ``Consumed`` (whether anything applies its recommendation, and whether a KEDA
formula stands between it and the count) and ``SpecAdjusted`` (whether the last evaluation sized it
with anything other than its spec states or probably means).

A condition's ``lastTransitionTime`` moves only when its status flips, so ``kubectl describe``
answers "since when" truthfully; reason and message may change without a transition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from presage_scaler.api.conditions import Condition, ConditionStatus
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.reasons import Reason
from presage_scaler.api.serving_contract import SCALER_KEY
from presage_scaler.engine.adjustments import Adjustment

READY = "Ready"
DEGRADED = "Degraded"
CONSUMED = "Consumed"
SPEC_ADJUSTED = "SpecAdjusted"


@dataclass(frozen=True)
class ConditionUpdate:
    type: str
    status: ConditionStatus
    reason: Reason
    message: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", Reason(self.reason))


def merge_conditions(
    existing: Sequence[Condition] | None, updates: Iterable[ConditionUpdate], generation: int | None, now: datetime
) -> list[Condition]:
    """Apply ``updates`` over ``existing``, keeping transition times of unchanged statuses and other types."""
    by_type = {c.type: c for c in existing or ()}
    for update in updates:
        previous = by_type.get(update.type)
        transitioned = previous is None or previous.status != update.status
        by_type[update.type] = Condition(
            type=update.type,
            status=update.status,
            reason=update.reason,
            message=update.message,
            observed_generation=generation,
            last_transition_time=now if transitioned or previous is None else previous.last_transition_time,
        )
    return sorted(by_type.values(), key=lambda c: c.type)


def find(conditions: Sequence[Condition] | None, type_: str) -> Condition | None:
    return next((c for c in conditions or () if c.type == type_), None)


class ScaledObjectConsumers(Protocol):
    """Which KEDA ScaledObjects apply a PredictiveScaler (``KubeScaledObjectTriggers`` in a cluster)."""

    def consumers(self, namespace: str, scaler: str) -> Sequence[str] | None:
        """The ScaledObjects in ``namespace`` with an external trigger naming ``scaler``, sorted;
        ``None`` when ScaledObjects are not known (KEDA's CRD not served, or the watch not synced)."""
        ...

    def formulas(self, namespace: str, scaler: str) -> Mapping[str, str]:
        """Those of :meth:`consumers` that compose their triggers with ``advanced.scalingModifiers``,
        each with its formula."""
        ...


def consumed_condition(
    spec: PredictiveScalerSpec, namespace: str, name: str, scaled_objects: ScaledObjectConsumers
) -> ConditionUpdate:
    """``Consumed``: whether anything applies this scaler's recommendation.

    presage only serves numbers; a KEDA ScaledObject (or, for an Agones Fleet, a FleetAutoscaler
    webhook) applies them. An Enforce scaler with neither changes nothing, silently: this says so.
    FleetAutoscalers are Agones' objects and not watched, so for a Fleet it can only be Unknown (the
    webhook's requests are no evidence either: the Service spreads them over every replica, and the
    leader, which writes status, need not see any).
    """
    found = scaled_objects.consumers(namespace, name)
    if found:
        plural = "s" if len(found) > 1 else ""
        named = (
            f"KEDA ScaledObject{plural} {', '.join(found)} in namespace {namespace} "
            f"{'name' if plural else 'names'} this scaler in an external trigger ({SCALER_KEY}: {name})"
        )
        formulas = scaled_objects.formulas(namespace, name)
        if formulas:
            return ConditionUpdate(CONSUMED, "True", Reason.SCALING_MODIFIERS, named + _formula_warning(spec, formulas))
        return ConditionUpdate(CONSUMED, "True", Reason.SCALED_OBJECT_FOUND, named)
    target = spec.scale_target_ref
    if target.is_agones_fleet:
        return ConditionUpdate(
            CONSUMED,
            "Unknown",
            Reason.AGONES_WEBHOOK,
            f"Fleet {target.name} is scaled by a FleetAutoscaler whose webhook is presage's "
            "(/agones/v1/scale); presage does not watch FleetAutoscalers, so it cannot tell whether one "
            f"exists: kubectl get fleetautoscalers -n {namespace}",
        )
    if found is None:
        return ConditionUpdate(
            CONSUMED,
            "Unknown",
            Reason.SCALED_OBJECTS_UNKNOWN,
            "ScaledObjects are not known (is KEDA installed, and may presage list/watch scaledobjects.keda.sh?): "
            "cannot tell whether one applies this scaler",
        )
    effect = "nothing applies the recommendation" if spec.mode == "Enforce" else "Shadow needs none, but Enforce will"
    return ConditionUpdate(
        CONSUMED,
        "False",
        Reason.NO_SCALED_OBJECT,
        f"no KEDA ScaledObject in namespace {namespace} has an external trigger with {SCALER_KEY}: {name}; "
        f"{effect}: presage scaledobject {name} -n {namespace} | kubectl apply -f -",
    )


def _formula_warning(spec: PredictiveScalerSpec, formulas: Mapping[str, str]) -> str:
    """What a scalingModifiers formula does to presage's answer, in this scaler's mode."""
    which = "; ".join(f"{so}: {formula!r}" for so, formula in sorted(formulas.items()))
    effect = (
        "in Shadow presage answers 0 beside other triggers (the current count when alone), and the formula "
        "passes that on: an average or a sum moves the count, max() leaves it"
        if spec.mode == "Shadow"
        else "the count is the formula's result, not the recommendation as presage made it"
    )
    return (
        f"; but KEDA scales to advanced.scalingModifiers.formula ({which}), not to presage's answer: {effect}. "
        "Drop presage's trigger from a ScaledObject with a formula, or give presage a ScaledObject of its own"
    )


def hides_known(consumed: ConditionUpdate, was: Condition | None, generation: int) -> bool:
    """Whether ``consumed`` is a cache's ``ScaledObjectsUnknown`` over a True or False that ``was``
    written for this same generation."""
    return (
        consumed.reason == Reason.SCALED_OBJECTS_UNKNOWN
        and was is not None
        and was.status != "Unknown"
        and was.observed_generation == generation
    )


def consumed_warning_due(mode: str, was: Condition | None, consumed: ConditionUpdate, generation: int) -> bool:
    """Whether ``consumed`` warrants a Warning Event now: an Enforce scaler that nothing applies
    (False), or a Shadow scaler whose answer a ScaledObject's formula passes on to the count
    (:data:`Reason.SCALING_MODIFIERS`); once it is found so, and again after each spec change (a
    switch of mode is one) while it stays so.

    Decided from the ``Consumed`` condition last written (``was``), so a restart or a new leader
    does not warn again.
    """
    repeat = (
        was is not None
        and was.status == consumed.status
        and was.reason == consumed.reason
        and was.observed_generation == generation
    )
    warns = (mode == "Enforce" and consumed.status == "False") or (
        mode == "Shadow" and consumed.reason == Reason.SCALING_MODIFIERS
    )
    return warns and not repeat


def spec_adjusted_condition(adjustments: Sequence[Adjustment]) -> ConditionUpdate:
    """``SpecAdjusted``: True, with the most consequential adjustment's reason and every adjustment
    in the message, when the last evaluation sized the scaler with anything other than its spec
    states or probably means (:mod:`presage_scaler.engine.adjustments`)."""
    if not adjustments:
        return ConditionUpdate(
            SPEC_ADJUSTED,
            "False",
            Reason.AS_SPECIFIED,
            "the last evaluation used the spec as written: its capacity, headroom, lead time and horizon",
        )
    return ConditionUpdate(SPEC_ADJUSTED, "True", adjustments[0].reason, "; ".join(a.message for a in adjustments))
