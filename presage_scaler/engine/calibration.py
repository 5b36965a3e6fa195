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
    minutes. Where demand comes in bursts that last (NASA's requests, ELB's), a forecast that drops
    right after a peak releases capacity the demand still needs; where it is a smooth curve with
    step-to-step noise (the crane pods' CPU), the 15-minute peak is the noise's, well above the next
    few minutes' maximum, and holding it buys capacity nothing uses. So both are tried: the blend
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

Where the past forecasts come from. Every forecast request asks the backend what it would have
forecast from the origins of the last day (:func:`hindcast_request`). A backend that can answer
cheaply (SeasonalNaive) does so in the same call: nothing is stored, and a restarted or brand-new
scaler is calibrated from its first evaluation. For any other backend (TimesFM) presage records each
backend reference ``β`` and band ``υ`` as they are made (at most one per SPAN / MAX_FORECASTS) in
:class:`CalibrationState`, which the controller keeps in ``status`` so that a restart keeps it too;
the levels ``ℓ``, peaks ``P`` and noise ``σ`` are recomputed from the history. With fewer than
MIN_SCORES scores the backend's own per-step band is used instead (its maximum over the window), and
the forecast is reported as uncalibrated.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from presage_scaler.api.predictive_scaler import CALIBRATION_MAX_FORECASTS, CalibrationForecast, SignalCalibration
from presage_scaler.backends.base import Forecast, HindcastRequest, History, band_spread
from presage_scaler.series.rolling import trailing_maxima, trailing_means, window_maxima, window_sums
from presage_scaler.series.timegrid import steps_for

SPAN = timedelta(days=1)
"""How far back the errors that calibrate a forecast reach."""

MAX_FORECASTS = 144
"""Most past forecasts scored per evaluation (one every 10 minutes over a day): enough for the tail
quantiles in use, few enough to store in status and to recompute at every evaluation."""

MIN_SCORES = 12
"""Fewer scores than this are not trusted: the backend's own band is used instead."""

ANALOG = timedelta(days=1)
"""How far back the forecast whose miss is expected again was made: the same time the day before."""

ANALOG_RANK = 0.9
"""A miss the day before at this time counts when it is beyond this quantile of the day's errors: one
window in ten where errors do not recur by time of day; a higher rank leaves recurring misses
uncovered on spiky demand. Checked by ``benchmarks/bench_backtest.py``."""

ANALOG_SCALE_RANGE = (0.5, 2.0)
"""How far the ratio of the day before's noise level to today's may scale yesterday's miss into
today's units: unbounded, a quarter hour far calmer or noisier than today's would set the whole
correction. Checked by ``benchmarks/bench_backtest.py``."""

LEVEL_WINDOW = timedelta(hours=1)
"""The span whose mean is the level the backend's reference may be blended with."""

RECENT_PEAK = timedelta(minutes=15)
"""The span whose highest value the backend's reference is held at (see Held reference)."""

PEAK_SAVING = 0.05
"""How much less (a share of the held reference's cost) the backend's own reference must size over the
day to be used without the hold: without a margin, a day whose errors favour the unheld reference by
chance releases capacity that bursty demand still needs. Checked by ``benchmarks/bench_backtest.py``."""

BLEND_WEIGHTS = (1.0, 0.75, 0.5, 0.25, 0.0)
"""The backend's share of the reference that calibration chooses among, the backend alone first."""

SELECTION_LEVEL = 0.9
"""The blend is chosen by what this quantile of the window maximum would have sized to over the day,
whatever levels are asked for, so one level's numbers never depend on which others are computed."""

BLEND_SAVING = 0.1
"""A blend replaces the backend's reference only where it would have sized at least this share less
over the day than the backend alone: a backend that is about as good is kept."""

YESTERDAY_SAVING = 0.05
"""How much more (a share of the backend alone's cost) a blend with yesterday's window must save than
the blend with the level it replaces: a second partner chosen on the same day's errors wins more
often by chance. Checked by ``benchmarks/bench_backtest.py``."""

BAND_LEVELS = (0.5, 0.9)
"""The backend's band whose width says how unsure it is: its median to its 0.9 quantile. Asked for
with every forecast and hindcast whatever the policy's levels, so that one level's numbers never
depend on which others are asked for."""

BAND_RATIO_RANGE = (0.25, 4.0)
"""How far the backend's band at one origin may be taken as wider or narrower than its mean over the
scored forecasts: one forecast whose band is wild (a model far outside what it was trained on) moves
the unit by at most the BAND_EXPONENT power of this."""

BAND_SAVING = 0.0
"""The band scales the unit only where it would have sized at least this share less over the day than
the noise alone: a band that says nothing about where the errors fall (SeasonalNaive's trailing
residuals, which lag the daily cycle by hours) widens the spread of the scores and costs capacity
without covering more."""

BAND_EXPONENT = 0.5
"""The power of the band ratio that scales the score unit: with the ratio itself, a band that narrows
over the day as an outage leaves SeasonalNaive's residuals covered 0.86 of the windows the day after
for a 0.9 target (test_property_after_a_day_without_traffic_coverage_returns_to_nominal), 0.87 with
its square root."""

LEVEL = "level"
"""The blend partner ``ℓ``: the last hour's mean."""

YESTERDAY = "yesterday"
"""The blend partner ``Y``: the same window's maximum the day before."""

PARTNERS = (LEVEL, YESTERDAY)
"""The blend partners in the order :func:`_blend` numbers them."""

SCALE_WINDOW = timedelta(minutes=15)
"""The span whose noise level normalises a score."""

SCALE_MIN_STEPS = 12
"""A noise level is measured over at least this many steps, however coarse the resolution."""

SCALE_LONG_FACTOR = 5
"""The longer noise span, in multiples of the short one (75 minutes at 1-minute steps, 5 hours at
5-minute steps): long enough to steady the noise level, short enough that the band narrows again
after a noisy hour instead of keeping the uncertainty guard holding. Checked by
``benchmarks/bench_backtest.py``."""

SCALE_FLOOR = 0.1
"""A window's noise level is taken as at least this fraction of the typical one."""

FLAT_SCALE = 1e-6
"""Where the series did not move at all, noise is taken as this fraction of its level."""

MAX_RECORDS = CALIBRATION_MAX_FORECASTS
"""Most recorded forecasts kept per signal: a day's worth plus those whose window is still open."""

STORED_DECIMALS = 4
"""A recorded reference is rounded as ``.status`` keeps it, so a restarted controller and a backtest
that never wrote status score the same numbers."""

_RANK_TOLERANCE = 1e-9


@dataclass(frozen=True)
class PastForecast:
    """A backend reference presage sized from, kept until its window has been observed and scored."""

    origin: datetime
    """The time of the newest history point the forecast was made from."""
    window: int
    """Steps of the sizing window it covered."""
    reference: float
    """``β``: the backend's highest point forecast over that window."""
    spread: float | None = None
    """``υ``: the backend's band width over that window (BAND_LEVELS); None when not recorded."""


@dataclass(frozen=True)
class SignalForecasts:
    """One signal's recorded forecasts, on the signal's resolution."""

    name: str
    step: timedelta
    forecasts: tuple[PastForecast, ...]


@dataclass(frozen=True)
class CalibrationState:
    """The recorded forecasts of a scaler whose backend cannot hindcast (persisted in ``.status``)."""

    signals: tuple[SignalForecasts, ...] = ()

    def of(self, name: str, step: timedelta) -> tuple[PastForecast, ...]:
        """The signal's recorded forecasts; none when the resolution has changed since."""
        for signal in self.signals:
            if signal.name == name and signal.step == step:
                return signal.forecasts
        return ()

    def to_status(self) -> list[SignalCalibration] | None:
        """``.status.calibration`` (None when nothing is recorded)."""
        return [
            SignalCalibration(
                name=signal.name,
                resolution=signal.step,
                forecasts=[
                    CalibrationForecast(time=f.origin, window=f.window, reference=f.reference, spread=f.spread)
                    for f in signal.forecasts
                ],
            )
            for signal in self.signals
        ] or None

    @classmethod
    def from_status(cls, status: Sequence[SignalCalibration] | None) -> CalibrationState:
        """The state a previous evaluation left in ``.status.calibration``."""
        return cls(
            signals=tuple(
                SignalForecasts(
                    name=signal.name,
                    step=signal.resolution,
                    forecasts=tuple(
                        PastForecast(origin=f.time, window=f.window, reference=f.reference, spread=f.spread)
                        for f in signal.forecasts or ()
                    ),
                )
                for signal in status or ()
            )
        )


@dataclass(frozen=True)
class WindowForecast:
    """One signal's forecast of the highest demand in its sizing window, per quantile level."""

    quantiles: dict[float, float]
    reference: float
    """``ρ(n)``: what the quantiles are calibrated offsets from: the backend's highest point forecast
    over the window (held at the recent peak unless ``held`` is False), or its blend with a partner."""
    scores: int
    """How many past forecasts calibrated it; below MIN_SCORES it is the backend's own band."""
    weight: float = 1.0
    """The backend's share of the reference; the rest is its ``partner``'s (see Reference)."""
    saving: float = 0.0
    """With a blend, how much less it would have sized over the day than the backend alone (a share)."""
    partner: str = LEVEL
    """What the backend is blended with when ``weight`` is below 1: LEVEL or YESTERDAY."""
    held: bool = True
    """Whether the backend's reference was held at the recent peak (see Held reference); never while
    uncalibrated."""
    unheld_saving: float = 0.0
    """Where it was not, how much less the backend's own reference would have sized over the day (a
    share)."""
    bands: dict[float, float] | None = None
    """Per level, the calibrated value before yesterday's miss is expected again (``ρ(n) + κ(n)·s``);
    None: the same as ``quantiles``."""
    backend_reference: float = math.nan
    """``β(n)``: the backend's own highest point forecast over the window."""
    recent_peak: float = math.nan
    """``P(n)``: the highest demand of the last RECENT_PEAK (NaN while uncalibrated)."""
    noise: float = math.nan
    """``σ(n)``: the noise level the scores are measured in (NaN while uncalibrated)."""
    band_ratio: float = 1.0
    """``u(n)`` where the band scales the unit: the backend's band width now against its mean over the
    scored forecasts (1: calibrated from errors alone)."""
    band_known: bool = False
    """Whether the backend reported its band now and at the scored origins, so that it was weighed."""
    band_saving: float = 0.0
    """How much less the band's unit would have sized over the day than the noise's alone (a share;
    negative where it would have sized more, and then it is not used)."""

    @property
    def calibrated(self) -> bool:
        return self.scores >= MIN_SCORES

    @property
    def held_at_peak(self) -> bool:
        """Whether the recent peak set the reference: held, and above the backend's own."""
        return self.held and self.recent_peak > self.backend_reference

    def lower(self, target: float, scale_down: float) -> float:
        """The scaleDownQuantile value the uncertainty guard compares with the targetQuantile value:
        the calibrated band's, raised by as much as yesterday's miss raised the target's, so that the
        spread stays the band's."""
        bands = self.bands or self.quantiles
        return bands[scale_down] + (self.quantiles[target] - bands[target])


@dataclass(frozen=True)
class PastReferences:
    """Past forecasts located in the current history, oldest first: origin indices, windows and
    references."""

    origins: np.ndarray
    windows: np.ndarray
    references: np.ndarray
    spreads: np.ndarray
    """``υ(o)``, NaN where the backend's band is not known."""


@dataclass(frozen=True)
class AnsweredPasts:
    """The past forecasts many forecasts' backend answered, one row per forecast, oldest first, each
    row as many origins (what a backtest's forecasts ask for); a NaN reference where the backend made
    none. What :func:`answered` gives each, at once."""

    origins: np.ndarray
    references: np.ndarray
    spreads: np.ndarray
    window: int


def answered_together(forecasts: Sequence[Forecast], window: int) -> AnsweredPasts | None:
    """:func:`answered` of every forecast at once; None unless each answered a hindcast of as many
    origins."""
    hindcasts = [f.hindcast for f in forecasts]
    if not hindcasts or any(h is None for h in hindcasts) or len({len(h.origins) for h in hindcasts if h}) != 1:
        return None
    answers = [h for h in hindcasts if h is not None]
    references = np.array([h.references for h in answers])
    spreads = [h.spreads for h in answers]
    return AnsweredPasts(
        origins=np.array([h.origins for h in answers])[:, ::-1],
        references=references[:, ::-1],
        spreads=np.full(references.shape, np.nan) if any(s is None for s in spreads) else np.array(spreads)[:, ::-1],
        window=window,
    )


def _spacing(step: timedelta) -> int:
    return steps_for(SPAN / MAX_FORECASTS, step)


def hindcast_request(n: int, window: int, step: timedelta) -> HindcastRequest:
    """The past forecasts a backend is asked for with a forecast from ``n`` points: one every
    SPAN / MAX_FORECASTS (at least one step), back from the newest whose window has been observed,
    over the last SPAN, and the one from the same time the day before (``n - D``), newest first."""
    origins = n - _hindcast_offsets(window, step)
    return HindcastRequest(window=window, origins=origins[origins >= 1], band=BAND_LEVELS)


@functools.lru_cache(maxsize=64)
def _hindcast_offsets(window: int, step: timedelta) -> np.ndarray:
    """How far back of ``n`` :func:`hindcast_request`'s origins lie, increasing (read-only: shared)."""
    spacing = _spacing(step)
    count = min(MAX_FORECASTS, max(1, SPAN // step) // spacing + 1)
    offsets = window + spacing * np.arange(count)
    analog = steps_for(ANALOG, step)
    if analog >= window and not (offsets == analog).any():
        offsets = np.sort(np.append(offsets, analog))
    offsets.flags.writeable = False
    return offsets


def _located(records: Sequence[PastForecast], n: int, newest: datetime, step: timedelta) -> PastReferences:
    """Recorded forecasts as origins in a history of ``n`` points whose newest point is at ``newest``."""
    origins, windows, references, spreads = [], [], [], []
    for record in records:
        back, rest = divmod(newest - record.origin, step)
        if rest == timedelta(0) and 0 <= back < n:
            origins.append(n - back)
            windows.append(record.window)
            references.append(record.reference)
            spreads.append(math.nan if record.spread is None else record.spread)
    return PastReferences(
        origins=np.array(origins, dtype=np.intp),
        windows=np.array(windows, dtype=np.intp),
        references=np.array(references, dtype=np.float64),
        spreads=np.array(spreads, dtype=np.float64),
    )


def remember(
    records: Sequence[PastForecast],
    origin: datetime,
    window: int,
    reference: float,
    step: timedelta,
    spread: float | None = None,
) -> tuple[PastForecast, ...]:
    """``records`` with this forecast added (unless one was recorded less than SPAN / MAX_FORECASTS
    ago) and those too old to score in the next day's evaluations dropped."""
    oldest = origin - SPAN - window * step
    kept = [r for r in records if oldest < r.origin < origin]
    if not kept or origin - kept[-1].origin >= _spacing(step) * step:
        stored = None if spread is None else round(spread, STORED_DECIMALS)
        kept.append(
            PastForecast(origin=origin, window=window, reference=round(reference, STORED_DECIMALS), spread=stored)
        )
    return tuple(kept[-MAX_RECORDS:])


def _realised(values: np.ndarray, origins: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """``M(o)``: the highest value of each window ``values[o : o + w]``."""
    if len(windows) and windows.min() == windows.max():  # the usual case: one window for all
        return window_maxima(values, origins, int(windows[0]))
    realised = np.empty(len(origins))
    for window in np.unique(windows).tolist():
        rows = windows == window
        realised[rows] = window_maxima(values, origins[rows], window)
    return realised


def base_level(quantile: float) -> float:
    """``L_q`` (module docstring): the level of the day's errors sized to when yesterday's miss at
    this time is not expected again."""
    rank = ANALOG_RANK
    if quantile <= (1 + rank * rank) / 2:
        return max(0.0, (quantile - (1 - rank * rank) / 2) / rank)
    return math.sqrt(2 * quantile - 1)


def _rank(count: int, level: float) -> int:
    """The 0-based position of ``s(level)`` among ``count`` ordered scores: the ``⌈(count + 1)·level⌉``-th
    smallest, within the first and the last."""
    return min(count, max(1, math.ceil((count + 1) * level - _RANK_TOLERANCE))) - 1


def _score_quantiles(
    scores: np.ndarray, offsets: np.ndarray, relative_scales: np.ndarray, window: int, levels: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """``t_q`` and, before yesterday's miss is expected again, the band's (module docstring) of
    forecasts with the same number of scores, one row per row of ``scores`` (``forecasts × levels``
    each); ``offsets`` are the scores' origins relative to the same time
    the day before, so ``a`` is the score nearest it, if less than ``window`` steps from it, and
    ``relative_scales`` each score's ``r`` (``κ(o) / κ(n)``, clipped), which puts yesterday's miss in
    today's units."""
    count = scores.shape[1]
    plain = np.array([_rank(count, level) for level in levels], dtype=np.intp)
    based = np.array([_rank(count, base_level(level)) for level in levels], dtype=np.intp)
    extreme = _rank(count, ANALOG_RANK)
    # A sort: numpy sorts rows this short faster than it partitions them, even at one position.
    ordered = np.sort(scores, axis=1)
    nearest = np.argmin(np.abs(offsets), axis=1)[:, np.newaxis]
    known = np.abs(np.take_along_axis(offsets, nearest, axis=1)) < window
    analog = np.take_along_axis(scores, nearest, axis=1)
    beyond = known & (analog >= ordered[:, [extreme]])
    miss = analog * np.take_along_axis(relative_scales, nearest, axis=1)
    band = np.where(known, ordered[:, based], ordered[:, plain])
    return np.where(beyond, np.maximum(miss, band), band), band


@dataclass(frozen=True)
class _Scored:
    """The scored past forecasts of the forecasts being calibrated, all in one array (series
    coordinates), and each forecast's rows ``[first, last)``."""

    origins: np.ndarray
    windows: np.ndarray
    references: np.ndarray
    spreads: np.ndarray
    owners: np.ndarray
    """The forecast each origin belongs to."""
    bounds: list[tuple[int, int]]
    """Per forecast, its rows ``[first, last)``; empty when it has fewer than MIN_SCORES."""


def _scored(spans: Sequence[tuple[int, int]], pasts: Sequence[PastReferences] | AnsweredPasts) -> _Scored:
    if isinstance(pasts, AnsweredPasts):
        return _scored_together(spans, pasts)
    origins, windows, references, spreads, owners, bounds = [], [], [], [], [], []
    row = 0
    for i, ((begin, end), past) in enumerate(zip(spans, pasts, strict=True)):
        keep = (past.origins >= 2) & (past.origins + past.windows <= end - begin)
        count = int(keep.sum())
        if count < MIN_SCORES:
            count = 0
        else:
            origins.append(begin + past.origins[keep])
            windows.append(past.windows[keep])
            references.append(past.references[keep])
            spreads.append(past.spreads[keep])
            owners.append(np.full(count, i))
        bounds.append((row, row + count))
        row += count
    if not row:
        none = np.zeros(0, dtype=np.intp)
        return _Scored(none, none, np.zeros(0), np.zeros(0), none, bounds)
    return _Scored(
        np.concatenate(origins),
        np.concatenate(windows),
        np.concatenate(references),
        np.concatenate(spreads),
        np.concatenate(owners),
        bounds,
    )


def _scored_together(spans: Sequence[tuple[int, int]], pasts: AnsweredPasts) -> _Scored:
    """:func:`_scored` of past forecasts answered together, with the same arrays in the same order."""
    begins = np.array([begin for begin, _ in spans], dtype=np.intp)
    lengths = np.array([end - begin for begin, end in spans], dtype=np.intp)
    keep = (
        np.isfinite(pasts.references) & (pasts.origins >= 2) & (pasts.origins + pasts.window <= lengths[:, np.newaxis])
    )
    counts = keep.sum(axis=1)
    counts[counts < MIN_SCORES] = 0
    keep &= (counts > 0)[:, np.newaxis]
    rows = np.concatenate(([0], np.cumsum(counts)))
    return _Scored(
        origins=(begins[:, np.newaxis] + pasts.origins)[keep],
        windows=np.full(int(rows[-1]), pasts.window, dtype=np.intp),
        references=pasts.references[keep],
        spreads=pasts.spreads[keep],
        owners=np.repeat(np.arange(len(spans)), counts),
        bounds=list(zip(rows[:-1].tolist(), rows[1:].tolist(), strict=True)),
    )


def _scales(
    values: np.ndarray, step: timedelta, scored: _Scored, spans: Sequence[tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray]:
    """``σ(o)`` of every scored origin, and ``σ(n)`` of every forecast (NaN for those not scored)."""
    short = steps_for(SCALE_WINDOW, step, at_least=SCALE_MIN_STEPS)
    long = SCALE_LONG_FACTOR * short
    active = np.flatnonzero([last > first for first, last in scored.bounds])
    begins = np.array([spans[i][0] for i in active])
    ends = np.array([spans[i][1] for i in active])
    lowest = np.array([scored.origins[slice(*scored.bounds[i])].min() for i in active])
    # Change t is |x_t − x_{t−1}|. An origin's noise is measured over changes [max(o − span, start + 1), o)
    # for each span; the typical noise of a forecast over all the changes its scores read, up to its own origin.
    first = np.maximum(lowest - long, begins + 1)
    region = int(first.min())
    read = values[region - 1 : int(ends.max())]
    changes = np.abs(np.diff(read))
    slot = np.zeros(len(spans), dtype=np.intp)
    slot[active] = np.arange(len(active))
    origins = np.concatenate((scored.origins, ends))
    owners = np.concatenate((slot[scored.owners], np.arange(len(active))))

    def noise(span: int) -> np.ndarray:
        starts = np.maximum(origins - span, begins[owners] + 1)
        return window_sums(changes, starts - region, origins - region) / (origins - starts)

    local = np.sqrt(noise(short) * noise(long))
    typical = window_sums(changes, first - region, ends - region) / (ends - first)
    # A perfectly flat span has no noise at all: measure it against the level instead.
    level = window_sums(np.abs(read), first - region + 1, ends - region + 1) / (ends - first)
    floor = np.maximum(SCALE_FLOOR * typical, FLAT_SCALE * level)
    sigma = np.maximum(local, floor[owners]) + np.finfo(np.float64).tiny
    now = np.full(len(spans), np.nan)
    now[active] = sigma[len(scored.origins) :]
    return sigma[: len(scored.origins)], now


@dataclass(frozen=True)
class CalibratedWindows:
    """:func:`window_forecasts` of many forecasts as arrays, one row per forecast (the columns of
    ``quantiles`` and ``bands`` are the levels, in the order asked)."""

    levels: tuple[float, ...]
    quantiles: np.ndarray
    bands: np.ndarray
    reference: np.ndarray
    scores: np.ndarray
    weight: np.ndarray
    saving: np.ndarray
    partner: np.ndarray
    """A position in PARTNERS."""
    held: np.ndarray
    unheld_saving: np.ndarray
    backend_reference: np.ndarray
    recent_peak: np.ndarray
    noise: np.ndarray
    band_ratio: np.ndarray
    band_known: np.ndarray
    band_saving: np.ndarray

    def forecasts(self) -> list[WindowForecast]:
        """One :class:`WindowForecast` per row."""
        results = []
        for i, (quantiles, bands) in enumerate(zip(self.quantiles.tolist(), self.bands.tolist(), strict=True)):
            own = dict(zip(self.levels, quantiles, strict=True))
            if not self.scores[i]:
                reference = float(self.reference[i])
                results.append(
                    WindowForecast(
                        quantiles=own, reference=reference, scores=0, held=False, backend_reference=reference
                    )
                )
                continue
            results.append(
                WindowForecast(
                    quantiles=own,
                    reference=float(self.reference[i]),
                    scores=int(self.scores[i]),
                    weight=float(self.weight[i]),
                    saving=float(self.saving[i]),
                    partner=PARTNERS[self.partner[i]],
                    held=bool(self.held[i]),
                    unheld_saving=float(self.unheld_saving[i]),
                    bands=dict(zip(self.levels, bands, strict=True)),
                    backend_reference=float(self.backend_reference[i]),
                    recent_peak=float(self.recent_peak[i]),
                    noise=float(self.noise[i]),
                    band_ratio=float(self.band_ratio[i]),
                    band_known=bool(self.band_known[i]),
                    band_saving=float(self.band_saving[i]),
                )
            )
        return results


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


def calibrated_windows(
    series: np.ndarray,
    step: timedelta,
    spans: Sequence[tuple[int, int]],
    forecasts: Sequence[Forecast],
    window: int,
    levels: Sequence[float],
    pasts: Sequence[PastReferences] | AnsweredPasts,
) -> CalibratedWindows:
    """:func:`window_forecasts` as arrays."""
    values = np.asarray(series, dtype=np.float64)
    scored = _scored(spans, pasts)
    begins = np.array([begin for begin, _ in spans])
    ends = np.array([end for _, end in spans])
    realised, levels_then, levels_now = np.zeros(0), np.zeros(0), np.zeros(len(spans))
    yesterdays_then, yesterdays_now = np.zeros(0), np.zeros(len(spans))
    past_noises, past_scales = np.zeros(0), np.zeros(0)
    noises, band_ratios = np.full(len(spans), np.nan), np.ones(len(spans))
    band_known = np.zeros(len(spans), dtype=bool)
    peaks_then, peaks_now = np.zeros(0), np.full(len(spans), np.nan)
    day = steps_for(ANALOG, step)
    if len(scored.origins):
        past_noises, noises = _scales(values, step, scored, spans)
        band_then, band_ratios, band_known = _band_ratios(scored, _backend_spreads(forecasts, window))
        past_scales = past_noises * band_then
        realised, yesterdays_then, yesterdays_now = _observed(values, scored, begins, ends, window, day)
        hour = steps_for(LEVEL_WINDOW, step)
        levels_then = trailing_means(values, scored.origins, begins[scored.owners], hour)
        levels_now = trailing_means(values, ends, begins, hour)
        recent = steps_for(RECENT_PEAK, step)
        peaks_then = trailing_maxima(values, scored.origins, begins[scored.owners], recent)
        peaks_now = trailing_maxima(values, ends, begins, recent)
    low = int(begins.min())
    negatives = np.concatenate(([0], np.cumsum(values[low:] < 0)))
    demand = negatives[ends - low] == negatives[begins - low]
    floors = np.where(demand, 0.0, -np.inf)
    counts = np.array([last - first for first, last in scored.bounds])
    firsts = np.array([first for first, _ in scored.bounds])
    yesterday = ends - day
    chosen, banded = np.zeros((len(spans), len(levels))), np.zeros((len(spans), len(levels)))
    weights, savings = np.ones(len(spans)), np.zeros(len(spans))
    partners = np.zeros(len(spans), dtype=np.intp)  # each forecast's partner, a position in PARTNERS
    held, unheld_savings = np.ones(len(spans), dtype=bool), np.zeros(len(spans))
    banded_unit, band_savings = np.zeros(len(spans), dtype=bool), np.zeros(len(spans))
    for count in np.unique(counts[counts > 0]).tolist():
        these = np.flatnonzero(counts == count)
        rows = firsts[these, np.newaxis] + np.arange(count)
        known = np.isfinite(yesterdays_then[rows]).all(axis=1) & np.isfinite(yesterdays_now[these])
        then = np.stack((levels_then[rows], np.nan_to_num(yesterdays_then[rows])))
        # Held and unheld, each in the noise's unit and in the unit the backend's band scales, are
        # chosen in one pass, as four times the forecasts: what a pass costs is mostly per numpy call,
        # not per row.
        references = scored.references[rows]
        held_references = np.maximum(references, peaks_then[rows])
        every = _blend(
            np.tile(realised[rows], (4, 1)),
            np.concatenate((held_references, references, held_references, references)),
            np.tile(then, (1, 4, 1)),
            np.concatenate((past_noises[rows], past_noises[rows], past_scales[rows], past_scales[rows])),
            np.tile(floors[these], 4),
            np.tile(known, 4),
        )
        picks, releases, saved = [], [], []
        for unit in range(2):  # the rows of ``every``: held, unheld; each in the noise's unit, then the band's
            at_peak = np.arange(len(these)) + 2 * len(these) * unit
            unheld = at_peak + len(these)
            saved.append(_saving(every.costs[at_peak], every.costs[unheld]))
            releases.append(saved[-1] >= PEAK_SAVING)
            picks.append(np.where(releases[-1], unheld, at_peak))
        band_saving = _saving(every.costs[picks[0]], every.costs[picks[1]])
        use = band_known[these] & (band_saving >= BAND_SAVING)
        release = np.where(use, releases[1], releases[0])
        held[these], unheld_savings[these] = ~release, np.where(release, np.where(use, saved[1], saved[0]), 0.0)
        banded_unit[these], band_savings[these] = use, np.where(band_known[these], band_saving, 0.0)
        blend = every.rows(np.where(use, picks[1], picks[0]))
        partners[these] = blend.partners
        weights[these], savings[these] = blend.weights, blend.savings
        offsets = scored.origins[rows] - yesterday[these, np.newaxis]
        unit_then = np.where(use[:, np.newaxis], past_scales[rows], past_noises[rows])
        unit_now = np.where(use, noises[these] * band_ratios[these], noises[these])
        relative_scales = np.clip(unit_then / unit_now[:, np.newaxis], *ANALOG_SCALE_RANGE)
        chosen[these], banded[these] = _score_quantiles(blend.scores, offsets, relative_scales, window, levels)
    band_ratios = np.where(banded_unit, band_ratios, 1.0)
    backends = _backend_references(forecasts, window)
    scored_rows = counts > 0
    references = np.where(held, np.maximum(backends, peaks_now), backends)
    blended = weights != 1.0
    partner_values = np.where(partners == 0, levels_now, yesterdays_now)
    references = np.where(blended, weights * references + (1.0 - weights) * partner_values, references)
    sigmas = (noises * band_ratios)[:, np.newaxis]
    quantiles = np.maximum(floors[:, np.newaxis], references[:, np.newaxis] + sigmas * chosen)
    bands = np.maximum(floors[:, np.newaxis], references[:, np.newaxis] + sigmas * banded)
    if not scored_rows.all():
        # Not calibrated: the backend's own band, its highest over the window.
        for i in np.flatnonzero(~scored_rows).tolist():
            own = [float(np.max(forecasts[i].quantiles[level][:window])) for level in levels]
            quantiles[i] = bands[i] = own
        references = np.where(scored_rows, references, backends)
    return CalibratedWindows(
        levels=tuple(levels),
        quantiles=quantiles,
        bands=bands,
        reference=references,
        scores=counts,
        weight=weights,
        saving=savings,
        partner=partners,
        held=held & scored_rows,
        unheld_saving=unheld_savings,
        backend_reference=backends,
        recent_peak=peaks_now,
        noise=noises,
        band_ratio=band_ratios,
        band_known=band_known,
        band_saving=band_savings,
    )


def _band_ratios(scored: _Scored, spreads_now: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``u(o)`` of every scored origin, ``u(n)`` of every forecast and whether its band is known
    (module docstring, Band ratio): the
    backend's band width over its mean at the scored origins where it is known, clipped to
    BAND_RATIO_RANGE, to the power BAND_EXPONENT; 1 at an origin whose band is not known (a history
    too short to measure it then, a forecast recorded without it), and throughout for a forecast whose
    band is not known now or is 0 on average (a point forecast only: calibrated from its errors alone)."""
    count = len(spreads_now)
    owners = scored.owners
    known = np.isfinite(scored.spreads)
    spreads = np.where(known, scored.spreads, 0.0)
    typical = np.bincount(owners, weights=spreads, minlength=count) / np.maximum(
        np.bincount(owners, weights=known, minlength=count), 1
    )
    usable = np.isfinite(spreads_now) & (typical > 0)
    divisor = np.where(usable, typical, 1.0)

    def ratio(spread: np.ndarray, typical: np.ndarray) -> np.ndarray:
        return np.clip(spread / typical, *BAND_RATIO_RANGE) ** BAND_EXPONENT

    now = np.where(usable, ratio(np.where(usable, spreads_now, 1.0), divisor), 1.0)
    then = np.where(usable[owners] & known, ratio(spreads, divisor[owners]), 1.0)
    return then, now, usable


def _backend_reference(forecast: Forecast, window: int) -> float:
    """``β(n)``: the highest point of the backend's forecast over the window."""
    return float(np.max(forecast.point[:window]))


def _backend_references(forecasts: Sequence[Forecast], window: int) -> np.ndarray:
    """:func:`_backend_reference` of each forecast."""
    heads = [f.point[:window] for f in forecasts]
    if len({len(head) for head in heads}) == 1:  # a backtest's batch: one matrix
        return np.array(heads).max(axis=1)
    return np.array([float(np.max(head)) for head in heads])


def _backend_spreads(forecasts: Sequence[Forecast], window: int) -> np.ndarray:
    """:func:`backend_spread` of each forecast."""
    lower, upper = ([f.quantiles.get(level) for f in forecasts] for level in BAND_LEVELS)
    if any(band is None for band in (*lower, *upper)) or len({len(band) for band in (*lower, *upper)}) != 1:
        return np.array([backend_spread(f, window) for f in forecasts])
    # band_spread of each row: fmax, like max(0.0, ·), never yields NaN.
    return np.fmax(0.0, (np.array(upper)[:, :window] - np.array(lower)[:, :window]).max(axis=1))


def backend_spread(forecast: Forecast, window: int) -> float:
    """``υ(n)``: the backend's band width over the window (BAND_LEVELS); NaN when it did not report
    both levels."""
    lower, upper = (forecast.quantiles.get(level) for level in BAND_LEVELS)
    if lower is None or upper is None:
        return math.nan
    return band_spread(lower, upper, window)


def _observed(
    values: np.ndarray, scored: _Scored, begins: np.ndarray, ends: np.ndarray, window: int, day: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``M(o)`` of every scored origin, and ``Y`` of every scored origin and of every forecast's ``n``
    (NaN where the day before lies before the history's start; it always lies before the origin, a
    sizing window being shorter than a day), all read in one pass."""
    count = len(scored.origins)
    origins = np.concatenate((scored.origins, scored.origins - day, ends - day))
    windows = np.concatenate((scored.windows, scored.windows, np.full(len(ends), window)))
    starts = np.concatenate((scored.origins, begins[scored.owners], begins))
    inside = origins >= starts
    maxima = np.full(len(origins), np.nan)
    maxima[inside] = _realised(values, origins[inside], windows[inside])
    return maxima[:count], maxima[count : 2 * count], maxima[2 * count :]


def _saving(base: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """How much less ``cost`` is than ``base``, as a share of ``base``."""
    return (base - cost) / np.maximum(np.abs(base), np.finfo(np.float64).tiny)


@dataclass(frozen=True)
class _Blend:
    """The chosen blend of each forecast: its partner (a position in PARTNERS), the backend's weight,
    how much less it would have sized than the backend alone, and its scores (``forecasts × scores``)."""

    partners: np.ndarray
    weights: np.ndarray
    savings: np.ndarray
    scores: np.ndarray
    costs: np.ndarray
    """What each chosen blend's quantile at SELECTION_LEVEL would have sized to on average."""

    def rows(self, which: np.ndarray) -> _Blend:
        """The choices of the forecasts at the positions ``which``."""
        return _Blend(
            partners=self.partners[which],
            weights=self.weights[which],
            savings=self.savings[which],
            scores=self.scores[which],
            costs=self.costs[which],
        )


BLEND_BLOCK = 256
"""Forecasts whose blends :func:`_blend` judges together: few enough for their arrays to stay in a
processor's cache (``benchmarks/bench_tune.py`` prints the CPU a tuning run costs)."""


def _blend(
    realised: np.ndarray,
    references: np.ndarray,
    partners: np.ndarray,
    scales: np.ndarray,
    floors: np.ndarray,
    with_yesterday: np.ndarray,
) -> _Blend:
    """Choose each forecast's blend (module docstring) from its past forecasts, one row each: what the
    window held, the backend's reference, the partners ``ℓ`` and ``Y`` (``2 × forecasts × scores``)
    and the scale at each origin; ``floors`` are what each forecast's quantiles are clipped at (0 or
    -inf), and ``with_yesterday`` says where ``Y`` may be a partner."""
    rank = _rank(realised.shape[1], SELECTION_LEVEL)
    mean_scale = scales.mean(axis=1)
    # Every blend of non-negative references and partners is non-negative, so only a negative
    # quantile can size below a floor of 0 there: elsewhere the mean needs no clipping.
    clipped = np.isfinite(floors)
    unsure = clipped & ((references.min(axis=1) < 0) | (partners.min(axis=-1) < 0).any(axis=0))

    def judged(part: slice, weight: float) -> np.ndarray:
        """What the quantile of the scores of a blend with ``weight`` would have sized to on average,
        for the forecasts ``part``."""
        own = references[part]
        blended = own if weight == 1.0 else weight * own + (1.0 - weight) * partners[:, part]
        ordered = (realised[part] - blended) / scales[part]
        ordered.sort(axis=-1)  # the scores, in place: only their order statistic is kept
        quantile = ordered[..., rank]
        sized = blended.mean(axis=-1) + mean_scale[part] * quantile
        clip = unsure[part] | (clipped[part] & (quantile < 0))
        if clip.any():
            at = np.nonzero(clip)
            rows = at[-1] + part.start
            sized[at] = np.maximum(
                blended[at] + scales[rows] * quantile[at][:, np.newaxis], floors[rows, np.newaxis]
            ).mean(axis=-1)
        return sized

    # weights × partners × forecasts, a block of forecasts at a time: each block's arrays stay in the
    # processor's cache while they are blended, scored and sorted.
    sized = np.empty((len(BLEND_WEIGHTS), 2, len(references)))
    for first in range(0, len(references), BLEND_BLOCK):
        part = slice(first, first + BLEND_BLOCK)
        for index, weight in enumerate(BLEND_WEIGHTS):
            sized[index, :, part] = judged(part, weight)
    own = sized[0, 0]
    eligible = sized <= own - BLEND_SAVING * np.abs(own)
    eligible[0] = True  # the backend alone, the dearest of the eligible
    best = np.argmin(np.where(eligible, sized, np.inf), axis=0)  # partners × forecasts: the first (highest) weight
    forecasts = np.arange(len(own))
    costs = sized[best, np.arange(2)[:, np.newaxis], forecasts]
    savings = _saving(own, costs)
    partner = (with_yesterday & (best[1] > 0) & (savings[1] >= savings[0] + YESTERDAY_SAVING)).astype(np.intp)
    weight = best[partner, forecasts]
    # The chosen blend's scores, made again as judged made them, for the rows that chose it.
    chosen = (realised - references) / scales
    for index, value in enumerate(BLEND_WEIGHTS[1:], start=1):
        rows = np.flatnonzero(weight == index)
        if len(rows):
            mixed = value * references[rows] + (1.0 - value) * partners[partner[rows], rows]
            chosen[rows] = (realised[rows] - mixed) / scales[rows]
    return _Blend(
        partners=partner,
        weights=np.array(BLEND_WEIGHTS)[weight],
        savings=np.where(weight > 0, savings[partner, forecasts], 0.0),
        scores=chosen,
        costs=costs[partner, forecasts],
    )


def answered(forecast: Forecast, window: int) -> PastReferences:
    """The past forecasts a backend answered with ``forecast`` (none if it did not hindcast)."""
    hindcast = forecast.hindcast
    if hindcast is None:
        none = np.zeros(0, dtype=np.intp)
        return PastReferences(none, none, np.zeros(0), np.zeros(0))
    # Oldest first, as records are kept, so that the same forecasts sum alike from either source.
    known = np.flatnonzero(np.isfinite(hindcast.references))[::-1]
    spreads = hindcast.spreads[known] if hindcast.spreads is not None else np.full(len(known), np.nan)
    return PastReferences(
        origins=hindcast.origins[known],
        windows=np.full(len(known), window, dtype=np.intp),
        references=hindcast.references[known],
        spreads=spreads,
    )


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
    :func:`hindcast_request`). ``newest`` is the time of the history's newest point; ``records``
    are those the previous evaluation kept."""
    n = len(history.values)
    hindcast = forecast.hindcast is not None
    past = answered(forecast, window) if hindcast else _located(records, n, newest, history.step)
    [result] = window_forecasts(history.values, history.step, [(0, n)], [forecast], window, levels, [past])
    if hindcast:
        return result, ()
    spread = backend_spread(forecast, window)
    recorded = None if math.isnan(spread) else spread
    return result, remember(records, newest, window, _backend_reference(forecast, window), history.step, recorded)
