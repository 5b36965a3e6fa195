"""Sums, means and maxima over many windows of one series, for the forecasting and calibration math."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from presage_scaler.series.blocks import row_blocks


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
    offsets = np.arange(1, steps + 1)
    for rows in row_blocks(len(short), 2 * offsets.nbytes):  # the positions and the values they read
        block = short[rows]
        index = np.maximum(origins[block, np.newaxis] - offsets, starts[block, np.newaxis])
        peaks[block] = values[index].max(axis=1)
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


WINDOW_BLOCK = 16
"""Windows whose starts lie in one block of this many positions share one sort in
:func:`window_order_statistics`: a larger block sorts less often but merges more per window
(``benchmarks/bench_tune.py`` prints the CPU a tuning run costs)."""


def window_order_statistics(values: np.ndarray, starts: np.ndarray, width: int, ranks: np.ndarray) -> np.ndarray:
    """``np.sort(values[start : start + width])[ranks]`` for each start (``starts × ranks``; every
    rank below ``width``), exactly.

    Overlapping windows share their common part: the windows whose starts fall in one block of
    WINDOW_BLOCK positions all hold ``values[last start : first start + width]``, its core, which is
    sorted once; each window adds fewer than WINDOW_BLOCK values of its own (:func:`_merged`). The
    starts are taken a row block at a time (:func:`presage_scaler.series.blocks.row_blocks`), so the
    cores and merges of many windows never exist at once."""
    starts = np.asarray(starts, dtype=np.intp)
    ranks = np.asarray(ranks, dtype=np.intp)
    found = np.empty((len(starts), len(ranks)))
    for rows in row_blocks(len(starts), _row_bytes(width, len(ranks), WINDOW_BLOCK)):
        found[rows] = _window_order_statistics(values, starts[rows], width, ranks)
    return found


def _window_order_statistics(values: np.ndarray, starts: np.ndarray, width: int, ranks: np.ndarray) -> np.ndarray:
    """:func:`window_order_statistics` of one row block."""
    if width < 2 * WINDOW_BLOCK:
        return np.sort(sliding_window_view(values, width)[starts], axis=1)[:, ranks]
    blocks, owner = np.unique(starts // WINDOW_BLOCK, return_inverse=True)
    first, last = _block_bounds(starts, owner, len(blocks))
    outside = last - first  # values of each window of the block that are not in its core
    # Every array below is padded with +inf, which sorts last and is never among a window's values.
    columns = np.arange(width)
    core = np.where(
        columns < (width - outside)[:, np.newaxis], values[_within(last[:, np.newaxis] + columns, values)], np.inf
    )
    # A window's extras: its values before the core, then those after it.
    own = np.arange(WINDOW_BLOCK)
    before = (last[owner] - starts)[:, np.newaxis]
    at = starts[:, np.newaxis] + own + np.where(own >= before, width - outside[owner, np.newaxis], 0)
    extras = np.where(own < outside[owner, np.newaxis], values[_within(at, values)], np.inf)
    return _merged(core, owner, extras, ranks)


SPLIT_BLOCK = 64
"""Windows of one end whose splits lie in one block of this many positions share one sort in
:func:`split_window_order_statistics`. A backtest's split windows are hindcasts whose histories begin
one decision apart, and those of one end lie tens of positions apart: a wider block than
WINDOW_BLOCK is what lets several share a sort (``benchmarks/bench_tune.py`` prints the CPU a tuning
run of 30 days costs)."""


def split_window_order_statistics(
    low: np.ndarray, high: np.ndarray, ends: np.ndarray, width: int, splits: np.ndarray, ranks: np.ndarray
) -> np.ndarray:
    """``np.sort(concat(low[end - width : split], high[split : end]))[ranks]`` for each (end, split)
    (``rows × ranks``; every rank below ``width``), exactly: windows of one length that read one series
    before their split and another (of equal length) from it on.

    Windows of one end whose splits fall in one block of SPLIT_BLOCK positions share all but the
    values between their block's first and last split, their core, which is sorted once; rows are
    taken a row block at a time, as in :func:`window_order_statistics`."""
    ends = np.asarray(ends, dtype=np.intp)
    splits = np.asarray(splits, dtype=np.intp)
    ranks = np.asarray(ranks, dtype=np.intp)
    found = np.empty((len(ends), len(ranks)))
    for rows in row_blocks(len(ends), _row_bytes(width, len(ranks), SPLIT_BLOCK)):
        found[rows] = _split_window_order_statistics(low, high, ends[rows], width, splits[rows], ranks)
    return found


def _split_window_order_statistics(
    low: np.ndarray, high: np.ndarray, ends: np.ndarray, width: int, splits: np.ndarray, ranks: np.ndarray
) -> np.ndarray:
    """:func:`split_window_order_statistics` of one row block."""
    if width < 2 * SPLIT_BLOCK:
        positions = ends[:, np.newaxis] - width + np.arange(width)
        return np.sort(np.where(positions < splits[:, np.newaxis], low[positions], high[positions]), axis=1)[:, ranks]
    block = splits // SPLIT_BLOCK
    _, owner = np.unique(ends * (int(block.max()) + 1) + block, return_inverse=True)
    count = int(owner.max()) + 1
    first, last = _block_bounds(splits, owner, count)
    block_ends = np.zeros(count, dtype=np.intp)
    block_ends[owner] = ends
    # A block's core: ``low`` before its first split and ``high`` from its last on; +inf between.
    positions = block_ends[:, np.newaxis] - width + np.arange(width)
    read = _within(positions, low)
    core = np.where(
        positions < first[:, np.newaxis],
        low[read],
        np.where(positions >= last[:, np.newaxis], high[read], np.inf),
    )
    # A window's extras: the positions between its block's first and last split, from the series its
    # own split gives them.
    at = first[owner, np.newaxis] + np.arange(SPLIT_BLOCK)
    read = _within(at, low)
    extras = np.where(at < last[owner, np.newaxis], np.where(at < splits[:, np.newaxis], low[read], high[read]), np.inf)
    return _merged(core, owner, extras, ranks)


def _row_bytes(width: int, ranks: int, extras: int) -> int:
    """The most bytes one window's row costs in an order-statistics pass: a core of its own (when no
    other window shares it), its sorted copy and padding, and the merge's ``ranks × (extras + 1)``
    candidates with their positions."""
    return 8 * (3 * (width + 2) + 3 * ranks * (extras + 1))


def _block_bounds(keys: np.ndarray, owner: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The least and the greatest of ``keys`` in each of ``count`` blocks (``owner`` names each key's)."""
    first = np.full(count, np.iinfo(np.intp).max)
    last = np.full(count, -1)
    np.minimum.at(first, owner, keys)
    np.maximum.at(last, owner, keys)
    return first, last


def _merged(core: np.ndarray, owner: np.ndarray, extras: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """The ``ranks``-th smallest values of each row's multiset: its block's ``core`` (``owner`` names
    the row's) and its own ``extras``, both padded with +inf.

    The ``r``-th smallest of a sorted core and sorted extras is the least, over ``j`` (how many of the
    ``r + 1`` smallest are extras), of ``max(extras[j - 1], core[r - j])``: each such pair is the
    largest of some ``r + 1`` values, and the right ``j`` gives the ``r``-th smallest itself."""
    rows, width = len(owner), core.shape[1]
    core = np.sort(core, axis=1)
    extras = np.sort(extras, axis=1)
    # extras[j - 1] and core[r - j] for j = 0 … len(extras), reading -inf at index -1 and +inf past the end.
    extras = np.concatenate((np.full((rows, 1), -np.inf), extras), axis=1)
    core = np.concatenate((core, np.full((len(core), 1), np.inf), np.full((len(core), 1), -np.inf)), axis=1)
    from_core = np.clip(ranks[:, np.newaxis] - np.arange(extras.shape[1]), -1, width)
    return np.maximum(extras[:, np.newaxis, :], core[owner[:, np.newaxis, np.newaxis], from_core]).min(axis=2)


def _within(index: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``index`` with positions past the end of ``values`` (only ever padding) read as its last."""
    return np.minimum(index, len(values) - 1)
