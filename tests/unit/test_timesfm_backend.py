"""The TimesFM backend's request, parsing and error mapping, against a stand-in forecaster served
over a real loopback socket (tests/harness/local_http.py).

The same client runs against the real presage-forecaster in tests/forecaster/test_backend_http.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from datetime import timedelta

import aiohttp
import numpy as np
import pytest
from aiohttp import web

from presage_scaler.api.forecast_backend import TimesFMBackend
from presage_scaler.api.parse import parse
from presage_scaler.backends.base import (
    BackendRejected,
    BackendUnavailable,
    ForecastRequest,
    History,
    ModelIdentity,
)
from presage_scaler.backends.timesfm import (
    MAX_ANSWER_BYTES,
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
from tests.harness.hostile_json import gzip_bomb
from tests.harness.local_http import Handler, Seen, seen, serving
from tests.harness.process import free_port

ENDPOINT = "http://forecaster.test:8080/"
STEP = timedelta(minutes=5)


def settings(**overrides) -> TimesFMBackend:
    return parse(TimesFMBackend, {"endpoint": ENDPOINT, "maxContext": 8, "maxHorizon": 16, **overrides})


def req(values, horizon, *levels) -> ForecastRequest:
    return ForecastRequest(History(np.asarray(values, dtype=float), STEP), horizon, tuple(levels))


class Server:
    """A stand-in forecaster: records requests, answers like presage-forecaster would."""

    def __init__(self, status: int = 200, body: object = None, sources: dict[str, str] | None = None) -> None:
        self.status, self.body, self.sources = status, body, sources or {}
        self.requests: list[Seen] = []

    async def __call__(self, request: web.Request) -> web.Response:
        self.requests.append(await seen(request))
        if self.status != 200 or self.body is not None:
            return web.json_response(self.body, status=self.status)
        if request.path == "/v1/model":
            return web.json_response(MODEL)
        sent = json.loads(self.requests[-1].body)
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
        return web.json_response(
            {
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


@pytest.fixture
async def backend():
    """``await backend(handler, **settings)``: a TimesFMClient, on a session of its own, to ``handler``
    served on a loopback socket (the endpoint written with a trailing slash); both closed after."""
    async with contextlib.AsyncExitStack() as stack:

        async def connect(handler: Handler, **overrides) -> TimesFMClient:
            url = await stack.enter_async_context(serving(handler))
            tfm = TimesFMClient("timesfm", settings(endpoint=f"{url}/", **overrides))
            stack.push_async_callback(tfm.aclose)
            return tfm

        yield connect


def test_request_body_carries_every_signal_once():
    body = request_body([req(range(20), 4, 0.9, 0.5), req([1.0, 2.0], 12, 0.5, 0.95)], settings())
    assert body["horizon"] == 12 and body["quantiles"] == [0.5, 0.9, 0.95] and body["useQuantileHead"] is True
    assert body["series"][0] == {"id": "0", "values": [float(v) for v in range(12, 20)]}  # cut to maxContext 8
    assert body["series"][1] == {"id": "1", "values": [1.0, 2.0]}
    point_only = request_body([req([1.0], 2, 0.9)], settings(useQuantileHead=False))
    assert point_only["quantiles"] == [] and point_only["useQuantileHead"] is False


async def test_one_request_per_evaluation_each_forecast_cut_to_its_own(backend):
    server = Server()
    tfm = await backend(server)
    assert tfm.identity == ModelIdentity(backend="timesfm")  # nothing reported yet
    a, b = await tfm.forecast([req([10.0, 11.0], 3, 0.5, 0.9), req([5.0], 6, 0.95)])
    assert [(r.method, r.path) for r in server.requests] == [("POST", "/v1/forecast")]
    assert a.point.tolist() == [11.0, 12.0, 13.0] and set(a.quantiles) == {0.5, 0.9}
    assert a.quantiles[0.9].tolist() == [11.9, 12.9, 13.9] and a.method == "" and a.notes == ()
    assert b.point.tolist() == [5.0, 6.0, 7.0, 8.0, 9.0, 10.0] and set(b.quantiles) == {0.95}
    assert tfm.identity == ModelIdentity("timesfm", "google/timesfm-2.5-200m-pytorch", "abc123")


async def test_approximated_levels_are_named_in_method_and_notes(backend):
    tfm = await backend(Server(sources={"0.95": "extrapolated", "0.25": "interpolated"}))
    [f] = await tfm.forecast([req([1.0, 2.0], 2, 0.25, 0.5, 0.95)])
    assert f.method == "q0.25 interpolated, q0.95 extrapolated from deciles"
    assert any("0.95 extrapolated" in note for note in f.notes)


async def test_point_only_fills_every_level_with_the_point(backend):
    server = Server()
    [f] = await (await backend(server, useQuantileHead=False)).forecast([req([3.0], 4, 0.5, 0.9)])
    assert f.method == POINT_ONLY
    assert f.quantiles[0.9].tolist() == f.point.tolist() == f.quantiles[0.5].tolist()
    assert json.loads(server.requests[0].body)["quantiles"] == []


async def test_truncation_reported_by_the_server_is_noted(backend):
    body = {
        "model": "m",
        "revision": None,
        "quantiles": [],
        "series": [{"point": [1.0], "quantiles": {}, "context": {"received": 9000, "used": 4096, "truncated": 4904}}],
    }
    [f] = await (await backend(Server(body=body))).forecast([req([1.0], 1)])
    assert any("4096 of 9000" in note for note in f.notes)


async def test_describe(backend):
    server = Server()
    tfm = await backend(server)
    info = await tfm.describe()
    assert info == ModelInfo("google/timesfm-2.5-200m-pytorch", "abc123", 4096, 128, tuple(MODEL["quantileLevels"]))
    assert [(r.method, r.path) for r in server.requests] == [("GET", "/v1/model")]
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
async def test_http_errors_are_typed(backend, status, body, error, reason, text):
    with pytest.raises(error) as caught:
        await (await backend(Server(status, body))).forecast([req([1.0], 1, 0.5)])
    assert caught.value.reason == reason and text in str(caught.value)
    if isinstance(caught.value, ForecasterRejected):
        assert isinstance(caught.value, BackendRejected) and caught.value.status == status
    elif status >= 500:
        assert isinstance(caught.value, BackendUnavailable)


async def test_missing_quantile_or_short_answer_is_invalid(backend):
    body = {"model": "m", "quantiles": [], "series": [{"point": [1.0], "quantiles": {}}]}
    with pytest.raises(InvalidForecasterResponse, match=r"0\.9"):
        await (await backend(Server(body=body))).forecast([req([1.0], 1, 0.9)])
    with pytest.raises(InvalidForecasterResponse, match="at least 3 values"):
        await (await backend(Server(body=body))).forecast([req([1.0], 3)])


def raw(body: bytes, **headers: str) -> Handler:
    """A forecaster answering ``body`` as it is, with ``headers``, to every request."""

    async def handle(request: web.Request) -> web.Response:
        return web.Response(body=body, headers={"Content-Type": "application/json", **headers})

    return handle


@pytest.mark.parametrize("inflated", [MAX_ANSWER_BYTES, MAX_ANSWER_BYTES + 1], ids=["at", "past"])
async def test_answers_are_read_up_to_the_cap_once_inflated(backend, inflated):
    """The model description padded with JSON whitespace to exactly the cap is read (gzip is inflated
    by the backend itself); one byte more is an InvalidBackendResponse that names the cap, however
    little of it was on the wire (tens of kB here)."""
    text = json.dumps(MODEL).encode()
    body = gzip_bomb(text[:-1], inflated, text[-1:])
    tfm = await backend(raw(body, **{"Content-Encoding": "gzip"}))
    if inflated <= MAX_ANSWER_BYTES:
        assert (await tfm.describe()).max_context == MODEL["maxContext"]
        return
    with pytest.raises(InvalidForecasterResponse) as caught:
        await tfm.describe()
    assert caught.value.reason == "InvalidBackendResponse"
    assert "over the limit of 32 MiB (33554432 bytes) once inflated (gzip)" in str(caught.value)
    assert "check that the ForecastBackend's endpoint is a presage-forecaster" in str(caught.value)


async def test_a_declared_length_past_the_cap_is_refused_unread(backend):
    async def huge(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_length = 1 << 40
        await response.prepare(request)
        return response

    with pytest.raises(InvalidForecasterResponse, match=r"declared in its Content-Length \(1099511627776 bytes\)"):
        await (await backend(huge)).forecast([req([1.0], 1, 0.5)])


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 200_000 + b"]" * 200_000,
        b'{"model": "m", "quantiles": [], "series": [{"point": [1' + b"0" * 400 + b'], "quantiles": {}}]}',
        b'{"model": "m", "quantiles": [], "series": [{"point": [1' + b"0" * 5000 + b'], "quantiles": {}}]}',
        b'{"error": {"code": "x", "message": "' + b"m" * 100_000 + b'"}}',
    ],
    ids=["nested-200000-deep", "400-digit-value", "5000-digit-value", "100k-message"],
)
async def test_hostile_answers_are_invalid_with_a_short_message(backend, body):
    """Nesting past the recursion limit, integers past float range or past Python's digit limit, and
    a message far longer than any condition's: each an InvalidBackendResponse whose message stays short."""
    with pytest.raises(InvalidForecasterResponse) as caught:
        await (await backend(raw(body))).forecast([req([1.0], 1)])
    assert caught.value.reason == "InvalidBackendResponse" and len(str(caught.value)) < 1000


async def test_describe_refuses_a_limit_past_float_range(backend):
    body = json.dumps(MODEL).replace("4096", "1" + "0" * 400).encode()
    with pytest.raises(InvalidForecasterResponse, match="too large to convert to float"):
        await (await backend(raw(body))).describe()


async def test_connection_refused_is_unreachable():
    port = free_port()  # nothing listens there
    tfm = TimesFMClient("timesfm", settings(endpoint=f"http://127.0.0.1:{port}"))
    try:
        with pytest.raises(ForecasterUnreachable) as caught:
            await tfm.describe()
    finally:
        await tfm.aclose()
    assert isinstance(caught.value, BackendUnavailable) and caught.value.reason == "BackendUnreachable"
    assert f"http://127.0.0.1:{port}/v1/model" in str(caught.value) and "ClientConnectorError" in str(caught.value)


async def test_a_server_that_hangs_up_is_unreachable(backend):
    async def hang_up(request: web.Request) -> web.Response:
        assert request.transport is not None
        request.transport.close()
        return web.Response()

    tfm = await backend(hang_up)
    with pytest.raises(ForecasterUnreachable) as caught:
        await tfm.describe()
    assert isinstance(caught.value, BackendUnavailable) and "ServerDisconnectedError" in str(caught.value)
    assert "/v1/model" in str(caught.value)


async def test_a_server_that_never_answers_times_out(backend):
    release = asyncio.Event()

    async def silent(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response()

    tfm = await backend(silent, timeout="300ms")
    try:
        with pytest.raises(ForecasterTimeout) as caught:
            await tfm.describe()
    finally:
        release.set()
    assert isinstance(caught.value, BackendUnavailable) and caught.value.reason == "BackendTimeout"
    assert "within 300ms" in str(caught.value) and "/v1/model" in str(caught.value)


async def test_limits_checked_before_sending(backend):
    server = Server()
    tfm = await backend(server)
    with pytest.raises(BackendRejected, match="maxHorizon 16"):
        await tfm.forecast([req([1.0], 17, 0.5)])
    with pytest.raises(BackendRejected, match="empty"):
        await tfm.forecast([req([], 1, 0.5)])
    assert server.requests == [] and await tfm.forecast([]) == []
    assert (tfm.max_context, tfm.max_horizon) == (8, 16)


async def test_shared_client_is_not_closed_and_own_client_is():
    async with serving(Server()) as url:
        shared = aiohttp.ClientSession()
        tfm = TimesFMClient("timesfm", settings(endpoint=url), shared)
        await tfm.describe()
        await tfm.aclose()
        assert not shared.closed
        await shared.close()
    own = TimesFMClient("timesfm", settings())
    await own.aclose()  # never opened: nothing to close


def test_the_scaler_never_imports_torch():
    assert "torch" not in sys.modules and "timesfm" not in sys.modules
