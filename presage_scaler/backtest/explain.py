"""Where presage's cost goes, after the warm-up: how often its calibrated quantiles covered the
sizing window's highest demand, which constraint decided each count, and a plain sentence when one
constraint decided most of them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from presage_scaler.api.binding_constraints import FORECAST, Constraint
from presage_scaler.api.predictive_scaler import PolicySpec
from presage_scaler.api.quantities import format_duration
from presage_scaler.backtest.replay import PresageRecord
from presage_scaler.series.rolling import window_maxima

DOMINANT_SHARE = 0.5
"""A constraint that decided more than this share of the decisions is called out."""

# Float forecasts and demand: a window maximum a rounding error above the forecast is still covered.
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Coverage:
    """How often the realised maximum of the sizing window was at or below each calibrated quantile."""

    target: float
    """Share of decisions covered by the targetQuantile forecast."""
    scale_down: float
    """Share covered by the scaleDownQuantile forecast."""
    decisions: int
    """Decisions after the warm-up whose window had been observed by the end of the trace."""
    calibrated: float
    """Share of those decisions whose forecast was calibrated (the rest used the backend's own band)."""


def coverage(record: PresageRecord, signal: np.ndarray, report_from_step: int) -> Coverage:
    """Coverage of presage's decisions at trace steps ``report_from_step`` and later."""
    counted = (record.steps >= report_from_step) & (record.window_starts + record.window <= len(signal))
    if not counted.any():
        return Coverage(target=float("nan"), scale_down=float("nan"), decisions=0, calibrated=float("nan"))
    realised = window_maxima(signal, record.window_starts[counted], record.window)
    margin = _TOLERANCE * np.maximum(np.abs(realised), 1.0)
    return Coverage(
        target=float(np.mean(realised <= record.upper[counted] + margin)),
        scale_down=float(np.mean(realised <= record.lower[counted] + margin)),
        decisions=int(counted.sum()),
        calibrated=float(np.mean(record.calibrated[counted])),
    )


def constraint_counts(record: PresageRecord, report_from_step: int) -> dict[str, int]:
    """How many decisions after the warm-up (at trace steps ``report_from_step`` and later, the steps
    every metric counts) each constraint decided, most first."""
    counted = Counter(
        c or FORECAST
        for step, c in zip(record.steps.tolist(), record.constraints, strict=True)
        if step >= report_from_step
    )
    return dict(counted.most_common())


def constraint_shares(record: PresageRecord, report_from_step: int) -> dict[str, float]:
    """:func:`constraint_counts` as shares of the decisions counted, largest first."""
    counts = constraint_counts(record, report_from_step)
    total = sum(counts.values())
    return {name: count / total for name, count in counts.items()}


def _sentence(constraint: str, policy: PolicySpec) -> str:
    guard = policy.scale_down_uncertainty_guard
    stabilization = policy.stabilization
    reasons: dict[str, str] = {  # keyed by name: a Constraint is its string (a StrEnum)
        Constraint.FORECAST_UNCERTAINTY: (
            f"this signal is too noisy for maxRelativeSpread {guard.max_relative_spread:g}, so capacity is held at its "
            "peaks; a larger maxRelativeSpread (or the guard disabled) releases it, at the risk the guard exists for"
        ),
        Constraint.SCALE_DOWN_WINDOW: (
            f"every release waits {format_duration(stabilization.scale_down_window)} (scaleDownWindow); a shorter "
            "window follows falling demand sooner"
        ),
        Constraint.REACTIVE_FLOOR: (
            "current demand plus the floor's buffer was above the forecast: the forecast trails the signal, or "
            "bufferSize is large"
        ),
        Constraint.MAX_SCALE_UP_RATE: (
            f"maxScaleUpRate {stabilization.max_scale_up_rate} held back scale-ups the forecast asked for"
        ),
        Constraint.MAX_SCALE_DOWN_RATE: (
            f"maxScaleDownRate {stabilization.max_scale_down_rate} slowed releases the forecast allowed"
        ),
        Constraint.MAX_REPLICAS: f"maxReplicas {policy.max_replicas} capped what the forecast asked for",
        Constraint.MIN_REPLICAS: f"minReplicas {policy.min_replicas} kept more than the forecast asked for",
    }
    return reasons[constraint]


def note(shares: dict[str, float], policy: PolicySpec) -> str:
    """A plain sentence naming the constraint that decided most counts, or "" when none did (or the
    forecast itself did, which is what it is for)."""
    dominant = [name for name, share in shares.items() if share > DOMINANT_SHARE and name != FORECAST]
    if not dominant:
        return ""
    name = dominant[0]
    return f"{name} held {100 * shares[name]:.0f} % of decisions: {_sentence(name, policy)}."
