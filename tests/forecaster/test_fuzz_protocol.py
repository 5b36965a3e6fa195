"""No request body makes the forecaster's request layer raise: fuzzing protocol.py in-process.

Bytes go through ``decode_body`` and ``parse_request`` exactly as the server's handler calls them;
the outcome must be a documented 4xx ``RequestError`` or a call the engine can forecast and the
response can carry. (The HTTP app itself is fuzzed against the real server in test_fuzz_http.py.)
The number of examples comes from the hypothesis profile (``PRESAGE_FUZZ_PROFILE``).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from presage_forecaster import protocol
from presage_forecaster.settings import Settings

from tests.forecaster.fuzzing import (
    BASES,
    ISSUE_CASES,
    MAX_CONTEXT,
    MAX_HORIZON,
    MAX_SERIES,
    assert_documented_error,
    issue_body,
    numeric_requests,
    render,
)
from tests.harness.hostile_json import bodies

SETTINGS = Settings(
    model="/weights", max_context=MAX_CONTEXT, max_horizon=MAX_HORIZON, max_series_per_request=MAX_SERIES
)
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(body: bytes) -> tuple[int, bytes, protocol.ForecastCall | None]:
    """What the handler would answer before the forward pass: (status, error body, the call)."""
    try:
        call = protocol.parse_request(protocol.decode_body(body), SETTINGS)
    except protocol.RequestError as err:
        return err.status, render(err.body()), None
    return 200, b"", call


def assert_forecastable(call: protocol.ForecastCall) -> None:
    """What the engine and the response rely on: finite values within the bound, sendable ids, and
    a response that renders as strict JSON even when every forecast is at the bound."""
    assert 1 <= call.horizon <= MAX_HORIZON and 1 <= len(call.series) <= MAX_SERIES
    for series in call.series:
        assert 1 <= series.values.size <= MAX_CONTEXT
        assert np.isfinite(series.values).all() and np.abs(series.values).max() <= protocol.MAX_ABS_VALUE
        extreme = np.full((call.horizon, 10), -protocol.MAX_ABS_VALUE)
        render(protocol.series_result(series, call, extreme))


@FUZZ
@given(bodies(BASES))
def test_any_body_is_a_call_or_a_documented_error(body: bytes) -> None:
    status, content, call = outcome(body)
    if call is None:
        assert_documented_error(status, content)
    else:
        assert_forecastable(call)


@FUZZ
@given(numeric_requests())
def test_any_number_anywhere_is_a_call_or_a_documented_error(request: dict[str, Any]) -> None:
    status, content, call = outcome(json.dumps(request).encode())
    if call is None:
        assert_documented_error(status, content)
    else:
        assert_forecastable(call)


@pytest.mark.parametrize(
    ("template", "status", "code", "field"), [case[1:] for case in ISSUE_CASES], ids=[case[0] for case in ISSUE_CASES]
)
def test_inputs_that_were_500_are_documented_errors_naming_the_field(template, status, code, field) -> None:
    answer, content, call = outcome(issue_body(template))
    assert call is None and answer == status
    error = assert_documented_error(answer, content)
    assert error["code"] == code and error.get("field") == field


@pytest.mark.parametrize("magnitude", [protocol.MAX_ABS_VALUE, -protocol.MAX_ABS_VALUE, 10**150, 1.2345e100])
def test_values_up_to_the_bound_are_accepted(magnitude) -> None:
    _, _, call = outcome(json.dumps({"horizon": 1, "series": [{"values": [0, magnitude]}]}).encode())
    assert call is not None and call.series[0].values.tolist() == [0.0, float(magnitude)]


@pytest.mark.parametrize("magnitude", [np.nextafter(protocol.MAX_ABS_VALUE, np.inf), -1.5e150, 10**151, 1e300])
def test_values_beyond_the_bound_are_refused_naming_the_value(magnitude) -> None:
    status, content, _ = outcome(json.dumps({"horizon": 1, "series": [{"values": [0, 1, magnitude]}]}).encode())
    error = assert_documented_error(status, content)
    assert (error["code"], error["field"]) == ("InvalidValue", "series[0].values[2]")
    assert "1e+150" in error["message"]


def test_error_messages_quote_the_client_value_shortened() -> None:
    status, content, _ = outcome(json.dumps({"horizon": 1, "series": [{"id": ["x" * 100_000] * 1000}]}).encode())
    error = assert_documented_error(status, content)
    assert error["field"] == "series[0].id" and "..." in error["message"] and len(error["message"]) < 400
