"""The memory a backtest or a tuning run needs, estimated before its data is read, and the budget it
must fit.

The hindcasts, band quantiles and candidate measurements are made in row blocks of fixed bytes
(:mod:`presage_scaler.series.blocks`), so what grows with the input is what is held whole: the points
read (their parsing, the trace, the signal at its resolution, the per-decision arrays) and the
replay's counts, one small integer per decision and candidate. The estimate is

    peak ≈ PROCESS_BYTES + CHUNK_BYTES + points · POINT_BYTES
           + (jobs - 1) · (WORKER_BYTES + points · WORKER_POINT_BYTES)
           + decisions · candidates · COUNT_BYTES

where :data:`CHUNK_BYTES` bounds one chunk of decisions' forecasts
(fewer decisions a chunk where the horizon is long), and a run whose estimate exceeds its budget is
refused with :class:`MemoryBudgetError` before it reads or allocates, rather than failing with a
MemoryError (or being OOM-killed) part way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from presage_scaler.api.quantities import format_duration
from presage_scaler.backtest.errors import BacktestError

MiB = 2**20

DEFAULT_MEMORY_BUDGET = 1536 * MiB
"""The budget when none is given: the chart's advise pod (``advise.resources.limits.memory``, 2Gi)
less 512 MiB for what the estimate leaves out (the Kubernetes client, the answers of the scalers
advised before, the allocator's slack)."""

PROCESS_BYTES = 280 * MiB
"""The process that reads and tunes: the interpreter, numpy and presage's modules (about 100 MiB) and
the row blocks' temporaries at their budget, a few BLOCK_BYTES each for the forecasting and the
measurement. Checked by ``tests/unit/test_memory_bounds.py`` (a tune's traced peak stays under the
estimate) and by the peaks stated in ``charts/presage/values.yaml``."""

CHUNK_BYTES = 256 * MiB
"""The most one chunk of decisions' forecasts may take (:mod:`presage_scaler.backtest.replay`): a chunk
holds fewer than its usual :data:`~presage_scaler.backtest.replay.CHUNK` decisions where their horizon
is long (a fine resolution, a long ``forecast.horizon``), so that memory does not grow with the
horizon. Down to 5-second resolution at a 5-minute lead time a chunk keeps CHUNK decisions, as every
trace of ``benchmarks/bench_backtest.py`` and ``benchmarks/bench_tune.py`` does
(``tests/unit/test_memory_bounds.py``)."""

WORKER_BYTES = 256 * MiB
"""Each further forecasting process (``--jobs``): an interpreter of its own with the same modules and
row blocks."""

POINT_BYTES = 400
"""Per signal point read by the process that tunes: the parsed answer or CSV row while it is read, the
trace and its signal (values, gaps, observed demand, the seasonal trigger's week-ago peaks, the
simulations' counts) and the per-decision forecasts. Above the slope of the peaks of ``presage tune``
on a 16-day trace at 5s and at 1s. A backtest keeps seven policies' simulations whole, a few dozen
bytes a point above it, which PROCESS_BYTES and CHUNK_BYTES cover up to millions of points, far
beyond what the default budget admits."""

WORKER_POINT_BYTES = 200
"""Per signal point, in each further forecasting process: the signal it receives and the forecasts
it sends back. Above the slope of the same runs' worker peaks."""

COUNT_BYTES = 2
"""Per decision and candidate: the replay's count in force (:func:`presage_scaler.tune.replay.replay`
keeps an int16 where the counts fit)."""


class MemoryBudgetError(BacktestError):
    """A run whose estimated peak memory exceeds its budget, refused before it reads or allocates."""


@dataclass(frozen=True)
class Footprint:
    """What a run will hold: the figures the estimate is made from."""

    points: int
    """Signal points read."""
    resolution: timedelta
    """Their spacing."""
    jobs: int = 1
    """Processes forecasting at once."""
    decisions: int = 0
    """Decisions replayed for every candidate (0 for a backtest: it keeps none per candidate)."""
    candidates: int = 1

    @property
    def estimate(self) -> int:
        """The estimated peak, in bytes (module docstring)."""
        return (
            PROCESS_BYTES
            + CHUNK_BYTES
            + self.points * POINT_BYTES
            + (max(1, self.jobs) - 1) * (WORKER_BYTES + self.points * WORKER_POINT_BYTES)
            + self.decisions * self.candidates * COUNT_BYTES
        )

    def check(self, budget: int) -> None:
        """Raise :class:`MemoryBudgetError` when the estimate exceeds ``budget`` bytes; the message
        gives both figures and what to change."""
        if self.estimate <= budget:
            return
        jobs = f", {self.jobs} processes" if self.jobs > 1 else ""
        fewer = ", fewer --jobs" if self.jobs > 1 else ""
        raise MemoryBudgetError(
            f"this run would need about {_size(self.estimate)} of memory ({self.points:,} points of "
            f"{format_duration(self.resolution)}{jobs}), more than its budget of {_size(budget)}: "
            f"use a coarser resolution, a shorter lookback or history{fewer}, or raise the budget (--memory-budget)"
        )


def points_between(span: timedelta, resolution: timedelta) -> int:
    """Signal points a read of ``span`` at ``resolution`` returns at most (both ends included)."""
    return span // resolution + 1


def parse_size(text: str) -> int:
    """Bytes from ``512Mi``, ``2Gi``, ``1.5G`` or a plain number of bytes (the units Kubernetes
    writes memory in); ValueError for anything else."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    stripped = text.strip()
    for suffix, factor in sorted(units.items(), key=lambda item: -len(item[0])):
        if stripped.endswith(suffix):
            number, scale = stripped[: -len(suffix)], factor
            break
    else:
        number, scale = stripped, 1
    try:
        value = float(number)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise ValueError(f"a memory size is a positive number of bytes, or with Ki, Mi, Gi, k, M or G; got {text!r}")
    return int(value * scale)


def _size(count: int) -> str:
    """``count`` bytes as MiB or GiB, e.g. ``1.50 GiB``."""
    return f"{count / 2**30:.2f} GiB" if count >= 2**30 else f"{count / MiB:.0f} MiB"
