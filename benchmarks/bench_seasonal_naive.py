"""CPU time of one SeasonalNaive forecast and of one full decision, against ``np.mean``.

A full decision is the forecast plus :func:`presage_scaler.engine.evaluator.decide` (policy, breakdown,
signal statuses and lastForecast) for a default single-signal PredictiveScaler: everything one
evaluation does except the I/O.

Run: ``.venv/bin/python benchmarks/bench_seasonal_naive.py``; writes
``benchmarks/results/bench_seasonal_naive.md`` (``--check`` verifies it), each case beside ``np.mean``
of its points timed in the same run. The target is under 1 ms per forecast at 4,032 points (14 days
at 5m). Horizon is 4× a 5-minute lead (20 minutes), quantiles (0.5, 0.9).
Times are ``time.process_time`` over a batch of calls, best of several batches, so other load on
the machine inflates them less than wall time would.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import results

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.backends.base import History
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.engine.evaluator import SignalData, decide, forecast_requests, signal_specs
from presage_scaler.engine.leadtime import resolve_lead_time
from presage_scaler.engine.policy import PolicyState

LEAD = timedelta(minutes=5)
QUANTILES = (0.5, 0.9)
TARGET_US = 1000.0
CASES = [
    # (label, points, step, season)
    ("14d at 5m, season 168h", 4032, timedelta(minutes=5), timedelta(hours=168)),
    ("14d at 5m, season 24h", 4032, timedelta(minutes=5), timedelta(hours=24)),
    ("14d at 1m, season 168h", 20160, timedelta(minutes=1), timedelta(hours=168)),
    ("14d at 1m, season 24h", 20160, timedelta(minutes=1), timedelta(hours=24)),
    ("2.8d at 1m, season 168h", 4032, timedelta(minutes=1), timedelta(hours=168)),
]


def demand(points: int, step: timedelta) -> np.ndarray:
    """A non-negative series with a daily and a weekly cycle and noise."""
    hours = np.arange(points) * (step / timedelta(hours=1))
    rng = np.random.default_rng(0)
    daily = 1 + 0.6 * np.sin(2 * np.pi * hours / 24)
    weekly = 1 + 0.2 * np.sin(2 * np.pi * hours / 168)
    return np.maximum(0.0, 200 * daily * weekly + rng.normal(0, 15, size=points))


def cpu_us_per_call(call: Callable[[], object], batches: int = 5, target_s: float = 0.2) -> float:
    """Microseconds of CPU per call: best of ``batches`` batches sized to take ``target_s`` each."""
    calls = 1
    while True:
        start = time.process_time()
        for _ in range(calls):
            call()
        if time.process_time() - start >= target_s / 10:
            break
        calls *= 4
    calls = max(1, int(calls * target_s / max(time.process_time() - start, 1e-9)))
    best = float("inf")
    for _ in range(batches):
        start = time.process_time()
        for _ in range(calls):
            call()
        best = min(best, (time.process_time() - start) / calls)
    return best * 1e6


NOW = datetime(2026, 11, 30, tzinfo=UTC)


def decision_call(backend: SeasonalNaive, history: History) -> Callable[[], object]:
    """One full decision (forecast + evaluator.decide) on ``history``, as a closure to time."""
    spec = parse(
        PredictiveScalerSpec,
        {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "signal": {
                "prometheus": {"address": "http://p:9090", "query": "q"},
                "resolution": f"{history.step.seconds}s",
            },
            "capacity": {"perReplica": 20},
            "leadTime": {"static": "5m"},
            "policy": {"maxReplicas": 1000},
        },
    )
    lead = resolve_lead_time(spec.lead_time)
    data = [SignalData(spec=signal_specs(spec)[0], history=history, gap_steps=0, capacity=20.0)]
    [request] = forecast_requests(spec, data, lead.value, backend.max_horizon)

    def call() -> object:
        forecast = backend.forecast_one(request.history, request.horizon, request.quantiles, request.hindcast)
        return decide(spec, data, [forecast], backend.identity, lead, 10, PolicyState(), NOW)

    return call


CASES_TABLE = results.Table(
    ("case", "points", "horizon", "method", "forecast µs", "decision µs", "np.mean µs", "forecast / np.mean")
)
LAYOUT = results.Layout(
    script=Path(__file__),
    machine=(f"np.mean of {CASES[0][1]:,} points, µs CPU",),
    sections=(results.Section("Cases", (CASES_TABLE,)),),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    results.add_check_argument(parser)
    if parser.parse_args().check:
        return results.check(LAYOUT)
    rows = []
    means = []
    slowest_at_4032 = 0.0
    for label, points, step, season in CASES:
        backend = SeasonalNaive(season=season, cycles=3)
        history = History(values=demand(points, step), step=step)
        horizon = 4 * round(LEAD / step)
        method = backend.forecast_one(history, horizon, QUANTILES).method or "seasonal-naive"
        forecast_us = cpu_us_per_call(lambda b=backend, h=history, n=horizon: b.forecast_one(h, n, QUANTILES))
        decision_us = cpu_us_per_call(decision_call(backend, history))
        mean_us = cpu_us_per_call(lambda v=history.values: np.mean(v))
        means.append(mean_us)
        if points == 4032:
            slowest_at_4032 = max(slowest_at_4032, forecast_us)
        rows.append(
            (
                label,
                points,
                horizon,
                method,
                f"{forecast_us:.1f}",
                f"{decision_us:.1f}",
                f"{mean_us:.1f}",
                f"{forecast_us / mean_us:.1f}",
            )
        )
    verdict = "meets" if slowest_at_4032 < TARGET_US else "MISSES"
    results.write(
        LAYOUT,
        datetime.now(UTC),
        sys.argv[1:],
        (f"{means[0]:.1f}",),
        {
            "Cases": [
                f"Horizon 4 × a {LEAD.seconds // 60}-minute lead, quantiles {QUANTILES}; µs of CPU per call, best "
                "of several batches.",
                "",
                *CASES_TABLE.render(rows),
                "",
                f"slowest at 4,032 points: {slowest_at_4032:.1f} µs per forecast, {verdict} the "
                f"{TARGET_US:.0f} µs target",
            ]
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
