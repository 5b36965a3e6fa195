"""Sums, means and maxima over many windows of one series, for the forecasting and calibration math."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def window_sums(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``Σ values[start … end - 1]`` for each (start, end) pair.

    The running sum covers only the part of ``values`` these windows read, so a long series costs
    nothing extra, and its rounding depends only on that part.
    """
    if not len(ends):
        return np.zeros(0)
    low = int(starts.min())
    part = values[low : int(ends.max())]
    running = np.zeros(len(part) + 1)
    np.cumsum(part, out=running[1:])
    return running[ends - low] - running[starts - low]


def trailing_means(values: np.ndarray, origins: np.ndarray, starts: np.ndarray, steps: int) -> np.ndarray:
    """The mean of the last ``steps`` values before each origin, none before its ``start`` (each
    origin must be past its start)."""
    span = np.minimum(steps, origins - starts)
    return window_sums(values, origins - span, origins) / span


def trailing_maxima(values: np.ndarray, origins: np.ndarray, starts: np.ndarray, steps: int) -> np.ndarray:
    """The highest of the last ``steps`` values before each origin, none before its ``start`` (each
    origin must be past its start)."""
    if steps == 1:  # the latest value: SeasonalNaive's floor at 1-minute steps or coarser
        return np.asarray(values[origins - 1], dtype=np.float64)
    peaks = np.empty(len(origins))
    full = origins - steps >= starts
    if full.any():
        peaks[full] = window_maxima(values, origins[full] - steps, steps)
    short = np.flatnonzero(~full)
    if len(short):
        offsets = np.arange(1, steps + 1)
        index = np.maximum(origins[short, np.newaxis] - offsets, starts[short, np.newaxis])
        peaks[short] = values[index].max(axis=1)
    return peaks


def window_maxima(values: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """``max values[start … start + length - 1]`` for each start (windows inside ``values``).

    Computed once for every position the windows cover, so overlapping windows cost nothing extra;
    windows that together hold fewer points than the span they cover are read directly.
    """
    if not len(starts):
        return np.zeros(0)
    low = int(starts.min())
    high = int(starts.max()) + length
    if len(starts) * length < high - low:  # few windows far apart: read only their points
        return values[starts[:, np.newaxis] + np.arange(length)].max(axis=1)
    return sliding_window_view(values[low:high], length).max(axis=1)[starts - low]
