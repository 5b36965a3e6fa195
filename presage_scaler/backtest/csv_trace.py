"""Demand traces from a CSV file, read with pandas (the ``backtest`` extra:
:mod:`presage_scaler.backtest.extra`), onto the regular grid of a :class:`~presage_scaler.backtest.trace.Trace`.

Rows are ``timestamp,value`` (the header is optional; ``ts`` and ``time`` name the time column too),
times in Unix seconds or ISO-8601. Only ``presage backtest`` and ``presage tune`` with a trace file
import this module; a trace read from Prometheus never needs pandas.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
from pandas.tseries.frequencies import to_offset

from presage_scaler.api.quantities import format_duration
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.backtest.trace import Trace, require_mostly_valid
from presage_scaler.clients.prometheus import fill_gaps

TIME_COLUMNS = ("timestamp", "ts", "time")
VALUE_COLUMN = "value"

# Unix seconds of 0001-01-01 and 9999-12-31T23:59:59, the range a datetime (and Go's time) holds.
_UNIX_RANGE = (-62135596800, 253402300799)
# Finer Unix times other tools write (JavaScript, Java and Grafana milliseconds; InfluxDB
# nanoseconds): a number out of the seconds' range that one of these brings into it is named as such.
_FINER_UNITS = (("milliseconds", 10**3), ("microseconds", 10**6), ("nanoseconds", 10**9))


def _timestamps(texts: pd.Series, where: pd.Series) -> pd.Series:
    """Unix seconds (when every text is a number) or ISO-8601 (without an offset: UTC), as UTC
    times; ``where`` names each text's place for the message that refuses an unreadable one."""
    seconds = pd.to_numeric(texts, errors="coerce")
    if seconds.notna().all():
        outside = ~seconds.between(*_UNIX_RANGE)
        if outside.any():
            first = outside.argmax()  # a position: texts, where and seconds share one index
            raise BacktestError(
                f"{where.iloc[first]}: {texts.iloc[first]!r} is not a time between the years 1 and 9999 in Unix "
                "seconds" + _finer_unit_hint(float(seconds.iloc[first]))
            )
        return pd.to_datetime(seconds, unit="s", utc=True)
    times = pd.to_datetime(texts, format="ISO8601", utc=True, errors="coerce")
    if times.isna().any():
        first = times.isna().argmax()
        raise BacktestError(
            f"{where.iloc[first]}: cannot read a timestamp from {texts.iloc[first]!r} (ISO-8601 or Unix seconds)"
        )
    return times


def _finer_unit_hint(number: float) -> str:
    """What a number too large for Unix seconds looks like instead, and what to do about it."""
    for unit, per_second in _FINER_UNITS:
        seconds = number / per_second
        if _UNIX_RANGE[0] <= seconds <= _UNIX_RANGE[1]:
            moment = datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")
            return f"; it looks like Unix {unit} ({moment}): divide the timestamps by {per_second}"
    return ""


def parse_timestamp(text: str, where: str) -> datetime:
    """One time, read as a trace's timestamps are (ISO-8601 or Unix seconds), in UTC; BacktestError
    naming ``where`` otherwise."""
    return _timestamps(pd.Series([text.strip()]), pd.Series([where])).iloc[0].to_pydatetime()


def _table(path: Path) -> tuple[pd.DataFrame, pd.Series]:
    """The non-blank rows as text, with the header (when there is one) as column names, and each
    row's ``file:line`` for messages."""
    try:
        rows = pd.read_csv(path, header=None, dtype=str, keep_default_na=False, skip_blank_lines=False)
    except pd.errors.EmptyDataError:
        raise BacktestError(f"{path}: no rows") from None
    except pd.errors.ParserError as err:
        raise BacktestError(f"{path}: not a CSV file: {str(err).strip()}") from None
    rows = rows.fillna("").apply(lambda column: column.str.strip())
    rows = rows[(rows != "").any(axis=1)]
    if rows.empty:
        raise BacktestError(f"{path}: no rows")
    try:
        parse_timestamp(rows.iloc[0, 0], "the first row")
    except BacktestError:
        rows.columns = [str(name).lower() for name in rows.iloc[0]]
        rows = rows.iloc[1:]
        if rows.empty:
            raise BacktestError(f"{path}: a header and no rows under it") from None
    else:
        rows.columns = [TIME_COLUMNS[0], VALUE_COLUMN, *rows.columns[2:]][: rows.shape[1]]
    return rows, pd.Series([f"{path}:{index + 1}" for index in rows.index], index=rows.index)


def _samples(path: Path) -> tuple[pd.Series, pd.Series, timedelta]:
    """Each row's time and demand (NaN where the value is not a finite number), and the UTC offset
    of the earliest row's timestamp (Unix seconds and ISO-8601 without one: UTC)."""
    rows, where = _table(path)
    time_column = next((name for name in TIME_COLUMNS if name in rows.columns), None)
    if time_column is None or VALUE_COLUMN not in rows.columns:
        raise BacktestError(
            f"{path}: expected a header with a time column ({', '.join(TIME_COLUMNS)}) and a {VALUE_COLUMN!r} "
            f"column, got {list(rows.columns)}"
        )
    times = _timestamps(rows[time_column], where)
    values = pd.to_numeric(rows[VALUE_COLUMN], errors="coerce").replace([np.inf, -np.inf], np.nan)
    negative = values < 0
    if negative.any():
        first = negative.argmax()  # a position: rows, where, times and values share one index
        raise BacktestError(
            f"{where.iloc[first]}: demand {values.iloc[first]:g} is negative; a trace holds demand, which is never "
            "below 0"
        )
    written = rows[time_column].iloc[times.argmin()]
    offset = pd.Timestamp(written).utcoffset() if pd.isna(pd.to_numeric(written, errors="coerce")) else None
    return times, values, offset or timedelta(0)


def snapped(times: pd.Series, values: pd.Series, step: timedelta) -> tuple[pd.Series, pd.Series]:
    """Samples (UTC times) moved to the nearest multiple of ``step`` since the Unix epoch (a 5m step
    puts them at :00, :05, …), those that land on the same point averaged: a trace whose timestamps
    jitter around a regular grid (a scraper that runs a few seconds early or late) gets its grid
    back, and one with several samples per step their mean, which keeps demand in its units (a sum
    would not). Values that are not numbers are left out of a mean; a point with none stays a gap."""
    points = pd.DataFrame({"time": times.dt.round(pd.Timedelta(step)).to_numpy(), "value": values.to_numpy()})
    means = points.groupby("time", sort=True)["value"].mean()
    return pd.Series(means.index), pd.Series(means.to_numpy())


def on_grid(
    times: pd.Series,
    values: pd.Series,
    source: str,
    offset: timedelta = timedelta(0),
    step: timedelta | None = None,
) -> Trace:
    """Place samples (UTC times) on their regular grid: the step is ``step`` or else the most common
    spacing, every timestamp must fall on it, and grid points without a sample become gaps.
    ``offset`` is the UTC offset the trace is shown in."""
    if len(times) < 2:
        raise BacktestError(f"{source}: a trace needs at least two points")
    samples = pd.Series(values.to_numpy(), index=pd.DatetimeIndex(times)).sort_index()
    moments = samples.index.to_series()
    if moments.nunique() == 1:
        raise BacktestError(f"{source}: all timestamps are equal")
    duplicated = moments.duplicated()
    if duplicated.any():
        raise BacktestError(
            f"{source}: timestamp {_shown(moments[duplicated].iloc[0], offset).isoformat()} appears more than once"
        )
    differences = moments.diff().dropna()
    spacings = differences.value_counts()
    grid_step = pd.Timedelta(step) if step is not None else spacings[spacings == spacings.max()].index.min()
    off_grid = (moments - moments.iloc[0]) % grid_step != pd.Timedelta(0)
    if off_grid.any():
        # moments come from a DatetimeIndex: their differences are Timedeltas.
        typical = _likely_step(cast(pd.Timedelta, differences.median()).to_pytimedelta())
        raise BacktestError(
            f"{source}: timestamp {_shown(moments[off_grid].iloc[0], offset).isoformat()} is not on the "
            f"{grid_step.total_seconds():g}s grid of the trace; to move every row to the nearest point of a "
            f"regular grid (averaging rows that meet), pass --resample {format_duration(typical)}"
        )
    grid = samples.asfreq(to_offset(grid_step)).to_numpy(dtype=np.float64)
    gaps = ~np.isfinite(grid)
    if gaps.all():
        raise BacktestError(f"{source}: no numeric values in the {VALUE_COLUMN!r} column")
    require_mostly_valid(gaps, source, f" (are the values in the {VALUE_COLUMN!r} column, and numbers?)")
    filled, _ = fill_gaps(grid)
    start = _shown(moments.iloc[0], offset)
    return Trace(values=filled, step=grid_step.to_pytimedelta(), start=start, gaps=gaps, source=source)


_ROUND_STEPS = tuple(
    timedelta(seconds=seconds)
    for seconds in (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
)
"""The steps traces are usually sampled at, which a jittered trace's typical spacing is rounded to."""


def _likely_step(typical: timedelta) -> timedelta:
    """The grid a trace with this typical (median) spacing was meant to be on: the nearest round step
    within 10 %, else the spacing in whole seconds (jitter makes the median 299s where 300s was meant)."""
    nearest = min(_ROUND_STEPS, key=lambda step: abs(step / typical - 1))
    if abs(nearest / typical - 1) <= 0.1:
        return nearest
    return max(timedelta(seconds=round(typical.total_seconds())), timedelta(seconds=1))


def _shown(moment: pd.Timestamp, offset: timedelta) -> datetime:
    return moment.to_pydatetime().astimezone(UTC if offset == timedelta(0) else timezone(offset))


def load_csv(path: Path, resample: timedelta | None = None) -> Trace:
    """Read a ``timestamp,value`` CSV (the header is optional; ``ts`` and ``time`` are accepted too).
    Times are shown in the UTC offset of the earliest row. With ``resample``, the rows are first
    :func:`snapped` to a grid of that step."""
    times, values, offset = _samples(path)
    if resample is None:
        return on_grid(times, values, str(path), offset)
    if resample < timedelta(seconds=1):
        raise BacktestError(f"--resample {format_duration(resample)}: the step must be at least 1s")
    times, values = snapped(times, values, resample)
    return on_grid(times, values, str(path), offset, resample)
