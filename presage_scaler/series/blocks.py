"""Row blocks of bounded bytes: how row-wise work on many windows keeps its temporaries small.

A backtest's hindcasts and a tuning run's candidates are matrices with one row per window or
candidate and one column per step; computed whole, their size is rows × columns, which grows with
the history's resolution times its length. Every computation that is split with :func:`row_blocks`
treats its rows independently (a sort, a quantile, a maximum along the row), so the numbers do not
depend on the split, and its temporaries stay within BLOCK_BYTES whatever the input.
"""

from __future__ import annotations

from collections.abc import Iterator

BLOCK_BYTES = 32 * 2**20
"""The bytes one block's matrix may take. The callers' temporaries are a few such matrices at once
(a sort's copy, a mask, a gather's positions), so a block's peak stays near a hundred MiB beside the
points read; rows of a few kB each still come several thousand to a block, which keeps numpy's
per-call overhead negligible (``benchmarks/bench_tune.py`` prints the CPU a tuning run costs, and
``tests/unit/test_memory_bounds.py`` bounds the peak of a fine-resolution tune)."""


def rows_per_block(row_bytes: int) -> int:
    """How many rows of ``row_bytes`` each fit in BLOCK_BYTES (at least one; read at each call, so a
    test can shrink the blocks to compare a split computation with a whole one)."""
    return max(1, BLOCK_BYTES // max(1, row_bytes))


def row_blocks(rows: int, row_bytes: int) -> Iterator[slice]:
    """Consecutive slices covering ``range(rows)``, each of at most BLOCK_BYTES at ``row_bytes`` a row
    (and at least one row)."""
    size = rows_per_block(row_bytes)
    for first in range(0, rows, size):
        yield slice(first, min(rows, first + size))
