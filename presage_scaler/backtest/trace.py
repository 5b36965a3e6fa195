"""Demand traces: a series on a regular step, read from Prometheus with a range query here, or from
a CSV file by :mod:`presage_scaler.backtest.csv_trace` (which needs pandas, from the ``backtest``
extra; nothing here does, so ``presage advise`` runs on the runtime dependencies alone).

Value ``i`` is the demand during the step ``[start + i·step, start + (i + 1)·step)``; it is known
once that step is over. Missing grid points and unreadable values are gaps, filled by the same rule
as production's Prometheus reads (:func:`presage_scaler.clients.prometheus.fill_gaps`) and remembered in
``gaps`` so that ``gapSteps`` is reported as it would be live.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from presage_scaler.api.quantities import format_duration
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.clients.prometheus import Connection, PrometheusClient

MIN_VALID_SHARE = 0.5
"""A trace with fewer numeric steps than this share is mostly invented by gap filling: refused."""


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
        whole = len(self) // blocks
        if whole == 0:
            raise BacktestError(f"the trace is shorter than one {format_duration(resolution)} resolution step")
        usable = whole * blocks
        return Trace(
            values=self.values[:usable].reshape(whole, blocks).mean(axis=1),
            step=resolution,
            start=self.start,
            gaps=np.logical_and.reduce(self.gaps[:usable].reshape(whole, blocks), axis=1),
            source=self.source,
        )


def require_mostly_valid(gaps: np.ndarray, source: str, hint: str = "") -> None:
    """Refuse a trace that gap filling would mostly invent."""
    valid = len(gaps) - int(gaps.sum())
    if valid < MIN_VALID_SHARE * len(gaps):
        raise BacktestError(
            f"{source}: only {valid} of {len(gaps)} steps hold a numeric value; a trace needs at least "
            f"{MIN_VALID_SHARE:.0%}{hint}"
        )


async def load_prometheus(
    address: str,
    query: str,
    start: datetime,
    end: datetime,
    step: timedelta,
    *,
    connection: Connection | None = None,
) -> Trace:
    """Read a trace with a range query. A Prometheus sample at ``τ`` covers the step that ends at
    ``τ`` (``rate(x[1m])`` at ``τ`` is the last minute's), so the trace starts one step before the
    first sample: a decision at ``τ`` sees the sample at ``τ``, as the controller does. Steps with
    no sample are gaps, filled as the controller fills them, counted, and refused when they are
    most of the trace, as in a CSV. ``connection`` holds the headers and TLS: a PredictiveScaler's
    (``presage tune --scaler``) or the flags' (``--header``, ``--basic-auth``, ``--ca-file``, ...)."""
    async with PrometheusClient(address, connection=connection or Connection()) as client:
        series = await client.query_range(query, start, end, step)
    negative = np.flatnonzero(series.values < 0)
    if negative.size:
        at = series.start + series.step * int(negative[0])
        raise BacktestError(
            f"{address} {query}: demand {series.values[negative[0]]:g} at {at.isoformat()} is negative; "
            "a trace holds demand, which is never below 0"
        )
    gaps = series.gaps if series.gaps is not None else np.zeros(len(series.values), dtype=bool)
    require_mostly_valid(gaps, f"{address} {query}")
    return Trace(
        values=series.values,
        step=series.step,
        start=series.start - series.step,
        gaps=gaps,
        source=f"{address} {query}",
    )
