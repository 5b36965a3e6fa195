"""Demand traces: a series on a regular step, from a CSV file or a Prometheus range query.

Value ``i`` is the demand during the step ``[start + i·step, start + (i + 1)·step)``; it is known
once that step is over. Missing grid points and unreadable values are gaps, filled by the same rule
as production's Prometheus reads (:func:`presage_scaler.prometheus.fill_gaps`) and remembered in
``gaps`` so that ``gapSteps`` is reported as it would be live.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from presage_scaler.api.quantities import format_duration
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.prometheus import PrometheusClient, fill_gaps

TIME_COLUMNS = ("timestamp", "ts", "time")
VALUE_COLUMN = "value"


@dataclass(frozen=True)
class Trace:
    """Demand on a regular step, gap-filled (finite values only)."""

    values: np.ndarray
    step: timedelta
    start: datetime
    """Aware; its UTC offset is the one the source used, so reports show local times."""
    gaps: np.ndarray
    """True where the value was filled in rather than read."""
    source: str

    def __len__(self) -> int:
        return len(self.values)

    def time_at(self, index: int) -> datetime:
        """When step ``index`` starts."""
        return self.start + index * self.step

    def resample(self, resolution: timedelta) -> Trace:
        """The trace averaged over whole blocks of ``resolution`` (a multiple of the step), from the
        first point; a trailing partial block is dropped. A block is a gap when all of it was."""
        ratio = resolution / self.step
        blocks = round(ratio)
        if blocks < 1 or not math.isclose(ratio, blocks, rel_tol=1e-9):
            raise BacktestError(
                f"the signal resolution {format_duration(resolution)} is not a whole multiple of the trace step "
                f"{format_duration(self.step)}: set spec.signal.resolution to a multiple of it"
            )
        if blocks == 1:
            return self
        usable = len(self) // blocks * blocks
        if usable == 0:
            raise BacktestError(f"the trace is shorter than one {format_duration(resolution)} resolution step")
        return Trace(
            values=self.values[:usable].reshape(-1, blocks).mean(axis=1),
            step=resolution,
            start=self.start,
            gaps=self.gaps[:usable].reshape(-1, blocks).all(axis=1),
            source=self.source,
        )


MIN_VALID_SHARE = 0.5
"""A trace with fewer numeric steps than this share is mostly invented by gap filling: refused."""


def parse_timestamp(text: str) -> datetime:
    """Unix seconds, or ISO-8601 with or without an offset (without one means UTC); ValueError otherwise."""
    try:
        seconds = float(text)
    except ValueError:
        moment = datetime.fromisoformat(text)
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"{text!r} is not a time between the years 1 and 9999") from None


def _value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        return math.nan
    return value if math.isfinite(value) else math.nan


def _columns(header: list[str]) -> tuple[int, int]:
    names = [name.strip().lower() for name in header]
    time_column = next((names.index(name) for name in TIME_COLUMNS if name in names), None)
    if time_column is None or VALUE_COLUMN not in names:
        raise BacktestError(
            f"expected a header with a time column ({', '.join(TIME_COLUMNS)}) and a {VALUE_COLUMN!r} column, "
            f"got {header}"
        )
    return time_column, names.index(VALUE_COLUMN)


def _rows(path: Path) -> tuple[list[datetime], list[float]]:
    with path.open(newline="") as handle:
        rows = [(line, row) for line, row in enumerate(csv.reader(handle), start=1) if any(c.strip() for c in row)]
    if not rows:
        raise BacktestError(f"{path}: no rows")
    try:
        parse_timestamp(rows[0][1][0].strip())
        time_column, value_column = 0, 1
    except ValueError:
        time_column, value_column = _columns(rows[0][1])
        rows = rows[1:]
    times, values = [], []
    for line, row in rows:
        try:
            times.append(parse_timestamp(row[time_column].strip()))
        except (ValueError, IndexError):
            raise BacktestError(f"{path}:{line}: cannot read a timestamp from {row}") from None
        value = _value(row[value_column].strip()) if value_column < len(row) else math.nan
        if value < 0:
            raise BacktestError(
                f"{path}:{line}: demand {value:g} is negative; a trace holds demand, which is never below 0"
            )
        values.append(value)
    return times, values


def on_grid(times: list[datetime], values: list[float], source: str) -> Trace:
    """Place samples on their regular grid: the step is the most common spacing, every timestamp must
    fall on it, and grid points without a sample become gaps."""
    if len(times) < 2:
        raise BacktestError(f"{source}: a trace needs at least two points")
    order = sorted(range(len(times)), key=times.__getitem__)
    seconds = np.array([times[i].timestamp() for i in order])
    spacings, counts = np.unique(np.diff(seconds), return_counts=True)
    positive = spacings > 0
    if not positive.any():
        raise BacktestError(f"{source}: all timestamps are equal")
    step = float(spacings[positive][np.argmax(counts[positive])])
    offsets = (seconds - seconds[0]) / step
    index = np.rint(offsets).astype(np.int64)
    off_grid = np.flatnonzero(np.abs(offsets - index) > 1e-6)
    if off_grid.size:
        bad = times[order[off_grid[0]]]
        raise BacktestError(f"{source}: timestamp {bad.isoformat()} is not on the {step:g}s grid of the trace")
    if np.any(np.diff(index) == 0):
        duplicate = times[order[int(np.flatnonzero(np.diff(index) == 0)[0])]]
        raise BacktestError(f"{source}: timestamp {duplicate.isoformat()} appears more than once")
    grid = np.full(int(index[-1]) + 1, np.nan)
    grid[index] = np.array(values)[order]
    gaps = ~np.isfinite(grid)
    valid = len(grid) - int(gaps.sum())
    if valid == 0:
        raise BacktestError(f"{source}: no numeric values in the 'value' column")
    if valid < MIN_VALID_SHARE * len(grid):
        raise BacktestError(
            f"{source}: only {valid} of {len(grid)} steps hold a numeric value; a trace needs at least "
            f"{MIN_VALID_SHARE:.0%} (are the values in the 'value' column, and numbers?)"
        )
    filled, _ = fill_gaps(grid)
    first = times[order[0]]
    return Trace(values=filled, step=timedelta(seconds=step), start=first, gaps=gaps, source=source)


def load_csv(path: Path) -> Trace:
    """Read a ``timestamp,value`` CSV (the header is optional; ``ts`` and ``time`` are accepted too)."""
    times, values = _rows(path)
    return on_grid(times, values, str(path))


async def load_prometheus(address: str, query: str, start: datetime, end: datetime, step: timedelta) -> Trace:
    """Read a trace with a range query. A Prometheus sample at ``τ`` covers the step that ends at
    ``τ`` (``rate(x[1m])`` at ``τ`` is the last minute's), so the trace starts one step before the
    first sample: a decision at ``τ`` sees the sample at ``τ``, as the controller does. The client
    fills gaps without saying which steps they were, so ``gaps`` is all False here."""
    async with PrometheusClient(address) as client:
        series = await client.query_range(query, start, end, step)
    negative = np.flatnonzero(series.values < 0)
    if negative.size:
        at = series.start + series.step * int(negative[0])
        raise BacktestError(
            f"{address} {query}: demand {series.values[negative[0]]:g} at {at.isoformat()} is negative; "
            "a trace holds demand, which is never below 0"
        )
    return Trace(
        values=series.values,
        step=series.step,
        start=series.start - series.step,
        gaps=np.zeros(len(series.values), dtype=bool),
        source=f"{address} {query}",
    )
