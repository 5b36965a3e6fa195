"""The past forecasts calibration scores: where they come from, where they lie in the history, and
which are scored. Pure: no I/O, time comes in as arguments.

Every forecast request asks the backend what it would have forecast from the origins of the last
day (:func:`hindcast_request`). A backend that can answer cheaply (SeasonalNaive) does so in the
same call (:func:`answered`, :func:`answered_together`): nothing is stored, and a restarted or
brand-new scaler is calibrated from its first evaluation. For any other backend (TimesFM) presage
records each backend reference ``β`` and band ``υ`` as they are made (at most one per
SPAN / MAX_FORECASTS, :func:`remember`) in :class:`CalibrationState`, which the controller keeps in
``status`` so that a restart keeps it too (:func:`located` finds them in the next history). The
levels, peaks and noise each score reads are recomputed from the history
(:mod:`presage_scaler.engine.calibration_readings`). With fewer than MIN_SCORES scores
(:func:`scored_pasts`) the backend's own per-step band is used instead.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from presage_scaler.api.predictive_scaler_status import (
    CALIBRATION_MAX_FORECASTS,
    CalibrationForecast,
    SignalCalibration,
)
from presage_scaler.backends.base import Forecast, HindcastRequest
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

BAND_LEVELS = (0.5, 0.9)
"""The backend's band whose width says how unsure it is: its median to its 0.9 quantile. Asked for
with every forecast and hindcast whatever the policy's levels, so that one level's numbers never
depend on which others are asked for."""

MAX_RECORDS = CALIBRATION_MAX_FORECASTS
"""Most recorded forecasts kept per signal: a day's worth plus those whose window is still open."""

STORED_DECIMALS = 4
"""A recorded reference is rounded as ``.status`` keeps it, so a restarted controller and a backtest
that never wrote status score the same numbers."""


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


def located(records: Sequence[PastForecast], n: int, newest: datetime, step: timedelta) -> PastReferences:
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


@dataclass(frozen=True)
class ScoredPasts:
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


def scored_pasts(spans: Sequence[tuple[int, int]], pasts: Sequence[PastReferences] | AnsweredPasts) -> ScoredPasts:
    """The past forecasts that can be scored: those past the history's second point whose window has
    been observed, of the forecasts that have at least MIN_SCORES of them (forecast ``i`` was made
    from ``series[begin:end]`` for ``spans[i]``)."""
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
        return ScoredPasts(none, none, np.zeros(0), np.zeros(0), none, bounds)
    return ScoredPasts(
        np.concatenate(origins),
        np.concatenate(windows),
        np.concatenate(references),
        np.concatenate(spreads),
        np.concatenate(owners),
        bounds,
    )


def _scored_together(spans: Sequence[tuple[int, int]], pasts: AnsweredPasts) -> ScoredPasts:
    """:func:`scored_pasts` of past forecasts answered together, with the same arrays in the same order."""
    begins = np.array([begin for begin, _ in spans], dtype=np.intp)
    lengths = np.array([end - begin for begin, end in spans], dtype=np.intp)
    keep = (
        np.isfinite(pasts.references) & (pasts.origins >= 2) & (pasts.origins + pasts.window <= lengths[:, np.newaxis])
    )
    counts = keep.sum(axis=1)
    counts[counts < MIN_SCORES] = 0
    keep &= (counts > 0)[:, np.newaxis]
    rows = np.concatenate(([0], np.cumsum(counts)))
    return ScoredPasts(
        origins=(begins[:, np.newaxis] + pasts.origins)[keep],
        windows=np.full(int(rows[-1]), pasts.window, dtype=np.intp),
        references=pasts.references[keep],
        spreads=pasts.spreads[keep],
        owners=np.repeat(np.arange(len(spans)), counts),
        bounds=list(zip(rows[:-1].tolist(), rows[1:].tolist(), strict=True)),
    )
