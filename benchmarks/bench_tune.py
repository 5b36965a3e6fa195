"""``presage tune`` on the five named real traces at lead 5m with a 1 % service level, figures on the
held-out part; then the time to tune a 30-day one-minute trace, beside one backtest of it.

Run: ``.venv/bin/python benchmarks/bench_tune.py [TRACES_DIR] [--jobs N]`` (TRACES_DIR defaults to
``../shared/traces`` next to the repository). Writes ``benchmarks/results/bench_tune.md`` (``--check``
verifies it): one row per trace, what each run said, the goals and the speed, under the machine's
calibration (one backtest of the 30-day trace the speed figure tunes).

Per trace, as ``benchmarks/bench_backtest.py`` sets it up: the default PredictiveScaler spec
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
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bench_backtest
import numpy as np
import results
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
    return bench_backtest.overrides_for(trace, LEAD)


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


def goals(by_trace: dict[str, TuneResult]) -> list[str]:
    lines = []

    def check(ok: bool, text: str) -> None:
        lines.append(f"- {'met' if ok else 'NOT met'}: {text}")

    worst = max(by_trace.items(), key=lambda item: item[1].chosen.held_out.under_pct)
    check(
        worst[1].chosen.held_out.under_pct <= UNDER_LIMIT_PCT,
        f"under-provisioned ≤ {UNDER_LIMIT_PCT:g} % held out on every trace (worst {worst[0]}: "
        f"{worst[1].chosen.held_out.under_pct:.2f} %)",
    )
    for name, limit in COST_LIMITS.items():
        if name in by_trace:
            cost = by_trace[name].chosen.held_out.cost_vs_oracle
            shown = f"{cost:.2f}"
            if (cost <= limit) != (float(shown) <= limit):  # rounding would hide which side it is on
                shown = f"{cost:.3f}"
            check(cost <= limit, f"{name} ≤ {limit}× the oracle held out ({shown}×)")
    dearer = [n for n, r in by_trace.items() if r.chosen.held_out.replica_hours > r.default.held_out.replica_hours]
    check(not dearer, "at or below the default spec's cost held out on every trace" + (
        f" (dearer: {', '.join(dearer)})" if dearer else ""))  # fmt: skip
    kept = [n for n, r in by_trace.items() if r.chosen.knobs == r.default.knobs]
    lines.append(
        "- the default already met the service level at the least cost found on: "
        + (", ".join(kept) if kept else "none of them")
    )
    return lines


@dataclass(frozen=True)
class Speed:
    """Tuning a 30-day one-minute trace, beside one backtest of it timed in the same run."""

    result: TuneResult
    tuning: Timing
    backtest: Timing
    """The machine's calibration for ``tuning``."""
    jobs: int

    def lines(self) -> list[str]:
        met = "met" if self.tuning.wall <= SPEED_TARGET_S else "NOT met"
        return [
            f"- tuning a 30-day 1-minute trace (43,200 points; {len(self.result.trials)} candidates replayed from "
            f"{self.result.forecasts} forecasts, {self.jobs} processes): {self.tuning.wall:.0f} s wall, "
            f"{self.tuning.cpu:.0f} s CPU (target ≤ {SPEED_TARGET_S:.0f} s wall: {met}); one `presage backtest` of "
            f"the same trace (all five policies): {self.backtest.wall:.1f} s wall, {self.backtest.cpu:.1f} s CPU",
        ]


def speed(jobs: int) -> Speed:
    minute = timedelta(minutes=1)
    values = demand(30 * 1440, minute)
    trace = Trace(values, minute, datetime(2026, 11, 2, tzinfo=UTC), np.zeros(len(values), dtype=bool), "30d.csv")
    setup = Setup(spec=scaler_spec(trace, None, overrides_for(trace)), backend=make_backend(backend_spec(None)))
    _, backtest = timed(lambda: run_backtest(trace, setup))
    result, tuning = timed(lambda: tuned(trace, jobs))
    assert isinstance(result, TuneResult)
    return Speed(result, tuning, backtest, jobs)


RUNS = results.Table(
    (
        "trace",
        "chosen on / held out",
        "chosen, held out",
        "default spec, held out",
        "reactive HPA, held out",
        "chosen, in-sample",
        "what changed",
        "candidates",
        "time",
    )
)
LAYOUT = results.Layout(
    script=Path(__file__),
    machine=("one backtest of the 30-day 1-minute trace, s wall", "its CPU, s"),
    sections=(
        results.Section("Runs", (RUNS,)),
        results.Section("What each run said"),
        results.Section("Goals"),
        results.Section("Speed"),
    ),
)


def row(name: str, result: TuneResult, timing: Timing) -> tuple[object, ...]:
    """One row of the runs table."""
    split = result.split.as_dict()
    return (
        name,
        f"{split['in_sample']} / {split['held_out']}",
        cell(result.chosen.held_out),
        cell(result.default.held_out),
        cell(result.reactive.held_out),
        cell(result.chosen.in_sample),
        changes(result),
        f"{len(result.trials)} ({result.forecasts} forecasts)",
        f"{timing.wall:.0f} s",
    )


def main() -> int:
    args = bench_backtest.arguments((__doc__ or "").split("\n\n")[0], "processes per tuning run")
    if args.check:
        return results.check(LAYOUT)
    paths = [args.traces / f"{name}.csv" for name in COST_LIMITS if (args.traces / f"{name}.csv").exists()]
    if not paths:
        print(f"none of the named traces in {args.traces}", file=sys.stderr)
        return 2
    tuned_by: dict[str, TuneResult] = {}
    timings: dict[str, Timing] = {}
    for path in paths:
        trace = load_csv(path)
        result, timing = timed(lambda trace=trace: tuned(trace, args.jobs))
        assert isinstance(result, TuneResult)
        tuned_by[path.stem], timings[path.stem] = result, timing
    measured = speed(args.jobs)

    legend = (
        "Default PredictiveScaler and SeasonalNaive (168h × 3), per-replica capacity = "
        f"p99 / {bench_backtest.REPLICAS_AT_P99}, "
        f"lead time {LEAD.seconds // 60}m (also the boot delay), decisions every max(1m, trace step), 7-day warm-up, "
        f"{SLO.describe()}. Figures on the held-out part: under-provisioned time % / unserved demand % / "
        "cost vs oracle; in-sample: the chosen spec's on the part it was chosen on."
    )
    geomean = math.exp(sum(math.log(r.chosen.held_out.cost_vs_oracle) for r in tuned_by.values()) / len(tuned_by))
    said = [
        f"- {name}: {verdict(result)}" + (f" {line}." if (line := alike_line(result)) else "")
        for name, result in tuned_by.items()
    ]
    results.write(
        LAYOUT,
        datetime.now(UTC),
        sys.argv[1:],
        (f"{measured.backtest.wall:.1f}", f"{measured.backtest.cpu:.1f}"),
        {
            "Runs": [
                legend,
                "",
                *RUNS.render(row(name, result, timings[name]) for name, result in tuned_by.items()),
                "",
                f"Geometric mean of the chosen specs' held-out cost vs the oracle: {geomean:.2f}×",
            ],
            "What each run said": said,
            "Goals": ["Held-out figures:", "", *goals(tuned_by)],
            "Speed": measured.lines(),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
