"""Which candidates to replay, and which one wins.

The winner is the candidate with the fewest replica-hours whose in-sample figures meet the service
level (:class:`Slo`); when none does, the one that came closest (least under-provisioned time). The
search never sees held-out figures: it is given a function that returns in-sample figures only.

Meeting the service level in-sample means meeting it with CONFIDENCE, not just on the days seen:
under-provisioning comes in spells, and a part that holds a handful of them says little about how
many the next days hold. The spells are counted as Poisson events, and the in-sample time and
demand short are scaled by the upper CONFIDENCE bound of their rate over the count seen
(Wilson–Hilferty's form of the chi-squared bound): ×1.58 with 5 spells, ×1.14 with 50, ×1.04 with
500. So a choice made on two days needs a margin, and one made on months hardly any. No spell seen is
not certainty either: the bound of a rate of which none was seen is 1.6 spells, so such a part is
judged as if it had been short for 1.6 steps (one step is the shortest a spell can be). On a part of
2,880 one-minute steps that is 0.06 %; on 48 half-hour steps, 3.3 %: a day of half-hours cannot show
a 1 % service level.

Months are also long enough to hide a drift: a candidate that meets the service level over half a
year but not over its last week is tuned to a past the next week may not resemble. So an in-sample
part longer than RECENT (a week, :mod:`presage_scaler.tune.split`) must meet it over its last
RECENT as well, with that part's own margin (:attr:`Figures.recent`).

The space is too large to replay whole (a ten-value dial times six knobs of four values), and two
regularities make that unnecessary. Along the **dial**, targetQuantile, cost rises and
under-provisioning falls, so for a setting of the other knobs (a *shape*) the cheapest point that
meets the service level is the lowest targetQuantile that does: found by stepping down from a known
feasible value, or up from an infeasible one (no further than the incumbent's cost: a dearer point
cannot win). Across shapes, the search is **coordinate descent**:
starting from the user's spec, each knob in turn tries each of its values (with the dial re-solved),
keeps the best, and passes repeat until one changes nothing. Knobs listed first are tried first;
the forecaster's settings come last because each new value is a new forecast.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any

import numpy as np

from presage_scaler.tune.knobs import Knobs

MAX_PASSES = 3

CONFIDENCE = 0.8
"""How sure the in-sample figures must make the choice that the service level holds (module
docstring): four times in five."""


def spells(short: np.ndarray) -> int:
    """How many runs of consecutive True values ``short`` holds."""
    if not len(short):
        return 0
    return int(short[0]) + int(np.count_nonzero(short[1:] & ~short[:-1]))


_Z = NormalDist().inv_cdf(CONFIDENCE)


def rate_bound(count: int) -> float:
    """The upper CONFIDENCE bound of a Poisson rate of which ``count`` (≥ 0) events were seen."""
    n = count + 1
    return n * (1.0 - 1.0 / (9.0 * n) + _Z / (3.0 * math.sqrt(n))) ** 3


@dataclass(frozen=True)
class Figures:
    """How a policy did over one part of the trace."""

    under_pct: float
    """Share of steps whose demand exceeded the ready capacity, %."""
    unserved_pct: float
    """Demand the ready capacity did not serve, % of all demand."""
    replica_hours: float
    cost_vs_oracle: float
    spells: int | None = None
    """Separate spells of under-provisioning (runs of consecutive short steps); None: not counted,
    and the figures are taken as they are."""
    recent: Figures | None = None
    """In-sample figures only: the same over the part's last RECENT, when it is longer than that."""
    steps: int | None = None
    """How many steps the figures cover; None: not known (the bound of a part without a spell is then 0)."""

    @property
    def margin(self) -> float:
        """What the in-sample figures are scaled by to meet the service level with CONFIDENCE."""
        return rate_bound(self.spells) / self.spells if self.spells else 1.0

    @property
    def under_bound_pct(self) -> float:
        """The under-provisioned time the service level is judged on: scaled by the margin or, where
        spells were counted and none seen, the bound's 1.6 spells of one step each."""
        if self.spells == 0 and self.steps:
            return 100.0 * rate_bound(0) / self.steps
        return self.under_pct * self.margin

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "under_provisioned_pct": self.under_pct,
            "unserved_pct": self.unserved_pct,
            "replica_hours": self.replica_hours,
            "cost_vs_oracle": self.cost_vs_oracle,
            "under_provisioned_spells": self.spells,
            "under_provisioned_bound_pct": self.under_bound_pct,
            "steps": self.steps,
            "recent": None if self.recent is None else self.recent.as_dict(),
        }


@dataclass(frozen=True)
class Slo:
    """The service level: at most ``under_pct`` % of the time under-provisioned and, when set, at
    most ``unserved_pct`` % of the demand unserved."""

    under_pct: float
    unserved_pct: float | None = None

    def met(self, figures: Figures) -> bool:
        """Whether ``figures`` (in-sample) meet it with CONFIDENCE, each scaled by its margin: over the
        whole part and, where there are figures of it, over its last RECENT."""
        return self._met(figures) and (figures.recent is None or self._met(figures.recent))

    def _met(self, figures: Figures) -> bool:
        return figures.under_bound_pct <= self.under_pct and (
            self.unserved_pct is None or figures.unserved_pct * figures.margin <= self.unserved_pct
        )

    def describe(self) -> str:
        text = f"under-provisioned ≤ {self.under_pct:g} % of the time"
        return text if self.unserved_pct is None else f"{text} and unserved ≤ {self.unserved_pct:g} % of demand"


@dataclass(frozen=True)
class Dimension:
    """A knob the search moves, with the values it tries (from the most conservative, usually)."""

    name: str
    values: tuple[Any, ...]
    field: str
    """The :class:`Knobs` field it sets."""

    def set(self, knobs: Knobs, value: Any) -> Knobs:
        return replace(knobs, **{self.field: value})


Progress = Callable[[str, int, int], None]
"""Called with (phase, done, total) as the search goes."""

Evaluate = Callable[[Knobs], Figures]
"""In-sample figures of a candidate (replayed at most once; the caller memoises)."""

Searcher = Callable[[Knobs, Sequence[float], Sequence[Dimension], Evaluate, Slo, Progress | None], Knobs]
"""What :func:`search` is: (start, dial, dimensions, evaluate, slo, progress) -> the winner."""


def rank(figures: Figures, slo: Slo) -> tuple[int, float, float]:
    """What the winner is the least of: feasible before infeasible; then the cheaper, or the less
    under-provisioned."""
    if slo.met(figures):
        return (0, figures.replica_hours, figures.under_pct)
    return (1, figures.under_pct, figures.replica_hours)


def search(
    start: Knobs,
    dial: Sequence[float],
    dimensions: Sequence[Dimension],
    evaluate: Evaluate,
    slo: Slo,
    progress: Progress | None = None,
) -> Knobs:
    """The best candidate found (module docstring). ``dial`` is the targetQuantile ladder, ascending;
    ``progress`` hears of each knob value tried, pass by pass."""
    seen: dict[Knobs, Figures] = {}

    def figures(knobs: Knobs) -> Figures:
        if knobs not in seen:
            seen[knobs] = evaluate(knobs)
        return seen[knobs]

    def ranked(knobs: Knobs) -> tuple[int, float, float]:
        return rank(figures(knobs), slo)

    def solve_dial(shape: Knobs, bound: float) -> Knobs:
        """The best point of ``shape``'s dial, stepping from its current targetQuantile. Stepping up
        stops at ``bound`` replica-hours: what costs that much already cannot beat the incumbent,
        and higher targetQuantiles cost more."""
        ladder = sorted({*dial, shape.target_quantile})
        index = ladder.index(shape.target_quantile)
        tried = [shape]
        if slo.met(figures(shape)):
            while index > 0 and slo.met(figures(lower := replace(shape, target_quantile=ladder[index - 1]))):
                tried.append(lower)
                index -= 1
        else:
            while index < len(ladder) - 1 and figures(tried[-1]).replica_hours < bound:
                index += 1
                tried.append(higher := replace(shape, target_quantile=ladder[index]))
                if slo.met(figures(higher)):
                    break
        return min(tried, key=ranked)

    def bound(knobs: Knobs) -> float:
        found = figures(knobs)
        return found.replica_hours if slo.met(found) else math.inf

    best = solve_dial(start, math.inf)
    moves = [(dimension, value) for dimension in dimensions for value in dimension.values]
    for number in range(1, MAX_PASSES + 1):
        incumbent = best
        for done, (dimension, value) in enumerate(moves, start=1):
            candidate = solve_dial(dimension.set(best, value), bound(best))
            if ranked(candidate) < ranked(best):
                best = candidate
            if progress is not None:
                progress(f"search, pass {number}", done, len(moves))
        if best == incumbent:
            break
    return best
