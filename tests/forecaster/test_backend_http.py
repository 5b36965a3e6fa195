"""The scaler's TimesFM backend against the real presage-forecaster over HTTP."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import numpy as np
import pytest

from presage_scaler.api.forecast_backend import TimesFMBackend
from presage_scaler.api.parse import parse
from presage_scaler.backends.base import ForecastRequest, History
from presage_scaler.backends.timesfm import (
    POINT_ONLY,
    ForecasterNotReady,
    ForecasterRejected,
    ForecasterTimeout,
    ForecasterUnreachable,
    TimesFMClient,
)
from tests.harness.forecaster import seasonal
from tests.harness.process import free_port

pytestmark = pytest.mark.integration

MODEL = "presage-testing/timesfm-2.5-tiny-random"


@pytest.fixture(scope="module")
def server(module_forecaster_factory):
    return module_forecaster_factory("--max-context", "256", "--max-horizon", "32")


def settings(endpoint: str, **overrides) -> TimesFMBackend:
    spec = {"endpoint": endpoint, "maxContext": 256, "maxHorizon": 32, "model": MODEL, **overrides}
    return parse(TimesFMBackend, spec)


def req(n: int, horizon: int, *levels: float, seed: int = 0) -> ForecastRequest:
    return ForecastRequest(History(np.array(seasonal(n, seed=seed)), timedelta(minutes=5)), horizon, levels)


async def test_describe_is_the_probe(server):
    tfm = TimesFMClient("timesfm-small", settings(server.url))
    try:
        info = await tfm.describe()
    finally:
        await tfm.aclose()
    assert (info.model, info.revision, info.max_context, info.max_horizon) == (MODEL, "seed-0", 256, 32)
    assert info.quantile_levels == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    assert info.mismatches(settings(server.url)) == []
    assert tfm.identity.model == MODEL and tfm.identity.backend == "timesfm-small"


async def test_forecast_through_the_server(server):
    tfm = TimesFMClient("timesfm-small", settings(server.url))
    try:
        a, b = await tfm.forecast([req(300, 8, 0.5, 0.9), req(60, 20, 0.5, 0.95, seed=1)])
    finally:
        await tfm.aclose()
    assert len(a.point) == 8 and set(a.quantiles) == {0.5, 0.9} and a.method == ""
    assert np.array_equal(a.point, a.quantiles[0.5]) and (a.quantiles[0.9] >= a.quantiles[0.5]).all()
    assert len(b.point) == 20 and set(b.quantiles) == {0.5, 0.95}
    assert b.method == "q0.95 extrapolated from deciles"
    assert tfm.identity.model == MODEL and tfm.identity.revision == "seed-0"


async def test_point_only(server):
    tfm = TimesFMClient("timesfm-small", settings(server.url, useQuantileHead=False))
    try:
        [f] = await tfm.forecast([req(100, 4, 0.5, 0.9)])
    finally:
        await tfm.aclose()
    assert f.method == POINT_ONLY and np.array_equal(f.quantiles[0.9], f.point)


async def test_server_limits_reject_with_its_code(server):
    tfm = TimesFMClient("timesfm-small", settings(server.url, maxHorizon=64))
    try:
        with pytest.raises(ForecasterRejected) as caught:
            await tfm.forecast([req(100, 40, 0.9)])
    finally:
        await tfm.aclose()
    assert caught.value.code == "HorizonTooLong" and caught.value.status == 422
    assert "maxHorizon 32" in str(caught.value)
    info = await TimesFMClient("x", settings(server.url, maxHorizon=64)).describe()
    assert "maxHorizon 64 is above the server's 32" in info.mismatches(settings(server.url, maxHorizon=64))[0]


async def test_not_ready(forecaster_factory):
    loading = forecaster_factory("--load-delay-seconds", "30", wait_ready=False)
    tfm = TimesFMClient("timesfm-small", settings(loading.url))
    try:
        with pytest.raises(ForecasterNotReady) as caught:
            await tfm.forecast([req(50, 4, 0.9)])
    finally:
        await tfm.aclose()
    assert caught.value.reason == "BackendNotReady" and "still loading" in str(caught.value)


async def test_connection_refused():
    port = free_port()  # nothing listens there
    tfm = TimesFMClient("timesfm-small", settings(f"http://127.0.0.1:{port}"))
    with pytest.raises(ForecasterUnreachable) as caught:
        await tfm.describe()
    await tfm.aclose()
    assert caught.value.reason == "BackendUnreachable" and f"127.0.0.1:{port}" in str(caught.value)


async def test_timeout_against_a_server_that_never_answers():
    release = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await release.wait()  # read nothing, answer nothing
        writer.close()

    listener = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    tfm = TimesFMClient("timesfm-small", settings(f"http://127.0.0.1:{port}", timeout="300ms"))
    try:
        with pytest.raises(ForecasterTimeout) as caught:
            await tfm.forecast([req(50, 4, 0.9)])
    finally:
        await tfm.aclose()
        release.set()
        listener.close()
        await listener.wait_closed()
    assert caught.value.reason == "BackendTimeout" and "within 300ms" in str(caught.value)
