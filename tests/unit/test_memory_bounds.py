"""Memory bounded by design: the row-blocked hindcasts, quantiles and measurements give exactly the
numbers computed whole; a run estimated to exceed its budget is refused before it reads or allocates,
with the figure; and a tune over days of fine-resolution history stays within a bound."""

from __future__ import annotations

import tracemalloc
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.backends.base import ForecastRequest, HindcastRequest, History
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.backtest.config import Overrides, backend_spec
from presage_scaler.backtest.memory import (
    CHUNK_BYTES,
    DEFAULT_MEMORY_BUDGET,
    Footprint,
    MemoryBudgetError,
    parse_size,
    points_between,
)
from presage_scaler.backtest.replay import (
    CHUNK,
    FORECAST_VALUE_BYTES,
    decisions_per_chunk,
    quantile_levels,
)
from presage_scaler.backtest.simulator import Schedule
from presage_scaler.backtest.trace import Trace
from presage_scaler.cli.main import main
from presage_scaler.engine.evaluator import signal_specs
from presage_scaler.series import blocks
from presage_scaler.series.rolling import split_window_order_statistics, window_order_statistics
from presage_scaler.tune import from_cluster
from presage_scaler.tune.measure import Part, Served, measure
from presage_scaler.tune.search import Slo
from presage_scaler.tune.space import TARGET_QUANTILES
from presage_scaler.tune.tuner import TuneSetup, tune


def both_ways(compute: Any) -> tuple[Any, Any]:
    """``compute()`` whole (the default budget holds these small inputs in one block) and a row at a
    time (every row block one row: the most a computation can be split)."""
    whole = compute()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blocks, "BLOCK_BYTES", 1)
        split = compute()
    return whole, split


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    width=st.integers(1, 80),
    rows=st.integers(1, 60),
    ranks=st.lists(st.integers(0, 79), min_size=1, max_size=4, unique=True),
)
def test_order_statistics_in_row_blocks_are_those_of_each_whole_sorted_window(seed, width, rows, ranks):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=width + 200)
    starts = rng.integers(0, 201, size=rows)
    ranks = np.array(sorted(r % width for r in ranks))
    whole, split = both_ways(lambda: window_order_statistics(values, starts, width, ranks))
    reference = np.sort(np.lib.stride_tricks.sliding_window_view(values, width)[starts], axis=1)[:, ranks]
    np.testing.assert_array_equal(whole, reference)
    np.testing.assert_array_equal(split, reference)

    ends = starts + width
    splits = ends - rng.integers(0, width + 1, size=rows)
    high = rng.normal(size=len(values))
    whole, split = both_ways(lambda: split_window_order_statistics(values, high, ends, width, splits, ranks))
    np.testing.assert_array_equal(split, whole)


def sliding_requests(values: np.ndarray, history: int, window: int, every: int) -> tuple[list, list]:
    """A backtest's requests: histories of at most ``history`` points, one every ``every`` points, each
    asking for a day's hindcasts (one every 6 points) over ``window`` steps."""
    spans, requests = [], []
    offsets = window + 6 * np.arange(40)
    for end in range(history // 2, len(values), every):
        begin = max(0, end - history)
        origins = (end - begin) - offsets
        spans.append((begin, end))
        requests.append(
            ForecastRequest(
                History(values[begin:end], timedelta(hours=1)),
                window * 2,
                (0.5, 0.9),
                HindcastRequest(window, origins[origins >= 1], band=(0.5, 0.9)),
            )
        )
    return spans, requests


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**16), season=st.sampled_from([12, 24]), cycles=st.integers(1, 3), window=st.integers(1, 9))
def test_seasonal_naive_in_row_blocks_forecasts_exactly_as_whole(seed, season, cycles, window):
    rng = np.random.default_rng(seed)
    values = np.maximum(0.0, 50 + 20 * np.sin(np.arange(400) * 2 * np.pi / season) + rng.normal(0, 5, 400))
    backend = SeasonalNaive(timedelta(hours=season), cycles)
    # Histories shorter than the series (each starts elsewhere: the general band path) and at the start
    # (the recent-level path, until a season is read).
    spans, requests = sliding_requests(values, 3 * season + 10, window, 7)
    whole, split = both_ways(lambda: backend.forecast_windows(values, spans, requests))
    for a, b in zip(whole, split, strict=True):
        np.testing.assert_array_equal(a.point, b.point)
        for level in a.quantiles:
            np.testing.assert_array_equal(a.quantiles[level], b.quantiles[level])
        assert a.hindcast is not None and b.hindcast is not None
        np.testing.assert_array_equal(a.hindcast.references, b.hindcast.references)
        np.testing.assert_array_equal(a.hindcast.spreads, b.hindcast.spreads)


def test_candidates_measured_in_row_blocks_have_the_same_figures():
    rng = np.random.default_rng(5)
    demand = rng.gamma(4.0, 10.0, size=600)
    counts = rng.integers(1, 6, size=(60, 9)).astype(np.int16)
    served = Served(demand, 10.0, timedelta(minutes=1), Schedule(first=0, every=10, lead=3), initial=2)
    parts = [Part(100, 400, 500.0), Part(400, 600, 300.0)]
    whole, split = both_ways(lambda: measure(counts, served, parts))
    assert split == whole


def test_a_budget_refusal_names_the_estimate_the_budget_and_what_to_change():
    footprint = Footprint(points_between(timedelta(days=9999), timedelta(seconds=1)), timedelta(seconds=1), jobs=2)
    with pytest.raises(MemoryBudgetError) as refused:
        footprint.check(DEFAULT_MEMORY_BUDGET)
    message = str(refused.value)
    assert f"{footprint.estimate / 2**30:.2f} GiB" in message
    assert "863,913,601 points of 1s" in message and "budget of 1.50 GiB" in message
    for remedy in ("coarser resolution", "shorter lookback", "fewer --jobs", "--memory-budget"):
        assert remedy in message
    Footprint(points_between(timedelta(days=28), timedelta(minutes=1)), timedelta(minutes=1)).check(
        DEFAULT_MEMORY_BUDGET
    )


@pytest.mark.parametrize(
    ("text", "size"), [("2Gi", 2 * 2**30), ("1536Mi", 1536 * 2**20), ("1.5G", 1_500_000_000), ("4096", 4096)]
)
def test_memory_sizes_parse_as_kubernetes_writes_them(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "0", "-1Gi", "abc", "infGi", "nan"])
def test_a_memory_size_that_is_not_one_is_refused(text):
    with pytest.raises(ValueError, match="a memory size is a positive number"):
        parse_size(text)


class _Cluster:
    """Answers the ForecastBackend a live scaler names; nothing else is read before the signal."""

    async def get(self, plural: Any, namespace: str | None, name: str) -> dict[str, Any]:
        return {"spec": {"type": "SeasonalNaive"}}


async def test_advice_over_9999_days_at_one_second_is_refused_before_prometheus_is_read(monkeypatch):
    async def never(*args: Any, **kwargs: Any) -> Trace:
        raise AssertionError("the signal was read")

    monkeypatch.setattr(from_cluster, "load_prometheus", never)
    scaler = {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "signal": {"prometheus": {"address": "http://prometheus:9090", "query": "q"}, "resolution": "1s"},
            "capacity": {"perReplica": 10},
            "policy": {"maxReplicas": 10},
        },
    }
    tracemalloc.start()
    try:
        with pytest.raises(MemoryBudgetError, match=r"about 322\.\d\d GiB .* budget of 1\.50 GiB"):
            await from_cluster.live_scaler(_Cluster(), scaler, timedelta(days=9999), datetime(2026, 1, 1, tzinfo=UTC))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20  # nothing the size of the signal was allocated


def test_the_cli_refuses_over_budget_in_one_line(tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    trace.write_text("ts,value\n" + "".join(f"{1_700_000_000 + 60 * i},{i % 7}\n" for i in range(6000)))
    argv = [str(trace), "--per-replica", "2", "--lead-time", "5m", "--no-progress", "--out", str(tmp_path / "out")]
    split = ["--warmup", "1d", "--holdout", "1d"]
    assert main(["tune", *argv, *split, "--slo", "1%", "--memory-budget", "64Mi", "--jobs", "2"]) == 2
    assert main(["backtest", *argv, "--memory-budget", "64Mi"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "Traceback" not in "".join(err)
    assert err[0].startswith("presage tune: this run would need about") and "budget of 64 MiB" in err[0]
    assert err[1].startswith("presage backtest: this run would need about") and "fewer --jobs" not in err[1]


def test_a_tune_over_days_of_ten_second_history_stays_within_its_bound():
    step, days = timedelta(seconds=10), 3
    points = days * 86400 // 10
    t = np.arange(points)
    rng = np.random.default_rng(11)
    values = np.maximum(0.0, 200 + 80 * np.sin(t * 2 * np.pi / 8640) + rng.gamma(2.0, 10.0, points))
    trace = Trace(values, step, datetime(2026, 3, 2, tzinfo=UTC), np.zeros(points, dtype=bool), "synthetic")
    spec = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        # A history shorter than the trace: every decision's hindcasts read a history of their own.
        "signal": {"prometheus": {"address": "http://p:9090", "query": "q"}, "resolution": "10s", "history": "1d"},
        "capacity": {"perReplica": "20"},
        "leadTime": {"static": "5m"},
        # Fewer decisions, each with a day's hindcasts as before: a quicker test of the same shapes.
        "interval": "5m",
        "policy": {"maxReplicas": 200},
    }
    setup = TuneSetup(
        spec=spec,
        overrides=Overrides(),
        backend=backend_spec(None),
        slo=Slo(1.0),
        warmup=timedelta(hours=12),
        holdout=timedelta(days=1),
    )
    tracemalloc.start()
    try:
        result = tune(trace, setup)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    decided = len(result.plan.schedule.decisions(points))
    estimate = Footprint(points, step, 1, decided, len(result.trials)).estimate
    # Row blocks and what is held whole, never the (decisions x hindcasts, 1024) or (hindcasts, window)
    # matrices of the whole run (over a GiB here); the estimate a budget is checked against covers it.
    assert peak < 8 * blocks.BLOCK_BYTES + 1_000 * points
    assert peak < estimate


def _scaler_spec(resolution: str, lead: str, horizon: str | None = None) -> PredictiveScalerSpec:
    wire: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "signal": {"prometheus": {"address": "http://prometheus:9090", "query": "x"}, "resolution": resolution},
        "capacity": {"perReplica": 10},
        "leadTime": {"static": lead},
        "policy": {"maxReplicas": 10},
    }
    if horizon is not None:
        wire["forecast"] = {"horizon": horizon}
    return parse(PredictiveScalerSpec, wire, path="spec")


@pytest.mark.parametrize("resolution", ["5m", "1m", "15s", "5s"])
def test_a_chunk_keeps_every_decision_down_to_five_seconds_at_a_five_minute_lead(resolution):
    spec = _scaler_spec(resolution, "5m")
    assert decisions_per_chunk(spec, signal_specs(spec)[0], timedelta(minutes=5), None, TARGET_QUANTILES) == CHUNK


def test_a_long_horizon_holds_fewer_decisions_a_chunk_within_its_bytes():
    from presage_scaler.backtest.replay import (
        CHUNK,
        decisions_per_chunk,
    )

    spec = _scaler_spec("1s", "5m", horizon="2h")
    held = decisions_per_chunk(spec, signal_specs(spec)[0], timedelta(minutes=5), None, TARGET_QUANTILES)
    per_decision = 7200 * (len(quantile_levels(spec, TARGET_QUANTILES)) + 1) * FORECAST_VALUE_BYTES
    assert 1 <= held < CHUNK
    assert held * per_decision <= CHUNK_BYTES < (held + 1) * per_decision
