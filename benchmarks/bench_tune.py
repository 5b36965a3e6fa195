"""``presage tune`` on the five named real traces at lead 5m with a 1 % service level, figures on the
held-out part; then the time to tune a 30-day one-minute trace, beside one backtest of it.

Run: ``.venv/bin/python benchmarks/bench_tune.py [TRACES_DIR] [--jobs N]`` (TRACES_DIR defaults to
``../shared/traces`` next to the repository). Prints Markdown for the README: the date and the exact
command first, then one row per trace, the goals and the speed.

Per trace, as ``benchmarks/backtest_traces.py`` sets it up: the default PredictiveScaler spec
(``--per-replica`` = p99 of demand / 20, ``leadTime.static`` = 5m, which is also the pods' boot
delay), the default SeasonalNaive backend (168h × 3), a decision every minute (or trace step when
coarser), a 7-day warm-up; ``presage tune`` holds out the last 7 days (less on a trace too short
for that: its split is printed) and chooses on what lies between. Columns, each on the held-out
part: under-provisioned time % / unserved demand % / cost vs the oracle, for the chosen spec, the
default spec and the reactive HPA (the default's headroom, 10 %).
"""

from __future__ import annotations

import math
import resource
import shlex
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import backtest_traces
import numpy as np
from bench_seasonal_naive import demand

from presage_scaler.backtest.config import Overrides, backend_spec, make_backend, scaler_spec
from presage_scaler.backtest.runner import Setup, run_backtest
from presage_scaler.backtest.trace import Trace, load_csv
from presage_scaler.tune.output import alike_line, verdict
from presage_scaler.tune.search import Figures, Searcher, Slo, search
from presage_scaler.tune.tuner import TuneResult, TuneSetup, tune

LEAD = timedelta(minutes=5)
SLO = Slo(1.0)
UNDER_LIMIT_PCT = 1.5
COST_LIMITS = {
    "nasa_http_jul1995_1m": 1.6,
    "crane_pod_cpu_a_1m": 1.45,
    "crane_pod_cpu_b_1m": 1.25,
    "nab_nyc_taxi_30m": 1.3,
    "nab_elb_request_count_5m": 3.0,
}
SPEED_TARGET_S = 120.0


def cell(figures: Figures) -> str:
    return f"{figures.under_pct:.2f} / {figures.unserved_pct:.3f} / {figures.cost_vs_oracle:.2f}×"


def overrides_for(trace: Trace) -> Overrides:
    return backtest_traces.overrides_for(trace, LEAD)


def tuned(trace: Trace, jobs: int, searcher: Searcher = search) -> TuneResult:
    setup = TuneSetup(spec=None, overrides=overrides_for(trace), backend=backend_spec(None), slo=SLO, jobs=jobs)
    return tune(trace, setup, searcher=searcher)


def changes(result: TuneResult) -> str:
    chosen, default = result.chosen.knobs.as_dict(), result.default.knobs.as_dict()
    moved = [f"{name} {value}" for name, value in chosen.items() if value != default[name]]
    return ", ".join(moved) or "none (the default is the cheapest found)"


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float
    """This process and its workers."""


def timed(call: object) -> tuple[object, Timing]:
    def cpu() -> float:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    began, spent = time.perf_counter(), cpu()
    value = call()  # type: ignore[operator]
    return value, Timing(time.perf_counter() - began, cpu() - spent)


def meets_goals(name: str, held_out: Figures) -> bool:
    """Whether held-out figures of the trace ``name`` are within its goals (under-provisioning, and
    cost where the trace has a limit)."""
    limit = COST_LIMITS.get(name)
    return held_out.under_pct <= UNDER_LIMIT_PCT and (limit is None or held_out.cost_vs_oracle <= limit)


def goals(results: dict[str, TuneResult]) -> list[str]:
    lines = []

    def check(ok: bool, text: str) -> None:
        lines.append(f"- {'met' if ok else 'NOT met'}: {text}")

    worst = max(results.items(), key=lambda item: item[1].chosen.held_out.under_pct)
    check(
        worst[1].chosen.held_out.under_pct <= UNDER_LIMIT_PCT,
        f"under-provisioned ≤ {UNDER_LIMIT_PCT:g} % held out on every trace (worst {worst[0]}: "
        f"{worst[1].chosen.held_out.under_pct:.2f} %)",
    )
    for name, limit in COST_LIMITS.items():
        if name in results:
            cost = results[name].chosen.held_out.cost_vs_oracle
            shown = f"{cost:.2f}"
            if (cost <= limit) != (float(shown) <= limit):  # rounding would hide which side it is on
                shown = f"{cost:.3f}"
            check(cost <= limit, f"{name} ≤ {limit}× the oracle held out ({shown}×)")
    dearer = [n for n, r in results.items() if r.chosen.held_out.replica_hours > r.default.held_out.replica_hours]
    check(not dearer, "at or below the default spec's cost held out on every trace" + (
        f" (dearer: {', '.join(dearer)})" if dearer else ""))  # fmt: skip
    kept = [n for n, r in results.items() if r.chosen.knobs == r.default.knobs]
    lines.append(
        "- the default already met the service level at the least cost found on: "
        + (", ".join(kept) if kept else "none of them")
    )
    return lines


def speed(jobs: int) -> list[str]:
    minute = timedelta(minutes=1)
    values = demand(30 * 1440, minute)
    trace = Trace(values, minute, datetime(2026, 11, 2, tzinfo=UTC), np.zeros(len(values), dtype=bool), "30d.csv")
    setup = Setup(spec=scaler_spec(trace, None, overrides_for(trace)), backend=make_backend(backend_spec(None)))
    _, backtest = timed(lambda: run_backtest(trace, setup))
    result, tuning = timed(lambda: tuned(trace, jobs))
    assert isinstance(result, TuneResult)
    return [
        f"- tuning a 30-day 1-minute trace (43,200 points; {len(result.trials)} candidates replayed from "
        f"{result.forecasts} forecasts, {jobs} processes): {tuning.wall:.0f} s wall, {tuning.cpu:.0f} s CPU "
        f"(target ≤ {SPEED_TARGET_S:.0f} s wall: {'met' if tuning.wall <= SPEED_TARGET_S else 'NOT met'}); one "
        f"`presage backtest` of the same trace (all five policies): {backtest.wall:.1f} s wall, "
        f"{backtest.cpu:.1f} s CPU",
    ]


def main() -> int:
    args = backtest_traces.arguments((__doc__ or "").split("\n\n")[0], "processes per tuning run")
    paths = [args.traces / f"{name}.csv" for name in COST_LIMITS if (args.traces / f"{name}.csv").exists()]
    if not paths:
        print(f"none of the named traces in {args.traces}", file=sys.stderr)
        return 2
    results: dict[str, TuneResult] = {}
    timings: dict[str, Timing] = {}
    for path in paths:
        trace = load_csv(path)
        result, timing = timed(lambda trace=trace: tuned(trace, args.jobs))
        assert isinstance(result, TuneResult)
        results[path.stem], timings[path.stem] = result, timing

    print(f"presage tune benchmark, {datetime.now(UTC):%Y-%m-%d}\n")
    print(f"    {shlex.join(['.venv/bin/python', 'benchmarks/bench_tune.py', *sys.argv[1:]])}\n")
    print(
        "Default PredictiveScaler and SeasonalNaive (168h × 3), per-replica capacity = "
        f"p99 / {backtest_traces.REPLICAS_AT_P99}, "
        f"lead time {LEAD.seconds // 60}m (also the boot delay), decisions every max(1m, trace step), 7-day warm-up, "
        f"{SLO.describe()}. Figures on the held-out part: under-provisioned time % / unserved demand % / "
        "cost vs oracle; in-sample: the chosen spec's on the part it was chosen on.\n"
    )
    print("| trace | chosen on / held out | chosen, held out | default spec, held out | reactive HPA, held out "
          "| chosen, in-sample | what changed | candidates | time |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for name, result in results.items():
        split = result.split.as_dict()
        print(
            f"| {name} | {split['in_sample']} / {split['held_out']} | {cell(result.chosen.held_out)} "
            f"| {cell(result.default.held_out)} | {cell(result.reactive.held_out)} | {cell(result.chosen.in_sample)} "
            f"| {changes(result)} | {len(result.trials)} ({result.forecasts} forecasts) | {timings[name].wall:.0f} s |"
        )
    print("\nWhat each run said:\n")
    for name, result in results.items():
        print(f"- {name}: {verdict(result)}" + (f" {line}." if (line := alike_line(result)) else ""))
    print("\nGoals (held-out figures):\n")
    print("\n".join(goals(results)))
    print("\nSpeed:\n")
    print("\n".join(speed(args.jobs)))
    geomean = math.exp(sum(math.log(r.chosen.held_out.cost_vs_oracle) for r in results.values()) / len(results))
    print(f"\nGeometric mean of the chosen specs' held-out cost vs the oracle: {geomean:.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
