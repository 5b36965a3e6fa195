"""Forecast once: the numbers a replay needs that no policy knob changes.

A decision's calibrated forecast of its sizing window's highest demand depends only on the history
it sees and the forecaster's settings, never on the policy's state or knobs
(:mod:`presage_scaler.backtest.replay`). So it is made once per forecaster setting, at every
targetQuantile a candidate may use, by the backtest's own :class:`DecisionFeed`, and every candidate
that shares the setting replays from it (:mod:`presage_scaler.tune.replay`).

Two settings that differ only in the history they read share every decision whose window of the
signal is the same under both: all of them while neither history is longer than what the decision
has seen. :func:`shared_decisions` counts them, so that only the rest is forecast again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from presage_scaler.backtest.replay import DecisionFeed, forecaster_for, history_points
from presage_scaler.backtest.runner import Plan
from presage_scaler.tune.errors import TuneError


@dataclass(frozen=True)
class Forecasts:
    """One forecaster setting's calibrated window forecasts for a run of a plan's decisions, in order."""

    levels: tuple[float, ...]
    windows: np.ndarray
    """``(decisions, levels)``: the calibrated forecast of the sizing window's highest demand."""
    bands: np.ndarray
    """``(decisions, levels)``: the same before yesterday's miss is expected again, which the
    uncertainty guard's lower value is measured from (:meth:`WindowForecast.lower`)."""

    def then(self, later: Forecasts) -> Forecasts:
        """These decisions followed by ``later``'s (made at the same levels)."""
        if later.levels != self.levels:
            raise ValueError(f"levels differ: {self.levels} and {later.levels}")
        windows = np.concatenate((self.windows, later.windows))
        return Forecasts(self.levels, windows, np.concatenate((self.bands, later.bands)))

    def head(self, decisions: int) -> Forecasts:
        """The first ``decisions``."""
        return Forecasts(self.levels, self.windows[:decisions], self.bands[:decisions])

    def lower(self, target: float, scale_down: float) -> np.ndarray:
        """Per decision, the scaleDownQuantile value the guard compares with the targetQuantile value
        (:meth:`presage_scaler.engine.calibration_windows.WindowForecast.lower`)."""
        at = self.levels.index
        return self.bands[:, at(scale_down)] + self.windows[:, at(target)] - self.bands[:, at(target)]


def levels_for(plan: Plan, levels: Sequence[float]) -> tuple[float, ...]:
    """The levels :func:`forecast` makes: ``levels`` and the plan's targetQuantile and scaleDownQuantile."""
    policy = plan.spec.policy
    return tuple(sorted({*levels, policy.target_quantile, policy.scale_down_quantile}))


def forecast(
    plan: Plan,
    levels: Sequence[float],
    skip: int = 0,
    on_progress: Callable[[int], None] | None = None,
    *,
    decisions: range | None = None,
    chunk: int | None = None,
) -> Forecasts:
    """Forecast and calibrate the decisions of ``plan``'s schedule from the ``skip``-th on (or
    ``decisions``, steps of that schedule), at :func:`levels_for` ``levels``, ``chunk`` decisions
    a chunk (:class:`DecisionFeed`'s ``chunk_size``).

    Only a backend that answers hindcasts is calibrated without state (SeasonalNaive); any other
    would make the sizing depend on the order of replays, and is refused.
    """
    ordered = levels_for(plan, levels)
    if decisions is None:
        decisions = plan.schedule.decisions(len(plan.trace))[skip:]
    windows, bands = np.empty((len(decisions), len(ordered))), np.empty((len(decisions), len(ordered)))
    with asyncio.Runner() as loop:
        feed = DecisionFeed(
            spec=plan.spec,
            signal_spec=plan.signal_spec,
            signal=plan.signal,
            ratio=plan.ratio,
            backend=plan.backend,
            forecaster=forecaster_for(plan.backend, loop),
            lead=plan.lead,
            decisions=decisions,
            levels=tuple(levels),
            chunk_size=chunk,
        )
        done = 0
        for calibrated in feed.calibrated():
            if calibrated is None:
                backend = plan.backend.identity.backend
                raise TuneError(
                    f"presage tune needs a backend that answers hindcasts (SeasonalNaive); {backend} does not"
                )
            columns = [calibrated.levels.index(level) for level in ordered]
            made = slice(done, done + len(calibrated.quantiles))
            windows[made], bands[made] = calibrated.quantiles[:, columns], calibrated.bands[:, columns]
            done = made.stop
            if on_progress is not None:
                on_progress(done)
    return Forecasts(ordered, windows, bands)


def shared_decisions(plan: Plan, history: int, other: int) -> int:
    """How many of ``plan``'s first decisions see the same window of the signal when they read at most
    ``history`` signal points as when they read at most ``other``: every one when the two are equal,
    else those that have seen no more points than the shorter."""
    decisions = plan.schedule.decisions(len(plan.trace))
    if history == other:
        return len(decisions)
    # A decision at trace step s sees the signal points before s // ratio.
    return len(range(decisions.start, min(decisions.stop, (min(history, other) + 1) * plan.ratio), decisions.step))


def points_read(plan: Plan) -> int:
    """The most signal points a decision of ``plan`` reads (its history, as the feed caps it)."""
    return history_points(plan.signal_spec, plan.backend)
