"""How much of a scaler's signal an advice reads, and where its warm-up ends.

An advice is made from ``spec.advice.lookback`` ending now: a warm-up, the part the policy is chosen
on and the part held out (:mod:`presage_scaler.tune.split`). The replay's decisions begin a
pre-roll before the warm-up ends (:data:`presage_scaler.backtest.runner.PRE_ROLL`), and each reads
the signal's history before it, as the running scaler does. So that no decision reads a history cut
short by where the read began, the read reaches :func:`history_before` further back than the
lookback: as far as the longest history a forecaster of the search reads
(:func:`presage_scaler.tune.space.longest_history`) before the first decision forecast, which is at
most a day before the first replayed (:meth:`presage_scaler.tune.days.Days.chunks`). Where
Prometheus holds less (a young scaler, a short retention), its answer starts at its first sample.

That makes what each decision reads independent of when the advice ran: a daily re-advice replays,
for every decision but the new day's, the very inputs the advice before it did, and takes its
forecasts (:mod:`presage_scaler.tune.chunk_reuse`). A read cut at the lookback's start would cut the
history of the first decisions a day later each day.

Everything read before the lookback is warm-up (:func:`warmup_for`): the parts measured are the
lookback's, whatever was read before it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.backtest.config import make_backend
from presage_scaler.backtest.replay import history_points
from presage_scaler.backtest.runner import PRE_ROLL
from presage_scaler.engine.evaluator import signal_specs
from presage_scaler.tune.days import DAY
from presage_scaler.tune.knobs import knobs_of
from presage_scaler.tune.space import longest_history


def history_before(spec: PredictiveScalerSpec, backend: ForecastBackendSpec, warmup: timedelta) -> timedelta:
    """How much of the signal before a lookback with a warm-up of ``warmup`` an advice of ``spec`` (its
    ForecastBackend's spec ``backend``) reads: the longest history a decision of the search reads (as the
    backend caps it), less what the warm-up holds before the first decision, in whole signal points."""
    longest = longest_history(knobs_of(spec, backend).forecaster)  # refuses a spec of several signals
    signal = replace(signal_specs(spec)[0], history=longest)
    read = history_points(signal, make_backend(backend)) * signal.resolution
    # The first decision lies at most one interval before the pre-roll (the decisions' grid), and the
    # first chunk of forecasts begins at most a day before it (tune.days: chunks of a day's decisions).
    first = warmup - PRE_ROLL - spec.interval - DAY
    missing = max(timedelta(0), read - first)
    return -(-missing // signal.resolution) * signal.resolution


def read_span(
    lookback: timedelta, warmup: timedelta, spec: PredictiveScalerSpec, backend: ForecastBackendSpec
) -> timedelta:
    """How far back from now an advice over ``lookback`` reads its signal (module docstring)."""
    return lookback + history_before(spec, backend, warmup)


def warmup_for(span: timedelta, lookback: timedelta, warmup: timedelta) -> timedelta:
    """The warm-up of a history of ``span`` read for an advice over ``lookback`` with a warm-up of
    ``warmup``: ``warmup`` and whatever of the history lies before the lookback."""
    return max(warmup, span - (lookback - warmup))
