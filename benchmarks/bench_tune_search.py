"""What ``presage tune``'s search misses, and how much its choice can be trusted, on a short trace.

Run: ``.venv/bin/python benchmarks/bench_tune_search.py [TRACES_DIR] [--only NAME ...] [--jobs N]`` (default: the
ELB trace, whose choice is made on two days; every candidate of a trace is replayed, so a 16-day
one-minute trace takes about half an hour). Per trace, set up as ``benchmarks/bench_tune.py`` sets
it up, it tunes twice: with the coordinate descent ``presage tune`` uses, and with every candidate of
the same space (every shape at every targetQuantile). It writes ``benchmarks/results/bench_tune_search.md``
(``--check`` verifies it) with, per trace,

- how much dearer in-sample the descent's choice is than the cheapest candidate meeting the service
  level in-sample (0 % when the descent finds it), and how many candidates each replayed;
- the *near-optimal* candidates: those meeting the service level in-sample within ALIKE (5 %) of the
  cheapest's replica-hours (one per outcome; ``presage tune`` reports the same of the candidates its
  search replayed), which the part chosen on cannot tell apart, with the spread of their
  held-out figures and how many of them meet ``bench_tune.py``'s goals for the trace. That spread is
  what the choice of one of them is uncertain by, whatever search makes it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import bench_backtest
import bench_tune
import results

from presage_scaler.backtest.trace import load_csv
from presage_scaler.tune.knobs import Knobs
from presage_scaler.tune.output import spread
from presage_scaler.tune.search import Dimension, Evaluate, Progress, Slo, rank
from presage_scaler.tune.tuner import ALIKE, TuneResult

DEFAULT_TRACES = ("nab_elb_request_count_5m",)


def every_candidate(
    start: Knobs,
    dial: Sequence[float],
    dimensions: Sequence[Dimension],
    evaluate: Evaluate,
    slo: Slo,
    progress: Progress | None = None,
) -> Knobs:
    """A :data:`presage_scaler.tune.search.Searcher` that replays the whole space and returns its
    best, ranked as the search ranks."""
    shapes = list(itertools.product(*(dimension.values for dimension in dimensions)))
    ranked = {}
    for done, values in enumerate(shapes, start=1):
        shape = start
        for dimension, value in zip(dimensions, values, strict=True):
            shape = dimension.set(shape, value)
        for quantile in dial:
            knobs = replace(shape, target_quantile=quantile)
            ranked[knobs] = rank(evaluate(knobs), slo)
        if progress is not None:
            progress("every candidate", done, len(shapes))
    return min(ranked, key=ranked.__getitem__)


def report(name: str, descent: TuneResult, whole: TuneResult) -> list[str]:
    if not whole.met:
        return [f"- {name}: no candidate meets the service level in-sample"]
    best = whole.chosen
    gap = descent.chosen.in_sample.replica_hours / best.in_sample.replica_hours - 1
    near = whole.alike
    limit = bench_tune.COST_LIMITS.get(name)
    meeting = [t for t in near if bench_tune.meets_goals(name, t.held_out)]
    goals = f"≤ {bench_tune.UNDER_LIMIT_PCT:g} % short" + ("" if limit is None else f" and ≤ {limit:g}×")
    return [
        f"- **{name}**, {whole.split.describe()}:",
        f"  - the search's choice: {descent.chosen.in_sample.cost_vs_oracle:.3f}× in-sample, "
        f"{gap:+.1%} against the cheapest of every candidate ({best.in_sample.cost_vs_oracle:.3f}×); "
        f"{len(descent.trials)} candidates replayed against {len(whole.trials)}",
        f"  - {len(near)} candidates (distinct outcomes) meet the service level in-sample within {ALIKE:.0%} of the "
        f"cheapest; held out they are {spread([t.held_out.under_pct for t in near], ' %', 2)} short at "
        f"{spread([t.held_out.cost_vs_oracle for t in near], '×', 2)} the oracle",
        f"  - {len(meeting)} of them ({len(meeting) / len(near):.0%}) meet the goals held out ({goals}); the "
        f"search's choice: {descent.chosen.held_out.under_pct:.2f} % at {descent.chosen.held_out.cost_vs_oracle:.3f}×",
    ]


LAYOUT = results.Layout(script=Path(__file__), machine=(), sections=(results.Section("Traces"),))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("traces", nargs="?", type=Path, default=bench_backtest.DEFAULT_TRACES)
    parser.add_argument("--only", nargs="+", default=list(DEFAULT_TRACES), metavar="NAME", help="trace names")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes per tuning run")
    results.add_check_argument(parser)
    args = parser.parse_args()
    if args.check:
        return results.check(LAYOUT)
    missing = [name for name in args.only if not (args.traces / f"{name}.csv").exists()]
    if missing:
        print(f"not in {args.traces}: {', '.join(missing)}", file=sys.stderr)
        return 2
    lines = []
    for name in args.only:
        trace = load_csv(args.traces / f"{name}.csv")
        descent, whole = bench_tune.tuned(trace, args.jobs), bench_tune.tuned(trace, args.jobs, every_candidate)
        reported = report(name, descent, whole)
        print("\n".join(reported), flush=True)  # progress: a trace of one-minute steps takes half an hour
        lines += reported
    results.write(LAYOUT, datetime.now(UTC), sys.argv[1:], (), {"Traces": lines})
    return 0


if __name__ == "__main__":
    sys.exit(main())
