"""The sample grid every signal lives on: multiples of its resolution since the Unix epoch."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def align_down(moment: datetime, step: timedelta) -> datetime:
    """``moment`` aligned down to a multiple of ``step`` since the Unix epoch. For a range query made
    at ``moment`` this is the time of its newest point."""
    return EPOCH + ((moment - EPOCH) // step) * step


def steps_for(span: timedelta, step: timedelta, *, at_least: int = 1) -> int:
    """The fewest whole steps that cover ``span``, and at least ``at_least``: a lead time shorter than
    one step still needs the next step's forecast, and a window of "the last hour" at 25-minute steps
    reads three. Every span presage counts in steps (lead times, windows, parts of a trace) is counted
    here, so they all round alike. A quotient within 1e-9 above a whole number is that number: float
    division must not add a step."""
    return max(at_least, math.ceil(span / step - 1e-9))
