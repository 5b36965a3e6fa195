"""The backend registry: every API type builds, under the ForecastBackend's name, with its probe; and the
backtest and presage tune build through it."""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import get_args

import aiohttp
import pytest
from aiohttp import web

from presage_scaler.api.forecast_backend import BackendType, ForecastBackendSpec
from presage_scaler.api.parse import parse
from presage_scaler.backends.registry import FACTORIES, build_backend
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.backends.timesfm import TimesFMClient
from presage_scaler.cli.main import main
from tests.harness.local_http import Seen, seen, serving

MODEL = {
    "model": "google/timesfm-2.5-200m-pytorch",
    "revision": "abc123",
    "maxContext": 4096,
    "maxHorizon": 64,
    "quantileLevels": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
}


def spec(data: dict) -> ForecastBackendSpec:
    return parse(ForecastBackendSpec, data, path="spec")


def test_every_type_the_api_declares_has_a_factory():
    assert set(FACTORIES) == set(get_args(BackendType))


async def test_seasonal_naive_builds_with_its_settings_and_is_always_ready():
    backend = build_backend("daily", spec({"type": "SeasonalNaive", "seasonalNaive": {"season": "24h", "cycles": 2}}))
    assert isinstance(backend, SeasonalNaive)
    assert (backend.season, backend.cycles) == (timedelta(hours=24), 2)
    assert backend.identity.backend == "daily"
    assert await backend.probe() == backend.identity.model == "seasonal-naive/24hx2"


async def test_timesfm_builds_on_the_shared_client_and_probes_the_server(caplog):
    asked: list[Seen] = []

    async def server(request: web.Request) -> web.Response:
        asked.append(await seen(request))
        return web.json_response(MODEL)

    async with serving(server) as url, aiohttp.ClientSession() as http:
        data = {"type": "TimesFM", "timesFM": {"endpoint": url, "maxHorizon": 128}}
        backend = build_backend("tfm", spec(data), http)
        assert isinstance(backend, TimesFMClient)
        assert backend.identity.backend == "tfm" and backend.identity.model is None
        with caplog.at_level(logging.WARNING):
            model = await backend.probe()
        await backend.aclose()
        assert not http.closed  # the shared session is the caller's
    assert model == "google/timesfm-2.5-200m-pytorch@abc123"
    assert [(r.method, r.path) for r in asked] == [("GET", "/v1/model")]
    assert backend.identity.model == "google/timesfm-2.5-200m-pytorch"
    assert "backend=tfm settings disagree with the server" in caplog.text and "maxHorizon 128" in caplog.text


def test_an_unknown_type_names_the_ones_there_are():
    # The API admits no other type; only a spec built around validation can carry one.
    stray = ForecastBackendSpec.model_construct(type="Prophet")
    with pytest.raises(ValueError, match="no backend of type 'Prophet'; the registry has SeasonalNaive, TimesFM"):
        build_backend("x", stray)


def daily_trace(path: Path, days: int = 3) -> Path:
    start = datetime(2026, 1, 5, tzinfo=UTC)
    rows = ["timestamp,value"]
    for k in range(days * 288):
        at = start + k * timedelta(minutes=5)
        rows.append(f"{at.isoformat()},{100 + 50 * math.sin(2 * math.pi * k / 288):.3f}")
    path.write_text("\n".join(rows) + "\n")
    return path


def backend_file(path: Path, name: str, spec_data: dict) -> Path:
    document = {"apiVersion": "scaling.presage.sh/v1alpha1", "kind": "ForecastBackend", "metadata": {"name": name}}
    path.write_text(json.dumps({**document, "spec": spec_data}))  # JSON is YAML
    return path


def test_the_backtest_names_the_forecast_backend_of_its_file(tmp_path):
    trace = daily_trace(tmp_path / "trace.csv")
    backend = backend_file(
        tmp_path / "b.yaml", "daily", {"type": "SeasonalNaive", "seasonalNaive": {"season": "24h", "cycles": 1}}
    )
    out = tmp_path / "out"
    flags = ["--per-replica", "20", "--lead-time", "10m", "--interval", "15m", "--warmup", "1d", "--no-progress"]
    assert main(["backtest", str(trace), "--backend-spec", str(backend), *flags, "--out", str(out)]) == 0
    parameters = json.loads((out / "summary.json").read_text())["parameters"]
    assert (parameters["backend"], parameters["model"]) == ("daily", "seasonal-naive/24hx1")


def test_tune_refuses_a_timesfm_backend_in_one_line_before_calling_it(tmp_path, capsys):
    trace = daily_trace(tmp_path / "trace.csv")
    # Nothing listens there: a refusal that called the backend first would say so instead.
    backend = backend_file(
        tmp_path / "b.yaml", "tfm", {"type": "TimesFM", "timesFM": {"endpoint": "http://127.0.0.1:9"}}
    )
    args = ["tune", str(trace), "--backend-spec", str(backend), "--per-replica", "20", "--lead-time", "10m"]
    assert main([*args, "--slo", "1%", "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        "presage tune: presage tune needs a backend that answers hindcasts (SeasonalNaive); "
        "a TimesFM backend does not\n"
    )
