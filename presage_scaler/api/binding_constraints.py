"""One vocabulary for *what bound a replica count*: ``breakdown.constraint``, the ``constraint``
label of ``presage_binding_constraint`` and the backtest's explanations.

A leaf module (it imports nothing of presage's), like :mod:`presage_scaler.api.reasons`, so the
policy, the CRD text, the metrics and the backtest name the same constraints without importing
each other.
"""

from __future__ import annotations

from enum import StrEnum


class Constraint(StrEnum):
    """A policy constraint that bound a decision, in the order the CRD text lists them. Values compare
    equal to their strings; ``breakdown.constraint`` is ``""`` when none bound."""

    MIN_REPLICAS = "MinReplicas"
    MAX_REPLICAS = "MaxReplicas"
    REACTIVE_FLOOR = "ReactiveFloor"
    FORECAST_UNCERTAINTY = "ForecastUncertainty"
    SCALE_DOWN_WINDOW = "ScaleDownWindow"
    MAX_SCALE_UP_RATE = "MaxScaleUpRate"
    MAX_SCALE_DOWN_RATE = "MaxScaleDownRate"


FORECAST = "Forecast"
"""What the forecast is called where a name is needed when it bound by itself (a metric label, the
backtest's shares), since ``breakdown.constraint`` is ``""`` then."""
