"""Whether the chosen spec held up on the part of the trace it was not chosen on.

The search (:mod:`presage_scaler.tune.search`) chooses on the in-sample part only; the held-out part
is the check. The check fails when, there, the chosen spec

- **missed the service level**: under-provisioned (or, with an unserved-demand level, unserved)
  more than the level allows, taken as measured: the held-out days are what the choice is for, so no
  margin for chance is added or granted; or
- **cost more than the starting spec** where tune claimed it saves: the starting spec met the level
  in-sample and the chosen one was preferred for costing less, yet held out it cost more while the
  starting spec met the level there too (had the starting spec missed it, paying more bought it).

Either way the choice rests on days that did not predict the days after, and one line says so, with
what to do: tune on more history, loosen the service level, or keep the starting spec when it did
better. The terminal, tune.json, tune.html and spec.yaml carry that line, and ``presage tune``
exits with :data:`presage_scaler.tune.request.HELD_OUT_FAILED`.
"""

from __future__ import annotations

from dataclasses import dataclass

from presage_scaler.tune.search import Figures, Slo
from presage_scaler.tune.tuner import TuneResult


@dataclass(frozen=True)
class HeldOutCheck:
    """What the held-out part says of the chosen spec."""

    missed_slo: bool
    """The chosen spec's held-out figures exceed the service level."""
    dearer: bool
    """It cost more held out than the starting spec, which it was chosen to be cheaper than."""
    message: str | None
    """One line saying what failed and what to do; None when nothing did."""

    @property
    def failed(self) -> bool:
        return self.missed_slo or self.dearer

    def as_dict(self) -> dict[str, bool | str | None]:
        return {"failed": self.failed, "missed_slo": self.missed_slo, "dearer": self.dearer, "message": self.message}


def misses(figures: Figures, slo: Slo) -> bool:
    """Whether figures measured held out exceed the service level, as measured (no margin)."""
    return figures.under_pct > slo.under_pct or (
        slo.unserved_pct is not None and figures.unserved_pct > slo.unserved_pct
    )


def _measured(figures: Figures, slo: Slo) -> str:
    text = f"{figures.under_pct:.2f} % under-provisioned"
    return text if slo.unserved_pct is None else f"{text}, {figures.unserved_pct:.3f} % unserved"


def _allowed(slo: Slo) -> str:
    unserved = "" if slo.unserved_pct is None else f" and {slo.unserved_pct:g} %"
    return f"at most {slo.under_pct:g} %{unserved} allowed"


def check(result: TuneResult) -> HeldOutCheck:
    """The held-out check of ``result``'s chosen spec (module docstring)."""
    chosen, start, slo = result.chosen, result.default, result.slo
    changed = chosen.knobs != start.knobs
    missed = misses(chosen.held_out, slo)
    start_held = not misses(start.held_out, slo)
    dearer = (
        changed
        and slo.met(start.in_sample)
        and chosen.in_sample.replica_hours < start.in_sample.replica_hours
        and chosen.held_out.replica_hours > start.held_out.replica_hours
        and start_held
    )
    if not (missed or dearer):
        return HeldOutCheck(missed_slo=False, dearer=False, message=None)
    failures = []
    if missed:
        failures.append(f"missed the service level ({_measured(chosen.held_out, slo)}, {_allowed(slo)})")
    if dearer:
        failures.append(
            f"cost more than the starting spec ({chosen.held_out.cost_vs_oracle:.2f}x against "
            f"{start.held_out.cost_vs_oracle:.2f}x the oracle)"
        )
    # A looser level lets a cheaper spec through: a remedy for a miss, not for paying more.
    remedies = ["tune on a longer history", *(["loosen the service level"] if missed else [])]
    if changed and start_held:
        remedies.append(
            f"keep the starting spec, which met the service level there ({_measured(start.held_out, slo)} at "
            f"{start.held_out.cost_vs_oracle:.2f}x the oracle)"
        )
    return HeldOutCheck(
        missed_slo=missed,
        dearer=dearer,
        message=(
            f"Held out, the chosen spec {' and '.join(failures)}: the days it was chosen on did not predict the "
            f"days after. {_sentence(remedies)}."
        ),
    )


def _sentence(remedies: list[str]) -> str:
    """``a, b or c``, capitalised."""
    text = remedies[0] if len(remedies) == 1 else f"{', '.join(remedies[:-1])} or {remedies[-1]}"
    return text[0].upper() + text[1:]
