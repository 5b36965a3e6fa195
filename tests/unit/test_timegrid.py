"""The sample grid: how many whole steps a span is."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presage_scaler.series.timegrid import steps_for

M5 = timedelta(minutes=5)
MINUTE = timedelta(minutes=1)


@pytest.mark.parametrize(
    ("lead", "step", "steps"),
    [(timedelta(minutes=2), M5, 1), (timedelta(minutes=5), M5, 1), (timedelta(minutes=11), M5, 3)],
)
def test_steps_for(lead, step, steps):
    assert steps_for(lead, step) == steps


@pytest.mark.parametrize(
    ("span", "step", "at_least", "steps"),
    [
        (timedelta(hours=1), timedelta(minutes=25), 1, 3),  # a window is covered, not approximated
        (timedelta(days=1), timedelta(minutes=7), 1, 206),
        (timedelta(minutes=15), MINUTE, 12, 15),
        (timedelta(minutes=15), M5, 12, 12),  # at least so many, however coarse the step
        (timedelta(minutes=1), M5, 1, 1),
        (timedelta(hours=1), timedelta(minutes=30), 2, 2),
        (timedelta(0), M5, 1, 1),
        (timedelta(0), M5, 0, 0),
        (timedelta(minutes=70), timedelta(hours=1), 0, 2),
        (timedelta(seconds=10), timedelta(microseconds=1), 1, 10_000_000),
    ],
)
def test_a_span_is_the_whole_steps_that_cover_it(span, step, at_least, steps):
    assert steps_for(span, step, at_least=at_least) == steps


steps = st.integers(1, 86_400_000_000).map(lambda us: timedelta(microseconds=us))
spans = st.integers(0, 10 * 86_400_000_000).map(lambda us: timedelta(microseconds=us))


@settings(max_examples=500, deadline=None)
@given(spans, steps, st.integers(0, 20))
def test_the_steps_cover_the_span_and_one_fewer_would_not(span, step, at_least):
    count = steps_for(span, step, at_least=at_least)
    assert count >= at_least
    assert span / step <= count + 1e-9  # a quotient within 1e-9 above a whole number is that number
    if count > at_least:
        assert (count - 1) * step < span


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 100_000), steps)
def test_a_whole_number_of_steps_is_that_number(multiple, step):
    assert steps_for(multiple * step, step, at_least=0) == multiple


@settings(max_examples=500, deadline=None)
@given(spans, spans, steps)
def test_a_longer_span_is_never_fewer_steps(a, b, step):
    shorter, longer = sorted((a, b))
    assert steps_for(shorter, step) <= steps_for(longer, step)
