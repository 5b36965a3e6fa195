"""Faults on real servers: each gives Degraded with its own reason and never lowers the recommendation.

One controller watches the test namespace; each scaler first earns a good recommendation, then
meets its fault. The last good recommendation must stay (same replicas, same generatedAt) and
Ready must say it is being held.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from presage_scaler.controller.app import running
from tests.harness.live_values import LiveValues
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


async def test_a_signal_whose_exporter_stops_is_stale_once_and_keeps_its_recommendation(
    cluster, kube_namespace, backend_name, prometheus_factory
):
    """Half an hour of backfilled demand, then a live exporter Prometheus scrapes every second. Once
    the exporter stops, Prometheus marks the series stale; when its newest sample is older than the
    bound (lead time 30s plus interval 3s, at least 3 steps of 10s: 33s), the scaler is Degraded
    with SignalStale, says which signal and how old, keeps serving its last good recommendation, and
    warns once however many evaluations fail the same way."""
    exporter = LiveValues(app_live_demand=140.0)
    # The backfill ends beyond Prometheus' 5-minute lookback, so only the scraped series is recent.
    backfilled = [(at, 140.0) for at, _ in recent_samples(hours=0.5)[:-6]]
    prom = prometheus_factory(Series("app_live_demand", {"job": "exporter"}, backfilled), start=False)
    prom.add_scrape_target("exporter", exporter.address, interval="1s")
    prom.start()
    # Scraped for long enough that the newest whole 10s steps hold samples of the live series.
    scraped = {"query": 'count_over_time(app_live_demand{instance!=""}[1m]) >= 25'}
    await eventually(
        lambda: httpx.get(f"{prom.url}/api/v1/query", params=scraped).json()["data"]["result"],
        bool,
        what="25 seconds of the exporter scraped",
    )
    apply(cluster, deployment("web", 3), kube_namespace)
    obj = _scaler("stops", prom.url, "max(app_live_demand)", backend_name)
    obj["spec"]["signal"].update(history="30m", resolution="10s")
    obj["spec"]["leadTime"] = {"static": "30s"}
    apply(cluster, obj, kube_namespace)
    async with running(options(cluster, kube_namespace)) as app:
        await _good(cluster, kube_namespace, "stops")
        exporter.stop()
        stale = await eventually(
            lambda: get(cluster, "predictivescaler", "stops", kube_namespace),
            lambda o: (condition(o, "Degraded") or {}).get("reason") == "SignalStale",
            timeout=120.0,
            what="stops to be Degraded with SignalStale",
        )
        degraded, ready = condition(stale, "Degraded"), condition(stale, "Ready")
        assert degraded["status"] == "True"
        assert degraded["message"].startswith("signal demand: its newest sample is ")
        assert "over the 33s bound" in degraded["message"]
        assert ready["status"] == "True" and ready["reason"] == "LastRecommendationHeld", ready
        start = app.scalers.evaluations
        await eventually(lambda: app.scalers.evaluations, lambda n: n >= start + 3, what="three more evaluations")
        later = get(cluster, "predictivescaler", "stops", kube_namespace)
    assert condition(later, "Degraded")["reason"] == "SignalStale"
    assert _status(later)["recommendedReplicas"] == _status(stale)["recommendedReplicas"]
    assert _status(later)["lastForecast"] == _status(stale)["lastForecast"]
    events = json.loads(cluster.kubectl("get", "events", "-n", kube_namespace, "-o", "json").stdout)["items"]
    warned = [e for e in events if e["involvedObject"]["name"] == "stops" and e["reason"] == "SignalStale"]
    assert len(warned) == 1 and warned[0]["type"] == "Warning" and warned[0].get("count", 1) == 1, warned


async def test_without_backend_ref_the_backend_named_default_is_used(cluster, kube_namespace, prometheus_factory):
    """The reference: "If unset, the backend named "default" is used." Missing, it is what
    BackendNotFound names; created, the scaler recovers on it."""
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", 3), kube_namespace)
    obj = _scaler("unnamed", prom.url, 'app_demand{job="web"}', "unused")
    del obj["spec"]["forecast"]
    apply(cluster, obj, kube_namespace)
    cluster.kubectl("delete", "forecastbackend", "default", "--ignore-not-found", check=False)
    try:
        async with running(options(cluster, kube_namespace)):
            missing = await eventually(
                lambda: get(cluster, "predictivescaler", "unnamed", kube_namespace),
                lambda o: (condition(o, "Degraded") or {}).get("reason") == "BackendNotFound",
                what="unnamed to miss the default backend",
            )
            assert "'default'" in condition(missing, "Degraded")["message"]
            apply(cluster, seasonal_backend("default"))
            found = await _good(cluster, kube_namespace, "unnamed")
        assert _status(found)["lastForecast"]["backend"] == "default"
        assert _status(found)["lastForecast"]["model"] == "seasonal-naive/1hx2"
    finally:
        cluster.kubectl("delete", "forecastbackend", "default", "--ignore-not-found", check=False)


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
