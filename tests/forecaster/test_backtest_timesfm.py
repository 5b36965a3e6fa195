"""``presage backtest --backend-spec`` with a TimesFM backend, forecast by the real presage-forecaster."""

from __future__ import annotations

import csv
import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from presage_scaler.backtest.replay import CHUNK, REQUESTS_PER_CALL
from presage_scaler.cli.main import main
from tests.harness.forecaster import metric

pytestmark = pytest.mark.integration

START = datetime(2026, 11, 20, tzinfo=UTC)
STEP = timedelta(minutes=5)
DAY = 288  # steps of 5m


def daily_trace(path: Path, days: int = 3) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["timestamp", "value"])
        for k in range(days * DAY):
            writer.writerow([(START + k * STEP).isoformat(), f"{100 + 50 * math.sin(2 * math.pi * k / DAY):.3f}"])
    return path


def backend_file(path: Path, url: str, *, quantile_head: bool = True) -> Path:
    settings = {"endpoint": url, "maxContext": 512, "maxHorizon": 64, "useQuantileHead": quantile_head}
    backend = {
        "apiVersion": "scaling.presage.sh/v1alpha1",
        "kind": "ForecastBackend",
        "metadata": {"name": "timesfm-small"},
        "spec": {"type": "TimesFM", "timesFM": settings},
    }
    path.write_text(json.dumps(backend))  # JSON is YAML
    return path


def test_backtest_through_the_forecaster(forecaster_factory, tmp_path):
    forecaster = forecaster_factory("--max-context", "512", "--max-horizon", "64")
    trace = daily_trace(tmp_path / "trace.csv")
    backend = backend_file(tmp_path / "timesfm.yaml", forecaster.url)
    out = tmp_path / "out"
    before = httpx.get(f"{forecaster.url}/metrics").text
    flags = ["--per-replica", "20", "--lead-time", "10m", "--interval", "15m", "--warmup", "2d", "--no-progress"]
    assert main(["backtest", str(trace), "--backend-spec", str(backend), *flags, "--out", str(out)]) == 0
    after = httpx.get(f"{forecaster.url}/metrics").text

    summary = json.loads((out / "summary.json").read_text())
    parameters = summary["parameters"]
    assert parameters["backend"] == "timesfm-small"
    assert parameters["model"] == "presage-testing/timesfm-2.5-tiny-random"
    presage = summary["presage"]
    for key in ("under_provisioned_pct", "unserved_pct", "replica_hours", "cost_vs_oracle", "largest_shortfall"):
        assert math.isfinite(presage[key]), key
    assert presage["replica_hours"] > 0
    calibration = summary["calibration"]
    # The last day every 15 minutes, less the last decision: its sizing window ends past the trace.
    assert calibration["decisions"] == DAY // 3 - 1
    for key in ("target_coverage", "scale_down_coverage", "calibrated_share"):
        assert 0.0 <= calibration[key] <= 1.0, key
    # No hindcasts from TimesFM: calibrated from the forecasts it made, as the controller does.
    assert calibration["calibrated_share"] == 1.0

    # Every decision's forecast came from the server, at most REQUESTS_PER_CALL decisions to a request.
    with (out / "decisions.csv").open() as handle:
        decisions = sum(1 for _ in csv.DictReader(handle))
    ok = {"path": "/v1/forecast", "code": "200"}
    requests = metric(after, "presage_forecaster_requests_total", **ok) - metric(
        before, "presage_forecaster_requests_total", **ok
    )
    series = metric(after, "presage_forecaster_series_total") - metric(before, "presage_forecaster_series_total")
    assert decisions <= CHUNK  # one chunk of decisions
    assert (requests, series) == (math.ceil(decisions / REQUESTS_PER_CALL), decisions)


def test_the_models_band_changes_what_is_sized(forecaster_factory, tmp_path):
    """useQuantileHead: true calibrates the model's band (a forecast it is less sure of than usual
    provisions more); false calibrates from its errors alone. Over the reported day, every decision
    calibrated, the two settings decide differently at least 5 % of the time."""
    forecaster = forecaster_factory("--max-context", "512", "--max-horizon", "64")
    trace = daily_trace(tmp_path / "trace.csv")
    flags = ["--per-replica", "20", "--lead-time", "10m", "--interval", "15m", "--warmup", "2d", "--no-progress"]
    replicas = {}
    for head in (True, False):
        backend = backend_file(tmp_path / f"timesfm-{head}.yaml", forecaster.url, quantile_head=head)
        out = tmp_path / f"out-{head}"
        assert main(["backtest", str(trace), "--backend-spec", str(backend), *flags, "--out", str(out)]) == 0
        assert json.loads((out / "summary.json").read_text())["calibration"]["calibrated_share"] == 1.0
        with (out / "decisions.csv").open() as handle:
            replicas[head] = [int(row["replicas"]) for row in csv.DictReader(handle) if int(row["step"]) >= 2 * DAY]
    assert len(replicas[True]) == len(replicas[False]) == DAY // 3
    differ = sum(a != b for a, b in zip(replicas[True], replicas[False], strict=True))
    assert differ >= 0.05 * len(replicas[True]), (differ, replicas)
