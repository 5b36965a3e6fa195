"""The calibrated sizing window of many forecasts in one vectorised pass, as named steps: score the
past forecasts, read the history, choose each forecast's reference and unit, size the quantiles
(:mod:`presage_scaler.engine.calibration` states the method). Pure: no I/O."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import timedelta

import numpy as np

from presage_scaler.backends.base import Forecast
from presage_scaler.engine.calibration_blend import LEVEL, PARTNERS, Blend, choose_blends, saving
from presage_scaler.engine.calibration_quantiles import analog_scales, score_quantiles
from presage_scaler.engine.calibration_readings import Readings, backend_references, read
from presage_scaler.engine.past_forecasts import (
    ANALOG,
    MIN_SCORES,
    AnsweredPasts,
    PastReferences,
    ScoredPasts,
    scored_pasts,
)
from presage_scaler.series.timegrid import steps_for

PEAK_SAVING = 0.05
"""How much less (a share of the held reference's cost) the backend's own reference must size over the
day to be used without the hold: without a margin, a day whose errors favour the unheld reference by
chance releases capacity that bursty demand still needs. Checked by ``benchmarks/bench_backtest.py``."""

BAND_SAVING = 0.0
"""The band scales the unit only where it would have sized at least this share less over the day than
the noise alone: a band that says nothing about where the errors fall (SeasonalNaive's trailing
residuals, which lag the daily cycle by hours) widens the spread of the scores and costs capacity
without covering more."""


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
class CalibratedWindows:
    """:func:`calibrated_windows` of F forecasts as arrays, one row per forecast: ``quantiles`` and
    ``bands`` of shape (F, L), the columns the levels in the order asked; the rest of shape (F,)."""

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


def calibrated_windows(
    series: np.ndarray,
    step: timedelta,
    spans: Sequence[tuple[int, int]],
    forecasts: Sequence[Forecast],
    window: int,
    levels: Sequence[float],
    pasts: Sequence[PastReferences] | AnsweredPasts,
) -> CalibratedWindows:
    """The calibrated window maximum at each level of forecasts whose histories are windows of one
    series, in one vectorised pass: a backtest calibrates a chunk of decisions at once, a single
    evaluation is the case of one.

    Parameters
    ----------
    series : numpy.ndarray, shape (N,)
        The series every forecast's history is a window of.
    step : timedelta
        Its resolution.
    spans : sequence of (int, int), length F
        Forecast ``i`` was made from ``series[begin:end]`` for ``spans[i]``.
    forecasts : sequence of Forecast, length F
        The backend's forecasts, each over at least ``window`` steps.
    window : int
        ``w``, the sizing window in steps.
    levels : sequence of float, length L
        The quantile levels ``q``.
    pasts : sequence of PastReferences, length F, or AnsweredPasts of F rows
        Each forecast's past forecasts, located in its history.

    Returns
    -------
    CalibratedWindows
        ``quantiles`` (``Q_q``) and ``bands`` of shape (F, L); ``reference`` (``ρ(n)``), ``scores``
        and each choice's figures of shape (F,).

    Notes
    -----
    In the symbols of :mod:`presage_scaler.engine.calibration`, for a forecast from ``n`` points
    with ``m`` scored past forecasts at origins ``o``::

        β̂(o) = max(β(o), P(o))                  the reference held at the recent peak
        ρ(o) = b·β̂(o) + (1 - b)·π(o)             π the level ℓ or yesterday's Y
        κ(o) = σ(o) · u(o)                        or σ(o) where the band does not pay
        s(o) = (M(o) - ρ(o)) / κ(o)
        Q_q  = max(f, ρ(n) + κ(n) · t_q)          t_q from the s(o) and a = s(n - D)

    with ``f`` 0 where the history is non-negative and -inf otherwise. The steps:
    :func:`~presage_scaler.engine.past_forecasts.scored_pasts` (which ``o``),
    :func:`~presage_scaler.engine.calibration_readings.read` (``M``, ``Y``, ``ℓ``, ``P``, ``σ``,
    ``u``), :func:`_choose` (the hold, ``b`` and ``π``, the unit, ``t_q``) and :func:`_sized`
    (``ρ(n)`` and ``Q_q``; the backend's own band where a forecast has fewer than MIN_SCORES).
    """
    values = np.asarray(series, dtype=np.float64)
    ends = np.array([end for _, end in spans])
    scored = scored_pasts(spans, pasts)
    readings = read(values, step, spans, scored, forecasts, window)
    floors = _floors(values, spans)
    choices = _choose(scored, readings, floors, ends - steps_for(ANALOG, step), window, levels)
    return _sized(forecasts, window, levels, readings, floors, choices)


def _floors(values: np.ndarray, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """``f`` of each forecast: 0 where its history holds no negative value (demand cannot be below
    nothing), -inf where it does."""
    begins = np.array([begin for begin, _ in spans])
    ends = np.array([end for _, end in spans])
    low = int(begins.min())
    negatives = np.concatenate(([0], np.cumsum(values[low:] < 0)))
    demand = negatives[ends - low] == negatives[begins - low]
    return np.where(demand, 0.0, -np.inf)


@dataclass(frozen=True)
class _Choices:
    """What :func:`_choose` chose for each forecast, one row each: for a forecast with no scores,
    offsets 0, the backend alone, held, in the noise's unit."""

    scores: np.ndarray
    """``m``, how many scores (F,)."""
    offsets: np.ndarray
    """``t_q`` (F, L)."""
    bands: np.ndarray
    """``t_q`` before yesterday's miss is expected again (F, L)."""
    weights: np.ndarray
    """``b`` (F,)."""
    savings: np.ndarray
    partners: np.ndarray
    """``π``, a position in PARTNERS (F,)."""
    held: np.ndarray
    unheld_savings: np.ndarray
    banded: np.ndarray
    """Whether the band scales the unit (F,)."""
    band_savings: np.ndarray

    def put(self, rows: np.ndarray, part: _Choices) -> None:
        """Write ``part``'s choices into the rows ``rows``."""
        for field in fields(self):
            getattr(self, field.name)[rows] = getattr(part, field.name)


def _choose(
    scored: ScoredPasts,
    readings: Readings,
    floors: np.ndarray,
    yesterdays: np.ndarray,
    window: int,
    levels: Sequence[float],
) -> _Choices:
    """Each forecast's choices (:func:`_choose_alike`), in groups of forecasts with as many scores.
    ``yesterdays`` are each forecast's ``n - D``."""
    count = len(scored.bounds)
    scores = np.array([last - first for first, last in scored.bounds])
    firsts = np.array([first for first, _ in scored.bounds])
    choices = _Choices(
        scores=scores,
        offsets=np.zeros((count, len(levels))),
        bands=np.zeros((count, len(levels))),
        weights=np.ones(count),
        savings=np.zeros(count),
        partners=np.zeros(count, dtype=np.intp),
        held=np.ones(count, dtype=bool),
        unheld_savings=np.zeros(count),
        banded=np.zeros(count, dtype=bool),
        band_savings=np.zeros(count),
    )
    for alike in np.unique(scores[scores > 0]).tolist():
        these = np.flatnonzero(scores == alike)
        rows = firsts[these, np.newaxis] + np.arange(alike)
        choices.put(these, _choose_alike(scored, readings, floors, yesterdays, window, levels, these, rows))
    return choices


def _choose_alike(
    scored: ScoredPasts,
    readings: Readings,
    floors: np.ndarray,
    yesterdays: np.ndarray,
    window: int,
    levels: Sequence[float],
    these: np.ndarray,
    rows: np.ndarray,
) -> _Choices:
    """The choices of the forecasts ``these``, whose scores are the rows ``rows`` of ``scored``
    (shape (F', m)): the blend of each variant (:func:`_judged_variants`), the variant
    (:func:`_pick_variant`), and the offsets ``t_q`` of its scores."""
    every = _judged_variants(scored, readings, floors, these, rows)
    variant = _pick_variant(every, readings.band_known[these])
    blend = every.rows(variant.rows)
    unit_then = np.where(variant.banded[:, np.newaxis], readings.banded_then[rows], readings.noise_then[rows])
    noises = readings.noise_now[these]
    unit_now = np.where(variant.banded, noises * readings.band_ratio_now[these], noises)
    since_yesterday = scored.origins[rows] - yesterdays[these, np.newaxis]
    offsets, bands = score_quantiles(blend.scores, since_yesterday, analog_scales(unit_then, unit_now), window, levels)
    return _Choices(
        scores=np.full(len(these), rows.shape[1]),
        offsets=offsets,
        bands=bands,
        weights=blend.weights,
        savings=blend.savings,
        partners=blend.partners,
        held=variant.held,
        unheld_savings=variant.unheld_saving,
        banded=variant.banded,
        band_savings=variant.band_saving,
    )


def _judged_variants(
    scored: ScoredPasts, readings: Readings, floors: np.ndarray, these: np.ndarray, rows: np.ndarray
) -> Blend:
    """The blend each of the forecasts ``these`` would choose in each of four variants: its reference
    held at the recent peak and not, each in the noise's unit and then in the band's; the variants
    one after the other (shape (4·F',))."""
    known = np.isfinite(readings.yesterday_then[rows]).all(axis=1) & np.isfinite(readings.yesterday_now[these])
    then = np.stack((readings.level_then[rows], np.nan_to_num(readings.yesterday_then[rows])))
    # The four variants are chosen in one pass, as four times the forecasts: what a pass costs is
    # mostly per numpy call, not per row.
    references = scored.references[rows]
    held = np.maximum(references, readings.peak_then[rows])
    noise, banded = readings.noise_then[rows], readings.banded_then[rows]
    return choose_blends(
        np.tile(readings.realised[rows], (4, 1)),
        np.concatenate((held, references, held, references)),
        np.tile(then, (1, 4, 1)),
        np.concatenate((noise, noise, banded, banded)),
        np.tile(floors[these], 4),
        np.tile(known, 4),
    )


@dataclass(frozen=True)
class _Variant:
    """Which of :func:`_judged_variants`' variants each forecast uses, and what the others would
    have cost (shape (F',) each)."""

    rows: np.ndarray
    """Its row among the variants."""
    held: np.ndarray
    unheld_saving: np.ndarray
    """Where not held, how much less the unheld reference sized than the held one (a share)."""
    banded: np.ndarray
    band_saving: np.ndarray
    """How much less the band's unit sized than the noise's (a share; 0 where the band is not known)."""


def _pick_variant(every: Blend, band_known: np.ndarray) -> _Variant:
    """In each unit, the unheld reference where it costs at least PEAK_SAVING less than the held one;
    then the band's unit where the band is known and costs at least BAND_SAVING less."""
    count = len(band_known)
    picks, releases, saved = [], [], []
    for unit in range(2):  # the rows of ``every``: held, unheld; each in the noise's unit, then the band's
        at_peak = np.arange(count) + 2 * count * unit
        unheld = at_peak + count
        saved.append(saving(every.costs[at_peak], every.costs[unheld]))
        releases.append(saved[-1] >= PEAK_SAVING)
        picks.append(np.where(releases[-1], unheld, at_peak))
    band_saving = saving(every.costs[picks[0]], every.costs[picks[1]])
    use = band_known & (band_saving >= BAND_SAVING)
    release = np.where(use, releases[1], releases[0])
    return _Variant(
        rows=np.where(use, picks[1], picks[0]),
        held=~release,
        unheld_saving=np.where(release, np.where(use, saved[1], saved[0]), 0.0),
        banded=use,
        band_saving=np.where(band_known, band_saving, 0.0),
    )


def _sized(
    forecasts: Sequence[Forecast],
    window: int,
    levels: Sequence[float],
    readings: Readings,
    floors: np.ndarray,
    choices: _Choices,
) -> CalibratedWindows:
    """``ρ(n)`` and ``Q_q`` of each forecast from its choices; a forecast with no scores is sized by
    the backend's own band, its highest over the window, from the backend's own reference."""
    band_ratios = np.where(choices.banded, readings.band_ratio_now, 1.0)
    backends = backend_references(forecasts, window)
    scored_rows = choices.scores > 0
    references = np.where(choices.held, np.maximum(backends, readings.peak_now), backends)
    blended = choices.weights != 1.0
    partner_values = np.where(choices.partners == 0, readings.level_now, readings.yesterday_now)
    references = np.where(blended, choices.weights * references + (1.0 - choices.weights) * partner_values, references)
    sigmas = (readings.noise_now * band_ratios)[:, np.newaxis]
    quantiles = np.maximum(floors[:, np.newaxis], references[:, np.newaxis] + sigmas * choices.offsets)
    bands = np.maximum(floors[:, np.newaxis], references[:, np.newaxis] + sigmas * choices.bands)
    if not scored_rows.all():
        for i in np.flatnonzero(~scored_rows).tolist():
            own = [float(np.max(forecasts[i].quantiles[level][:window])) for level in levels]
            quantiles[i] = bands[i] = own
        references = np.where(scored_rows, references, backends)
    return CalibratedWindows(
        levels=tuple(levels),
        quantiles=quantiles,
        bands=bands,
        reference=references,
        scores=choices.scores,
        weight=choices.weights,
        saving=choices.savings,
        partner=choices.partners,
        held=choices.held & scored_rows,
        unheld_saving=choices.unheld_savings,
        backend_reference=backends,
        recent_peak=readings.peak_now,
        noise=readings.noise_now,
        band_ratio=band_ratios,
        band_known=readings.band_known,
        band_saving=choices.band_savings,
    )
