"""A ForecastUncertainty hold read from a PredictiveScaler's status and spec alone, as
docs/concepts.md ("Reading a guard hold from status") tells a user to: no presage code decides it,
only the spec's defaults are read through the declared API."""

from __future__ import annotations

from typing import Any

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec


def guard_held(status: dict[str, Any], spec: dict[str, Any]) -> bool:
    """Whether the uncertainty guard held the count, from ``status`` and ``spec`` as JSON: a scale-down
    (the larger of predictive and reactive, within [minReplicas, maxReplicas], below currentReplicas),
    the guard enabled, and guardSpread above maxRelativeSpread, compared as numbers."""
    policy = parse(PredictiveScalerSpec, spec).policy
    breakdown = status["breakdown"]
    number = max(breakdown["predictive"], breakdown.get("reactive", 0))
    bounded = min(max(number, policy.min_replicas), policy.max_replicas)
    guard = policy.scale_down_uncertainty_guard
    return (
        bounded < status["currentReplicas"]
        and guard.enabled
        and float(breakdown["guardSpread"]) > guard.max_relative_spread
    )


def guard_held_at(status: dict[str, Any], spec: dict[str, Any]) -> int | None:
    """What the guard held the count at, from ``status`` and ``spec`` as JSON: currentReplicas, within
    maxReplicas (the bound applied after the guard); None where the guard did not hold."""
    if not guard_held(status, spec):
        return None
    return min(status["currentReplicas"], parse(PredictiveScalerSpec, spec).policy.max_replicas)


def forecast_uncertainty_named(status: dict[str, Any], spec: dict[str, Any]) -> bool:
    """Whether ``breakdown.constraint`` must be ForecastUncertainty: the guard held, and currentReplicas
    is within maxReplicas (above it, the bound applied after the guard is the constraint named)."""
    max_replicas = parse(PredictiveScalerSpec, spec).policy.max_replicas
    return guard_held(status, spec) and status["currentReplicas"] <= max_replicas
