"""presage against reactive scaling and the oracle on every real trace, at lead times of 2, 5 and 10 min.

Run: ``.venv/bin/python benchmarks/backtest_traces.py [TRACES_DIR] [--jobs N]`` (TRACES_DIR defaults
to ``../shared/traces`` next to the repository). Prints Markdown for the README: the date and the
exact command first, then one row per trace and lead time.

Per run: the default PredictiveScaler spec (the API's defaults, ``--per-replica`` = p99 of demand /
20, ``leadTime.static`` = the lead time, which is also the pods' boot delay) and the default
SeasonalNaive backend (168h × 3 cycles), a decision every minute (or every trace step when coarser),
a 7-day warm-up. Columns:

* under-provisioned time %, unserved demand % and cost (replica-hours) relative to the oracle, for
  presage, the reactive HPA (same headroom as presage, 10 %), the HPA with its headroom raised until
  it costs what presage costs, and the oracle;
* goal: presage's under-provisioned time is at most 1/5 of the cost-matched HPA's;
* best q: of the targetQuantile grid, the one with the least under-provisioned time among those
  within 1.25× the oracle's cost and at most 1 % under-provisioned time ("none" if none is).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from presage_scaler.backtest.config import Overrides, backend_spec, make_backend, scaler_spec
from presage_scaler.backtest.runner import Setup, metrics_of, plan, run_backtest, run_presage
from presage_scaler.backtest.trace import Trace, load_csv

LEADS_MIN = (2, 5, 10)
QUANTILES = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
DEFAULT_Q = 0.9
REPLICAS_AT_P99 = 20
GOAL_FACTOR = 5.0
COST_LIMIT = 1.25
UNDER_LIMIT_PCT = 1.0
DEFAULT_TRACES = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"


@dataclass(frozen=True)
class Outcome:
    under_pct: float
    unserved_pct: float
    cost: float
    """Replica-hours relative to the oracle's."""

    def __str__(self) -> str:
        return f"{self.under_pct:.2f} / {self.unserved_pct:.3f} / {self.cost:.2f}×"


@dataclass
class Row:
    """One trace at one lead time."""

    policies: dict[str, Outcome]
    matched_headroom: str
    oracle_hours: float
    grid: dict[float, Outcome] = field(default_factory=dict)

    @property
    def goal(self) -> bool:
        return self.policies["presage"].under_pct <= self.policies["reactive_cost_matched"].under_pct / GOAL_FACTOR

    def best_quantile(self) -> str:
        """The grid's best targetQuantile under the cost and under-provisioning limits."""
        fits = [
            (o.under_pct, o.cost, q)
            for q, o in sorted(self.grid.items())
            if o.cost <= COST_LIMIT and o.under_pct <= UNDER_LIMIT_PCT
        ]
        if not fits:
            return "none"
        under, cost, q = min(fits)
        return f"{q:g} ({under:.2f} %, {cost:.2f}×)"


def setup_for(trace: Trace, lead_min: int, quantile: float) -> Setup:
    per_replica = float(np.percentile(trace.values, 99)) / REPLICAS_AT_P99
    overrides = Overrides(
        per_replica=per_replica,
        lead_time=timedelta(minutes=lead_min),
        target_quantile=None if quantile == DEFAULT_Q else quantile,
    )
    return Setup(spec=scaler_spec(trace, None, overrides), backend=make_backend(backend_spec(None)))


def full_run(path: Path, lead_min: int) -> Row:
    """All four policies with the default spec."""
    trace = load_csv(path)
    result = run_backtest(trace, setup_for(trace, lead_min, DEFAULT_Q))
    policies = {
        name: Outcome(p.metrics.under_provisioned_pct, p.metrics.unserved_pct, result.cost_vs_oracle(name))
        for name, p in result.policies.items()
    }
    row = Row(
        policies=policies,
        matched_headroom=str(result.policies["reactive_cost_matched"].headroom),
        oracle_hours=result.policies["oracle"].metrics.replica_hours,
    )
    row.grid[DEFAULT_Q] = policies["presage"]
    return row


def presage_only(path: Path, lead_min: int, quantile: float) -> tuple[float, float, float]:
    """presage with another targetQuantile: under-provisioned %, unserved %, replica-hours."""
    trace = load_csv(path)
    the_plan = plan(trace, setup_for(trace, lead_min, quantile))
    simulation, _ = run_presage(the_plan)
    metrics = metrics_of(the_plan, simulation)
    return metrics.under_provisioned_pct, metrics.unserved_pct, metrics.replica_hours


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("traces", nargs="?", type=Path, default=DEFAULT_TRACES, help="directory of CSV traces")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    args = parser.parse_args()
    paths = sorted(args.traces.glob("*.csv"))
    if not paths:
        print(f"no CSV traces in {args.traces}", file=sys.stderr)
        return 2

    began = time.perf_counter()
    # Longest traces first, so the workers finish together.
    order = sorted(paths, key=lambda p: -p.stat().st_size)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        fulls = {(p, lead): pool.submit(full_run, p, lead) for p in order for lead in LEADS_MIN}
        grid = {
            (p, lead, q): pool.submit(presage_only, p, lead, q)
            for p in order
            for lead in LEADS_MIN
            for q in QUANTILES
            if q != DEFAULT_Q
        }
        rows = {key: future.result() for key, future in fulls.items()}
        for (p, lead, q), future in grid.items():
            under, unserved, hours = future.result()
            rows[p, lead].grid[q] = Outcome(under, unserved, hours / rows[p, lead].oracle_hours)

    print(f"presage backtest benchmark, {datetime.now(UTC):%Y-%m-%d}\n")
    print(f"    {shlex.join(['.venv/bin/python', 'benchmarks/backtest_traces.py', *sys.argv[1:]])}\n")
    print(
        "Default PredictiveScaler and SeasonalNaive (168h × 3), per-replica capacity = p99 / 20, decisions "
        "every max(1m, trace step), 7-day warm-up; the lead time is also the pods' boot delay, rounded up to "
        "whole trace steps. Each policy: under-provisioned time % / unserved demand % / cost vs oracle. "
        f"Goal: presage under-provisioned ≤ 1/{GOAL_FACTOR:g} of the cost-matched HPA's. Best q: targetQuantile "
        f"in {', '.join(f'{q:g}' for q in QUANTILES)} with the least under-provisioned time within "
        f"{COST_LIMIT:g}× the oracle's cost and ≤ {UNDER_LIMIT_PCT:g} % under-provisioned time.\n"
    )
    print("| trace | lead | presage | reactive HPA | HPA, cost-matched | its headroom | oracle | goal | best q |")
    print("|---|---|---|---|---|---|---|---|---|")
    for p in paths:
        for lead in LEADS_MIN:
            row = rows[p, lead]
            outcome = row.policies
            print(
                f"| {p.stem} | {lead}m | {outcome['presage']} | {outcome['reactive']} | "
                f"{outcome['reactive_cost_matched']} | {row.matched_headroom} | {outcome['oracle']} | "
                f"{'yes' if row.goal else 'no'} | {row.best_quantile()} |"
            )
    grid_runs = len(rows) * (len(QUANTILES) - 1)
    print(f"\n{len(rows)} runs and {grid_runs} targetQuantile runs in {time.perf_counter() - began:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
