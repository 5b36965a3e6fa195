"""Conditions: the ``Ready``/``Degraded`` pair every PredictiveScaler and ForecastBackend reports.

A condition's ``lastTransitionTime`` moves only when its status flips, so ``kubectl describe``
answers "since when" truthfully; reason and message may change without a transition.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from presage_scaler.api.types import Condition, ConditionStatus

READY = "Ready"
DEGRADED = "Degraded"


@dataclass(frozen=True)
class ConditionUpdate:
    type: str
    status: ConditionStatus
    reason: str
    message: str


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
