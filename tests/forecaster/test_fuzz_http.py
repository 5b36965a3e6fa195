"""No request takes presage-forecaster to a 5xx: hostile bodies against the real server over HTTP.

The server loads the tests' small TimesFM 2.5 checkpoint, so a body the request layer accepts runs a
real forward pass and its answer is checked too. Every answer is a forecast of the request or a
documented 4xx error of at most a few KiB, and the server logs no traceback. The number of examples
comes from the hypothesis profile (``PRESAGE_FUZZ_PROFILE``); test_fuzz_protocol.py fuzzes the
request layer in-process with the same bodies, many times faster.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from presage_forecaster.protocol import MAX_ABS_VALUE

from tests.forecaster.fuzzing import (
    BASES,
    ISSUE_CASES,
    MAX_CONTEXT,
    MAX_HORIZON,
    MAX_SERIES,
    alternating,
    assert_documented_error,
    assert_forecast,
    issue_body,
    numeric_requests,
)
from tests.harness.hostile_json import bodies

pytestmark = pytest.mark.integration

LIMITS = ("--max-context", str(MAX_CONTEXT), "--max-horizon", str(MAX_HORIZON))
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def server(module_forecaster_factory):
    return module_forecaster_factory(*LIMITS, "--max-series-per-request", str(MAX_SERIES))


@pytest.fixture(scope="module")
def client(server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


def post(server, client: httpx.Client, body: bytes) -> httpx.Response:
    """POST ``body`` and check the server logged no traceback while answering it."""
    logged = server.log_path.stat().st_size
    response = client.post("/v1/forecast", content=body, headers={"content-type": "application/json"})
    with server.log_path.open("rb") as log:
        log.seek(logged)
        assert b"Traceback" not in log.read(), server.log_tail()
    return response


@FUZZ
@given(bodies(BASES))
def test_any_body_gets_a_forecast_or_a_documented_error(server, client, body: bytes) -> None:
    response = post(server, client, body)
    event(f"HTTP {response.status_code}")
    if response.status_code == 200:
        assert_forecast(json.loads(body), response.status_code, response.content)
    else:
        assert_documented_error(response.status_code, response.content)


@FUZZ
@given(numeric_requests())
def test_any_number_anywhere_gets_a_forecast_or_a_documented_error(server, client, request: dict[str, Any]) -> None:
    """Requests that reach the forward pass more often: any number in each numeric field."""
    response = post(server, client, json.dumps(request).encode())
    event(f"HTTP {response.status_code}")
    if response.status_code == 200:
        assert_forecast(request, response.status_code, response.content)
    else:
        assert_documented_error(response.status_code, response.content)


@pytest.mark.parametrize(
    ("template", "status", "code", "field"), [case[1:] for case in ISSUE_CASES], ids=[case[0] for case in ISSUE_CASES]
)
def test_inputs_that_were_500_are_documented_errors_naming_the_field(server, client, template, status, code, field):
    response = post(server, client, issue_body(template))
    assert response.status_code == status, response.text
    error = assert_documented_error(response.status_code, response.content)
    assert error["code"] == code and error.get("field") == field


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_values_at_the_bound_are_forecast_at_full_context(forecaster_factory, dtype):
    """MAX_ABS_VALUE holds where it is tightest: full context, the largest variance for the magnitude."""
    server = forecaster_factory(*LIMITS, "--dtype", dtype)
    level = 1.2345e100  # a constant series this large was not finite before it was kept at zeros
    request = {
        "horizon": MAX_HORIZON,
        "quantiles": [0.01, 0.99],
        "series": [
            {"id": "alternating", "values": alternating(MAX_ABS_VALUE, MAX_CONTEXT)},
            {"id": "halves", "values": [-MAX_ABS_VALUE] * (MAX_CONTEXT // 2) + [MAX_ABS_VALUE] * (MAX_CONTEXT // 2)},
            {"id": "spike", "values": [0.0] * (MAX_CONTEXT - 1) + [MAX_ABS_VALUE]},
            {"id": "constant", "values": [level] * 64},
        ],
    }
    with httpx.Client(base_url=server.url, timeout=120) as client:
        response = post(server, client, json.dumps(request).encode())
    assert_forecast(request, response.status_code, response.content)
    constant = response.json()["series"][3]
    assert constant["point"] == pytest.approx([level] * MAX_HORIZON, rel=1e-6)


MAX_BODY = 1024 * 1024
MEMORY_GROWTH_LIMIT_KIB = 256 * 1024
"""Peak RSS the largest bodies may add after a first full-size forward pass: the request layer holds
one decoded body at a time, bounded by --max-body-bytes, whatever the body holds."""


def _largest_bodies() -> list[bytes]:
    """Bodies at the size limit, one of each shape that costs the request layer most to decode."""
    filler = MAX_BODY - 64
    numbers = ",".join(["1"] * (filler // 2))
    return [
        f'{{"horizon": 8, "series": [{{"id": "a", "values": [{numbers}]}}]}}'.encode()[:MAX_BODY],
        b"[" * filler,
        ('{"horizon": 8, "series": [' + ",".join(['{"id": "s", "values": [1]}'] * (filler // 27)) + "]}").encode(),
        f'{{"horizon": 8, "id": "{"x" * filler}"}}'.encode(),
        b"1" * (MAX_BODY + 1),
    ]


def test_the_largest_bodies_cost_bounded_memory(forecaster_factory) -> None:
    server = forecaster_factory(*LIMITS, "--max-body-bytes", str(MAX_BODY))
    full = {"horizon": MAX_HORIZON, "series": [{"id": "a", "values": alternating(1000.0, MAX_CONTEXT)}]}
    with httpx.Client(base_url=server.url, timeout=120) as client:
        warm = post(server, client, json.dumps(full).encode())
        assert_forecast(full, warm.status_code, warm.content)
        before = server.memory_kib("VmHWM")
        for _ in range(3):
            for body in _largest_bodies():
                response = post(server, client, body)
                if response.status_code == 200:  # a long series is cut to the model's context, and forecast
                    assert_forecast(json.loads(body), response.status_code, response.content)
                else:
                    assert_documented_error(response.status_code, response.content)
        growth = server.memory_kib("VmHWM") - before
    assert growth < MEMORY_GROWTH_LIMIT_KIB, f"peak RSS grew by {growth} KiB"
