"""What the controller and the servers that answer KEDA and Agones agree on: the ScaledObject trigger
metadata key that names a PredictiveScaler, and the age past which a recommendation is refused.

The controller writes ScaledObjects and the Ready condition by these; ``serving/`` answers by them,
so each is declared once, below both.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

SCALER_KEY = "predictiveScaler"
"""The trigger metadata key whose value is the PredictiveScaler's name."""


@dataclass(frozen=True)
class StalenessBound:
    """A recommendation older than ``max(factor × interval, floor)`` is refused with UNAVAILABLE.

    Three missed evaluations (default) means the controller is not keeping up; the floor keeps
    short intervals from flapping on ordinary scheduling jitter.
    """

    factor: float = 3.0
    floor: timedelta = timedelta(minutes=2)

    def max_age(self, interval: timedelta) -> timedelta:
        return max(interval * self.factor, self.floor)

    def served_within(self, interval: timedelta, agones_max_age: timedelta | None) -> timedelta:
        """The age past which a recommendation is refused anywhere: this bound, or an Agones Fleet's
        maximum recommendation age where that is shorter."""
        bound = self.max_age(interval)
        return bound if agones_max_age is None else min(bound, agones_max_age)
