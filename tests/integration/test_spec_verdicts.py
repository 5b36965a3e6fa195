"""presage and the real API server agree on every spec: what one accepts, the other accepts.

Hostile specs (tests/harness/hostile_specs.py, JSON-safe) are sent to kube-apiserver v1.37.2 as a
server-side dry-run create with strict field validation, exactly what ``kubectl apply`` does, and
parsed by presage. A spec the API server stores must parse in presage (or a tenant could write a
scaler that presage cannot run); a spec presage refuses must be refused at admission (or the user
learns it only from the scaler's Degraded condition, and ``presage backtest --spec`` would not be
validated "exactly as the API server would").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from presage_scaler.api.forecast_backend import ForecastBackendSpec
from presage_scaler.api.kinds import API_VERSION
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.schema import APIModel
from tests.harness.hostile_specs import SCALER_BASES, backend_specs, scaler_specs
from tests.harness.kube import KubeControlPlane

pytestmark = pytest.mark.integration

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def api(cluster: KubeControlPlane) -> Iterator[httpx.Client]:
    with cluster.http_client() as client:
        yield client


def _server_accepts(api: httpx.Client, plural: str, kind: str, spec: Any) -> tuple[bool, str]:
    namespaced = plural == "predictivescalers"
    path = f"/apis/{API_VERSION}/" + ("namespaces/default/" if namespaced else "") + plural
    body = {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": "verdict"}, "spec": spec}
    response = api.post(path, params={"dryRun": "All", "fieldValidation": "Strict"}, content=json.dumps(body))
    assert response.status_code in (200, 201, 400, 422), response.text
    return response.status_code in (200, 201), response.json().get("message", "")


def _presage_accepts(model: type[APIModel], spec: Any) -> tuple[bool, str]:
    try:
        parse(model, spec)
    except SpecError as err:
        return False, str(err)
    return True, ""


def _agree(api: httpx.Client, plural: str, kind: str, model: type[APIModel], spec: Any) -> None:
    server, server_says = _server_accepts(api, plural, kind, spec)
    presage, presage_says = _presage_accepts(model, spec)
    assert server == presage, (
        f"API server {'accepts' if server else 'refuses'} ({server_says}), "
        f"presage {'accepts' if presage else 'refuses'} ({presage_says}):\n{json.dumps(spec, indent=1)}"
    )


def _base_with(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    spec = json.loads(json.dumps(SCALER_BASES[0]))
    node = spec
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return spec


def test_the_bases_are_valid_on_both_sides(api: httpx.Client) -> None:
    """Without this the property below could pass by both sides refusing everything."""
    for spec in SCALER_BASES:
        assert _server_accepts(api, "predictivescalers", "PredictiveScaler", spec)[0]
        assert _presage_accepts(PredictiveScalerSpec, spec)[0]


@FUZZ
@given(spec=scaler_specs(json_safe=True))
def test_predictive_scaler_verdicts_agree(api: httpx.Client, spec: Any) -> None:
    _agree(api, "predictivescalers", "PredictiveScaler", PredictiveScalerSpec, spec)


@FUZZ
@given(spec=backend_specs(json_safe=True))
def test_forecast_backend_verdicts_agree(api: httpx.Client, spec: Any) -> None:
    _agree(api, "forecastbackends", "ForecastBackend", ForecastBackendSpec, spec)


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("leadTime", "static"), "99999999999h", "spec.leadTime.static"),
        (("forecast", "horizon"), "11111111111111111111s", "spec.forecast.horizon"),
        (("policy", "stabilization", "scaleDownWindow"), "2562048h", "spec.policy.stabilization.scaleDownWindow"),
        (("policy", "maxReplicas"), 2**31, "spec.policy.maxReplicas"),
        (("policy", "headroom"), -3, "spec.policy.headroom"),
        (("capacity", "perReplica"), -5, "spec.capacity.perReplica"),
        (("policy", "headroom"), 10**30, "spec.policy.headroom"),
        (("policy", "reactiveFloor", "bufferSize"), -2, "spec.policy.reactiveFloor.bufferSize"),
        (("policy", "stabilization", "maxScaleUpRate"), -1, "spec.policy.stabilization.maxScaleUpRate"),
        (("policy", "stabilization", "maxScaleDownRate"), -1, "spec.policy.stabilization.maxScaleDownRate"),
    ],
)
def test_the_issue_reproductions_are_refused_naming_the_field(
    api: httpx.Client, path: tuple[str, ...], value: Any, field: str
) -> None:
    spec = _base_with(path, value)
    accepted, message = _server_accepts(api, "predictivescalers", "PredictiveScaler", spec)
    assert not accepted and field in message, message
    assert not _presage_accepts(PredictiveScalerSpec, spec)[0]


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("policy", "targetQuantile"), "1.5", '"1.5" is not a quantile strictly between 0 and 1'),
        (("policy", "headroom"), "-5%", '"-5%" is not a non-negative integer, or a string such as "2.5" or "10%"'),
        (("interval",), "soon", '"soon" is not a duration such as 30s, 5m, 1h30m or 7d'),
        (("forecast", "horizon"), "1m", "forecast.horizon must be at least the lead time"),
        (("policy", "headroom"), 2.5, "spec.policy.headroom in body must be of type integer,string"),
        # A value of the wrong JSON type is refused by the API server's own type check, before any rule of
        # presage's can run: it names the field and the type wanted, not the value.
        (("policy", "targetQuantile"), 0.9, "spec.policy.targetQuantile in body must be of type string"),
        # The base is an Agones Fleet with maxRecommendationAge 5m: an interval as long refuses every answer.
        (("interval",), "5m", "interval must be shorter than scaleTargetRef.agones.maxRecommendationAge"),
    ],
)
def test_refusals_read_like_presage_s_own(api: httpx.Client, path: tuple[str, ...], value: Any, expected: str) -> None:
    """One line naming the field, quoting the value and saying what is allowed: no raw regex, no CEL
    conversion error, no list of anyOf branches."""
    spec = _base_with(path, value)
    accepted, message = _server_accepts(api, "predictivescalers", "PredictiveScaler", spec)
    assert not accepted and expected in message, message
    for noise in ("should match '^", "type conversion error", "anyOf"):
        assert noise not in message, message
    problems = _presage_accepts(PredictiveScalerSpec, spec)[1]
    if isinstance(value, str) and "must be" not in expected:
        assert expected in problems, problems
