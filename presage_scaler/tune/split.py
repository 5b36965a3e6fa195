"""Where the choice is made and where it is checked: the trace after the warm-up, cut in two.

The earlier part (in-sample) is what ``presage tune`` chooses on; the later part (held out) is only
ever measured, after the choice, so that the figures it reports for the chosen spec are ones it
could not have fitted. By default the last HOLDOUT is held out, or, when that would leave less than
MIN_IN_SAMPLE to choose on, everything after the first MIN_IN_SAMPLE; either part must be at least
MIN_PART long (the lengths are :mod:`presage_scaler.backtest.history`'s, which ``presage backtest``
reads too).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from presage_scaler.api.quantities import format_duration
from presage_scaler.backtest.history import HOLDOUT, MIN_IN_SAMPLE, MIN_PART
from presage_scaler.series.timegrid import steps_for
from presage_scaler.tune.errors import HistoryTooShort

RECENT = timedelta(days=7)
"""An in-sample part longer than this is judged over its last RECENT too (see
:class:`presage_scaler.tune.search.Slo`)."""


@dataclass(frozen=True)
class Split:
    """Trace steps ``[report_from, held_out_from)`` are in-sample, ``[held_out_from, end)`` held out."""

    report_from: int
    held_out_from: int
    end: int
    start: datetime
    """When step 0 starts."""
    step: timedelta
    held_out_asked: timedelta = HOLDOUT
    """How long the held-out part was asked to be: it is shorter while the trace is too short for that."""

    def at(self, index: int) -> datetime:
        return self.start + index * self.step

    @property
    def in_sample(self) -> timedelta:
        return (self.held_out_from - self.report_from) * self.step

    @property
    def held_out(self) -> timedelta:
        return (self.end - self.held_out_from) * self.step

    def missing(self, in_sample: timedelta) -> timedelta:
        """How much longer the trace must be for the part chosen on to last ``in_sample``: the held-out
        part grows to the length asked before the part chosen on does."""
        zero = timedelta(0)
        return max(self.held_out_asked - self.held_out, zero) + max(in_sample - self.in_sample, zero)

    @property
    def recent_from(self) -> int | None:
        """Where the in-sample part's last RECENT begins; None when the part is no longer than that."""
        begin = self.held_out_from - steps_for(RECENT, self.step)
        return begin if begin > self.report_from else None

    def describe(self) -> str:
        """One sentence for the terminal and the report."""
        return (
            f"Chosen on {_span(self.at(self.report_from), self.at(self.held_out_from))} "
            f"({format_duration(self.in_sample)}), checked on the held-out "
            f"{_span(self.at(self.held_out_from), self.at(self.end))} ({format_duration(self.held_out)})"
        )

    def as_dict(self) -> dict[str, str]:
        return {
            "in_sample_from": self.at(self.report_from).isoformat(),
            "held_out_from": self.at(self.held_out_from).isoformat(),
            "end": self.at(self.end).isoformat(),
            "in_sample": format_duration(self.in_sample),
            "held_out": format_duration(self.held_out),
        }


def _span(begin: datetime, end: datetime) -> str:
    return f"{begin:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M}"


def split(length: int, start: datetime, step: timedelta, report_from: int, holdout: timedelta | None = None) -> Split:
    """Cut steps ``[report_from, length)`` of a trace starting at ``start`` into the in-sample and the
    held-out part; ``holdout`` overrides the default length of the held-out part."""
    after = length - report_from
    default = min(steps_for(HOLDOUT, step), after - steps_for(MIN_IN_SAMPLE, step))
    held = default if holdout is None else steps_for(holdout, step, at_least=0)
    least = steps_for(MIN_PART, step)
    if held < least or after - held < least:
        raise HistoryTooShort(
            f"the trace is too short to hold out a part to check the choice on: after the warm-up it holds "
            f"{format_duration(after * step)}, and both the part chosen on and the part held out need at least "
            f"{format_duration(MIN_PART)} (by default {format_duration(MIN_IN_SAMPLE)} to choose on); give a longer "
            "trace, a shorter --warmup or a shorter --holdout"
        )
    asked = HOLDOUT if holdout is None else holdout
    return Split(report_from, length - held, length, start, step, asked)
