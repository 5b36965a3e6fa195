"""The bookkeeping of a scaler's simulated life (``benchmarks/lifecycle.py``): presage advise's runs on the
simulated clock, the advised spec proven on the demand that comes, applied under ``WhenProven`` and rolled
back after a live miss, through production's rules. The advisor is made up here (what presage advise would
write), so that nothing tunes; everything after it is production's code on a short trace."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.api.parse import parse
from presage_scaler.backtest.config import Overrides, make_backend, scaler_spec
from presage_scaler.backtest.runner import Plan, Setup, plan, run_presage
from presage_scaler.backtest.trace import Trace
from presage_scaler.tune.errors import HistoryTooShort

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
START = datetime(2026, 3, 2, tzinfo=UTC)
STEP = timedelta(minutes=5)
PER_STEP = 12 * 24
BACKEND = {"type": "SeasonalNaive", "seasonalNaive": {"season": "24h", "cycles": 1}}
PATCH = json.dumps({"spec": {"policy": {"headroom": "0%"}}}, separators=(",", ":"))
ADVICE = {"apply": "WhenProven", "proveFor": "6h", "every": "24h"}


@pytest.fixture(scope="module")
def lifecycle() -> Iterator[ModuleType]:
    """``benchmarks/lifecycle.py``, imported as ``benchmarks/bench_lifecycle.py`` imports it."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("lifecycle")
    finally:
        sys.path.remove(str(BENCHMARKS))


def daily(days: int, jumps_from: float | None = None) -> Trace:
    """A smooth daily cycle between 100 and 300 at 5 minutes; from ``jumps_from`` (days) on, demand jumps
    by half every half hour, four times (a rise no forecast of yesterday's cycle sees)."""
    steps = days * PER_STEP
    t = np.arange(steps)
    values = 200.0 + 100.0 * np.sin(2 * np.pi * t / PER_STEP)
    if jumps_from is not None:
        jumps = np.clip((t - int(jumps_from * PER_STEP)) // 6 + 1, 0, 4)
        values = values * 1.5**jumps
    return Trace(values, STEP, START, np.zeros(steps, dtype=bool), "daily.csv")


def starting(trace: Trace) -> Plan:
    spec = scaler_spec(trace, None, Overrides(per_replica=10.0, lead_time=STEP))
    wire = {**spec.to_wire(), "advice": ADVICE}
    spec = scaler_spec(trace, wire, Overrides())
    backend = make_backend(parse(ForecastBackendSpec, BACKEND, path="spec"))
    return plan(trace, Setup(spec=spec, backend=backend, warmup=timedelta(0)))


def cluster_for(lifecycle: ModuleType, start: Plan) -> Any:
    return lifecycle.Cluster.holding(start.spec.to_wire(), BACKEND)


def advising(patch: str, *, always: bool = False) -> Any:
    """An advisor that advises ``patch`` for the spec as it was first (``always``: for every spec), and
    keeps any later spec."""

    def advisor(history: Trace, obj: dict[str, Any], backend: dict[str, Any], now: datetime) -> dict[str, Any]:
        generation = obj["metadata"]["generation"]
        body: dict[str, Any] = {"observedGeneration": generation, "time": now.isoformat(), "error": None}
        if generation == 1 or always:
            return {**body, "verdict": "Advised", "patch": patch, "message": "Advised: made up"}
        return {**body, "verdict": "Keep", "patch": None, "live": None, "message": "Keep: made up"}

    return advisor


def test_an_advice_met_live_is_proven_then_applied(lifecycle: ModuleType) -> None:
    trace = daily(3)
    start = starting(trace)
    cluster = cluster_for(lifecycle, start)
    life = lifecycle.live(trace, start, cluster, advising(PATCH))
    assert [event.what for event in life.events] == ["Advised", "Proven", "Applied", "Keep"]
    advised, proven, applied = (life.first(what) for what in ("Advised", "Proven", "Applied"))
    assert advised == START + lifecycle.ADVISOR_PERIOD
    assert timedelta(hours=6) <= proven - advised <= timedelta(hours=6, minutes=10)
    assert timedelta(0) <= applied - proven <= STEP
    assert cluster.generation == 2 and cluster.obj["spec"]["policy"]["headroom"] == "0%"
    record = cluster.obj["status"]["advice"]["applied"]
    assert record["patch"] == PATCH and "rolledBack" not in record and record["samples"] > 0
    # The life is the starting spec's until the apply, and spends less after it.
    alone, _ = run_presage(start)
    until = (applied - START) // STEP
    assert np.array_equal(life.simulation.desired[:until], alone.desired[:until])
    assert life.simulation.desired[until + 2 :].sum() < alone.desired[until + 2 :].sum()


def test_a_miss_after_the_apply_restores_the_spec_and_fails_the_advice(lifecycle: ModuleType) -> None:
    trace = daily(2, jumps_from=0.5)
    start = starting(trace)
    cluster = cluster_for(lifecycle, start)
    life = lifecycle.live(trace, start, cluster, advising(PATCH, always=True))
    whats = [event.what for event in life.events]
    assert whats.index("Advised") < whats.index("Proven") < whats.index("Applied") < whats.index("RolledBack")
    assert whats.count("Applied") == 1  # a rolled-back patch, advised again, is never applied again
    rolled = life.first("RolledBack")
    assert START + timedelta(days=0.5) < rolled < START + timedelta(days=0.5, hours=2)
    assert cluster.generation == 3
    assert cluster.obj["spec"]["policy"].get("headroom") == start.spec.to_wire()["policy"].get("headroom")
    advice = cluster.obj["status"]["advice"]
    assert advice["applied"]["rolledBack"] and advice["applied"]["misses"] > 0


@pytest.mark.parametrize(
    ("error", "noted"),
    [(ValueError, "AdviceFailed"), (HistoryTooShort, "WaitingForHistory")],
    ids=["failed", "waiting"],
)
def test_a_failing_advise_is_retried_hourly_and_noted_once(
    lifecycle: ModuleType, error: type[Exception], noted: str
) -> None:
    trace = daily(1)
    start = starting(trace)
    cluster = cluster_for(lifecycle, start)

    def failing(history: Trace, obj: dict[str, Any], backend: dict[str, Any], now: datetime) -> dict[str, Any]:
        raise error(f"only {len(history)} points")

    life = lifecycle.live(trace, start, cluster, failing)
    assert [event.what for event in life.events] == [noted]
    assert life.advice_runs == 23  # every hour after the first, within the day
    assert cluster.obj["status"]["advice"]["error"].startswith("only ")
    assert cluster.generation == 1


def test_a_read_returns_the_span_before_now(lifecycle: ModuleType) -> None:
    trace = daily(3)
    read = lifecycle.history_before(trace, 2 * PER_STEP, timedelta(days=1))
    assert len(read) == PER_STEP and read.start == START + timedelta(days=1)
    assert read.values[-1] == trace.values[2 * PER_STEP - 1]
    assert len(lifecycle.history_before(trace, 10, timedelta(days=1))) == 10
