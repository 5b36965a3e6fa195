"""Conditions: the ``Ready``/``Degraded`` pair every PredictiveScaler and ForecastBackend reports, and a
PredictiveScaler's ``Consumed`` (whether anything applies its recommendation) and ``SpecAdjusted``
(whether the last evaluation used the spec as written).

A condition's ``lastTransitionTime`` moves only when its status flips, so ``kubectl describe``
answers "since when" truthfully; reason and message may change without a transition.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from presage_scaler.api.conditions import Condition, ConditionStatus
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.reasons import Reason
from presage_scaler.engine.leadtime import Adjustment
from presage_scaler.serving.keda import SCALER_KEY

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
        return ConditionUpdate(
            CONSUMED,
            "True",
            Reason.SCALED_OBJECT_FOUND,
            f"KEDA ScaledObject{plural} {', '.join(found)} in namespace {namespace} "
            f"{'name' if plural else 'names'} this scaler in an external trigger ({SCALER_KEY}: {name})",
        )
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


def hides_known(consumed: ConditionUpdate, was: Condition | None, generation: int) -> bool:
    """Whether ``consumed`` is a cache's ``ScaledObjectsUnknown`` over a True or False that ``was``
    written for this same generation."""
    return (
        consumed.reason == Reason.SCALED_OBJECTS_UNKNOWN
        and was is not None
        and was.status != "Unknown"
        and was.observed_generation == generation
    )


def unconsumed_warning_due(was: Condition | None, consumed: ConditionUpdate, generation: int) -> bool:
    """Whether an Enforce scaler's ``consumed`` warrants a Warning Event now: when it is False, once
    it is found so, and again after each spec change (a switch to Enforce is one) while it stays so.

    Decided from the ``Consumed`` condition last written (``was``), so a restart or a new leader
    does not warn again.
    """
    repeat = (
        was is not None
        and was.status == consumed.status
        and was.reason == consumed.reason
        and was.observed_generation == generation
    )
    return consumed.status == "False" and not repeat


def spec_adjusted_condition(adjustments: Sequence[Adjustment]) -> ConditionUpdate:
    """``SpecAdjusted``: True, with the most consequential adjustment's reason and every adjustment
    in the message, when the last evaluation used another lead time or horizon than the spec's."""
    if not adjustments:
        return ConditionUpdate(
            SPEC_ADJUSTED,
            "False",
            Reason.AS_SPECIFIED,
            "the last evaluation used the lead time and horizon as specified",
        )
    return ConditionUpdate(SPEC_ADJUSTED, "True", adjustments[0].reason, "; ".join(a.message for a in adjustments))
