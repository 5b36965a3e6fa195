"""Faults on real servers: each gives Degraded with its own reason and never lowers the recommendation.

One controller watches the test namespace; each scaler first earns a good recommendation, then
meets its fault. The last good recommendation must stay (same replicas, same generatedAt) and
Ready must say it is being held.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from presage_scaler.controller.app import running
from tests.harness.presage_cluster import (
    apply,
    condition,
    deployment,
    eventually,
    get,
    options,
    predictive_scaler,
    recent_samples,
    seasonal_backend,
    unique,
)
from tests.harness.prometheus import Series

pytestmark = pytest.mark.integration


def _status(o: dict[str, Any]) -> dict[str, Any]:
    return o.get("status") or {}


async def _good(plane, namespace: str, name: str) -> dict[str, Any]:
    return await eventually(
        lambda: get(plane, "predictivescaler", name, namespace),
        lambda o: _status(o).get("recommendedReplicas") is not None and condition(o, "Degraded")["status"] == "False",
        what=f"{name} to get a good recommendation",
    )


async def _degraded(plane, namespace: str, name: str, reason: str, before: dict[str, Any]) -> dict[str, Any]:
    after = await eventually(
        lambda: get(plane, "predictivescaler", name, namespace),
        lambda o: (condition(o, "Degraded") or {}).get("reason") == reason,
        what=f"{name} to be Degraded with {reason}",
    )
    degraded, ready = condition(after, "Degraded"), condition(after, "Ready")
    assert degraded["status"] == "True" and degraded["message"]
    assert ready["status"] == "True" and ready["reason"] == "LastRecommendationHeld", ready
    assert _status(after)["recommendedReplicas"] == _status(before)["recommendedReplicas"]
    assert _status(after)["lastForecast"] == _status(before)["lastForecast"]
    events = json.loads(plane.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    assert any(e["reason"] == reason and e["type"] == "Warning" and e["involvedObject"]["name"] == name for e in events)
    return after


def _scaler(name: str, prom_url: str, query: str, backend: str, **prometheus: Any) -> dict[str, Any]:
    obj = predictive_scaler(name, "web", prom_url, query, backend, interval="3s")
    obj["spec"]["signal"]["prometheus"].update(prometheus)
    return obj


async def test_faults_degrade_with_a_reason_and_keep_the_last_recommendation(
    cluster,
    kube_namespace,
    backend_name,
    prometheus_factory,
):
    samples = recent_samples()
    prom = prometheus_factory(
        Series("app_demand", {"job": "web"}, samples),
        Series("app_demand", {"job": "other"}, samples),
    )
    doomed = prometheus_factory(Series("app_demand", {"job": "web"}, samples))
    spare_backend = unique("sn-spare")
    apply(cluster, seasonal_backend(spare_backend))
    token = base64.b64encode(b"not-checked-by-prometheus").decode()
    apply(
        cluster,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "prom-token"}, "data": {"token": token}},
        kube_namespace,
    )
    apply(cluster, deployment("web", 3), kube_namespace)
    with_secret = {"bearerTokenSecretRef": {"name": "prom-token", "key": "token"}}
    scalers = {
        "prom-down": _scaler("prom-down", doomed.url, 'app_demand{job="web"}', backend_name),
        "two-series": _scaler("two-series", prom.url, 'app_demand{job="web"}', backend_name),
        "secret": _scaler("secret", prom.url, 'app_demand{job="web"}', backend_name, **with_secret),
        "backend": _scaler("backend", prom.url, 'app_demand{job="web"}', spare_backend),
    }
    for obj in scalers.values():
        apply(cluster, obj, kube_namespace)

    async with running(options(cluster, kube_namespace)):
        good = {name: await _good(cluster, kube_namespace, name) for name in scalers}

        doomed.stop()
        two = scalers["two-series"]
        two["spec"]["signal"]["prometheus"]["query"] = "app_demand"
        apply(cluster, two, kube_namespace)
        secret = scalers["secret"]
        secret["spec"]["signal"]["prometheus"]["bearerTokenSecretRef"]["name"] = "no-such-secret"
        apply(cluster, secret, kube_namespace)
        cluster.kubectl("delete", "forecastbackend", spare_backend)

        await _degraded(cluster, kube_namespace, "prom-down", "PrometheusUnreachable", good["prom-down"])
        after = await _degraded(cluster, kube_namespace, "two-series", "TooManySeries", good["two-series"])
        assert (
            "2 series" in condition(after, "Degraded")["message"] or "series" in condition(after, "Degraded")["message"]
        )
        after = await _degraded(cluster, kube_namespace, "secret", "SecretNotFound", good["secret"])
        assert "no-such-secret" in condition(after, "Degraded")["message"]
        after = await _degraded(cluster, kube_namespace, "backend", "BackendNotFound", good["backend"])
        assert spare_backend in condition(after, "Degraded")["message"]

        # Recovery: the backend comes back, the scaler recovers and says so.
        apply(cluster, seasonal_backend(spare_backend))
        recovered = await _good(cluster, kube_namespace, "backend")
        assert condition(recovered, "Ready")["reason"] == "Recommended"
        events = json.loads(cluster.kubectl("get", "events", "-n", kube_namespace, "-o", "json").stdout)["items"]
        assert any(e["reason"] == "Recovered" and e["involvedObject"]["name"] == "backend" for e in events)
    cluster.kubectl("delete", "forecastbackend", spare_backend, "--ignore-not-found", check=False)


async def test_degraded_events_do_not_flood(cluster, kube_namespace, backend_name):
    apply(cluster, deployment("web", 3), kube_namespace)
    # Nothing listens on port 9: every 1s evaluation fails the same way.
    apply(cluster, _scaler("flaky", "http://127.0.0.1:9", "up", backend_name) | {}, kube_namespace)
    obj = get(cluster, "predictivescaler", "flaky", kube_namespace)
    obj["spec"]["interval"] = "1s"
    apply(cluster, obj, kube_namespace)
    async with running(options(cluster, kube_namespace)) as app:
        await eventually(
            lambda: get(cluster, "predictivescaler", "flaky", kube_namespace),
            lambda o: (condition(o, "Degraded") or {}).get("reason") == "PrometheusUnreachable",
            what="flaky to degrade",
        )
        start = app.scalers.evaluations
        await eventually(lambda: app.scalers.evaluations, lambda n: n >= start + 5, what="five more evaluations")
    events = json.loads(cluster.kubectl("get", "events", "-n", kube_namespace, "-o", "json").stdout)["items"]
    mine = [e for e in events if e["involvedObject"]["name"] == "flaky"]
    assert len(mine) == 1, [e["reason"] for e in mine]
    ready = condition(get(cluster, "predictivescaler", "flaky", kube_namespace), "Ready")
    assert ready["status"] == "False" and ready["reason"] == "NoRecommendation"
