"""How much history ``presage tune`` needs after the warm-up: the parts it cuts a trace into
(:mod:`presage_scaler.tune.split`) and the least part chosen on whose choice it advises
(:mod:`presage_scaler.tune.verdict`). Declared here, below both commands, so that ``presage backtest``
can say what tune will be able to do on the same trace without a figure of its own.
"""

from __future__ import annotations

import math
from datetime import timedelta

HOLDOUT = timedelta(days=7)
"""The held-out part's length by default."""
MIN_IN_SAMPLE = timedelta(days=2)
"""The least part chosen on by default: a shorter trace holds out less rather than choose on less."""
MIN_PART = timedelta(days=1)
"""The least length of either part."""
TRUSTED = timedelta(days=7)
"""The shortest part chosen on whose choice is advised."""


def tunable(after_warmup: timedelta) -> bool:
    """Whether ``presage tune`` can cut ``after_warmup`` (the trace after its warm-up) into both parts
    with the default held-out length."""
    return after_warmup >= MIN_IN_SAMPLE + MIN_PART


def missing_to_advise(after_warmup: timedelta) -> timedelta:
    """How much longer the trace after its warm-up must be for tune to advise on it with the default
    held-out length: TRUSTED to choose on, then HOLDOUT held out; zero when it is long enough."""
    return max(TRUSTED + HOLDOUT - after_warmup, timedelta(0))


def more_days(span: timedelta) -> str:
    """``span`` in whole days, rounded up: ``2 more days``."""
    days = math.ceil(span / timedelta(days=1))
    return f"{days} more day{'s' if days > 1 else ''}"
