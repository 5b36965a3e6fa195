"""When an advised spec is proven on live demand, when it has failed there, and when an applied one is
rolled back: the rules of ``status.advice.live`` and ``spec.advice.apply``, shared by the controller and
``benchmarks/bench_lifecycle.py``. Pure: counts and times come in as arguments.

An advice's live record counts the moments scored since scoring it began (``samples``) and those whose
demand exceeded the advised spec's count (``misses``). Its share of misses is judged against the
service level (``spec.advice.serviceLevel``, a percentage of the time):

* **Proven** once ``proveFor`` has passed since scoring began, with the share at most the service level.
* **FailedLive** once at least :data:`JUDGED_AFTER` (or ``proveFor``, when shorter) has been scored
  with the share above it, or as soon as the misses alone exceed the service level's share of every
  moment ``proveFor`` can hold: no later moment can bring it back within.

An apply is watched for one ``spec.advice.every``: it is rolled back as soon as its misses exceed the
service level's share of the moments that window holds, or when the window ends with the share above
the service level. A window ends the watch either way; a rollback is never made after it.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Literal

JUDGED_AFTER = timedelta(days=1)
"""How long a live share must have been scored before it can fail an advice: a day holds the daily
peak, which the first hours of scoring may not."""

LiveJudgement = Literal["Proving", "Proven", "FailedLive"]


def parse_service_level(service_level: str) -> float:
    """``"1%"`` as a share of the time (0.01)."""
    return float(service_level.removesuffix("%")) / 100


def moments_in(span: timedelta, interval: timedelta) -> int:
    """How many decisions ``span`` holds at one per ``interval``: at least one."""
    return max(1, math.floor(span / interval))


def _beyond_reach(misses: int, span: timedelta, interval: timedelta, level: float) -> bool:
    """Whether ``misses`` alone exceed ``level`` of every moment ``span`` holds."""
    return misses > level * moments_in(span, interval)


def live_judgement(
    misses: int,
    samples: int,
    since: datetime,
    now: datetime,
    *,
    prove_for: timedelta,
    interval: timedelta,
    level: float,
) -> LiveJudgement:
    """The verdict of an advice scored since ``since`` with ``misses`` of ``samples`` moments short, at
    ``now``; ``level`` is the service level as a share (:func:`parse_service_level`)."""
    scored = now - since
    share = misses / samples if samples else 0.0
    if _beyond_reach(misses, prove_for, interval, level):
        return "FailedLive"
    if samples and scored >= min(JUDGED_AFTER, prove_for) and share > level:
        return "FailedLive"
    if samples and scored >= prove_for:
        return "Proven"
    return "Proving"


def rollback_due(
    misses: int,
    samples: int,
    applied: datetime,
    now: datetime,
    *,
    every: timedelta,
    interval: timedelta,
    level: float,
) -> bool:
    """Whether an apply made at ``applied``, whose spec has since been short at ``misses`` of ``samples``
    scored moments, is to be rolled back at ``now`` (never once ``every`` has passed and was judged)."""
    if _beyond_reach(misses, every, interval, level):
        return True
    return now - applied >= every and samples > 0 and misses / samples > level


def watch_over(applied: datetime, now: datetime, every: timedelta) -> bool:
    """Whether the watch of an apply made at ``applied`` has ended (its window was judged)."""
    return now - applied > every
