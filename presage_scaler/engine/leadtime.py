"""Resolve the lead time and the forecast horizon. Pure functions; what resolving them changed is
:mod:`presage_scaler.engine.adjustments`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from presage_scaler.api.predictive_scaler import ForecastSpec, LeadTimeSpec
from presage_scaler.api.quantities import format_duration
from presage_scaler.api.reasons import Reason
from presage_scaler.series.timegrid import steps_for


class HorizonError(ValueError):
    """The backend cannot forecast as far as the lead time."""

    reason = Reason.HORIZON_TOO_SHORT


@dataclass(frozen=True)
class LeadTime:
    """The lead time used for one evaluation, and whether the [min, max] clamp changed it."""

    value: timedelta
    source: str
    clamped: bool = False


def resolve_lead_time(spec: LeadTimeSpec, observed_seconds: float | None = None) -> LeadTime:
    """Static, or the Observed query's value in seconds; either way clamped into [min, max]."""
    if spec.source == "Observed":
        if observed_seconds is None:
            raise ValueError("an Observed lead time needs the observed query's value")
        raw = timedelta(seconds=max(observed_seconds, 0.0))
    else:
        raw = spec.static
    clamped = min(max(raw, spec.min), spec.max)
    return LeadTime(value=clamped, source=spec.source, clamped=clamped != raw)


MAX_FORECAST_STEPS = 20_000
"""The most forecast steps presage asks any backend for, whatever the spec says: ``horizon: 99999h``
at ``resolution: 1s`` is 360 million steps, which would exhaust memory rather than fail."""


def resolve_horizon(
    spec: ForecastSpec, lead: timedelta, interval: timedelta, step: timedelta, max_horizon: int | None
) -> int:
    """Forecast steps to request: ``horizon`` or 4× the lead time, and never fewer than the sizing
    window (next step up to lead time + ``interval``), so that the horizon never changes what is
    sized; at most what the backend allows (and :data:`MAX_FORECAST_STEPS`). A window beyond the
    backend's limit is read over the steps it covers. Raises :class:`HorizonError` when even the
    lead time does not fit."""
    lead_steps = steps_for(lead, step)
    horizon = max(asked_steps(spec, lead, step), steps_for(lead + interval, step))
    limit = step_limit(max_horizon)
    if lead_steps > limit:
        who = "the backend forecasts" if limit == max_horizon else "presage forecasts"
        raise HorizonError(
            f"lead time {format_duration(lead)} needs {lead_steps} steps of {format_duration(step)}, but {who} at "
            f"most {limit} steps: use a coarser resolution, a shorter leadTime.max"
            + (", or a larger maxHorizon" if limit == max_horizon else "")
        )
    return min(horizon, limit)


def asked_steps(spec: ForecastSpec, lead: timedelta, step: timedelta) -> int:
    """The horizon the spec asks for, in steps: ``horizon``, or 4× the lead time."""
    return steps_for(spec.horizon, step) if spec.horizon is not None else 4 * steps_for(lead, step)


def step_limit(max_horizon: int | None) -> int:
    """The most forecast steps requested: the backend's maxHorizon, and never more than MAX_FORECAST_STEPS."""
    return MAX_FORECAST_STEPS if max_horizon is None else min(max_horizon, MAX_FORECAST_STEPS)
