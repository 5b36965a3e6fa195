"""The clock's days of a trace: chunks that hold the same decisions in every run that makes all of
them, and digests that change with the data, the gaps and the place on the clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from presage_scaler.backtest.trace import Trace
from presage_scaler.tune.days import Days, chunk_size

STEP = timedelta(minutes=5)
PER_DAY = 288


def trace_at(start: datetime, steps: int, seed: int = 0) -> Trace:
    values = np.random.default_rng(seed).random(steps)
    return Trace(values, STEP, start, np.zeros(steps, dtype=bool), "t.csv")


MIDNIGHT = datetime(2026, 3, 2, tzinfo=UTC)


def absolute_chunks(
    days: Days, decisions: range, size: int, earliest: int | None = None
) -> dict[tuple[int, int], tuple[list[int], bool]]:
    """Each chunk's decisions on the clock and whether it is complete; by default no decision can be made
    before ``decisions`` (the first chunk is cut there)."""
    cut = decisions.start if earliest is None else earliest
    return {
        (c.day, c.index): ([days.absolute(s) for s in c.steps], c.complete)
        for c in days.chunks(decisions, size, earliest=cut)
    }


@pytest.mark.parametrize("every", [1, 3, 7])
def test_a_chunk_holds_the_same_decisions_in_runs_a_day_and_some_hours_apart(every):
    whole = trace_at(MIDNIGHT, 10 * PER_DAY)
    shift = PER_DAY + 37  # a day and a few hours later, as a CronJob's next run
    early = replace(whole, values=whole.values[: 8 * PER_DAY], gaps=whole.gaps[: 8 * PER_DAY])
    late = replace(
        whole,
        values=whole.values[shift : shift + 8 * PER_DAY],
        gaps=whole.gaps[shift : shift + 8 * PER_DAY],
        start=MIDNIGHT + shift * STEP,
    )
    first, second = Days.of(early), Days.of(late)
    assert first is not None and second is not None
    size = chunk_size(PER_DAY // every, 40)
    # Decisions on the same grid of the clock in both runs, from different first steps.
    one = absolute_chunks(first, range(5, 8 * PER_DAY, every), size)
    other_start = (5 - shift) % every
    two = absolute_chunks(second, range(other_start, 8 * PER_DAY, every), size)
    both = [key for key in one if key in two and one[key][1] and two[key][1]]
    assert len(both) >= 5 * -(-(PER_DAY // every) // size)  # the runs share more than five whole days
    for key in both:
        assert one[key] == two[key]  # a complete chunk: the same decisions on the clock
    for chunks in (one, two):
        assert all(len(steps) <= size for steps, _ in chunks.values())
        incomplete = {key for key, (_, complete) in chunks.items() if not complete}
        assert incomplete <= {min(chunks), max(chunks)}  # only where the run begins and ends


@pytest.mark.parametrize("every", [1, 3])
def test_the_first_chunk_is_made_whole_where_decisions_can_be_made_before_it(every):
    trace = trace_at(MIDNIGHT, 8 * PER_DAY)
    days = Days.of(trace)
    assert days is not None
    size = chunk_size(PER_DAY // every, 40)
    earlier = absolute_chunks(days, range(2, 8 * PER_DAY, every), size)
    start = 2 + (3 * PER_DAY + 17) // every * every  # mid-chunk, on the same grid
    later = absolute_chunks(days, range(start, 8 * PER_DAY, every), size, earliest=2)
    first = min(later)
    steps, complete = later[first]
    assert complete and steps[0] < days.absolute(start) <= steps[-1]  # begun before the first decision
    assert later[first] == earlier[first]  # the chunk an earlier run made whole
    cut = absolute_chunks(days, range(start, 8 * PER_DAY, every), size, earliest=start)
    assert not cut[first][1] and cut[first][0][0] == days.absolute(start)  # nothing before can be made
    # Nothing is made before the first decision a trace can make (a chunk that would begin there is cut).
    young = absolute_chunks(days, range(2, 8 * PER_DAY, every), size, earliest=2)
    assert young[min(young)][0][0] == days.absolute(2)


def test_chunk_size_divides_a_day_where_it_can():
    assert chunk_size(1440, 1024) == 720
    assert chunk_size(288, 40) == 36
    assert chunk_size(97, 40) == 40  # a prime: no divisor above half of the most, so the most


def test_a_trace_off_the_clocks_grid_has_no_days():
    assert Days.of(trace_at(MIDNIGHT + timedelta(minutes=2), 100)) is None


def test_the_digest_names_the_values_the_gaps_and_the_place_on_the_clock():
    trace = trace_at(MIDNIGHT, 3 * PER_DAY)
    days = Days.of(trace)
    assert days is not None
    base = days.digest(100, 400)
    assert days.digest(100, 400) == base
    changed = trace.values.copy()
    changed[250] += 1e-9
    assert Days(days.origin, days.per_day, replace(trace, values=changed)).digest(100, 400) != base
    assert Days(days.origin, days.per_day, replace(trace, values=changed)).digest(300, 400) == days.digest(300, 400)
    gaps = trace.gaps.copy()
    gaps[120] = True
    assert Days(days.origin, days.per_day, replace(trace, gaps=gaps)).digest(100, 400) != base
    later = Days(days.origin + 1, days.per_day, trace)  # the same values a step later on the clock
    assert later.digest(100, 400) != base
