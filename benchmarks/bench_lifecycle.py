"""What a scaler's life costs: the first 60 days of each shared trace (fewer when it is shorter) replayed
as the life of a PredictiveScaler left in Shadow with the API's defaults and ``spec.advice.apply:
WhenProven``, through production's code on a simulated clock (``benchmarks/lifecycle.py``): presage
advise every hour when due (every 24h once advised, 28d lookback, serviceLevel 1 %, with a forecast cache
as the chart's ``advise.cache`` gives it), the advised spec
decided beside the live one and proven on the demand that comes (proveFor 7d), applied when Proven, and
rolled back if it then misses over one day.

Run: ``.venv/bin/python benchmarks/bench_lifecycle.py [TRACES_DIR] [--jobs N]`` (TRACES_DIR defaults to
``../shared/traces`` next to the repository; one process per trace, N at once). Writes
``benchmarks/results/bench_lifecycle.md`` (``--check`` verifies it), under the machine's calibration (one
``presage tune`` of 14 days of one-minute demand, timed in the same run).

Per trace, as ``benchmarks/bench_backtest.py`` and ``benchmarks/bench_tune.py`` set it up: per-replica
capacity = p99 of the replayed demand / 20, ``leadTime.static`` 5m (also the pods' boot delay), a
decision every max(1m, trace step), the default SeasonalNaive backend; the scaler decides from the first
complete point. Columns: the day (from the trace's start) presage advise first wrote the verdict Advised,
the day that advice was Proven on live demand, applied and rolled back; then, over the last 7 days:
under-provisioned time % / cost (replica-hours) vs the oracle, of the life as lived, of the default spec
left alone, and of the seasonal trigger a KEDA user writes by hand (Grafana Mimir's recipe: max(current
demand, the highest of [t − 7d, t − 7d + 30m]) at 75 % target utilization); the life's replica-hours
÷ the default's; the advise runs and the CPU the life took.

Goals, on the traces long enough to reach a Proven advice within the replay (LONG_ENOUGH), Proven or
not: each reached one; over the last 7 days the life costs at most COST_RATIO_LIMIT of the default
spec's replica-hours (geometric mean) and never more than the default on any of them, and is
under-provisioned at most UNDER_LIMIT_PCT of the time on each.
"""

from __future__ import annotations

import math
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bench_backtest
import lifecycle
import results

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import AdviceSpec
from presage_scaler.backtest.baselines import DEFAULT_TRIGGER_UTILIZATION
from presage_scaler.backtest.config import DEFAULT_WARMUP, backend_spec, make_backend, scaler_spec
from presage_scaler.backtest.csv_trace import load_csv
from presage_scaler.backtest.history import HOLDOUT, TRUSTED
from presage_scaler.backtest.runner import Plan, Setup, plan, run_oracle, run_presage, run_trigger
from presage_scaler.backtest.scoring import measure
from presage_scaler.backtest.simulator import Simulation
from presage_scaler.backtest.trace import Trace
from presage_scaler.series.timegrid import steps_for
from presage_scaler.tune.forecast_cache import ForecastCache
from presage_scaler.tune.in_cluster_advisor import AdviseOptions
from presage_scaler.tune.search import Slo
from presage_scaler.tune.tuner import TuneSetup, tune

LEAD = timedelta(minutes=5)
DAYS = timedelta(days=60)
LAST = timedelta(days=7)
COST_RATIO_LIMIT = 0.85
UNDER_LIMIT_PCT = 1.5
"""``benchmarks/bench_tune.py``'s held-out tolerance for a 1 % service level."""
ADVICE = {"apply": "WhenProven"}
"""``spec.advice``: the defaults, and presage applies a Proven advice."""
LONG_ENOUGH = DEFAULT_WARMUP + TRUSTED + HOLDOUT + parse(AdviceSpec, ADVICE, path="spec.advice").prove_for
"""The shortest replay that can reach a Proven advice: presage advise advises a change once it has the
warm-up, TRUSTED to choose on and HOLDOUT held out, and the advice is proven on proveFor after that."""
OPTIONS = AdviseOptions(deadline=timedelta(hours=1))
"""presage advise's flags: its defaults (the deadline never binds on a simulated clock), and a
``--cache-dir`` of the life's own (:func:`run`): each advice forecasts only the days the last one did
not, and chooses as a run without the cache would."""
CALIBRATION_TRACE = "crane_pod_cpu_a_1m"
CALIBRATION_DAYS = 14


@dataclass(frozen=True)
class Figures:
    """One policy over the last LAST of the replay."""

    under_pct: float
    cost: float
    """Replica-hours relative to the oracle's."""
    replica_hours: float

    def __str__(self) -> str:
        return f"{self.under_pct:.2f} % / {self.cost:.2f}×"


@dataclass(frozen=True)
class Lived:
    """One trace's life and what it is compared with."""

    name: str
    days: float
    life: lifecycle.Life
    lived: Figures
    default: Figures
    trigger: Figures
    cpu: float
    """CPU seconds (user + sys) of the whole run of this trace."""

    @property
    def proven(self) -> bool:
        return self.life.first("Proven") is not None

    @property
    def ratio(self) -> float:
        return self.lived.replica_hours / self.default.replica_hours


def first_days(trace: Trace, span: timedelta) -> Trace:
    steps = min(len(trace), steps_for(span, trace.step))
    return replace(trace, values=trace.values[:steps], gaps=trace.gaps[:steps])


def starting_plan(trace: Trace) -> Plan:
    """The default spec with ``spec.advice`` on ``trace``, deciding from its first complete point."""
    spec = scaler_spec(trace, None, bench_backtest.overrides_for(trace, LEAD))
    spec = spec.model_copy(update={"advice": parse(AdviceSpec, ADVICE, path="spec.advice")})
    return plan(trace, Setup(spec=spec, backend=make_backend(backend_spec(None)), warmup=timedelta(0)))


def last_days(the_plan: Plan, simulation: Simulation, oracle: float) -> Figures:
    trace = the_plan.trace
    begin = len(trace) - steps_for(LAST, trace.step)
    metrics = measure(trace.values, simulation, the_plan.per_replica, trace.step, begin)
    return Figures(metrics.under_provisioned_pct, metrics.replica_hours / oracle, metrics.replica_hours)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(path: Path) -> Lived:
    """One trace's life, the default spec left alone and the seasonal trigger, over the same replay."""
    began = cpu_seconds()
    trace = first_days(load_csv(path), DAYS)
    start = starting_plan(trace)
    cluster = lifecycle.Cluster.holding(start.spec.to_wire(), backend_spec(None).to_wire())
    with tempfile.TemporaryDirectory(prefix="presage-advise-cache-") as cache:
        options = replace(OPTIONS, cache=ForecastCache(Path(cache)))
        life = lifecycle.live(trace, start, cluster, lifecycle.production_advisor(options))
    default, _ = run_presage(start)
    oracle = run_oracle(start)
    begin = len(trace) - steps_for(LAST, trace.step)
    oracle_hours = measure(trace.values, oracle, start.per_replica, trace.step, begin).replica_hours
    return Lived(
        name=path.stem,
        days=len(trace) * trace.step / timedelta(days=1),
        life=life,
        lived=last_days(start, life.simulation, oracle_hours),
        default=last_days(start, default, oracle_hours),
        trigger=last_days(start, run_trigger(start, DEFAULT_TRIGGER_UTILIZATION), oracle_hours),
        cpu=cpu_seconds() - began,
    )


def day(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def goals(lived: list[Lived]) -> list[str]:
    """The goal lines, judged on every trace long enough to reach a Proven advice (:data:`LONG_ENOUGH`),
    whether it reached one or not: one that did not is judged on the life it had."""
    judged = [each for each in lived if each.days >= LONG_ENOUGH / timedelta(days=1)]
    proven = [each.name for each in judged if each.proven]
    lines = [
        f"Over the last {LAST.days} days, on the traces long enough to reach a Proven advice (at least "
        f"{LONG_ENOUGH.days} days: the warm-up, {TRUSTED.days} days to choose on, {HOLDOUT.days} held out, then "
        f"proveFor): {', '.join(each.name for each in judged) or 'none'}; Proven on {', '.join(proven) or 'none'}",
        "",
    ]

    def check(ok: bool, text: str) -> None:
        lines.append(f"- {'met' if ok else 'NOT met'}: {text}")

    if not judged:
        return [*lines, "- NOT met: no trace is long enough to reach a Proven advice, so no goal can be judged"]
    unproven = [each.name for each in judged if not each.proven]
    check(not unproven, "each reached a Proven advice" + (f" (not {', '.join(unproven)})" if unproven else ""))
    mean = geometric_mean([each.ratio for each in judged])
    check(
        mean <= COST_RATIO_LIMIT,
        f"replica-hours ≤ {COST_RATIO_LIMIT}× the default spec's, geometric mean ({mean:.3f}×)",
    )
    dearer = [f"{each.name} {each.ratio:.3f}×" for each in judged if each.ratio > 1.0]
    worst = max(judged, key=lambda each: each.ratio)
    check(
        not dearer,
        "never more replica-hours than the default spec's"
        + (f" (more on {', '.join(dearer)})" if dearer else f" (highest {worst.name}: {worst.ratio:.3f}×)"),
    )
    under = max(judged, key=lambda each: each.lived.under_pct)
    check(
        under.lived.under_pct <= UNDER_LIMIT_PCT,
        f"under-provisioned ≤ {UNDER_LIMIT_PCT:g} % of the time on each (worst {under.name}: "
        f"{under.lived.under_pct:.2f} %)",
    )
    return lines


def story(each: Lived) -> str:
    """One line: what happened to the advice, day by day."""
    events = ", ".join(f"day {each.life.day(event.at):.1f} {event.what}" for event in each.life.events)
    return f"- {each.name}: {events or 'no advice written'}"


RUNS = results.Table(
    (
        "trace",
        "days",
        "first Advised",
        "Proven",
        "applied",
        "rolled back",
        "life, last 7 days",
        "default spec",
        "seasonal trigger 75 %",
        "life ÷ default",
        "advise runs",
        "CPU",
    )
)
LAYOUT = results.Layout(
    script=Path(__file__),
    machine=(f"presage tune of {CALIBRATION_DAYS} days at 1m, CPU s",),
    sections=(results.Section("Runs", (RUNS,)), results.Section("What happened"), results.Section("Goals")),
)


def row(each: Lived) -> tuple[object, ...]:
    life = each.life
    return (
        each.name,
        f"{each.days:.0f}",
        day(life.day(life.first("Advised"))),
        day(life.day(life.first("Proven"))),
        day(life.day(life.first("Applied"))),
        day(life.day(life.first("RolledBack"))),
        each.lived,
        each.default,
        each.trigger,
        f"{each.ratio:.3f}",
        life.advice_runs,
        f"{each.cpu:.0f} s",
    )


def calibration(traces: Path) -> str:
    """One tuning of CALIBRATION_DAYS of a one-minute trace, CPU seconds: how fast the machine was."""
    path = traces / f"{CALIBRATION_TRACE}.csv"
    if not path.exists():
        return "—"
    trace = first_days(load_csv(path), timedelta(days=CALIBRATION_DAYS))
    setup = TuneSetup(
        spec=None, overrides=bench_backtest.overrides_for(trace, LEAD), backend=backend_spec(None), slo=Slo(1.0)
    )
    began = cpu_seconds()
    tune(trace, setup)
    return f"{cpu_seconds() - began:.1f}"


def main() -> int:
    args = bench_backtest.arguments((__doc__ or "").split("\n\n")[0], "traces replayed at once")
    if args.check:
        return results.check(LAYOUT)
    paths = bench_backtest.csv_traces(args.traces)
    began = time.perf_counter()
    order = sorted(paths, key=lambda p: -p.stat().st_size)  # the longest first, so that the workers end together
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {path: pool.submit(run, path) for path in order}
        lived = [futures[path].result() for path in paths]
    elapsed = time.perf_counter() - began
    measured = calibration(args.traces)
    legend = (
        f"Default PredictiveScaler with spec.advice.apply WhenProven (every 24h, lookback 28d, proveFor 7d, "
        f"serviceLevel 1%), SeasonalNaive (168h × 3), per-replica capacity = p99 / {bench_backtest.REPLICAS_AT_P99}, "
        f"lead time {LEAD.seconds // 60}m (also the boot delay), decisions every max(1m, trace step), presage "
        f"advise hourly when due. Days from the trace's start. Last {LAST.days} days: under-provisioned time % / "
        "cost vs the oracle; life ÷ default: replica-hours."
    )
    results.write(
        LAYOUT,
        datetime.now(UTC),
        sys.argv[1:],
        (measured,),
        {
            "Runs": [
                legend,
                "",
                *RUNS.render(row(each) for each in lived),
                "",
                f"{len(lived)} lives in {elapsed:.0f} s wall, {args.jobs} at once, "
                f"{sum(each.cpu for each in lived):.0f} CPU-s in all",
            ],
            "What happened": [story(each) for each in lived],
            "Goals": goals(lived),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
