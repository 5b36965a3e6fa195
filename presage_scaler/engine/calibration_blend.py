"""Choosing each forecast's reference: the backend's own, or a blend of it with the last hour's level
or with yesterday's window, by what each would have sized to over the day
(:mod:`presage_scaler.engine.calibration`, Reference). Pure."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from presage_scaler.engine.calibration_quantiles import rank

LEVEL = "level"
"""The blend partner ``ℓ``: the last hour's mean."""

YESTERDAY = "yesterday"
"""The blend partner ``Y``: the same window's maximum the day before."""

PARTNERS = (LEVEL, YESTERDAY)
"""The blend partners in the order :func:`choose_blends` numbers them."""

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

BLEND_BLOCK = 256
"""Forecasts whose blends :func:`_costs` judges together: few enough for their arrays to stay
in a processor's cache (``benchmarks/bench_tune.py`` prints the CPU a tuning run costs)."""


def saving(base: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """How much less ``cost`` is than ``base``, as a share of ``base``."""
    return (base - cost) / np.maximum(np.abs(base), np.finfo(np.float64).tiny)


@dataclass(frozen=True)
class Blend:
    """The chosen blend of each forecast: its partner (a position in PARTNERS), the backend's weight,
    how much less it would have sized than the backend alone, and its scores (``forecasts × scores``)."""

    partners: np.ndarray
    weights: np.ndarray
    savings: np.ndarray
    scores: np.ndarray
    costs: np.ndarray
    """What each chosen blend's quantile at SELECTION_LEVEL would have sized to on average."""

    def rows(self, which: np.ndarray) -> Blend:
        """The choices of the forecasts at the positions ``which``."""
        return Blend(
            partners=self.partners[which],
            weights=self.weights[which],
            savings=self.savings[which],
            scores=self.scores[which],
            costs=self.costs[which],
        )


def choose_blends(
    realised: np.ndarray,
    references: np.ndarray,
    partners: np.ndarray,
    scales: np.ndarray,
    floors: np.ndarray,
    with_yesterday: np.ndarray,
) -> Blend:
    """Choose each forecast's blend from its past forecasts, one row each.

    Parameters
    ----------
    realised : numpy.ndarray, shape (F, m)
        ``M(o)``: what each scored window held.
    references : numpy.ndarray, shape (F, m)
        The backend's reference at each origin.
    partners : numpy.ndarray, shape (2, F, m)
        The partners ``ℓ(o)`` and ``Y(o)``, in the order of PARTNERS.
    scales : numpy.ndarray, shape (F, m)
        The score unit at each origin.
    floors : numpy.ndarray, shape (F,)
        What each forecast's quantiles are clipped at: 0 or -inf.
    with_yesterday : numpy.ndarray of bool, shape (F,)
        Where ``Y`` may be a partner.

    Returns
    -------
    Blend
        One row per forecast; its ``scores`` of shape (F, m).

    Notes
    -----
    Each weight ``b`` of BLEND_WEIGHTS and partner ``π`` costs what the SELECTION_LEVEL quantile of
    its scores would have sized to on average over the day::

        ρ_b(o) = b·β(o) + (1 - b)·π(o),   s_b(o) = (M(o) - ρ_b(o)) / κ(o)
        c_b = mean over o of max(f, ρ_b(o) + κ(o)·s_b(p))

    with ``f`` the floor and ``p`` = SELECTION_LEVEL. The backend alone (``b = 1``) is kept unless a
    blend costs at least BLEND_SAVING of ``c_1`` less; then the cheapest such (ties to the higher
    weight). Yesterday's replaces the level's where ``with_yesterday`` and it saves a further
    YESTERDAY_SAVING of ``c_1``.
    """
    sized = _costs(realised, references, partners, scales, floors)
    own = sized[0, 0]
    eligible = sized <= own - BLEND_SAVING * np.abs(own)
    eligible[0] = True  # the backend alone, the dearest of the eligible
    best = np.argmin(np.where(eligible, sized, np.inf), axis=0)  # partners × forecasts: the first (highest) weight
    forecasts = np.arange(len(own))
    costs = sized[best, np.arange(2)[:, np.newaxis], forecasts]
    savings = saving(own, costs)
    partner = (with_yesterday & (best[1] > 0) & (savings[1] >= savings[0] + YESTERDAY_SAVING)).astype(np.intp)
    weight = best[partner, forecasts]
    # The chosen blend's scores, made again as _costs judged them, for the rows that chose it.
    chosen = (realised - references) / scales
    for index, value in enumerate(BLEND_WEIGHTS[1:], start=1):
        rows = np.flatnonzero(weight == index)
        if len(rows):
            mixed = value * references[rows] + (1.0 - value) * partners[partner[rows], rows]
            chosen[rows] = (realised[rows] - mixed) / scales[rows]
    return Blend(
        partners=partner,
        weights=np.array(BLEND_WEIGHTS)[weight],
        savings=np.where(weight > 0, savings[partner, forecasts], 0.0),
        scores=chosen,
        costs=costs[partner, forecasts],
    )


def _costs(
    realised: np.ndarray, references: np.ndarray, partners: np.ndarray, scales: np.ndarray, floors: np.ndarray
) -> np.ndarray:
    """``c``: what each blend's SELECTION_LEVEL quantile would have sized to on average over the day
    (shape (len(BLEND_WEIGHTS), 2, F): weights × partners × forecasts; the arguments as
    :func:`choose_blends` takes them)."""
    position = rank(realised.shape[1], SELECTION_LEVEL)
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
        quantile = ordered[..., position]
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
    return sized
