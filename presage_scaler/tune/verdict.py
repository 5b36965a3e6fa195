"""Whether to act on what ``presage tune`` chose: one verdict, and one line that says why.

The choice (:mod:`presage_scaler.tune.search`) is made on the in-sample part alone. Whether it is
advised depends on what the choice could not see, in this order:

1. **Not enough history yet**: the part chosen on is shorter than
   :data:`presage_scaler.backtest.history.TRUSTED` (7 days). A few days hold too few spells of
   under-provisioning to tell candidates alike in-sample apart: some meet the level held out and
   some miss it (``benchmarks/bench_tune_search.py`` counts them on choices made on two days).
2. **Nothing met the level in-sample**: the chosen spec is only the least under-provisioned one,
   and the part chosen on cannot decide among specs that all miss.
3. **The held-out check failed** (:mod:`presage_scaler.tune.held_out`): the chosen spec missed the
   level held out, or cost more there than the starting spec it was chosen to undercut.
4. Otherwise the chosen spec is advised, or, when it is the starting spec, keeping it.

A ``presage advise`` process turns :class:`Advice` into a status patch; ``presage tune`` prints
:attr:`Advice.message` and writes it to tune.json, spec.yaml's header and tune.html.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from presage_scaler.api.quantities import format_duration
from presage_scaler.backtest.history import TRUSTED, more_days
from presage_scaler.tune.held_out import check, misses
from presage_scaler.tune.tuner import TuneResult


class Verdict(StrEnum):
    """What tune advises."""

    ADVISED = "Advised"
    """Change to the chosen spec: it met the level in-sample and held out, for no more than the start."""
    KEEP = "Keep"
    """The starting spec is the choice, and held up."""
    NOT_ENOUGH_HISTORY = "NotEnoughHistory"
    NOTHING_MET = "NothingMet"
    HELD_OUT_FAILED = "HeldOutFailed"


@dataclass(frozen=True)
class Advice:
    """What to do with a tuning run's choice."""

    verdict: Verdict
    message: str
    """One line: what the verdict rests on, and what to do."""
    held_out_met: bool
    """Whether the chosen spec met the service level on the held-out part, as measured."""

    @property
    def advised(self) -> bool:
        """Whether the chosen spec is advised (a change, or keeping the start)."""
        return self.verdict in (Verdict.ADVISED, Verdict.KEEP)

    def as_dict(self) -> dict[str, Any]:
        return {"verdict": str(self.verdict), "message": self.message, "held_out_met": self.held_out_met}


def history_line(result: TuneResult) -> str | None:
    """ "Not enough history yet" when the part chosen on is shorter than TRUSTED; None otherwise."""
    have = result.split.in_sample
    if have >= TRUSTED:
        return None
    return (
        f"Not enough history yet: the choice was made on {format_duration(have)}, and one to act on needs at least "
        f"{format_duration(TRUSTED)} after the warm-up and before the held-out part. Keep the starting spec and "
        f"tune again with {more_days(result.split.missing(TRUSTED))} of history."
    )


def nothing_met_line(result: TuneResult) -> str:
    """Why no candidate met the service level in-sample, and what would: when the least
    under-provisioned one met it as measured and only the margin for chance failed it, the part chosen
    on is too short to tell; otherwise a looser level or a better signal is needed."""
    slo, least = result.slo, result.chosen.in_sample
    if not misses(least, slo):
        spells = f"{least.spells} spell{'s' if least.spells != 1 else ''}"
        return (
            f"No candidate met {slo.describe()} in-sample with the margin for chance, though the least "
            f"under-provisioned one was short {least.under_pct:.2f} % of the time, in {spells}: "
            f"{format_duration(result.split.in_sample)} are too short to tell."
        )
    return (
        f"No candidate met {slo.describe()} in-sample, so the part chosen on cannot decide; a looser service "
        "level, or a better signal, is needed."
    )


def held_out_line(result: TuneResult) -> str:
    """The held-out verdict in one line: the check's message when it failed, else what the chosen spec
    did there beside the starting spec."""
    found = check(result)
    if found.message is not None:
        return found.message
    chosen, start = result.chosen.held_out, result.default.held_out
    line = (
        f"Held out, the chosen spec met the service level ({chosen.under_pct:.2f} % under-provisioned at "
        f"{chosen.cost_vs_oracle:.2f}x the oracle"
    )
    if result.chosen.knobs != result.default.knobs:
        line += f"; the starting spec: {start.under_pct:.2f} % at {start.cost_vs_oracle:.2f}x"
    return line + ")."


def advise(result: TuneResult) -> Advice:
    """The verdict on ``result`` (module docstring)."""
    met = not misses(result.chosen.held_out, result.slo)
    if (line := history_line(result)) is not None:
        return Advice(Verdict.NOT_ENOUGH_HISTORY, line, met)
    if not result.met:
        return Advice(Verdict.NOTHING_MET, f"{nothing_met_line(result)} Keep the starting spec.", met)
    if check(result).failed:
        return Advice(Verdict.HELD_OUT_FAILED, held_out_line(result), met)
    if result.chosen.knobs == result.default.knobs:
        return Advice(Verdict.KEEP, f"Keep the starting spec. {held_out_line(result)}", met)
    return Advice(Verdict.ADVISED, f"Advised: the chosen spec. {held_out_line(result)}", met)


def undecided_line(result: TuneResult) -> str | None:
    """When the candidates alike in-sample (:attr:`TuneResult.alike`) split between meeting and missing
    the service level held out: one line saying so; None otherwise."""
    alike = result.alike
    missed = sum(misses(trial.held_out, result.slo) for trial in alike)
    if not 0 < missed < len(alike):
        return None
    return (
        f"The part chosen on cannot decide among the candidates alike in-sample: {missed} of the {len(alike)} "
        "missed the service level held out"
    )
