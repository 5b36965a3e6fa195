"""From the day's scores to the offsets a calibrated quantile is sized at: the conformal rank, and
yesterday's miss expected again (:mod:`presage_scaler.engine.calibration`, Same time yesterday and
Forecast). Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

ANALOG_RANK = 0.9
"""A miss the day before at this time counts when it is beyond this quantile of the day's errors: one
window in ten where errors do not recur by time of day; a higher rank leaves recurring misses
uncovered on spiky demand. Checked by ``benchmarks/bench_backtest.py``."""

ANALOG_SCALE_RANGE = (0.5, 2.0)
"""How far the ratio of the day before's noise level to today's may scale yesterday's miss into
today's units: unbounded, a quarter hour far calmer or noisier than today's would set the whole
correction. Checked by ``benchmarks/bench_backtest.py``."""

_RANK_TOLERANCE = 1e-9


def rank(count: int, level: float) -> int:
    """The 0-based position of ``s(level)`` among ``count`` ordered scores: the ``⌈(count + 1)·level⌉``-th
    smallest, within the first and the last."""
    return min(count, max(1, math.ceil((count + 1) * level - _RANK_TOLERANCE))) - 1


def base_level(quantile: float) -> float:
    """``L_q`` (:mod:`presage_scaler.engine.calibration`, Forecast): the level of the day's errors
    sized to when yesterday's miss at this time is not expected again."""
    top = ANALOG_RANK
    if quantile <= (1 + top * top) / 2:
        return max(0.0, (quantile - (1 - top * top) / 2) / top)
    return math.sqrt(2 * quantile - 1)


def analog_scales(unit_then: np.ndarray, unit_now: np.ndarray) -> np.ndarray:
    """``r``, each score's unit ``κ(o)`` over its forecast's ``κ(n)`` clipped to ANALOG_SCALE_RANGE,
    which puts a miss at ``o`` in today's units (``forecasts × scores`` and ``forecasts``)."""
    return np.clip(unit_then / unit_now[:, np.newaxis], *ANALOG_SCALE_RANGE)


def score_quantiles(
    scores: np.ndarray, offsets: np.ndarray, relative_scales: np.ndarray, window: int, levels: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """``t_q`` and, before yesterday's miss is expected again, the band's ``b_q`` of forecasts with the
    same number of scores.

    Parameters
    ----------
    scores : numpy.ndarray, shape (F, m)
        ``s(o)``: each forecast's ``m`` scores, one row per forecast.
    offsets : numpy.ndarray, shape (F, m)
        Each score's origin relative to its forecast's same time the day before (``o - (n - D)``):
        ``a`` is the score nearest 0, if less than ``window`` steps from it.
    relative_scales : numpy.ndarray, shape (F, m)
        Each score's ``r`` (:func:`analog_scales`).
    window : int
        ``w``, the sizing window in steps.
    levels : sequence of float, length L
        The levels ``q``.

    Returns
    -------
    offsets, bands : numpy.ndarray, shape (F, L)
        ``t_q`` and ``b_q``.

    Notes
    -----
    With ``s(p)`` the ``⌈(m + 1)·p⌉``-th smallest score (:func:`rank`) and ``T`` = ANALOG_RANK::

        b_q = s(L_q) where a is known, else s(q)
        t_q = max(a · r, b_q) where a is known and a ≥ s(T), else b_q
    """
    count = scores.shape[1]
    plain = np.array([rank(count, level) for level in levels], dtype=np.intp)
    based = np.array([rank(count, base_level(level)) for level in levels], dtype=np.intp)
    extreme = rank(count, ANALOG_RANK)
    # A sort: numpy sorts rows this short faster than it partitions them, even at one position.
    ordered = np.sort(scores, axis=1)
    nearest = np.argmin(np.abs(offsets), axis=1)[:, np.newaxis]
    known = np.abs(np.take_along_axis(offsets, nearest, axis=1)) < window
    analog = np.take_along_axis(scores, nearest, axis=1)
    beyond = known & (analog >= ordered[:, [extreme]])
    miss = analog * np.take_along_axis(relative_scales, nearest, axis=1)
    band = np.where(known, ordered[:, based], ordered[:, plain])
    return np.where(beyond, np.maximum(miss, band), band), band
