"""Whether ``presage tune``'s search finds the in-sample optimum of its space on production's numbers,
and how its choice rule compares held out with rules that prefer margin or fewer changes.

Run: ``.venv/bin/python benchmarks/bench_tune_search.py [TRACES_DIR] [--only NAME ...] [--jobs N]``
(default: every shared trace; about 15 minutes on 2 cores). Per trace, set up as
``benchmarks/bench_tune.py`` sets it up, it tunes once, and writes
``benchmarks/results/bench_tune_search.md`` (``--check`` verifies it) with one line per trace and the
detail below it:

- the **in-sample gap**: how much dearer in-sample the choice is than the cheapest candidate of the
  whole space meeting the service level in-sample (0 % unless the starting spec was kept, which it
  is only within ALIKE of the cheapest), with how many candidates were replayed;
- **production's numbers**: the chosen, the cheapest and two other candidates replayed again one by
  one through ``presage backtest``'s own decision path (forecasts included), whose figures must equal
  those the choice was made on;
- the candidates **alike** in-sample (within ALIKE of the chosen one's replica-hours, one per
  outcome): how many missed the service level held out, which the part chosen on could not foresee;
- each **rule**, by its held-out regret (its held-out replica-hours ÷ those of the cheapest candidate
  meeting the level held out, in hindsight) and its held-out under-provisioned time: tune's (the
  cheapest meeting the level with CONFIDENCE, the starting spec kept within ALIKE); the same asked
  with other confidence levels; the same without the check of the part's last week; and, among the
  candidates meeting the level in-sample within ALIKE of the cheapest, the fewest changes from the
  starting spec and the most margin below the level. The summary gives each rule's geometric-mean
  regret and worst held-out under-provisioning over the traces beside ``bench_tune.py``'s goals for
  both, so what a rule buys in regret is seen beside what it costs in misses held out.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import bench_backtest
import bench_tune
import numpy as np
import results

from presage_scaler.backtest.config import make_backend
from presage_scaler.backtest.csv_trace import load_csv
from presage_scaler.backtest.runner import Setup, plan, run_presage
from presage_scaler.backtest.trace import Trace
from presage_scaler.tune.held_out import misses
from presage_scaler.tune.search import ALIKE, CONFIDENCE, Figures, Slo, changes, choose, rank
from presage_scaler.tune.tuner import Outcome, Trial, TuneResult, outcome

Rule = Callable[[TuneResult], Trial]


def _band(result: TuneResult) -> list[Trial]:
    """The candidates meeting the service level in-sample within ALIKE of the cheapest that does."""
    meeting = [t for t in result.trials if result.slo.met(t.in_sample)]
    if not meeting:
        return [min(result.trials, key=lambda t: rank(t.in_sample, result.slo))]
    cheapest = min(t.in_sample.replica_hours for t in meeting)
    return [t for t in meeting if t.in_sample.replica_hours <= cheapest * (1 + ALIKE)]


def _bound(figures: Figures) -> float:
    recent = figures.recent.under_bound_pct if figures.recent is not None else 0.0
    return max(figures.under_bound_pct, recent)


def _chosen_with(result: TuneResult, slo: Slo, last_week: bool = True) -> Trial:
    """What tune's choice picks among ``result``'s candidates for ``slo``, with or without the check
    of the part's last week."""
    candidates = [(t.knobs, t.in_sample if last_week else replace(t.in_sample, recent=None)) for t in result.trials]
    knobs = choose(candidates, result.default.knobs, slo)
    return next(t for t in result.trials if t.knobs == knobs)


def _at(confidence: float) -> Rule:
    return lambda result: _chosen_with(result, replace(result.slo, confidence=confidence))


OTHER_CONFIDENCES = (0.5, 0.6, 0.7, 0.9)
"""The confidence levels measured beside CONFIDENCE."""

RULES: dict[str, Rule] = {
    f"tune's (the cheapest at confidence {CONFIDENCE:g})": lambda result: result.chosen,
    **{f"the cheapest at confidence {level:g}": _at(level) for level in OTHER_CONFIDENCES},
    "the cheapest without the last week's check": lambda result: _chosen_with(result, result.slo, last_week=False),
    "fewest changes": lambda result: min(
        _band(result), key=lambda t: (changes(t.knobs, result.default.knobs), t.in_sample.replica_hours)
    ),
    "most margin": lambda result: min(_band(result), key=lambda t: (_bound(t.in_sample), t.in_sample.replica_hours)),
}


def reproduced(trace: Trace, result: TuneResult, trials: Sequence[Trial]) -> int:
    """How many of ``trials`` have the same figures when replayed one by one through the backtest."""
    same = 0
    for trial in trials:
        spec = trial.knobs.spec(result.base_wire)
        backend = make_backend(trial.knobs.forecaster.backend_spec())
        setup = Setup(spec=spec, backend=backend, boot_delay=result.plan.boot_delay, warmup=result.plan.warmup)
        the_plan = plan(trace, setup)
        simulation, _ = run_presage(the_plan)
        same += outcome(the_plan, simulation, result.split, result.oracle) == Outcome(trial.in_sample, trial.held_out)
    return same


@dataclass
class Held:
    """What one rule's choices did held out, trace by trace."""

    regrets: list[float] = field(default_factory=list)
    under: dict[str, float] = field(default_factory=dict)
    """Held-out under-provisioned time %, by trace."""

    def row(self, rule: str) -> tuple[str, str, str, str]:
        """The rule's cells of RULES_TABLE."""
        regret = math.exp(sum(map(math.log, self.regrets)) / len(self.regrets))
        worst = max(self.under, key=self.under.__getitem__)
        goals = regret <= bench_tune.REGRET_LIMIT and self.under[worst] <= bench_tune.UNDER_LIMIT_PCT
        return (rule, f"{regret:.3f}", f"{self.under[worst]:.2f} ({worst})", "both met" if goals else "not both")


RULES_TABLE = results.Table(("rule", "regret, geometric mean", "worst under-provisioned held out, %", "goals"))


def report(name: str, trace: Trace, result: TuneResult, held: dict[str, Held]) -> list[str]:
    meeting = [t for t in result.trials if result.slo.met(t.in_sample)]
    hindsight = bench_tune.hindsight(result)
    if not meeting:
        return [f"- **{name}**: no candidate meets the service level in-sample ({len(result.trials)} replayed)"]
    cheapest = min(meeting, key=lambda t: t.in_sample.replica_hours)
    gap = result.chosen.in_sample.replica_hours / cheapest.in_sample.replica_hours - 1
    rng = np.random.default_rng(0)
    others = [meeting[i] for i in rng.choice(len(meeting), min(2, len(meeting)), replace=False)]
    checked = list({t.knobs: t for t in (result.chosen, cheapest, *others)}.values())
    same = reproduced(trace, result, checked)
    alike = result.alike
    missed = sum(misses(t.held_out, result.slo) for t in alike)
    rules = []
    for rule, pick in RULES.items():
        trial = pick(result)
        regret = trial.held_out.replica_hours / hindsight
        found = held.setdefault(rule, Held())
        found.regrets.append(regret)
        found.under[name] = trial.held_out.under_pct
        met = "met" if not misses(trial.held_out, result.slo) else "MISSED"
        rules.append(f"{rule} {regret:.3f} ({trial.held_out.under_pct:.2f} %, {met})")
    return [
        f"- **{name}**: in-sample gap {gap:+.1%} of {len(result.trials)} candidates; {same} of {len(checked)} "
        f"re-replayed through the backtest agree; {missed} of {len(alike)} alike missed held out",
        f"  - {result.split.describe()}",
        f"  - the choice: {result.chosen.in_sample.cost_vs_oracle:.3f}× the oracle in-sample, the cheapest meeting "
        f"the level {cheapest.in_sample.cost_vs_oracle:.3f}×",
        f"  - held-out regret by rule: {'; '.join(rules)}",
    ]


LAYOUT = results.Layout(
    script=Path(__file__),
    machine=(),
    sections=(results.Section("Traces"), results.Section("Rules", (RULES_TABLE,))),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("traces", nargs="?", type=Path, default=bench_backtest.DEFAULT_TRACES)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="trace names (default: every shared trace)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes per tuning run")
    results.add_check_argument(parser)
    args = parser.parse_args()
    if args.check:
        return results.check(LAYOUT)
    names = args.only or sorted(path.stem for path in args.traces.glob("*.csv"))
    missing = [name for name in names if not (args.traces / f"{name}.csv").exists()]
    if missing or not names:
        print(f"not in {args.traces}: {', '.join(missing) or 'any trace'}", file=sys.stderr)
        return 2
    lines: list[str] = []
    held: dict[str, Held] = {}
    for name in names:
        trace = load_csv(args.traces / f"{name}.csv")
        reported = report(name, trace, bench_tune.tuned(trace, args.jobs), held)
        print("\n".join(reported), flush=True)
        lines += reported
    legend = (
        f"Each rule over the {len(names)} traces: the geometric mean of its held-out regret (held-out replica-hours ÷ "
        "the cheapest candidate's meeting the level held out, in hindsight) and its worst held-out under-provisioned "
        f"time, beside bench_tune.py's goals: regret ≤ {bench_tune.REGRET_LIMIT:g} and "
        f"≤ {bench_tune.UNDER_LIMIT_PCT:g} % under-provisioned on every trace. Fewest changes and most margin choose "
        f"among the candidates meeting the level in-sample within {ALIKE:.0%} of the cheapest."
    )
    table = RULES_TABLE.render(found.row(rule) for rule, found in held.items())
    print("\n".join(table))
    results.write(LAYOUT, datetime.now(UTC), sys.argv[1:], (), {"Traces": lines, "Rules": [legend, "", *table]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
