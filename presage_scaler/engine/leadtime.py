"""Resolve the lead time and the forecast horizon. Pure functions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from presage_scaler.api.predictive_scaler import ForecastSpec, LeadTimeSpec, PredictiveScalerSpec
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
    horizon = max(_asked_steps(spec, lead, step), steps_for(lead + interval, step))
    limit = _step_limit(max_horizon)
    if lead_steps > limit:
        who = "the backend forecasts" if limit == max_horizon else "presage forecasts"
        raise HorizonError(
            f"lead time {format_duration(lead)} needs {lead_steps} steps of {format_duration(step)}, but {who} at "
            f"most {limit} steps: use a coarser resolution, a shorter leadTime.max"
            + (", or a larger maxHorizon" if limit == max_horizon else "")
        )
    return min(horizon, limit)


def _asked_steps(spec: ForecastSpec, lead: timedelta, step: timedelta) -> int:
    """The horizon the spec asks for, in steps: ``horizon``, or 4× the lead time."""
    return steps_for(spec.horizon, step) if spec.horizon is not None else 4 * steps_for(lead, step)


def _step_limit(max_horizon: int | None) -> int:
    """The most forecast steps requested: the backend's maxHorizon, and never more than MAX_FORECAST_STEPS."""
    return MAX_FORECAST_STEPS if max_horizon is None else min(max_horizon, MAX_FORECAST_STEPS)


_ADJUSTMENT_ORDER = (Reason.LEAD_TIME_CLAMPED, Reason.HORIZON_CUT, Reason.HORIZON_RAISED)


@dataclass(frozen=True)
class Adjustment:
    """One number an evaluation used instead of what the spec asked for: a condition reason, and a
    message saying what was asked, what was used and why."""

    reason: Reason
    message: str


def spec_adjustments(spec: PredictiveScalerSpec, lead: LeadTime, max_horizon: int | None) -> tuple[Adjustment, ...]:
    """What an evaluation of ``spec`` that resolved ``lead`` used other than as written, most
    consequential first (:data:`Reason.LEAD_TIME_CLAMPED`, :data:`Reason.HORIZON_CUT`, :data:`Reason.HORIZON_RAISED`);
    empty when the spec was used as written.

    Describes, never decides: the horizon is the one :func:`resolve_horizon` requests (one per
    signal resolution), so the evaluation must have succeeded (a lead time beyond the limit raises
    :class:`HorizonError` here as there). A horizon raised to the sizing window is reported whether it
    was the default or set: either way the horizon asked for is not the one used.
    """
    found = [Adjustment(Reason.LEAD_TIME_CLAMPED, _clamp_message(spec.lead_time, lead))] if lead.clamped else []
    signals = [spec.signal] if spec.signal is not None else list(spec.signals or ())
    for step in dict.fromkeys(s.resolution for s in signals):
        found.extend(_horizon_adjustments(spec, lead.value, step, max_horizon))
    return tuple(sorted(found, key=lambda a: _ADJUSTMENT_ORDER.index(a.reason)))


def _clamp_message(spec: LeadTimeSpec, lead: LeadTime) -> str:
    """The clamp as the spec reads: an Observed value is not kept, only which bound it crossed."""
    if spec.source == "Observed":
        asked = "the leadTime.observed query's value"
        side = "outside" if spec.min == spec.max else "below" if lead.value == spec.min else "above"
    else:
        asked = f"leadTime.static {format_duration(spec.static)}"
        side = "below" if spec.static < spec.min else "above"
    bounds = f"[{format_duration(spec.min)}, {format_duration(spec.max)}]"
    return (
        f"{asked} is {side} [leadTime.min, leadTime.max] = {bounds}: the scaler is sized for the lead time "
        f"clamped into it, {format_duration(lead.value)}"
    )


def _horizon_adjustments(
    spec: PredictiveScalerSpec, lead: timedelta, step: timedelta, max_horizon: int | None
) -> list[Adjustment]:
    """The horizon asked for at one resolution against the one :func:`resolve_horizon` requests."""
    used = resolve_horizon(spec.forecast, lead, spec.interval, step, max_horizon)
    window = steps_for(lead + spec.interval, step)
    explicit = spec.forecast.horizon
    wanted = _asked_steps(spec.forecast, lead, step)
    asked = (
        f"forecast.horizon {format_duration(explicit)}"
        if explicit is not None
        else f"the default horizon (4 × the lead time {format_duration(lead)})"
    )
    asked += f" at resolution {format_duration(step)} is {wanted} steps"
    if window > wanted:
        asked += (
            f", raised to the sizing window (lead time + interval {format_duration(spec.interval)}, {window} steps)"
        )
    if used < max(wanted, window):
        limit = _step_limit(max_horizon)
        who = f"the backend's maxHorizon {limit}" if limit == max_horizon else f"presage's limit of {limit} steps"
        covered = (
            "the sizing window is still covered"
            if used >= window
            else "short of the sizing window: its highest demand is read over the steps forecast, and "
            "calibration accounts for the rest"
        )
        message = f"{asked}; cut to {used} steps ({format_duration(used * step)}), {who}; {covered}"
        return [Adjustment(Reason.HORIZON_CUT, message)]
    if used > wanted:
        return [Adjustment(Reason.HORIZON_RAISED, f"{asked}, so that the horizon never changes what is sized")]
    return []
