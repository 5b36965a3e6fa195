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
- each **rule** among the candidates meeting the level in-sample within ALIKE of the cheapest —
  tune's (the cheapest, the starting spec kept within ALIKE), the fewest changes from the starting
  spec, the most margin below the level — by its held-out regret (its held-out replica-hours ÷ those
  of the cheapest candidate meeting the level held out, in hindsight) and whether it met the level
  held out; with the geometric mean of each rule's regret over the traces.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import bench_backtest
import bench_tune
import numpy as np
import results

from presage_scaler.backtest.config import make_backend
from presage_scaler.backtest.runner import Setup, plan, run_presage
from presage_scaler.backtest.trace import Trace, load_csv
from presage_scaler.tune.held_out import misses
from presage_scaler.tune.search import ALIKE, Figures, changes, rank
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


RULES: dict[str, Rule] = {
    "tune's (the cheapest)": lambda result: result.chosen,
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


def report(name: str, trace: Trace, result: TuneResult, regrets: dict[str, list[float]]) -> list[str]:
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
    for rule, choose in RULES.items():
        trial = choose(result)
        regret = trial.held_out.replica_hours / hindsight
        regrets.setdefault(rule, []).append(regret)
        met = "met" if not misses(trial.held_out, result.slo) else "MISSED"
        rules.append(f"{rule} {regret:.3f} ({met})")
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
    sections=(results.Section("Traces"), results.Section("Rules")),
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
    regrets: dict[str, list[float]] = {}
    for name in names:
        trace = load_csv(args.traces / f"{name}.csv")
        reported = report(name, trace, bench_tune.tuned(trace, args.jobs), regrets)
        print("\n".join(reported), flush=True)
        lines += reported
    rules = [
        f"- {rule}: geometric mean {math.exp(sum(map(math.log, found)) / len(found)):.3f} over {len(found)} traces"
        for rule, found in regrets.items()
    ]
    legend = (
        f"Held-out regret of each rule among the candidates meeting the level in-sample within {ALIKE:.0%} of the "
        "cheapest: its held-out replica-hours ÷ the cheapest candidate's meeting the level held out, in hindsight."
    )
    results.write(LAYOUT, datetime.now(UTC), sys.argv[1:], (), {"Traces": lines, "Rules": [legend, "", *rules]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
