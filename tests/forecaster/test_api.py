"""presage-forecaster's HTTP API, against the real server loading a small TimesFM 2.5 checkpoint."""

from __future__ import annotations

import hashlib
import json
import math
import socket
from statistics import NormalDist

import httpx
import numpy as np
import pytest

from tests.harness.forecaster import metric, seasonal

pytestmark = pytest.mark.integration

MAX_CONTEXT, MAX_HORIZON = 256, 48


@pytest.fixture(scope="module")
def server(module_forecaster_factory):
    return module_forecaster_factory(
        "--max-context",
        str(MAX_CONTEXT),
        "--max-horizon",
        str(MAX_HORIZON),
        "--max-series-per-request",
        "8",
        "--max-body-bytes",
        "200000",
    )


def post(server, body, **kwargs) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/forecast", json=body, timeout=60, **kwargs)


def forecast(server, body) -> dict:
    response = post(server, body)
    assert response.status_code == 200, response.text
    return response.json()


def test_health_ready_and_model(server, tiny_checkpoint):
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{server.url}/readyz").status_code == 200
    model = httpx.get(f"{server.url}/v1/model").json()
    assert model["model"] == "presage-testing/timesfm-2.5-tiny-random"  # from presage-checkpoint.json
    assert model["revision"] == "seed-0"
    assert model["weightsSha256"] == hashlib.sha256((tiny_checkpoint / "model.safetensors").read_bytes()).hexdigest()
    assert (model["maxContext"], model["maxHorizon"]) == (MAX_CONTEXT, MAX_HORIZON)
    assert model["quantileLevels"] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    assert model["extrapolatedLevels"] == {"min": 0.01, "max": 0.99}
    assert model["pointForecast"] == "median"
    assert model["architecture"]["num_layers"] == 2 and model["device"] == "cpu"


def test_forecast_shape_point_and_ordering(server):
    values = seasonal(200)
    body = forecast(server, {"horizon": 12, "quantiles": [0.1, 0.5, 0.9], "series": [{"id": "web", "values": values}]})
    assert body["model"] == "presage-testing/timesfm-2.5-tiny-random" and body["revision"] == "seed-0"
    assert body["horizon"] == 12 and body["pointForecast"] == "median"
    assert [q["source"] for q in body["quantiles"]] == ["model", "model", "model"]
    [s] = body["series"]
    assert s["id"] == "web" and len(s["point"]) == 12
    assert s["quantiles"]["0.5"] == s["point"]  # the point forecast is the median
    low, mid, high = (np.array(s["quantiles"][k]) for k in ("0.1", "0.5", "0.9"))
    assert (low <= mid).all() and (mid <= high).all()
    assert (low >= 0).all()  # a non-negative series gets a non-negative forecast
    assert s["context"] == {"received": 200, "used": 200, "truncated": 0, "leadingMissing": 0, "filled": 0}
    assert "timestamps" not in s


def test_timestamps_continue_the_series(server):
    values = seasonal(10)
    stamps = [1_700_000_000 + 300 * i for i in range(10)]
    [s] = forecast(server, {"horizon": 3, "series": [{"values": values, "timestamps": stamps}]})["series"]
    assert s["timestamps"] == [stamps[-1] + 300.0, stamps[-1] + 600.0, stamps[-1] + 900.0]
    assert s["quantiles"] == {}


def test_quantiles_between_and_beyond_the_deciles(server):
    values = seasonal(150, seed=3)
    levels = [0.1, 0.2, 0.25, 0.8, 0.9, 0.95, 0.99, 0.05]
    body = forecast(server, {"horizon": 6, "quantiles": levels, "series": [{"values": values}]})
    treatments = {q["key"]: q for q in body["quantiles"]}
    assert treatments["0.25"] == {"level": 0.25, "key": "0.25", "source": "interpolated", "from": [0.2, 0.3]}
    assert treatments["0.95"] == {"level": 0.95, "key": "0.95", "source": "extrapolated", "from": [0.8, 0.9]}
    assert treatments["0.05"]["source"] == "extrapolated" and treatments["0.05"]["from"] == [0.1, 0.2]
    assert treatments["0.9"]["source"] == "model" and "from" not in treatments["0.9"]
    q = {k: np.array(v) for k, v in body["series"][0]["quantiles"].items()}
    deciles = forecast(server, {"horizon": 6, "quantiles": [0.2, 0.3], "series": [{"values": values}]})
    q20, q30 = (np.array(deciles["series"][0]["quantiles"][k]) for k in ("0.2", "0.3"))
    z = NormalDist().inv_cdf

    def between(level, lo, hi, q_lo, q_hi):
        return q_lo + (z(level) - z(lo)) / (z(hi) - z(lo)) * (q_hi - q_lo)

    assert q["0.25"] == pytest.approx(between(0.25, 0.2, 0.3, q20, q30), rel=1e-9)
    for level in (0.95, 0.99):
        expected = between(level, 0.8, 0.9, q["0.8"], q["0.9"])
        assert q[f"{level:g}"] == pytest.approx(expected, rel=1e-9)
        assert (q[f"{level:g}"] >= q["0.9"]).all()
    expected = np.maximum(between(0.05, 0.1, 0.2, q["0.1"], q["0.2"]), 0.0)  # clipped: the series is demand
    assert q["0.05"] == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_use_quantile_head_false_is_point_only(server):
    body = forecast(
        server, {"horizon": 5, "quantiles": [0.5, 0.95], "useQuantileHead": False, "series": [{"values": seasonal(64)}]}
    )
    assert [q["source"] for q in body["quantiles"]] == ["point", "point"]
    s = body["series"][0]
    assert s["quantiles"]["0.95"] == s["point"] == s["quantiles"]["0.5"]


def test_long_series_are_cut_to_the_most_recent_max_context(server):
    values = seasonal(MAX_CONTEXT + 100, seed=5)
    [cut] = forecast(server, {"horizon": 8, "quantiles": [0.9], "series": [{"values": values}]})["series"]
    assert cut["context"]["received"] == MAX_CONTEXT + 100
    assert cut["context"]["used"] == MAX_CONTEXT and cut["context"]["truncated"] == 100
    [recent] = forecast(server, {"horizon": 8, "quantiles": [0.9], "series": [{"values": values[-MAX_CONTEXT:]}]})[
        "series"
    ]
    assert cut["point"] == pytest.approx(recent["point"], rel=1e-5)
    metrics = httpx.get(f"{server.url}/metrics").text
    assert metric(metrics, "presage_forecaster_series_truncated_total") >= 1


def test_missing_points_are_dropped_or_filled_and_reported(server):
    values = seasonal(120, seed=7)
    gappy = [None, None, *values[:50], None, *values[51:]]
    [s] = forecast(server, {"horizon": 4, "series": [{"values": gappy}]})["series"]
    assert s["context"] == {"received": 122, "used": 120, "truncated": 0, "leadingMissing": 2, "filled": 1}
    filled = [*values[:50], (values[49] + values[51]) / 2, *values[51:]]
    [same] = forecast(server, {"horizon": 4, "series": [{"values": filled}]})["series"]
    assert s["point"] == pytest.approx(same["point"], rel=1e-6)


def test_scale_equivariance(server):
    """TimesFM is affine-equivariant, and the server's per-series scaling keeps it so."""
    values = np.array(seasonal(160, seed=11))
    [a] = forecast(server, {"horizon": 6, "quantiles": [0.9], "series": [{"values": values.tolist()}]})["series"]
    [b] = forecast(server, {"horizon": 6, "quantiles": [0.9], "series": [{"values": (values * 1e4).tolist()}]})[
        "series"
    ]
    assert np.array(b["point"]) == pytest.approx(np.array(a["point"]) * 1e4, rel=1e-4)


@pytest.mark.parametrize(
    ("body", "status", "code", "names"),
    [
        ({"horizon": 4, "series": [{"values": []}]}, 422, "EmptySeries", "series[0].values"),
        ({"horizon": 4, "series": [{"values": [1]}, {"values": [None, None]}]}, 422, "AllMissing", "series[1].values"),
        ({"horizon": MAX_HORIZON + 1, "series": [{"values": [1]}]}, 422, "HorizonTooLong", f"maxHorizon {MAX_HORIZON}"),
        ({"horizon": 4, "quantiles": ["p95"], "series": [{"values": [1]}]}, 422, "UnknownQuantileFormat", "'p95'"),
        ({"horizon": 4, "quantiles": [0.999], "series": [{"values": [1]}]}, 422, "QuantileOutOfRange", "0.999"),
        ({"horizon": 4, "series": [{"values": [1]}] * 9}, 413, "TooManySeries", "limit is 8"),
        ({"horizon": 4, "series": [{"values": [1.5] * 50_000}]}, 413, "PayloadTooLarge", "200000 bytes"),
        ({"series": [{"values": [1]}]}, 422, "InvalidHorizon", "horizon"),
        ({"horizon": 4, "series": [{"values": [1, "x"]}]}, 422, "InvalidValue", "series[0].values[1]"),
    ],
)
def test_bad_input_is_4xx_naming_the_problem(server, body, status, code, names):
    response = post(server, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and names in error["message"]


def test_malformed_json_and_infinity(server):
    bad = httpx.post(f"{server.url}/v1/forecast", content=b'{"horizon": 4, "series": [', timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "InvalidJSON"
    inf = httpx.post(
        f"{server.url}/v1/forecast", content=b'{"horizon": 4, "series": [{"values": [1, Infinity]}]}', timeout=10
    )
    assert inf.status_code == 422 and "infinities" in inf.json()["error"]["message"]
    nan = httpx.post(f"{server.url}/v1/forecast", content=b'{"horizon": 2, "series": [{"values": [1, NaN, 3]}]}')
    assert nan.status_code == 200 and nan.json()["series"][0]["context"]["filled"] == 1
    assert httpx.get(f"{server.url}/v1/forecast").status_code == 405


def test_declared_oversized_body_is_refused_before_reading(server):
    payload = json.dumps({"horizon": 1, "series": [{"values": [1.0] * 60_000}]}).encode()
    response = httpx.post(
        f"{server.url}/v1/forecast", content=payload, headers={"content-type": "application/json"}, timeout=30
    )
    assert response.status_code == 413 and response.json()["error"]["code"] == "PayloadTooLarge"


def test_absurd_content_length_is_refused_without_waiting_for_the_body(server):
    """413 at once on the declared size: the server neither waits for nor reads 99 TB."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
        conn.sendall(
            b"POST /v1/forecast HTTP/1.1\r\nHost: forecaster\r\nContent-Type: application/json\r\n"
            b"Content-Length: 99999999999999\r\n\r\n"
        )
        answer = b""  # no body was sent: an answer at all means it was not awaited
        while not answer.endswith(b"}}") and (chunk := conn.recv(65536)):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b'"PayloadTooLarge"' in answer


def test_chunked_body_is_cut_off_at_the_limit(server):
    """Without a Content-Length the body is counted while it streams and refused past the limit."""
    sent = 0

    def chunks():
        nonlocal sent
        yield b'{"horizon": 1, "series": [{"values": [1'
        while sent < 1_000_000:  # 5x the limit; the server stops reading at 200,000 bytes
            sent += 10_000
            yield b", 1" * 3_333 + b" "

    response = httpx.post(f"{server.url}/v1/forecast", content=chunks(), timeout=30)
    assert "content-length" not in response.request.headers
    assert response.status_code == 413 and response.json()["error"]["code"] == "PayloadTooLarge"


def test_metrics(server):
    before = httpx.get(f"{server.url}/metrics").text
    forecast(server, {"horizon": 2, "series": [{"values": seasonal(40)}, {"values": seasonal(50)}]})
    post(server, {"horizon": 2, "series": []})
    after = httpx.get(f"{server.url}/metrics").text
    ok = {"path": "/v1/forecast", "code": "200"}
    assert (
        metric(after, "presage_forecaster_requests_total", **ok)
        == metric(before, "presage_forecaster_requests_total", **ok) + 1
    )
    assert metric(after, "presage_forecaster_requests_total", path="/v1/forecast", code="422") >= 1
    assert metric(after, "presage_forecaster_series_total") - metric(before, "presage_forecaster_series_total") == 2
    for name in (
        "presage_forecaster_batch_size_count",
        "presage_forecaster_queue_wait_seconds_count",
        "presage_forecaster_forward_seconds_count",
        "presage_forecaster_request_duration_seconds_count",
    ):
        assert metric(after, name) > 0, name
    assert metric(after, "presage_forecaster_ready") == 1
    assert metric(after, "presage_forecaster_model_info", model="presage-testing/timesfm-2.5-tiny-random") == 1
    assert math.isfinite(metric(after, "presage_forecaster_model_load_seconds"))
