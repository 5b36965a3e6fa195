"""The TimesFM backend's request, parsing and error mapping, on an in-memory httpx transport.

The same client runs against the real presage-forecaster in tests/forecaster/test_backend_http.py.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta

import httpx
import numpy as np
import pytest

from presage_scaler.api.parse import parse
from presage_scaler.api.types import TimesFMBackend
from presage_scaler.backends.base import (
    BackendRejected,
    BackendUnavailable,
    ForecastRequest,
    History,
    ModelIdentity,
)
from presage_scaler.backends.timesfm import (
    POINT_ONLY,
    ForecasterNotReady,
    ForecasterOverloaded,
    ForecasterRejected,
    ForecasterServerError,
    ForecasterTimeout,
    ForecasterUnreachable,
    InvalidForecasterResponse,
    ModelInfo,
    TimesFMClient,
    request_body,
)

ENDPOINT = "http://forecaster.test:8080/"
STEP = timedelta(minutes=5)


def settings(**overrides) -> TimesFMBackend:
    return parse(TimesFMBackend, {"endpoint": ENDPOINT, "maxContext": 8, "maxHorizon": 16, **overrides})


def req(values, horizon, *levels) -> ForecastRequest:
    return ForecastRequest(History(np.asarray(values, dtype=float), STEP), horizon, tuple(levels))


class Server:
    """An in-memory forecaster: records requests, answers like presage-forecaster would."""

    def __init__(self, status: int = 200, body: object = None, sources: dict[str, str] | None = None) -> None:
        self.status, self.body, self.sources = status, body, sources or {}
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.status != 200 or self.body is not None:
            return httpx.Response(self.status, json=self.body)
        if request.url.path == "/v1/model":
            return httpx.Response(200, json=MODEL)
        sent = json.loads(request.content)
        keys = [format(q, "g") for q in sent["quantiles"]]
        series = []
        for s in sent["series"]:
            last = s["values"][-1]
            point = [last + k for k in range(sent["horizon"])]
            series.append(
                {
                    "id": s["id"],
                    "point": point,
                    "quantiles": {k: [p + float(k) for p in point] for k in keys},
                    "context": {"received": len(s["values"]), "used": len(s["values"]), "truncated": 0},
                }
            )
        return httpx.Response(
            200,
            json={
                "model": "google/timesfm-2.5-200m-pytorch",
                "revision": "abc123",
                "horizon": sent["horizon"],
                "quantiles": [{"level": float(k), "key": k, "source": self.sources.get(k, "model")} for k in keys],
                "series": series,
            },
        )


MODEL = {
    "model": "google/timesfm-2.5-200m-pytorch",
    "revision": "abc123",
    "maxContext": 4096,
    "maxHorizon": 128,
    "quantileLevels": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
}


def backend(server: Server, **overrides) -> TimesFMClient:
    client = httpx.AsyncClient(transport=httpx.MockTransport(server))
    return TimesFMClient("timesfm", settings(**overrides), client)


def test_request_body_carries_every_signal_once():
    body = request_body([req(range(20), 4, 0.9, 0.5), req([1.0, 2.0], 12, 0.5, 0.95)], settings())
    assert body["horizon"] == 12 and body["quantiles"] == [0.5, 0.9, 0.95] and body["useQuantileHead"] is True
    assert body["series"][0] == {"id": "0", "values": [float(v) for v in range(12, 20)]}  # cut to maxContext 8
    assert body["series"][1] == {"id": "1", "values": [1.0, 2.0]}
    point_only = request_body([req([1.0], 2, 0.9)], settings(useQuantileHead=False))
    assert point_only["quantiles"] == [] and point_only["useQuantileHead"] is False


async def test_one_request_per_evaluation_each_forecast_cut_to_its_own():
    server = Server()
    tfm = backend(server)
    assert tfm.identity == ModelIdentity(backend="timesfm")  # nothing reported yet
    a, b = await tfm.forecast([req([10.0, 11.0], 3, 0.5, 0.9), req([5.0], 6, 0.95)])
    assert len(server.requests) == 1 and server.requests[0].url == "http://forecaster.test:8080/v1/forecast"
    assert a.point.tolist() == [11.0, 12.0, 13.0] and set(a.quantiles) == {0.5, 0.9}
    assert a.quantiles[0.9].tolist() == [11.9, 12.9, 13.9] and a.method == "" and a.notes == ()
    assert b.point.tolist() == [5.0, 6.0, 7.0, 8.0, 9.0, 10.0] and set(b.quantiles) == {0.95}
    assert tfm.identity == ModelIdentity("timesfm", "google/timesfm-2.5-200m-pytorch", "abc123")


async def test_approximated_levels_are_named_in_method_and_notes():
    tfm = backend(Server(sources={"0.95": "extrapolated", "0.25": "interpolated"}))
    [f] = await tfm.forecast([req([1.0, 2.0], 2, 0.25, 0.5, 0.95)])
    assert f.method == "q0.25 interpolated, q0.95 extrapolated from deciles"
    assert any("0.95 extrapolated" in note for note in f.notes)


async def test_point_only_fills_every_level_with_the_point():
    server = Server()
    [f] = await backend(server, useQuantileHead=False).forecast([req([3.0], 4, 0.5, 0.9)])
    assert f.method == POINT_ONLY
    assert f.quantiles[0.9].tolist() == f.point.tolist() == f.quantiles[0.5].tolist()
    assert json.loads(server.requests[0].content)["quantiles"] == []


async def test_truncation_reported_by_the_server_is_noted():
    body = {
        "model": "m",
        "revision": None,
        "quantiles": [],
        "series": [{"point": [1.0], "quantiles": {}, "context": {"received": 9000, "used": 4096, "truncated": 4904}}],
    }
    [f] = await backend(Server(body=body)).forecast([req([1.0], 1)])
    assert any("4096 of 9000" in note for note in f.notes)


async def test_describe():
    server = Server()
    tfm = backend(server)
    info = await tfm.describe()
    assert info == ModelInfo("google/timesfm-2.5-200m-pytorch", "abc123", 4096, 128, tuple(MODEL["quantileLevels"]))
    assert server.requests[0].method == "GET" and server.requests[0].url.path == "/v1/model"
    assert tfm.identity.model == "google/timesfm-2.5-200m-pytorch" and tfm.identity.revision == "abc123"


def test_model_info_mismatches():
    info = ModelInfo("google/timesfm-2.5-200m-pytorch", "abc", 1024, 64, (0.1,))
    assert info.mismatches(settings(maxContext=1024, maxHorizon=64)) == []
    problems = info.mismatches(settings(maxContext=4096, maxHorizon=128, model="acme/other"))
    assert len(problems) == 3 and "maxHorizon 128" in problems[0] and "maxContext 4096" in problems[1]


@pytest.mark.parametrize(
    ("status", "body", "error", "reason", "text"),
    [
        (
            503,
            {"error": {"code": "NotReady", "message": "still loading"}},
            ForecasterNotReady,
            "BackendNotReady",
            "503",
        ),
        (
            503,
            {"error": {"code": "Overloaded", "message": "40 series are already waiting"}},
            ForecasterOverloaded,
            "BackendOverloaded",
            "Overloaded: 40 series",
        ),
        (
            500,
            {"error": {"code": "ModelOutputNotFinite", "message": "x"}},
            ForecasterServerError,
            "BackendServerError",
            "ModelOutputNotFinite",
        ),
        (502, "bad gateway", ForecasterServerError, "BackendServerError", "502 HTTP502"),
        (
            422,
            {"error": {"code": "HorizonTooLong", "message": "horizon 99"}},
            ForecasterRejected,
            "BackendRejected",
            "HorizonTooLong: horizon 99",
        ),
        (413, {"error": {"code": "PayloadTooLarge", "message": "big"}}, ForecasterRejected, "BackendRejected", "413"),
        (200, ["not", "an", "object"], InvalidForecasterResponse, "InvalidBackendResponse", "JSON list"),
        (
            200,
            {"model": "m", "quantiles": [], "series": []},
            InvalidForecasterResponse,
            "InvalidBackendResponse",
            "0 series",
        ),
    ],
)
async def test_http_errors_are_typed(status, body, error, reason, text):
    with pytest.raises(error) as caught:
        await backend(Server(status, body)).forecast([req([1.0], 1, 0.5)])
    assert caught.value.reason == reason and text in str(caught.value)
    if isinstance(caught.value, ForecasterRejected):
        assert isinstance(caught.value, BackendRejected) and caught.value.status == status
    elif status >= 500:
        assert isinstance(caught.value, BackendUnavailable)


async def test_missing_quantile_or_short_answer_is_invalid():
    body = {"model": "m", "quantiles": [], "series": [{"point": [1.0], "quantiles": {}}]}
    with pytest.raises(InvalidForecasterResponse, match=r"0\.9"):
        await backend(Server(body=body)).forecast([req([1.0], 1, 0.9)])
    with pytest.raises(InvalidForecasterResponse, match="at least 3 values"):
        await backend(Server(body=body)).forecast([req([1.0], 3)])


@pytest.mark.parametrize(
    ("exception", "error", "text"),
    [
        (httpx.ConnectError("Connection refused"), ForecasterUnreachable, "Connection refused"),
        (httpx.ReadTimeout("timed out"), ForecasterTimeout, "within 30s"),
        (httpx.RemoteProtocolError("peer closed"), ForecasterUnreachable, "peer closed"),
    ],
)
async def test_transport_errors_are_unavailable(exception, error, text):
    def fail(request: httpx.Request) -> httpx.Response:
        raise exception

    tfm = TimesFMClient("timesfm", settings(), httpx.AsyncClient(transport=httpx.MockTransport(fail)))
    with pytest.raises(error) as caught:
        await tfm.describe()
    assert isinstance(caught.value, BackendUnavailable) and text in str(caught.value)
    assert "http://forecaster.test:8080/v1/model" in str(caught.value)


async def test_limits_checked_before_sending():
    server = Server()
    tfm = backend(server)
    with pytest.raises(BackendRejected, match="maxHorizon 16"):
        await tfm.forecast([req([1.0], 17, 0.5)])
    with pytest.raises(BackendRejected, match="empty"):
        await tfm.forecast([req([], 1, 0.5)])
    assert server.requests == [] and await tfm.forecast([]) == []
    assert (tfm.max_context, tfm.max_horizon) == (8, 16)


async def test_shared_client_is_not_closed_and_own_client_is():
    shared = httpx.AsyncClient(transport=httpx.MockTransport(Server()))
    tfm = TimesFMClient("timesfm", settings(), shared)
    await tfm.aclose()
    assert not shared.is_closed
    await shared.aclose()
    own = TimesFMClient("timesfm", settings())
    await own.aclose()  # never opened: nothing to close


def test_the_scaler_never_imports_torch():
    assert "torch" not in sys.modules and "timesfm" not in sys.modules
