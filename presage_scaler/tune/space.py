"""The values ``presage tune`` tries for each knob, around the user's own.

The dial is targetQuantile (every value is calibrated in the same forecasting pass, so moving along
it costs one replay). The other knobs are listed in the order the search moves them, each from its
most conservative value to its least; the user's own value is always among them, so the starting
spec is a candidate. The forecaster's settings come last: each new one is a new forecasting pass.
Values that cannot differ on this trace are left out (a season longer than the trace forecasts as
any other such season does).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.quantities import Amount
from presage_scaler.backtest.trace import Trace
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


def _with(values: tuple[Any, ...], own: Any) -> tuple[Any, ...]:
    return values if own in values else (*values, own)


def forecasters(base: ForecasterKnobs, trace: Trace) -> tuple[ForecasterKnobs, ...]:
    """The user's forecaster and the SEASONS that can forecast differently on ``trace``."""
    span = len(trace) * trace.step
    found = [base]
    for season, cycles in SEASONS:
        candidate = ForecasterKnobs(season, cycles, history_for(season, cycles, base.history))
        if season >= span:
            continue  # never a whole season in the trace: the recent-level fallback, like any other
        same = (
            candidate.season == base.season
            and candidate.cycles == base.cycles
            and min(candidate.history, span) == min(base.history, span)
        )
        if not same and candidate not in found:
            found.append(candidate)
    return tuple(found)


def space_for(base: Knobs, spec: PredictiveScalerSpec, trace: Trace) -> Space:
    """The dial and the knobs for a search that starts at ``base``."""
    lowest = spec.policy.scale_down_quantile
    dial = tuple(sorted(q for q in {*TARGET_QUANTILES, base.target_quantile} if q >= lowest))
    dimensions = (
        Dimension("guard", _with(GUARDS, base.max_relative_spread), "max_relative_spread"),
        Dimension("scaleDownWindow", _with(SCALE_DOWN_WINDOWS, base.scale_down_window), "scale_down_window"),
        Dimension("maxScaleDownRate", _with(SCALE_DOWN_RATES, base.max_scale_down_rate), "max_scale_down_rate"),
        Dimension("headroom", _with(HEADROOMS, base.headroom), "headroom"),
        Dimension("forecaster", forecasters(base.forecaster, trace), "forecaster"),
    )
    return Space(dial=dial, dimensions=dimensions)
