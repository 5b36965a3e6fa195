"""A trace's days on the clock, and how a tuning run that reuses earlier work is cut along them.

A daily re-advice reads nearly the same history as the day before, shifted by however long passed
between the runs. What it can take over from the earlier run must be named by time, not by position
in the trace, so the trace is cut along whole days of the clock (UTC days, for a step that divides a
day; blocks of a day's worth of steps from the Unix epoch otherwise).

A **chunk** is a run of consecutive decisions forecast together. Its numbers depend on which
decisions share it (:mod:`presage_scaler.backtest.replay`), so chunks are counted from each day's
first decision on the clock, :func:`chunk_size` at a time: a chunk holds the same decisions in every
run that holds all of them.

What a chunk's forecasts read is named by :meth:`Days.digest`, a digest of the trace's values and
gaps over the steps read, with their place on the clock: equal digests, equal inputs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from presage_scaler.backtest.trace import Trace
from presage_scaler.series.timegrid import EPOCH, steps_for

DAY = timedelta(days=1)

DIGEST_BYTES = 16
"""Bytes of a data digest (BLAKE2b): a chance collision is out of reach for any number of runs."""


@dataclass(frozen=True)
class Chunk:
    """Consecutive decisions of one day forecast together: the ``index``-th :func:`chunk_size` of the day's
    decisions, those of it this run makes at ``steps``."""

    day: int
    index: int
    steps: range
    complete: bool
    """Whether the run makes every decision of the chunk (only a complete chunk is kept for later)."""


@dataclass(frozen=True)
class Days:
    """The clock's days of a trace whose step ``i`` is step ``origin + i`` since the Unix epoch."""

    origin: int
    per_day: int
    """Steps in a day."""
    trace: Trace

    @classmethod
    def of(cls, trace: Trace) -> Days | None:
        """The trace's days; None when its steps are off the clock's grid of its step (its start is not
        a whole number of steps since the epoch), where no run can name them alike."""
        since = trace.start - EPOCH
        if since % trace.step:
            return None
        return cls(since // trace.step, steps_for(DAY, trace.step), trace)

    def day_of(self, step: int) -> int:
        return (self.origin + step) // self.per_day

    def start_of(self, day: int) -> int:
        """The trace step the day begins at (negative before the trace)."""
        return day * self.per_day - self.origin

    def absolute(self, step: int) -> int:
        """Trace step ``step`` as a step since the epoch."""
        return self.origin + step

    def chunks(self, decisions: range, size: int, earliest: int) -> list[Chunk]:
        """``decisions`` (every ``decisions.step`` steps) cut into chunks of at most ``size``, counted
        from each day's first decision on their grid (module docstring). The chunk that holds the first
        decision begins where it would in a run whose decisions begin earlier, when a decision can be
        made there (at or after step ``earliest``): it is made whole, so that it is the chunk such a run
        made, and the decisions before ``decisions`` are made only for it."""
        every = decisions.step
        found = []
        day = self.day_of(decisions.start) if decisions else 0
        while decisions and self.start_of(day) < decisions.stop:
            begin, end = self.start_of(day), self.start_of(day + 1)
            # The day's first decision on the grid, made by this run or not.
            first = decisions.start + -(-(begin - decisions.start) // every) * every
            for index, low in enumerate(range(first, end, size * every)):
                high = min(low + size * every, end)
                if high <= decisions.start:
                    continue
                start = low if low >= earliest else max(low, decisions.start)
                steps = range(start, min(high, decisions.stop), every)
                if steps:
                    found.append(Chunk(day, index, steps, start == low and high <= decisions.stop))
            day += 1
        return found

    def digest(self, begin: int, end: int) -> bytes:
        """A digest of the trace's values and gaps at steps ``[begin, end)`` (cut to the trace) and of
        where they lie on the clock."""
        low, high = max(0, begin), min(len(self.trace), end)
        made = hashlib.blake2b(digest_size=DIGEST_BYTES)
        made.update(np.array([self.absolute(low), high - low], dtype=np.int64).tobytes())
        made.update(np.ascontiguousarray(self.trace.values[low:high], dtype=np.float64).tobytes())
        made.update(np.packbits(self.trace.gaps[low:high]).tobytes())
        return made.digest()


def chunk_size(per_day: int, most: int) -> int:
    """The decisions of a chunk: the largest divisor of a day's decisions that is at most ``most``, so
    that a day's chunks are equal (``most`` when a day's decisions have no divisor above half of it)."""
    divisors = [n for n in range(1, min(per_day, most) + 1) if per_day % n == 0]
    best = max(divisors)
    return best if best * 2 > most else most
