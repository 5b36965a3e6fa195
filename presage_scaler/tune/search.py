"""Which candidate wins, from in-sample figures only.

Every candidate of the space is replayed (:mod:`presage_scaler.tune.replay`), so the search is exact:
the winner is the candidate with the fewest replica-hours whose in-sample figures meet the service
level (:class:`Slo`), ties going to the fewest changes from the starting spec; when none meets it,
the one that came closest (least under-provisioned time). One exception keeps what the part chosen
on cannot rank from moving the user's spec: the starting spec stays when it meets the level and
costs at most ALIKE more than the winner. The choice never sees held-out figures.

``presage advise`` weighs one more spec after this choice, the one it advised before
(:mod:`presage_scaler.tune.previous_advice`): that spec is chosen instead when it still meets the level
in-sample and held out and costs at most ALIKE more than the winner in-sample, so that a daily re-advice
does not restart the proof on live demand over candidates the part chosen on cannot rank; and a spec
whose advice failed on live demand is left out of the choice.

Why the cheapest, and not a rule that prefers margin or fewer changes among the candidates ALIKE in
cost: such rules pay more held out, and the misses held out they would avoid come from parts too
short to choose on, which :mod:`presage_scaler.tune.verdict` refuses to advise from. Checked by
``benchmarks/bench_tune_search.py``, which measures each rule. The noise in "meets the level" is
priced where it arises, in the margin below.

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
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, TypeAlias

import numpy as np

from presage_scaler.tune.knobs import Knobs

CONFIDENCE = 0.8
"""How sure the in-sample figures must make the choice that the service level holds (module
docstring): four times in five; a lower level buys regret with misses held out. Checked by
``benchmarks/bench_tune_search.py``, which measures the held-out regret and under-provisioning of
other levels."""


def spells(short: np.ndarray) -> int:
    """How many runs of consecutive True values ``short`` holds."""
    if not len(short):
        return 0
    return int(short[0]) + int(np.count_nonzero(short[1:] & ~short[:-1]))


@functools.cache
def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(confidence)


def rate_bound(count: int, confidence: float = CONFIDENCE) -> float:
    """The upper ``confidence`` bound of a Poisson rate of which ``count`` (≥ 0) events were seen."""
    n = count + 1
    return n * (1.0 - 1.0 / (9.0 * n) + _z(confidence) / (3.0 * math.sqrt(n))) ** 3


FiguresRecord: TypeAlias = dict[str, "float | int | FiguresRecord | None"]
""":meth:`Figures.as_dict`: each figure by name, the recent part's nested."""


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
        return self.margin_at(CONFIDENCE)

    @property
    def under_bound_pct(self) -> float:
        """The under-provisioned time the service level is judged on with CONFIDENCE."""
        return self.under_bound_at(CONFIDENCE)

    def margin_at(self, confidence: float) -> float:
        """What the figures are scaled by to meet the service level with ``confidence``."""
        return rate_bound(self.spells, confidence) / self.spells if self.spells else 1.0

    def under_bound_at(self, confidence: float) -> float:
        """The under-provisioned time scaled by the margin of ``confidence`` or, where spells were
        counted and none seen, the bound's spells (1.6 at CONFIDENCE) of one step each."""
        if self.spells == 0 and self.steps:
            return 100.0 * rate_bound(0, confidence) / self.steps
        return self.under_pct * self.margin_at(confidence)

    def as_dict(self) -> FiguresRecord:
        """The figures as the tune output writes them, ``recent`` nested."""
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
    confidence: float = CONFIDENCE
    """How sure the in-sample figures must make it that the level holds: tune always asks CONFIDENCE;
    ``benchmarks/bench_tune_search.py`` measures others."""

    def met(self, figures: Figures) -> bool:
        """Whether ``figures`` (in-sample) meet it with its ``confidence``, each scaled by its margin: over the
        whole part and, where there are figures of it, over its last RECENT."""
        return self._met(figures) and (figures.recent is None or self._met(figures.recent))

    def _met(self, figures: Figures) -> bool:
        return figures.under_bound_at(self.confidence) <= self.under_pct and (
            self.unserved_pct is None or figures.unserved_pct * figures.margin_at(self.confidence) <= self.unserved_pct
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


ALIKE = 0.05
"""Candidates that meet the service level in-sample for at most this share more replica-hours than
another are alike: the part chosen on cannot rank them by a few percent."""


def rank(figures: Figures, slo: Slo) -> tuple[int, float, float]:
    """What the in-sample optimum is the least of: feasible before infeasible; then the cheaper, or the
    less under-provisioned."""
    if slo.met(figures):
        return (0, figures.replica_hours, figures.under_pct)
    return (1, figures.under_pct, figures.replica_hours)


def changes(knobs: Knobs, start: Knobs) -> int:
    """How many knobs ``knobs`` sets differently from ``start``."""
    mine, theirs = knobs.as_dict(), start.as_dict()
    return sum(mine[name] != theirs[name] for name in mine)


def choose(candidates: Sequence[tuple[Knobs, Figures]], start: Knobs, slo: Slo) -> Knobs:
    """The winner (module docstring) among ``candidates``, each a point of the space with its
    in-sample figures; ``start`` must be one of them."""
    # The least rank, and among those alike, the fewest changes (the first in order on a tie).
    ranked = [rank(found, slo) for _, found in candidates]
    least = min(ranked)
    tied = [candidate for candidate, each in zip(candidates, ranked, strict=True) if each == least]
    best, figures = min(tied, key=lambda candidate: changes(candidate[0], start))
    own = next(found for knobs, found in candidates if knobs == start)
    if slo.met(figures) and slo.met(own) and own.replica_hours <= figures.replica_hours * (1 + ALIKE):
        return start
    return best
