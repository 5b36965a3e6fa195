"""What a daily re-advice costs with ``presage advise --cache-dir``, against the first advice.

Per one-minute trace of the shared traces long enough for two runs a day apart: the scaler's stored
spec is the default PredictiveScaler spec (Shadow, so advised with ``spec.advice``'s defaults: a
28-day lookback) with ``bench_backtest``'s per-replica capacity (p99 / 20) and a 5-minute lead time,
fixed once for the trace as a stored spec is. Two advice runs are made through production's
:func:`presage_scaler.tune.in_cluster_advisor.advice_from`, the function ``presage advise`` calls per
scaler after its reads, each on what its reads would return
(:func:`presage_scaler.tune.read_window.read_span` before it, from the trace's start where that is
later): the last runs the trace holds a day apart, ending at the same time of day (``END_OF_DAY``
past a trace day, so that the runs end in the middle of a day, as a CronJob's runs do). The shared
traces are shorter than one advice's read, so they measure a scaler younger than that, whose
history starts at its first sample; a scaler with all of it is measured on the longest trace
continued by itself (:func:`continued`), which only speed is read from.

* **cold**: the first advice, with an empty cache directory (what every advice costs without one);
* **warm**: the advice a day later, from the cache the first one left, its previous ``status.advice``
  the first one's;
* **cold again**: the same second advice from an empty cache, which the warm one must equal field for
  field (``status.advice`` as written, the figures and choice included);
* **every chunk taken**: the same second advice once more, from every chunk the cold one made held in
  memory (those a file does not keep included): what an advice costs besides forecasting, the least a
  warm one can cost.

CPU is ``time.process_time`` of each call (this process; ``--jobs`` 1, as the chart runs advise), so
other load on the machine inflates it less than wall time would, the least of ``REPEATS`` calls from the
same cache: a process's first touches of memory it never used cost kernel time that varies from call to
call, and a long-lived advise pod advising scaler after scaler pays them once. Chunks: forecast chunks the run made
/ those it used. The speed goal is the issue's: a warm daily re-advice at 28 days of one-minute
history within WARM_LIMIT CPU-s per scaler.

Run: ``.venv/bin/python benchmarks/bench_readvice.py [TRACES_DIR]``; writes
``benchmarks/results/bench_readvice.md`` (``--check`` verifies it without running).
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bench_backtest
import numpy as np
import results
from bench_seasonal_naive import cpu_us_per_call, demand

from presage_scaler.backtest.config import backend_spec, scaler_spec
from presage_scaler.backtest.csv_trace import load_csv
from presage_scaler.backtest.trace import Trace
from presage_scaler.tune.forecast_cache import ForecastCache, ForecastStore, cache_name
from presage_scaler.tune.in_cluster_advisor import AdviseOptions, advice_from, read_span_of

LEAD = timedelta(minutes=5)
END_OF_DAY = timedelta(hours=10)
WARM_LIMIT = 5.0
"""CPU-s a warm daily re-advice may take per scaler at 28 days of one-minute history."""
REPEATS = 3
"""Calls of each advice; its CPU is the least of them."""
CONTINUED_BY = timedelta(days=21)
"""How far back a continued trace repeats itself: whole weeks, so that each weekday follows its own."""
ONE_MINUTE = timedelta(minutes=1)
OPTIONS = AdviseOptions(deadline=timedelta(hours=1))


@dataclass(frozen=True)
class Run:
    cpu: float
    made: int
    used: int
    body: dict[str, Any]
    kept: int
    """Bytes of the scaler's cache file after the run."""
    store: ForecastStore


@dataclass(frozen=True)
class Measured:
    trace: str
    window: timedelta
    """What the second run read."""
    cold: Run
    warm: Run
    floor: Run
    same: bool
    verdict: str

    @property
    def ratio(self) -> float:
        return self.cold.cpu / self.warm.cpu


def window(trace: Trace, begin: int, end: int) -> Trace:
    return replace(
        trace, values=trace.values[begin:end], gaps=trace.gaps[begin:end], start=trace.start + begin * trace.step
    )


def continued(trace: Trace, days: int, name: str) -> Trace:
    """``trace`` continued to ``days`` days, each step after its end repeating the step CONTINUED_BY
    before it (the same weekday and time): a history as long as one advice reads, for its speed alone."""
    total, back = int(timedelta(days=days) / trace.step), int(CONTINUED_BY / trace.step)
    values, gaps = np.resize(trace.values, total), np.resize(trace.gaps, total)
    for step in range(len(trace), total):
        values[step], gaps[step] = values[step - back], gaps[step - back]
    return replace(trace, values=values, gaps=gaps, source=name)


class Cluster:
    """One scaler as stored, and the cache ``presage advise --cache-dir`` keeps for it."""

    def __init__(self, trace: Trace, directory: Path) -> None:
        spec = scaler_spec(trace, None, bench_backtest.overrides_for(trace, LEAD)).to_wire()
        metadata = {"name": "web", "namespace": "shop", "uid": "bench", "generation": 1}
        self.obj: dict[str, Any] = {"metadata": metadata, "spec": spec, "status": {}}
        self.backend = backend_spec(None).to_wire()
        self.cache = ForecastCache(directory)

    def read_span(self) -> int:
        """Trace steps one advice reads (presage advise's read, :func:`presage_scaler.tune.read_window.read_span`)."""
        return int(read_span_of(self.obj, self.backend, OPTIONS.warmup) / ONE_MINUTE)

    def advise(self, trace: Trace, *, cached: bool, holding: ForecastStore | None = None) -> Run:
        """One advice at the end of ``trace``, from the cache when ``cached`` (else from nothing; from
        ``holding`` alone when given), REPEATS times from the same cache: its CPU is the least of them;
        the cache then holds what the advice kept."""
        if not cached:
            self.cache.save(cache_name(self.obj["metadata"]), ForecastStore())  # an empty cache
        files = {path: path.read_bytes() for path in self.cache.directory.glob("*.npz")}
        runs = []
        for _ in range(REPEATS):
            for path, data in files.items():
                path.write_bytes(data)
            store: list[ForecastStore] = []
            cache = _Watched(self.cache.directory, self.cache.max_bytes, store, holding)
            now = trace.start + len(trace) * trace.step
            began = time.process_time()
            body, _ = advice_from(trace, self.obj, self.backend, replace(OPTIONS, cache=cache), now)
            runs.append((time.process_time() - began, body, store[0]))
        cpu, body, made = min(runs, key=lambda run: run[0])
        assert all(other == body for _, other, _ in runs)
        kept = sum(path.stat().st_size for path in self.cache.directory.glob("*.npz"))
        return Run(cpu, made.made, made.used, body, kept, made)


@dataclass(frozen=True)
class _Watched(ForecastCache):
    """The cache, handing the store it loads to the benchmark for its counts; or, ``holding`` given, a
    store of those chunks in memory alone (nothing read or written)."""

    seen: list[ForecastStore] | None = None
    holding: ForecastStore | None = None

    def load(self, scaler: str) -> ForecastStore:
        found = super().load(scaler) if self.holding is None else ForecastStore(chunks=dict(self.holding.chunks))
        assert self.seen is not None
        self.seen.append(found)
        return found

    def save(self, scaler: str, store: ForecastStore) -> None:
        if self.holding is None:
            super().save(scaler, store)


def measure(trace: Trace, name: str, spec_from: Trace) -> Measured | None:
    """The two runs on ``trace``, for a scaler whose stored spec is derived from ``spec_from``."""
    day, into = int(timedelta(days=1) / trace.step), int(END_OF_DAY / trace.step)
    today = (len(trace) - into) // day * day + into  # the last run's step
    if today - day <= into:
        return None
    with tempfile.TemporaryDirectory() as directory:
        cluster = Cluster(spec_from, Path(directory))
        span = cluster.read_span()
        first = cluster.advise(window(trace, max(0, today - day - span), today - day), cached=False)
        cluster.obj["status"] = {"advice": first.body}
        read = window(trace, max(0, today - span), today)
        warm = cluster.advise(read, cached=True)
        cold = cluster.advise(read, cached=False)
        floor = cluster.advise(read, cached=True, holding=cold.store)
    print(f"{name}: cold {cold.cpu:.1f} CPU-s, warm {warm.cpu:.1f}, every chunk taken {floor.cpu:.1f}", flush=True)
    same = warm.body == cold.body == floor.body
    return Measured(name, len(read) * trace.step, cold, warm, floor, same, str(warm.body.get("verdict")))


RUNS = results.Table(
    (
        "trace",
        "read",
        "cold CPU-s",
        "cold chunks made/used",
        "warm CPU-s",
        "warm chunks made/used",
        "cold / warm",
        "every chunk taken CPU-s",
        "warm = cold",
        "cache file MiB",
        "verdict",
    )
)
LAYOUT = results.Layout(
    script=Path(__file__),
    machine=("np.mean of 4,032 points, µs CPU",),
    sections=(results.Section("Runs", (RUNS,)), results.Section("Goals")),
)


def _days(span: timedelta) -> str:
    return f"{span / timedelta(days=1):.2f}d"


def row(each: Measured) -> tuple[object, ...]:
    return (
        each.trace,
        _days(each.window),
        f"{each.cold.cpu:.1f}",
        f"{each.cold.made}/{each.cold.used}",
        f"{each.warm.cpu:.1f}",
        f"{each.warm.made}/{each.warm.used}",
        f"{each.ratio:.2f}×",
        f"{each.floor.cpu:.1f}",
        "yes" if each.same else "NO",
        f"{each.warm.kept / 2**20:.1f}",
        each.verdict,
    )


def goals(measured: list[Measured], whole: Measured) -> list[str]:
    met = whole.warm.cpu <= WARM_LIMIT
    return [
        f"- warm daily re-advice ≤ {WARM_LIMIT:g} CPU-s per scaler at the default lookback (28 days) of one-minute "
        f"history, reading the {_days(whole.window)} before it ({whole.trace}): {whole.warm.cpu:.1f} CPU-s, the "
        f"first (cold) advice {whole.cold.cpu:.1f} CPU-s, with every chunk taken {whole.floor.cpu:.1f} CPU-s: "
        f"{'met' if met else 'not met'}",
        f"- a warm re-advice writes the same status.advice as one from nothing, on every trace: "
        f"{'met' if all(m.same for m in measured) else 'not met'}",
    ]


def main() -> int:
    bench_backtest.as_the_commands_run()
    args = bench_backtest.arguments((__doc__ or "").split("\n\n")[0], "unused: advise runs with one process")
    if args.check:
        return results.check(LAYOUT)
    points = demand(4032, timedelta(minutes=5))
    mean_us = cpu_us_per_call(lambda: points.mean())
    loaded = {path.name: load_csv(path) for path in sorted(args.traces.glob("*.csv"))}
    traces = {name: trace for name, trace in loaded.items() if trace.step == ONE_MINUTE}
    measured = [m for name, trace in traces.items() if (m := measure(trace, name, trace)) is not None]
    if not measured:
        print(f"no one-minute trace in {args.traces} is long enough for two runs a day apart", file=sys.stderr)
        return 1
    longest = max(measured, key=lambda m: m.window).trace
    days = math.ceil(Cluster(traces[longest], Path()).read_span() * ONE_MINUTE / timedelta(days=1)) + 2
    name = f"{longest} continued to {days}d"
    whole = measure(continued(traces[longest], days, name), name, traces[longest])
    assert whole is not None
    measured.append(whole)
    text = [
        "Default PredictiveScaler spec (Shadow, spec.advice's defaults), per-replica capacity p99 / "
        f"{bench_backtest.REPLICAS_AT_P99}, lead time {LEAD.total_seconds() / 60:g}m; each run on what its reads "
        "would return (read: the history it holds), the second a day after the first, both ending "
        f"{END_OF_DAY.total_seconds() / 3600:g}h into a day. A trace continued: each step after its end repeats "
        f"the one {CONTINUED_BY.days} days before it, for a history as long as one advice reads. CPU-s: process "
        "time of one advice (production's advice_from, one process). Chunks: forecast chunks made / used. Every "
        "chunk taken: the second advice again with every chunk the cold one made in memory, the least a warm one "
        "costs. Cache file: what the warm run kept for the next.",
        "",
        *RUNS.render(row(m) for m in measured),
    ]
    results.write(
        LAYOUT,
        datetime.now(UTC),
        sys.argv[1:],
        (f"{mean_us:.1f}",),
        {"Runs": text, "Goals": goals(measured, whole)},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
