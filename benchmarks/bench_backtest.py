"""presage against reactive scaling, a static count and the oracle on every real trace, at lead times
of 2, 5 and 10 min; then the speed of one decision and of a 30-day backtest.

Run: ``.venv/bin/python benchmarks/bench_backtest.py [TRACES_DIR] [--jobs N]`` (TRACES_DIR defaults
to ``../shared/traces`` next to the repository). Writes ``benchmarks/results/bench_backtest.md``
(``--check`` verifies it): one row per trace and lead time, the goals, and the speed figures, under
the machine's calibration (np.sort of 4,032 points, the reactive HPA alone on the 30-day trace).

Per run: the default PredictiveScaler spec (the API's defaults, ``--per-replica`` = p99 of demand /
20, ``leadTime.static`` = the lead time, which is also the pods' boot delay) and the default
SeasonalNaive backend (168h × 3 cycles), a decision every minute (or every trace step when coarser),
a 7-day warm-up. Columns:

* under-provisioned time %, unserved demand % and cost (replica-hours) relative to the oracle, for
  presage, the reactive HPA (same headroom as presage, 10 %), the HPA with its headroom raised until
  it costs what presage costs, the static count that covers the warm-up's peak, and the seasonal
  trigger a KEDA user writes by hand (the HPA on the higher of the current demand and the highest of
  the 30 minutes after this time a week ago, at 75 % target utilization) and that trigger with its
  utilization moved until it costs what presage costs;
* coverage: how often the sizing window's highest demand was at or below presage's calibrated
  targetQuantile (0.9) and scaleDownQuantile (0.5) forecasts, after the warm-up;
* decided by: the constraint that decided most of presage's counts after the warm-up, and its share;
* guard off: presage with only ``scaleDownUncertaintyGuard.enabled: false``;
* goal: presage's under-provisioned time is at most 1/5 of the cost-matched HPA's, or at most 0.5 %.

The Goals section also says in how many cells presage was less under-provisioned than the seasonal
trigger at the same cost.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import results
from bench_seasonal_naive import cpu_us_per_call, decision_call, demand

from presage_scaler.backends.base import History
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.backtest.config import Overrides, backend_spec, make_backend, scaler_spec
from presage_scaler.backtest.csv_trace import load_csv
from presage_scaler.backtest.output import policy_summary
from presage_scaler.backtest.runner import (
    Setup,
    metrics_of,
    plan,
    run_backtest,
    run_oracle,
    run_presage,
    run_reactive,
)
from presage_scaler.backtest.trace import Trace

LEADS_MIN = (2, 5, 10)
REPLICAS_AT_P99 = 20
GOAL_FACTOR = 5.0
GOAL_ABSOLUTE_PCT = 0.5
UNDER_LIMIT_PCT = 1.0
NAMED = {
    # trace: the most its cost may be relative to the oracle's at every lead time (None: no bound)
    "crane_pod_cpu_a_1m": 1.6,
    "crane_pod_cpu_b_1m": 1.25,
    "nab_elb_request_count_5m": None,
    "nab_nyc_taxi_30m": 1.3,
    "nasa_http_jul1995_1m": 2.0,
}
GEOMEAN_LIMIT = 1.9
GEOMEAN_GUARD_OFF_LIMIT = 1.55
COVERAGE_TOLERANCE = 0.03
DECISION_TARGET_US = 1000.0
BACKTEST_TARGET_S = 10.0
SPEED_REPEATS = 3
"""The 30-day backtest (and the reactive HPA beside it) is timed this many times and the least is
reported: on a shared machine the spread between runs (±15 %) is the neighbours', not the code's."""
DEFAULT_TRACES = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"


@dataclass(frozen=True)
class Outcome:
    under_pct: float
    unserved_pct: float
    cost: float
    """Replica-hours relative to the oracle's."""

    def __str__(self) -> str:
        return f"{self.under_pct:.2f} / {self.unserved_pct:.3f} / {self.cost:.2f}×"


@dataclass(frozen=True)
class Row:
    """One trace at one lead time."""

    policies: dict[str, Outcome]
    matched_headroom: str
    matched_utilization: str
    target_coverage: float
    scale_down_coverage: float
    decided_by: str
    guard_off: Outcome | None = None

    @property
    def goal(self) -> bool:
        under = self.policies["presage"].under_pct
        return under <= GOAL_ABSOLUTE_PCT or under <= self.policies["reactive_cost_matched"].under_pct / GOAL_FACTOR


def overrides_for(trace: Trace, lead: timedelta) -> Overrides:
    """The benchmark's setting for a trace: per-replica capacity p99 / REPLICAS_AT_P99, this lead time."""
    return Overrides(per_replica=float(np.percentile(trace.values, 99)) / REPLICAS_AT_P99, lead_time=lead)


HUGE_PAGES = "NUMPY_MADVISE_HUGEPAGE"
"""numpy's setting that presage's commands run with (presage_scaler/cli/__init__.py), read at its import."""


def as_the_commands_run() -> None:
    """Run this benchmark again, from the start, with numpy set as presage's commands set it (numpy is
    imported already, and reads the setting only then); nothing when it is so set."""
    if os.environ.get(HUGE_PAGES) != "0":
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, HUGE_PAGES: "0"})


def arguments(description: str, jobs_help: str) -> argparse.Namespace:
    """The benchmarks' command line: the traces directory (default ../shared/traces), --jobs and --check."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("traces", nargs="?", type=Path, default=DEFAULT_TRACES, help="directory of CSV traces")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help=jobs_help)
    results.add_check_argument(parser)
    return parser.parse_args()


def csv_traces(directory: Path) -> list[Path]:
    """The CSV traces in ``directory``, by name; a benchmark with none to run exits with status 2."""
    paths = sorted(directory.glob("*.csv"))
    if not paths:
        print(f"no CSV traces in {directory}", file=sys.stderr)
        raise SystemExit(2)
    return paths


def setup_for(trace: Trace, lead_min: int, *, guard: bool = True) -> Setup:
    spec = scaler_spec(trace, None, overrides_for(trace, timedelta(minutes=lead_min)))
    if not guard:
        policy = spec.policy
        off = policy.scale_down_uncertainty_guard.model_copy(update={"enabled": False})
        spec = spec.model_copy(update={"policy": policy.model_copy(update={"scale_down_uncertainty_guard": off})})
    return Setup(spec=spec, backend=make_backend(backend_spec(None)))


def full_run(path: Path, lead_min: int) -> Row:
    """All seven policies with the default spec."""
    trace = load_csv(path)
    result = run_backtest(trace, setup_for(trace, lead_min))
    policies = {
        name: Outcome(p.metrics.under_provisioned_pct, p.metrics.unserved_pct, result.cost_vs_oracle(name))
        for name, p in result.policies.items()
    }
    name, share = next(iter(result.constraint_shares.items()))
    return Row(
        policies=policies,
        matched_headroom=str(result.policies["reactive_cost_matched"].headroom),
        matched_utilization=policy_summary(result, "seasonal_trigger_cost_matched")["utilization"],
        target_coverage=result.coverage.target,
        scale_down_coverage=result.coverage.scale_down,
        decided_by=f"{name} {100 * share:.0f} %",
    )


def guard_off_run(path: Path, lead_min: int) -> Outcome:
    """presage alone with the uncertainty guard disabled; cost relative to the same oracle."""
    trace = load_csv(path)
    the_plan = plan(trace, setup_for(trace, lead_min, guard=False))
    simulation, _ = run_presage(the_plan)
    metrics = metrics_of(the_plan, simulation)
    oracle = metrics_of(the_plan, run_oracle(the_plan))
    return Outcome(metrics.under_provisioned_pct, metrics.unserved_pct, metrics.replica_hours / oracle.replica_hours)


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def goals(rows: dict[tuple[Path, int], Row], paths: list[Path]) -> list[str]:
    """One line per goal of the calibration issue, with the measured numbers and whether it holds."""
    named = [rows[p, lead] for p in paths if p.stem in NAMED for lead in LEADS_MIN]
    others = [rows[p, lead] for p in paths if p.stem not in NAMED for lead in LEADS_MIN]
    lines = []

    def check(ok: bool, text: str) -> None:
        lines.append(f"- {'met' if ok else 'NOT met'}: {text}")

    worst = max(r.policies["presage"].under_pct for r in named)
    check(
        worst <= UNDER_LIMIT_PCT,
        f"under-provisioned ≤ {UNDER_LIMIT_PCT:g} % on the five named traces (worst {worst:.2f} %)",
    )
    check(all(r.goal for r in named), "under-provisioned ≤ 1/5 of the cost-matched HPA's (or ≤ 0.5 %) in every cell")
    default = geomean([r.policies["presage"].cost for r in named])
    check(default <= GEOMEAN_LIMIT, f"geometric mean cost ≤ {GEOMEAN_LIMIT}× over the 15 cells ({default:.2f}×)")
    for p in paths:
        limit = NAMED.get(p.stem)
        if limit is not None:
            costs = [rows[p, lead].policies["presage"].cost for lead in LEADS_MIN]
            check(max(costs) <= limit, f"{p.stem} ≤ {limit}× ({', '.join(f'{c:.2f}×' for c in costs)})")
    off = geomean([r.guard_off.cost for r in named if r.guard_off is not None])
    check(off <= GEOMEAN_GUARD_OFF_LIMIT, f"guard off: geometric mean ≤ {GEOMEAN_GUARD_OFF_LIMIT}× ({off:.2f}×)")
    if others:
        worst_other = max(r.policies["presage"].under_pct for r in others)
        check(
            worst_other <= UNDER_LIMIT_PCT,
            f"under-provisioned ≤ {UNDER_LIMIT_PCT:g} % on the other traces (worst {worst_other:.2f} %)",
        )
    every = list(rows.values())
    off_by = max(abs(r.target_coverage - 0.9) for r in every)
    check(
        off_by <= COVERAGE_TOLERANCE,
        f"targetQuantile coverage within ±3 points of 90 % (worst {100 * off_by:.1f} points off)",
    )
    beaten = [
        f"{p.stem} {lead}m"
        for p in paths
        for lead in LEADS_MIN
        if rows[p, lead].policies["seasonal_trigger_cost_matched"].under_pct
        < rows[p, lead].policies["presage"].under_pct
    ]
    lines.append(
        f"- at presage's cost, the seasonal trigger was less under-provisioned than presage in {len(beaten)} of "
        f"{len(rows)} cells" + (f": {', '.join(beaten)}" if beaten else "")
    )
    return lines


def _timed(call: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds of one call."""
    began, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - began, time.process_time() - cpu


@dataclass(frozen=True)
class Speed:
    """The speed figures, each beside a baseline timed in the same run."""

    decision_us: float
    sort_us: float
    """np.sort of the decision's 4,032 points: the machine's calibration for ``decision_us``."""
    backtest_cpu: float
    backtest_wall: float
    reactive_cpu: float
    """The reactive HPA alone on the same 30-day trace: the calibration for ``backtest_cpu``."""

    def lines(self) -> list[str]:
        return [
            f"- one SeasonalNaive decision at 4,032 points (5m steps; forecast, hindcasts, calibration and policy): "
            f"{self.decision_us:.0f} µs CPU (target < {DECISION_TARGET_US:.0f} µs); np.sort of the same 4,032 "
            f"points: {self.sort_us:.0f} µs",
            f"- a 30-day 1-minute backtest (43,200 points, all seven policies and both cost matches; least of "
            f"{SPEED_REPEATS} runs): {self.backtest_cpu:.1f} s CPU, {self.backtest_wall:.1f} s wall (target ≤ "
            f"{BACKTEST_TARGET_S:.0f} s); simulating the reactive HPA alone on it: {self.reactive_cpu:.2f} s CPU",
        ]


def speed() -> Speed:
    """One decision at 4,032 points and a 30-day 1-minute backtest, with their baselines."""
    step = timedelta(minutes=5)
    history = History(values=demand(4032, step), step=step)
    decision_us = cpu_us_per_call(decision_call(SeasonalNaive(), history))
    sort_us = cpu_us_per_call(lambda v=history.values: np.sort(v))
    minute = timedelta(minutes=1)
    values = demand(30 * 1440, minute)
    trace = Trace(values, minute, datetime(2026, 11, 2, tzinfo=UTC), np.zeros(len(values), dtype=bool), "30d.csv")
    setup = setup_for(trace, 5)
    the_plan = plan(trace, setup)
    runs = [_timed(lambda: run_backtest(trace, setup)) for _ in range(SPEED_REPEATS)]
    reactive = [_timed(lambda: run_reactive(the_plan, the_plan.reactive_headroom)) for _ in range(SPEED_REPEATS)]
    return Speed(
        decision_us=decision_us,
        sort_us=sort_us,
        backtest_cpu=min(c for _, c in runs),
        backtest_wall=min(w for w, _ in runs),
        reactive_cpu=min(c for _, c in reactive),
    )


RUNS = results.Table(
    (
        "trace",
        "lead",
        "presage",
        "coverage q0.9 / q0.5",
        "decided by",
        "guard off",
        "reactive HPA",
        "HPA, cost-matched",
        "its headroom",
        "static",
        "goal",
        "seasonal trigger",
        "trigger, cost-matched",
        "its utilization",
    )
)
LAYOUT = results.Layout(
    script=Path(__file__),
    machine=("np.sort of 4,032 points, µs CPU", "reactive HPA alone, 30 days at 1m, s CPU"),
    sections=(results.Section("Runs", (RUNS,)), results.Section("Goals"), results.Section("Speed")),
)


def cells(trace: str, lead_min: int, row: Row) -> tuple[object, ...]:
    """One row of the runs table."""
    outcome = row.policies
    return (
        trace,
        f"{lead_min}m",
        outcome["presage"],
        f"{100 * row.target_coverage:.1f} / {100 * row.scale_down_coverage:.1f} %",
        row.decided_by,
        row.guard_off,
        outcome["reactive"],
        outcome["reactive_cost_matched"],
        row.matched_headroom,
        outcome["static"],
        "yes" if row.goal else "no",
        outcome["seasonal_trigger"],
        outcome["seasonal_trigger_cost_matched"],
        row.matched_utilization,
    )


def main() -> int:
    args = arguments((__doc__ or "").split("\n\n")[0], "worker processes")
    if args.check:
        return results.check(LAYOUT)
    paths = csv_traces(args.traces)

    began = time.perf_counter()
    # Longest traces first, so the workers finish together.
    order = sorted(paths, key=lambda p: -p.stat().st_size)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        fulls = {(p, lead): pool.submit(full_run, p, lead) for p in order for lead in LEADS_MIN}
        offs = {(p, lead): pool.submit(guard_off_run, p, lead) for p in order for lead in LEADS_MIN}
        rows = {key: replace(future.result(), guard_off=offs[key].result()) for key, future in fulls.items()}
    elapsed = time.perf_counter() - began
    measured = speed()

    legend = (
        "Default PredictiveScaler and SeasonalNaive (168h × 3), per-replica capacity = p99 / 20, decisions "
        "every max(1m, trace step), 7-day warm-up; the lead time is also the pods' boot delay, rounded up to "
        "whole trace steps. Each policy: under-provisioned time % / unserved demand % / cost vs oracle; the "
        "seasonal trigger: the HPA on max(current demand, the highest of [t − 7d, t − 7d + 30m]) at 75 % target "
        "utilization. "
        "Coverage: how often the sizing window's highest demand was at or below the calibrated q0.9 / q0.5. "
        f"Goal: presage under-provisioned ≤ 1/{GOAL_FACTOR:g} of the cost-matched HPA's or ≤ {GOAL_ABSOLUTE_PCT:g} %."
    )
    table = RUNS.render(cells(p.stem, lead, rows[p, lead]) for p in paths for lead in LEADS_MIN)
    results.write(
        LAYOUT,
        datetime.now(UTC),
        sys.argv[1:],
        (f"{measured.sort_us:.0f}", f"{measured.reactive_cpu:.2f}"),
        {
            "Runs": [
                legend,
                "",
                *table,
                "",
                f"{len(rows)} runs with the default spec and {len(rows)} with the guard off in {elapsed:.0f}s",
            ],
            "Goals": ["The five named traces × 2m, 5m, 10m unless said:", "", *goals(rows, paths)],
            "Speed": measured.lines(),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
