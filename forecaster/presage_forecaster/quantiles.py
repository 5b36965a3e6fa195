"""Quantile levels: what a request may ask for, and how each is made from TimesFM 2.5's deciles.

TimesFM 2.5 produces the deciles 0.1 … 0.9 (and a mean). A requested level is served as:

``model``
    one of the deciles: the model's own number.
``interpolated``
    a level strictly between two deciles (e.g. 0.25, 0.75): interpolated between the two
    neighbouring deciles, linearly in the standard normal quantile ``z(p) = Φ⁻¹(p)``.
``extrapolated``
    a level outside [0.1, 0.9] (e.g. 0.05, 0.95, 0.99), allowed down to :data:`MIN_LEVEL` and up to
    :data:`MAX_LEVEL`: the outermost two deciles (0.1 and 0.2, or 0.8 and 0.9) are extended,
    linearly in ``z``. For a normal forecast distribution this is exact; for a heavier tail it
    understates the extreme levels, which is why the response flags it.
``point``
    the request turned the quantile head off (``useQuantileHead: false``): every level is the point
    forecast, as the ForecastBackend API documents.

Formally, for ``p`` with neighbours ``a < b`` (the two deciles either side, or the outermost two):
``q(p) = q(a) + (z(p) − z(a)) / (z(b) − z(a)) · (q(b) − q(a))``. The deciles are made
non-decreasing before this (TimesFM's ``fix_quantile_crossing``), so the result is non-decreasing in
``p`` at every step. Never is a level silently served by another level.

A level is a JSON number, or a string holding a decimal number (``"0.95"``); anything else (``"p95"``,
``"95%"``, ``true``) is an unknown format. Levels are keyed in responses by ``format(level, "g")``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np

from presage_forecaster.quoting import quote

MODEL_LEVELS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""The levels TimesFM 2.5 produces, in the order of its quantile outputs 1…9."""

MEDIAN = 5
"""Index of the median (TimesFM's point forecast) in the model's 10 outputs per step: 0 is the mean,
1…9 the deciles."""

MIN_LEVEL = 0.01
MAX_LEVEL = 0.99
"""The extrapolation range: beyond it two deciles say too little about the tail to report a number."""

Source = Literal["model", "interpolated", "extrapolated", "point"]

_NORMAL = NormalDist()


class QuantileLevelError(ValueError):
    """A requested level that is not a number in [MIN_LEVEL, MAX_LEVEL]; ``code`` names which problem."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Treatment:
    """How one requested level is served: ``q(level) = q(lower) + weight · (q(upper) − q(lower))``."""

    level: float
    source: Source
    lower: float
    upper: float
    weight: float

    @property
    def key(self) -> str:
        """The level's key in responses, e.g. ``"0.95"``."""
        return level_key(self.level)


def level_key(level: float) -> str:
    """A level as it is keyed in responses: ``format(level, "g")``."""
    return format(level, "g")


def parse_level(raw: object) -> float:
    """A requested level from its JSON form; raises :class:`QuantileLevelError` naming the problem."""
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise QuantileLevelError(
            "UnknownQuantileFormat", f'{quote(raw)} is not a quantile level: use a number such as 0.9 or "0.9"'
        )
    if isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            raise QuantileLevelError(
                "UnknownQuantileFormat", f'{quote(raw)} is not a quantile level: use a decimal number such as "0.95"'
            ) from None
    else:
        value = raw  # compared as it is: an integer may be beyond float's range
    if not 0.0 < value < 1.0:  # NaN compares false
        raise QuantileLevelError("QuantileOutOfRange", f"quantile level {quote(raw)} must lie strictly between 0 and 1")
    if not MIN_LEVEL <= value <= MAX_LEVEL:
        raise QuantileLevelError(
            "QuantileOutOfRange",
            f"quantile level {quote(raw)} is outside [{MIN_LEVEL}, {MAX_LEVEL}]: it would be extrapolated too far "
            "beyond the model's deciles (0.1 … 0.9)",
        )
    return float(value)


def plan(levels: Sequence[float], *, use_quantile_head: bool = True) -> list[Treatment]:
    """The treatment of each level, in request order, duplicates (same key) dropped."""
    out: list[Treatment] = []
    seen: set[str] = set()
    for level in levels:
        key = level_key(level)
        if key in seen:
            continue
        seen.add(key)
        out.append(_treatment(level, use_quantile_head))
    return out


def _treatment(level: float, use_quantile_head: bool) -> Treatment:
    if not use_quantile_head:
        return Treatment(level, "point", 0.5, 0.5, 0.0)
    for decile in MODEL_LEVELS:
        if math.isclose(level, decile, abs_tol=1e-9):
            return Treatment(decile, "model", decile, decile, 0.0)
    if level < MODEL_LEVELS[0]:
        lower, upper, source = MODEL_LEVELS[0], MODEL_LEVELS[1], "extrapolated"
    elif level > MODEL_LEVELS[-1]:
        lower, upper, source = MODEL_LEVELS[-2], MODEL_LEVELS[-1], "extrapolated"
    else:
        upper = next(d for d in MODEL_LEVELS if d > level)
        lower = MODEL_LEVELS[MODEL_LEVELS.index(upper) - 1]
        source = "interpolated"
    z = _NORMAL.inv_cdf
    weight = (z(level) - z(lower)) / (z(upper) - z(lower))
    return Treatment(level, source, lower, upper, weight)  # type: ignore[arg-type]


def apply(treatment: Treatment, deciles: np.ndarray, point: np.ndarray) -> np.ndarray:
    """One level's values per step from ``deciles`` (``steps × 9``, non-decreasing) and ``point``."""
    if treatment.source == "point":
        return point.copy()
    lower = deciles[:, MODEL_LEVELS.index(treatment.lower)]
    upper = deciles[:, MODEL_LEVELS.index(treatment.upper)]
    return lower + treatment.weight * (upper - lower)
