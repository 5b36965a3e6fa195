"""The sample grid every signal lives on: multiples of its resolution since the Unix epoch."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def align_down(moment: datetime, step: timedelta) -> datetime:
    """``moment`` aligned down to a multiple of ``step`` since the Unix epoch. For a range query made
    at ``moment`` this is the time of its newest point."""
    return EPOCH + ((moment - EPOCH) // step) * step


def steps_for(duration: timedelta, step: timedelta) -> int:
    """Whole steps covering ``duration``, at least one: a lead time shorter than one step still
    needs the next step's forecast."""
    return max(1, math.ceil(duration / step - 1e-9))
