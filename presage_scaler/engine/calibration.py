"""Calibration: the highest demand of the sizing window at targetQuantile and scaleDownQuantile,
corrected by the backend's own recent errors. Pure: no I/O, time comes in as arguments.

A count decided now must serve every step of the sizing window (the next step up to lead time +
interval: pods added now are ready one lead time later, and the count holds until the next
evaluation's pods are), and the maximum of per-step quantiles is not a quantile of the maximum. So
each signal is sized from a forecast of the window's maximum, calibrated split-conformal style on
the backend's errors over the last day (``w`` is the window in steps, ``x`` the history, ``n`` its
length; a forecast made from the first ``o`` points has origin ``o``; a span "in steps" is the
whole steps that cover it, :func:`presage_scaler.series.timegrid.steps_for`):

Backend reference
    ``β(o)``: the maximum of the backend's point forecast over the window, made at origin ``o``.
Recent peak
    ``P(o) = max x[o - R … o - 1]``, ``R`` = RECENT_PEAK in steps (at least one; none before the
    history's start).
Held reference
    ``β̂(o) = max(β(o), P(o))``: the backend's reference, never below the peak of the last 15
    minutes. Where demand comes in bursts that last, a forecast that drops right after a peak
    releases capacity the demand still needs; where it is a smooth curve with step-to-step noise,
    the 15-minute peak is the noise's, well above the next few minutes' maximum, and holding it buys
    capacity nothing uses. So both are tried: the blend
    below is chosen for ``β̂`` and for ``β`` separately, and ``β`` is used where its chosen blend's
    ``c`` is at least PEAK_SAVING of the held one's lower; otherwise ``β̂``. Below, ``β`` stands for
    the one used.
Level
    ``ℓ(o)``: the mean of the LEVEL_WINDOW before ``o`` (at least one step): the forecast that says
    "as in the last hour".
Yesterday
    ``Y(o) = max x[o - D … o - D + w - 1]``: what the same window held the day before (``D`` =
    ANALOG in steps).
Reference
    ``ρ(o) = b·β(o) + (1 - b)·π(o)``, one partner ``π`` (the level ``ℓ`` or yesterday's ``Y``) and
    one backend weight ``b`` per current forecast, chosen among BLEND_WEIGHTS by what each would have
    cost over the day: ``c = mean max(0, ρ(o) + κ(o) · s(p))`` over the scored origins (without the
    0 where the history has negative values), ``s(p)`` the plain conformal quantile of its scores at
    ``p`` = SELECTION_LEVEL, i.e. the mean of what that quantile would have sized to. (Unclipped, a
    partner far above a quiet day's demand, yesterday's traffic during an outage say, has hugely
    negative scores where the noise is small and would look cheaper than nothing.) ``b = 1`` (the
    backend alone) unless a blend with the level costs at least BLEND_SAVING of ``c_1`` less than
    ``c_1``; then the lowest such. A blend with yesterday replaces that choice where it costs a further
    YESTERDAY_SAVING of ``c_1`` less than it (and at least BLEND_SAVING less than ``c_1``), and only
    when every scored origin and ``n`` have a day of history before them. A backend that forecasts
    worse than the recent level (a weekly profile read from one noisy week, say) is thus diluted
    where and while that is so, one that misses what recurs daily (a job at the same time every day
    that last week's same day did not run) is blended with the day before, and one that forecasts
    well is used as it is. The current reference is ``ρ(n)``; the scores below are those of the
    chosen blend.
Realised
    ``M(o) = max x[o … o + w - 1]``: what that window turned out to hold.
Scale
    ``σ(o) = max(√(σ_S(o) · σ_L(o)), SCALE_FLOOR · d)``: ``σ_S(o)`` is the mean of
    ``|x_t - x_{t-1}|`` over the SCALE_WINDOW before ``o`` (at least SCALE_MIN_STEPS steps),
    ``σ_L(o)`` the same over SCALE_LONG_FACTOR times as many steps, and ``d`` the mean absolute step
    change over all the points the scores read. The local noise level, so a calm hour gets a narrow
    band and a bursty one a wide one; the geometric mean with the longer span halves how much the
    few changes of a quarter hour (15 at 1-minute steps) move it by chance, which widened every
    score's spread, while still following a change of regime. Never narrower than a tenth of the
    day's typical noise (a flat spell would otherwise divide by zero), nor, where the day did not
    move at all, than FLAT_SCALE of its mean absolute level.
Backend band
    ``υ(o)``: how wide the backend's band between its BAND_LEVELS was over the window, at its widest
    (:func:`presage_scaler.backends.base.band_spread`), as the backend reported it at origin ``o``
    (a hindcast's, a record's) or now (``υ(n)``, from the current forecast).
Band ratio
    ``u(o) = clip(υ(o) / ῡ, BAND_RATIO_RANGE) ^ BAND_EXPONENT``, ``ῡ`` the mean of ``υ`` over the
    scored origins where it is known: how much less sure of its forecast the backend was than
    usual. 1 at an origin whose band is not known, and everywhere when ``υ(n)`` is not known or
    ``ῡ`` is 0 (a point forecast only: the errors alone calibrate it). The clip keeps one wild band
    from sizing far off; the square root keeps a band that drifts over the day (SeasonalNaive's
    after an outage) from moving coverage by more than the errors correct.
Unit
    ``κ(o) = σ(o) · u(o)``: the noise level, widened where the backend was less sure than usual and
    narrowed where it was surer, where the band has told where the errors fall: the blend below is
    chosen in both units, and the band's is used where its chosen blend's ``c`` is at least
    BAND_SAVING of the noise's lower; otherwise ``κ = σ``. A band as much wider everywhere changes
    nothing: the scores are measured against the errors that followed it.
Score
    ``s(o) = (M(o) - ρ(o)) / κ(o)``, for the past origins whose window has been observed: at most
    MAX_FORECASTS, one every SPAN / MAX_FORECASTS (at least one step) over the last SPAN.
Same time yesterday
    ``a``: the score of the forecast made one day before the current one (origin ``n - D``, ``D`` =
    ANALOG in steps; the hindcast grid always holds it, a recorded forecast counts when its origin
    is less than ``w`` steps from it). Forecast errors recur at the time of day (a nightly job, a
    morning rush the seasonal profile under-forecasts), and a quantile of all the day's errors
    spends its misses exactly there.
Forecast
    ``Q_q = ρ(n) + κ(n) · t_q``, clipped at 0 when the history is non-negative, with ``s(p)`` the
    ``⌈(m + 1)·p⌉``-th smallest of the ``m`` scores (the smallest when that rank is below 1, the
    largest above ``m``). Without ``a`` (less than a day of history, or no recorded forecast near
    it), ``t_q = s(q)``: the conformal quantile. With it, a miss yesterday beyond all but the
    largest ``1 - T`` of the day's errors (``a ≥ s(T)``, ``T`` = ANALOG_RANK) is expected again, as
    large in demand as it was: ``t_q = max(a · r, s(L_q))`` with ``r = κ(n - D) / κ(n)`` clipped
    to ANALOG_SCALE_RANGE; otherwise ``t_q = s(L_q)``. (A job that recurs at this time adds the same
    demand whatever today's noise level before it; in score units a calmer hour today would shrink
    it. The clip keeps a quarter hour far noisier or calmer than today's from setting it.) ``L_q``
    is what makes the rule cover exactly ``q`` where errors do not depend on the time of day (``a``
    then falls in the top
    ``1 - T`` with probability ``1 - T``, and covers a new error with probability ``(1 + T) / 2``):
    ``L_q = (q - (1 - T²)/2) / T`` up to ``q = (1 + T²)/2``, ``√(2q - 1)`` above it, and 0 for the
    levels below ``(1 - T²)/2``, which then cover a little more than ``q``. At 0.9, ``L_q`` is
    0.894. ``L_q`` grows with ``q``: the quantiles never cross.
Guard's lower value
    The scaleDownQuantile value the uncertainty guard reads is the band's, ``ρ(n) + κ(n) · b_λ``
    with ``b_λ`` the ``t_λ`` without ``a`` (``s(L_λ)``, or ``s(λ)``), raised by as much as ``a``
    raised the targetQuantile value ``τ``: ``Q_τ - κ(n) · b_τ``. Yesterday's miss raises both
    alike, so the spread the guard measures is the calibrated band's, never closed to 0 by it
    (:meth:`WindowForecast.lower`).

After its first day the realised window maximum is at or below ``Q_q`` a fraction ``q`` of the time,
to within how much the errors change from one day to the next; backtests and ``status.shadow``
measure it.

With fewer than MIN_SCORES scores the backend's own per-step band is used instead (its maximum over
the window), and the forecast is reported as uncalibrated.

Where each part is computed, with the constants named above:

- :mod:`~presage_scaler.engine.past_forecasts`: where the past forecasts come from (a hindcast
  answered with the forecast, or recorded in ``status``) and which are scored (SPAN, MAX_FORECASTS,
  MIN_SCORES, ANALOG, BAND_LEVELS);
- :mod:`~presage_scaler.engine.calibration_readings`: ``M``, ``Y``, ``ℓ``, ``P``, ``σ``, ``υ``
  and ``u`` (RECENT_PEAK, LEVEL_WINDOW, SCALE_*, FLAT_SCALE, BAND_RATIO_RANGE, BAND_EXPONENT);
- :mod:`~presage_scaler.engine.calibration_blend`: the reference's blend (BLEND_WEIGHTS,
  SELECTION_LEVEL, BLEND_SAVING, YESTERDAY_SAVING);
- :mod:`~presage_scaler.engine.calibration_quantiles`: ``s(p)``, ``L_q`` and yesterday's miss
  (ANALOG_RANK, ANALOG_SCALE_RANGE);
- :mod:`~presage_scaler.engine.calibration_windows`: the steps in order, the hold and the unit
  (PEAK_SAVING, BAND_SAVING), and ``Q_q``, for many forecasts in one vectorised pass;
- here: one signal's calibration (:func:`calibrate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

import numpy as np

from presage_scaler.backends.base import Forecast, History
from presage_scaler.engine.calibration_readings import backend_reference, backend_spread
from presage_scaler.engine.calibration_windows import WindowForecast, calibrated_windows
from presage_scaler.engine.past_forecasts import PastForecast, PastReferences, answered, located, remember


def window_forecasts(
    series: np.ndarray,
    step: timedelta,
    spans: Sequence[tuple[int, int]],
    forecasts: Sequence[Forecast],
    window: int,
    levels: Sequence[float],
    pasts: Sequence[PastReferences],
) -> list[WindowForecast]:
    """The calibrated window maximum at each level (module docstring) of forecasts whose histories are
    windows of one series: forecast ``i`` was made from ``series[begin:end]`` for ``spans[i]``, and
    ``pasts[i]`` locates its past forecasts in that history. One vectorised pass
    (:func:`calibrated_windows`), so that a backtest calibrates a chunk of decisions at once; a single
    evaluation is the case of one."""
    return calibrated_windows(series, step, spans, forecasts, window, levels, pasts).forecasts()


def calibrate(
    history: History,
    forecast: Forecast,
    window: int,
    levels: Sequence[float],
    records: Sequence[PastForecast],
    newest: datetime,
) -> tuple[WindowForecast, tuple[PastForecast, ...]]:
    """One signal's calibrated window forecast, and the recorded forecasts to keep for the next
    evaluation: none when the backend answered the hindcast its request asked for (see
    :func:`~presage_scaler.engine.past_forecasts.hindcast_request`). ``newest`` is the time of the
    history's newest point; ``records`` are those the previous evaluation kept."""
    n = len(history.values)
    hindcast = forecast.hindcast is not None
    past = answered(forecast, window) if hindcast else located(records, n, newest, history.step)
    [result] = window_forecasts(history.values, history.step, [(0, n)], [forecast], window, levels, [past])
    if hindcast:
        return result, ()
    spread = backend_spread(forecast, window)
    recorded = None if math.isnan(spread) else spread
    return result, remember(records, newest, window, backend_reference(forecast, window), history.step, recorded)
