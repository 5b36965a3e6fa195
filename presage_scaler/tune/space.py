"""The values ``presage tune`` tries for each knob, around the user's own.

The dial is targetQuantile: every value is calibrated in the same forecasting pass. The other knobs
are listed each from its most conservative value to its least; the user's own value is always among
them, so the starting spec is a candidate. The forecaster's settings are last: each new one is a new
forecasting pass. Values that cannot differ on this trace are left out: a season longer than the
trace forecasts as any other such season does, and two histories longer than any decision has seen
read the same points.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from presage_scaler.api.quantities import Amount
from presage_scaler.backtest.replay import history_points
from presage_scaler.backtest.runner import Plan
from presage_scaler.tune.knobs import ForecasterKnobs, Knobs, history_for
from presage_scaler.tune.search import Dimension

TARGET_QUANTILES = (0.5, 0.6, 0.7, 0.8, 0.85, 0.875, 0.9, 0.925, 0.95, 0.975, 0.99)
HEADROOMS = tuple(Amount(float(p), percent=True) for p in (10, 5, 0))
GUARDS: tuple[float | None, ...] = (0.25, 0.5, None)
"""maxRelativeSpread; None disables the guard."""
SCALE_DOWN_WINDOWS = tuple(timedelta(minutes=m) for m in (15, 5, 0))
SCALE_DOWN_RATES = tuple(Amount(float(p), percent=True) for p in (20, 50, 100))
SEASONS = ((timedelta(hours=168), 3), (timedelta(hours=24), 7), (timedelta(hours=24), 3))
"""SeasonalNaive (season, cycles) pairs besides the user's."""


@dataclass(frozen=True)
class Space:
    dial: tuple[float, ...]
    dimensions: tuple[Dimension, ...]

    @property
    def forecasters(self) -> tuple[ForecasterKnobs, ...]:
        """The forecaster settings the search may try (each one forecasting pass)."""
        return next(d.values for d in self.dimensions if d.field == "forecaster")

    def candidates(self, start: Knobs) -> tuple[Knobs, ...]:
        """Every point of the space, ``start`` first: each setting of the dimensions at each value of
        the dial."""
        found = {start: None}
        for values in itertools.product(*(dimension.values for dimension in self.dimensions)):
            shape = replace(start, **{d.field: v for d, v in zip(self.dimensions, values, strict=True)})
            found.update((replace(shape, target_quantile=q), None) for q in self.dial)
        return tuple(found)


def _with(values: tuple[Any, ...], own: Any) -> tuple[Any, ...]:
    return values if own in values else (*values, own)


def points_seen(plan: Plan, history: timedelta) -> int:
    """How many signal points the decisions of ``plan`` read at most with ``history``: the history's
    points, or all that the last decision has seen when that is fewer."""
    signal = replace(plan.signal_spec, history=history)
    last = plan.schedule.decisions(len(plan.trace))[-1]
    return min(history_points(signal, plan.backend), last // plan.ratio)


def forecasters(base: ForecasterKnobs, plan: Plan) -> tuple[ForecasterKnobs, ...]:
    """The user's forecaster and the SEASONS that can forecast differently on ``plan``'s trace."""
    span = len(plan.trace) * plan.trace.step
    found = {(base.season, base.cycles, points_seen(plan, base.history)): base}
    for season, cycles in SEASONS:
        if season >= span:
            continue  # never a whole season in the trace: the recent-level fallback, like any other
        history = history_for(season, cycles, base.history)
        found.setdefault((season, cycles, points_seen(plan, history)), ForecasterKnobs(season, cycles, history))
    return tuple(found.values())


def space_for(base: Knobs, plan: Plan) -> Space:
    """The dial and the knobs for a search that starts at ``base``, on ``plan`` (the starting spec's)."""
    lowest = plan.spec.policy.scale_down_quantile
    dial = tuple(sorted(q for q in {*TARGET_QUANTILES, base.target_quantile} if q >= lowest))
    dimensions = (
        Dimension("guard", _with(GUARDS, base.max_relative_spread), "max_relative_spread"),
        Dimension("scaleDownWindow", _with(SCALE_DOWN_WINDOWS, base.scale_down_window), "scale_down_window"),
        Dimension("maxScaleDownRate", _with(SCALE_DOWN_RATES, base.max_scale_down_rate), "max_scale_down_rate"),
        Dimension("headroom", _with(HEADROOMS, base.headroom), "headroom"),
        Dimension("forecaster", forecasters(base.forecaster, plan), "forecaster"),
    )
    return Space(dial=dial, dimensions=dimensions)


def longest_history(base: ForecasterKnobs) -> timedelta:
    """The longest history a forecaster of a search that starts at ``base`` reads (:func:`forecasters`
    tries ``base`` and SEASONS)."""
    return max(base.history, *(history_for(season, cycles, base.history) for season, cycles in SEASONS))
