"""What an advice reads before its lookback: enough that no decision it replays reads a history cut
short by where the read began, so that a re-advice a day later forecasts the new day alone and
chooses as one from nothing; and where its warm-up ends."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.backtest.config import backend_spec
from presage_scaler.backtest.trace import Trace
from presage_scaler.series.timegrid import steps_for
from presage_scaler.tune.forecast_cache import ForecastStore
from presage_scaler.tune.read_window import history_before, read_span, warmup_for
from presage_scaler.tune.tuner import tune
from tests.unit.test_tune_cache import LATER, same_choices, setup_for
from tests.unit.test_tune_parts import DAY, daily_trace

WEEK = timedelta(days=7)


def spec_of(wire: dict | None) -> PredictiveScalerSpec:
    return parse(PredictiveScalerSpec, wire, path="spec")


def test_the_longest_history_the_search_reads_less_what_the_warmup_holds_is_read_before():
    trace = daily_trace(2)
    wire = setup_for(trace).spec
    assert wire is not None
    spec = spec_of({**wire, "interval": "5m"})
    # The search tries a weekly season over 3 cycles, which reads 3 weeks and a day of hindcasts; the
    # first decision forecast lies a pre-roll, an interval and (its chunk) a day before the warm-up's end.
    assert history_before(spec, backend_spec(None), WEEK) == timedelta(days=22) - (WEEK - timedelta(days=2, minutes=5))
    assert history_before(spec, backend_spec(None), timedelta(days=30)) == timedelta(0)  # the warm-up holds it all
    assert read_span(timedelta(days=28), WEEK, spec, backend_spec(None)) == timedelta(days=45, minutes=5)


def test_a_history_capped_by_the_forecasters_context_is_read_as_capped():
    trace = daily_trace(2)
    wire = setup_for(trace).spec
    assert wire is not None
    one_second = {**wire, "signal": {**wire["signal"], "resolution": "1s"}}
    # At 1s the signal's history is capped at the most points a signal is read with (2.3 days):
    # the warm-up holds it, and nothing is read before the lookback.
    assert history_before(spec_of(one_second), backend_spec(None), WEEK) == timedelta(0)


@pytest.mark.parametrize(
    ("span", "warmup"),
    [
        (timedelta(days=45), timedelta(days=24)),  # all of it read: the lookback's warm-up and what precedes it
        (timedelta(days=28), WEEK),  # a young scaler: no more than the lookback
        (timedelta(days=20), WEEK),  # younger still: the warm-up is never shorter than asked
    ],
)
def test_what_precedes_the_lookback_is_warm_up(span, warmup):
    assert warmup_for(span, timedelta(days=28), WEEK) == warmup


def window(trace: Trace, begin: int, end: int) -> Trace:
    return replace(
        trace, values=trace.values[begin:end], gaps=trace.gaps[begin:end], start=trace.start + begin * trace.step
    )


def test_an_advice_a_day_later_forecasts_the_new_day_alone_and_chooses_as_from_nothing():
    """Two runs a day apart (and a few steps), each on what its read returns, both past a young
    scaler's: the second takes every chunk of the first but the last day's."""
    lookback = timedelta(days=6)
    trace = daily_trace(34, seed=7)
    setup = setup_for(trace)
    spec = spec_of(setup.spec)
    span = steps_for(read_span(lookback, setup.warmup, spec, setup.backend), trace.step)
    today = len(trace) - 3
    yesterday = today - DAY - LATER
    assert yesterday - span >= 0  # both reads whole: the warm-up reaches before the lookback

    def advised(end: int, store: ForecastStore):
        read = window(trace, end - span, end)
        warmup = warmup_for(len(read) * read.step, lookback, setup.warmup)
        assert warmup > setup.warmup
        return tune(read, replace(setup, warmup=warmup), store=store)

    kept = ForecastStore()
    advised(yesterday, kept)
    warm_store = ForecastStore.holding({key: kept.chunks[key] for key in kept.kept})
    cold_store = ForecastStore()
    warm, cold = advised(today, warm_store), advised(today, cold_store)
    same_choices(warm, cold)
    # The decisions replayed span the lookback less the warm-up and a pre-roll day: five days, a chunk a
    # day here. Per forecasting pass, only the new day's chunk and the one yesterday's run cut short are
    # forecast again.
    assert 0 < warm_store.made <= 2 * cold.forecasts < cold_store.made
