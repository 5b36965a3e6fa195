"""Forecast once: everything a replay needs that no policy knob changes.

A decision's data, its forecast and the calibrated forecast of its sizing window's highest demand
depend only on the history and the forecaster's settings, never on the policy's state or knobs
(:mod:`presage_scaler.backtest.replay`). So they are made once per forecaster setting, at every
targetQuantile a candidate may use, by the backtest's own :class:`DecisionFeed`, and every candidate
that shares the setting replays from them.

:func:`forecast` keeps the numbers as arrays (:class:`Forecasts`), small enough to come back from
another process; :func:`prepare` turns them into the objects production's decision code takes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from presage_scaler.backends.base import Forecast, History
from presage_scaler.backtest.replay import DecisionFeed, forecaster_for
from presage_scaler.backtest.runner import Plan
from presage_scaler.engine.calibration import CalibrationState, WindowForecast
from presage_scaler.engine.evaluator import SignalData, Sizing
from presage_scaler.tune.errors import TuneError


@dataclass(frozen=True)
class Forecasts:
    """One forecaster setting's numbers for every decision of a plan's schedule, in order."""

    spans: np.ndarray
    """``(decisions, 2)``: the signal points ``[begin, end)`` each decision saw."""
    gap_steps: np.ndarray
    points: np.ndarray
    """``(decisions, horizon)``: the backend's point forecast."""
    levels: tuple[float, ...]
    windows: np.ndarray
    """``(decisions, levels)``: the calibrated forecast of the sizing window's highest demand."""
    references: np.ndarray
    scores: np.ndarray


def forecast(plan: Plan, levels: Sequence[float], on_progress: Callable[[int], None] | None = None) -> Forecasts:
    """Forecast and calibrate every decision of ``plan`` at ``levels`` and the spec's own.

    Only a backend that answers hindcasts is calibrated without state (SeasonalNaive); any other
    would make the sizing depend on the order of replays, and is refused.
    """
    spans, gaps, points, windows, references, scores = [], [], [], [], [], []
    with asyncio.Runner() as loop:
        feed = DecisionFeed(
            spec=plan.spec,
            signal_spec=plan.signal_spec,
            signal=plan.signal,
            ratio=plan.ratio,
            backend=plan.backend,
            forecaster=forecaster_for(plan.backend, loop),
            lead=plan.lead,
            decisions=plan.schedule.decisions(len(plan.trace)),
            levels=tuple(levels),
        )
        ordered = tuple(sorted({*levels, plan.spec.policy.target_quantile, plan.spec.policy.scale_down_quantile}))
        for done, (step, data, made, sizing) in enumerate(feed, start=1):
            if sizing is None:
                backend = plan.backend.identity.backend
                raise TuneError(
                    f"presage tune needs a backend that answers hindcasts (SeasonalNaive); {backend} does not"
                )
            [window] = sizing.windows
            end = step // plan.ratio
            spans.append((end - len(data.history.values), end))
            gaps.append(data.gap_steps)
            points.append(made.point)
            windows.append([window.quantiles[level] for level in ordered])
            references.append(window.reference)
            scores.append(window.scores)
            if on_progress is not None and done % 1024 == 0:
                on_progress(done)
    if on_progress is not None:
        on_progress(len(spans))
    return Forecasts(
        spans=np.array(spans, dtype=np.int64).reshape(-1, 2),
        gap_steps=np.array(gaps, dtype=np.int64),
        points=np.array(points, dtype=np.float64),
        levels=ordered,
        windows=np.array(windows, dtype=np.float64),
        references=np.array(references, dtype=np.float64),
        scores=np.array(scores, dtype=np.int64),
    )


@dataclass(frozen=True)
class Prepared:
    """Per decision of ``plan``'s schedule, in order: the signal data, the forecast and the sizing,
    as :func:`presage_scaler.engine.evaluator.decide` takes them."""

    plan: Plan
    data: tuple[SignalData, ...]
    forecasts: tuple[Forecast, ...]
    sizings: tuple[Sizing, ...]


def prepare(plan: Plan, forecasts: Forecasts) -> Prepared:
    """The decision inputs of ``plan`` from its forecaster's numbers. A forecast carries its point
    forecast only: a decision reads nothing else of it (its quantiles went into the sizing)."""
    signal, spec = plan.signal, plan.signal_spec
    data, made, sizings = [], [], []
    empty = CalibrationState()
    for (begin, end), gaps, point, window, reference, scores in zip(
        forecasts.spans.tolist(),
        forecasts.gap_steps.tolist(),
        forecasts.points,
        forecasts.windows.tolist(),
        forecasts.references.tolist(),
        forecasts.scores.tolist(),
        strict=True,
    ):
        history = History(values=signal.values[begin:end], step=signal.step)
        data.append(SignalData(spec=spec, history=history, gap_steps=gaps, capacity=spec.per_replica))
        made.append(Forecast(point=point, quantiles={}))
        quantiles = dict(zip(forecasts.levels, window, strict=True))
        sizing = WindowForecast(quantiles=quantiles, reference=reference, scores=scores)
        sizings.append(Sizing(windows=(sizing,), calibration=empty))
    return Prepared(plan=plan, data=tuple(data), forecasts=tuple(made), sizings=tuple(sizings))
