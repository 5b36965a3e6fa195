"""What a scaler is sized with other than its spec says, or than its author probably meant: the
``SpecAdjusted`` condition's reasons, which ``presage scaledobject`` prints as warnings too. Pure
functions that describe, never decide: nothing here refuses or changes what the reference allows.

Most consequential first (:data:`ORDER`):

* ``CapacityDefaulted``: the single-signal form without ``capacity``. The reference defaults it to
  one replica per signal unit, right for a signal that counts replicas and far off for any other
  (a request rate of 174 per second asks for 174 replicas).
* ``AbsoluteHeadroom``: ``policy.headroom`` written as a number is that many signal units, not a
  percentage (``10`` is ten requests per second, ``"10%"`` a tenth of the forecast).
* ``LeadTimeClamped``: the lead time resolved outside ``[leadTime.min, leadTime.max]`` and clamped.
* ``HorizonCut``: the horizon cut to the backend's ``maxHorizon`` or presage's own limit.
* ``HorizonRaised``: the horizon raised to the sizing window, so that it never changes what is sized.

The first two follow from the spec alone; the others from resolving the lead time and the horizon as
an evaluation does (:mod:`presage_scaler.engine.leadtime`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from presage_scaler.api.predictive_scaler import LeadTimeSpec, PredictiveScalerSpec
from presage_scaler.api.quantities import format_duration
from presage_scaler.api.reasons import Reason
from presage_scaler.engine.leadtime import (
    LeadTime,
    asked_steps,
    resolve_horizon,
    resolve_lead_time,
    step_limit,
)
from presage_scaler.series.timegrid import steps_for

ORDER = (
    Reason.CAPACITY_DEFAULTED,
    Reason.ABSOLUTE_HEADROOM,
    Reason.LEAD_TIME_CLAMPED,
    Reason.HORIZON_CUT,
    Reason.HORIZON_RAISED,
)
"""Every adjustment's reason, most consequential first: the condition's reason is the first found."""


@dataclass(frozen=True)
class Adjustment:
    """One value a scaler is sized with other than its spec states or probably means: a condition
    reason, and a message saying what the spec says, what is used and what to write instead."""

    reason: Reason
    message: str


def spec_adjustments(
    spec: PredictiveScalerSpec, lead: LeadTime | None, max_horizon: int | None
) -> tuple[Adjustment, ...]:
    """Every adjustment of ``spec`` in :data:`ORDER`; empty when it is sized exactly as written.

    ``lead``: the lead time an evaluation resolved; None when none is known (an Observed lead time
    before any evaluation), which leaves out the lead time and the horizon. ``max_horizon``: the
    ForecastBackend's, None for presage's own limit alone. The horizon is the one
    :func:`~presage_scaler.engine.leadtime.resolve_horizon` requests (one per signal resolution), so
    a lead time beyond the limit raises :class:`~presage_scaler.engine.leadtime.HorizonError` here as
    it fails the evaluation there. A horizon raised to the sizing window is reported whether it was
    the default or set: either way the horizon asked for is not the one used.
    """
    found = list(_written(spec))
    if lead is not None:
        if lead.clamped:
            found.append(Adjustment(Reason.LEAD_TIME_CLAMPED, _clamp_message(spec.lead_time, lead)))
        signals = [spec.signal] if spec.signal is not None else list(spec.signals or ())
        for step in dict.fromkeys(s.resolution for s in signals):
            found.extend(_horizon_adjustments(spec, lead.value, step, max_horizon))
    return tuple(sorted(found, key=lambda a: ORDER.index(a.reason)))


def planned_adjustments(spec: PredictiveScalerSpec) -> tuple[Adjustment, ...]:
    """What the spec alone shows before any evaluation (``presage scaledobject``): a Static lead time
    resolves as every evaluation will, an Observed one is not known yet; the horizon is held against
    presage's own limit (a ForecastBackend's ``maxHorizon`` may cut it further: the scaler's
    ``SpecAdjusted`` condition says). Raises :class:`~presage_scaler.engine.leadtime.HorizonError`
    when no evaluation can succeed."""
    lead = resolve_lead_time(spec.lead_time) if spec.lead_time.source == "Static" else None
    return spec_adjustments(spec, lead, None)


def _written(spec: PredictiveScalerSpec) -> list[Adjustment]:
    """The adjustments the spec alone decides: a defaulted capacity, an absolute headroom."""
    found = []
    if spec.signal is not None and spec.capacity is None:
        found.append(
            Adjustment(
                Reason.CAPACITY_DEFAULTED,
                "capacity is not set, so the reference's default applies: one replica per signal unit "
                "(capacity.perReplica 1), and the scaler asks for as many replicas as the signal's value (a "
                "signal of 174 requests per second asks for 174 replicas and more); set capacity.perReplica to "
                "what one replica serves, or to 1 where the signal counts replicas",
            )
        )
    headroom = spec.policy.headroom
    if not headroom.percent and headroom.value != 0:
        units = "signal units" if spec.signal is not None else "units of each signal"
        found.append(
            Adjustment(
                Reason.ABSOLUTE_HEADROOM,
                f"policy.headroom {headroom} is a number, so it means {headroom} {units} on top of the forecast, not "
                f'{headroom} %: write "{headroom}%" for a share of the forecast (an absolute headroom is allowed, '
                "and this says so while it is set)",
            )
        )
    return found


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
    """The horizon asked for at one resolution against the one ``resolve_horizon`` requests."""
    used = resolve_horizon(spec.forecast, lead, spec.interval, step, max_horizon)
    window = steps_for(lead + spec.interval, step)
    explicit = spec.forecast.horizon
    wanted = asked_steps(spec.forecast, lead, step)
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
        limit = step_limit(max_horizon)
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
