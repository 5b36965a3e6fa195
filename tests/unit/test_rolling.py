"""Rolling windows over a series: each result is what a plain loop over its window gives, whichever
way the windows are read (all positions of their span at once, or only their own points)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from presage_scaler.series.rolling import (
    WINDOW_BLOCK,
    split_window_order_statistics,
    trailing_maxima,
    trailing_means,
    window_maxima,
    window_order_statistics,
    window_sums,
)

series = st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=1, max_size=300).map(np.array)


@settings(max_examples=200, deadline=None)
@given(values=series, data=st.data())
def test_property_window_maxima_are_each_windows_maximum(values, data):
    length = data.draw(st.integers(min_value=1, max_value=len(values)))
    starts = np.array(
        data.draw(st.lists(st.integers(min_value=0, max_value=len(values) - length), min_size=1, max_size=40))
    )
    expected = [values[s : s + length].max() for s in starts]
    assert window_maxima(values, starts, length).tolist() == expected


def test_few_windows_far_apart_and_many_overlapping_ones_read_the_same_maxima():
    values = np.random.default_rng(3).normal(size=5000)
    far_apart = np.array([0, 2500, 4990])  # 30 points over a span of 5,000: read directly
    overlapping = np.arange(100, 900)  # 8,000 points over a span of 810: read as one rolling pass
    for starts in (far_apart, overlapping):
        assert window_maxima(values, starts, 10).tolist() == [values[s : s + 10].max() for s in starts]


@settings(max_examples=100, deadline=None)
@given(values=series, data=st.data())
def test_property_window_sums_and_trailing_means_match_a_loop(values, data):
    pairs = data.draw(
        st.lists(st.tuples(st.integers(0, len(values)), st.integers(0, len(values))), min_size=1, max_size=20)
    )
    starts = np.array([min(a, b) for a, b in pairs])
    ends = np.array([max(a, b) for a, b in pairs])
    sums = window_sums(values, starts, ends)
    for total, start, end in zip(sums, starts, ends, strict=True):
        assert np.isclose(total, values[start:end].sum(), rtol=1e-9, atol=1e-3)
    origins = np.maximum(ends, 1)
    steps = data.draw(st.integers(min_value=1, max_value=50))
    means = trailing_means(values, origins, np.zeros(len(origins), dtype=np.intp), steps)
    for mean, origin in zip(means, origins, strict=True):
        assert np.isclose(mean, values[max(0, origin - steps) : origin].mean(), rtol=1e-9, atol=1e-3)


@settings(max_examples=100, deadline=None)
@given(values=series, data=st.data())
def test_property_trailing_maxima_read_nothing_before_each_start(values, data):
    pairs = data.draw(
        st.lists(st.tuples(st.integers(0, len(values) - 1), st.integers(1, len(values))), min_size=1, max_size=20)
    )
    starts = np.array([min(a, b - 1) for a, b in pairs])
    origins = np.array([max(a + 1, b) for a, b in pairs])
    steps = data.draw(st.integers(min_value=1, max_value=50))
    expected = [
        values[max(start, origin - steps) : origin].max() for start, origin in zip(starts, origins, strict=True)
    ]
    assert trailing_maxima(values, origins, starts, steps).tolist() == expected


@settings(max_examples=300, deadline=None)
@given(values=series, data=st.data())
def test_property_window_order_statistics_are_each_sorted_windows(values, data):
    # Rounded values repeat, so ties between a window's core and its own values are exercised.
    values = np.round(values, data.draw(st.sampled_from([-5, 0, 6])))
    width = data.draw(st.integers(min_value=1, max_value=len(values)))
    starts = np.array(
        data.draw(st.lists(st.integers(min_value=0, max_value=len(values) - width), min_size=1, max_size=60))
    )
    ranks = np.array(sorted(data.draw(st.sets(st.integers(min_value=0, max_value=width - 1), min_size=1, max_size=6))))
    expected = [np.sort(values[s : s + width])[ranks].tolist() for s in starts]
    assert window_order_statistics(values, starts, width, ranks).tolist() == expected


def test_window_order_statistics_of_consecutive_windows_share_sorts_and_stay_exact():
    values = np.random.default_rng(5).normal(size=6000)
    starts = np.arange(1000, 3000)  # many blocks of WINDOW_BLOCK consecutive windows
    width = 64 * WINDOW_BLOCK
    ranks = np.array([0, 1, 511, 900, width - 1])
    expected = np.sort(np.lib.stride_tricks.sliding_window_view(values, width)[starts], axis=1)[:, ranks]
    assert np.array_equal(window_order_statistics(values, starts, width, ranks), expected)


@settings(max_examples=300, deadline=None)
@given(values=series, data=st.data())
def test_property_split_window_order_statistics_are_each_sorted_two_part_window(values, data):
    values = np.round(values, data.draw(st.sampled_from([-5, 0, 6])))
    high = np.round(values * data.draw(st.sampled_from([-1.0, 0.5, 2.0])) + 3.0, 2)
    width = data.draw(st.integers(min_value=1, max_value=len(values)))
    rows = data.draw(
        st.lists(
            st.integers(min_value=width, max_value=len(values)).flatmap(
                lambda end: st.tuples(st.just(end), st.integers(min_value=end - width, max_value=end))
            ),
            min_size=1,
            max_size=60,
        )
    )
    ends, splits = np.array([end for end, _ in rows]), np.array([split for _, split in rows])
    ranks = np.array(sorted(data.draw(st.sets(st.integers(min_value=0, max_value=width - 1), min_size=1, max_size=6))))
    expected = [
        np.sort(np.concatenate((values[end - width : split], high[split:end])))[ranks].tolist() for end, split in rows
    ]
    assert split_window_order_statistics(values, high, ends, width, splits, ranks).tolist() == expected


def test_split_windows_of_one_end_share_sorts_and_stay_exact():
    rng = np.random.default_rng(7)
    low, high = rng.normal(size=4000), rng.normal(size=4000) + 0.5
    width = 1024
    ends = np.repeat([2000, 3000, 3990], 1023)  # every split strictly inside each window: many shared blocks
    splits = ends - width + np.tile(np.arange(1, width), 3)
    ranks = np.array([0, 3, 511, 1000, width - 1])
    windows = [np.concatenate((low[e - width : p], high[p:e])) for e, p in zip(ends, splits, strict=True)]
    expected = np.sort(np.array(windows), axis=1)[:, ranks]
    assert np.array_equal(split_window_order_statistics(low, high, ends, width, splits, ranks), expected)
