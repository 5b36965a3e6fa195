"""The figures of every candidate over each part of the trace, from the counts it had in force.

The same numbers, operation for operation, as :func:`presage_scaler.backtest.scoring.measure` of
each candidate's simulation (its :func:`~presage_scaler.backtest.scoring.shortfall` itself), for a
block of candidates at a time so that the arrays stay small: at most BLOCK, and fewer where the
measured steps are many (:func:`presage_scaler.series.blocks.rows_per_block`), so a fine-resolution
trace's ``(candidates, steps)`` matrices stay within a fixed budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from presage_scaler.backtest.scoring import shortfall
from presage_scaler.backtest.simulator import Schedule
from presage_scaler.series.blocks import rows_per_block
from presage_scaler.tune.replay import in_force, ready
from presage_scaler.tune.search import Figures

BLOCK = 256
"""Most candidates measured together."""

STEP_BYTES = 32
"""Bytes one candidate's measurement takes per trace step: the counts in force and ready (two
integers), the capacity and the shortfall (two doubles), and the masks over them."""


@dataclass(frozen=True)
class Part:
    """Trace steps ``[begin, end)``, and the oracle's replica-hours over them."""

    begin: int
    end: int
    oracle_hours: float


@dataclass(frozen=True)
class Served:
    """What the counts are measured against."""

    demand: np.ndarray
    """Per trace step."""
    per_replica: float
    step: timedelta
    schedule: Schedule
    initial: int
    kept_from: int = 0
    """The decision the counts measured start after (:func:`presage_scaler.tune.replay.replay`)."""


def measure(counts: np.ndarray, served: Served, parts: Sequence[Part]) -> list[list[Figures]]:
    """Per part, per candidate (a column of ``counts``, the count in force after each decision), its
    figures."""
    found: list[list[Figures]] = [[] for _ in parts]
    begin, end = min(p.begin for p in parts), max(p.end for p in parts)
    lead = served.schedule.lead
    size = min(BLOCK, rows_per_block(STEP_BYTES * (end - begin + lead)))
    for first in range(0, counts.shape[1], size):
        block = counts[:, first : first + size]
        desired = in_force(block, served.schedule, served.initial, begin - lead, end, served.kept_from)
        missing = shortfall(served.demand[begin:end], ready(desired, lead), served.per_replica)
        short = missing > 0
        for part, figures in zip(parts, found, strict=True):
            figures += _figures(part, served, desired[:, lead:], missing, short, begin)
    return found


def _figures(
    part: Part, served: Served, desired: np.ndarray, missing: np.ndarray, short: np.ndarray, offset: int
) -> list[Figures]:
    b, e = part.begin - offset, part.end - offset
    total = float(served.demand[part.begin : part.end].sum())
    under = np.count_nonzero(short[:, b:e], axis=1).tolist()
    unserved = missing[:, b:e].sum(axis=1).tolist()
    hours = desired[:, b:e].sum(axis=1).tolist()
    runs = (short[:, b] + np.count_nonzero(short[:, b + 1 : e] & ~short[:, b : e - 1], axis=1)).tolist()
    steps = part.end - part.begin
    found = []
    for short_steps, unserved_sum, count_sum, spells in zip(under, unserved, hours, runs, strict=True):
        replica_hours = float(count_sum) * served.step / timedelta(hours=1)
        found.append(
            Figures(
                under_pct=100.0 * float(short_steps) / steps,
                unserved_pct=100.0 * float(unserved_sum) / total if total > 0 else 0.0,
                replica_hours=replica_hours,
                cost_vs_oracle=replica_hours / part.oracle_hours if part.oracle_hours > 0 else float("inf"),
                spells=int(spells),
                steps=steps,
            )
        )
    return found
