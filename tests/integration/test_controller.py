"""The controller against a real kube-apiserver and a real Prometheus: status, conditions, events."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest

from presage_scaler.api.quantities import format_significant
from presage_scaler.clients.kube.events import EventRecorder
from presage_scaler.clients.prometheus import PrometheusClientPool
from presage_scaler.controller.app import running
from presage_scaler.controller.predictive_scaler_controller import ScalerController
from presage_scaler.controller.predictive_scaler_objects import ScalerEntry
from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.serving.store import RecommendationStore
from tests.harness.fixtures_prometheus import PrometheusFactory
from tests.harness.guard_reading import forecast_uncertainty_named, guard_held_at
from tests.harness.kube import KubeControlPlane
from tests.harness.presage_cluster import (
    WRITES_EVERY_EVALUATION,
    apply,
    condition,
    demand,
    deployment,
    eventually,
    get,
    options,
    predictive_scaler,
    recent_samples,
    scaler_table,
)
from tests.harness.prometheus import Series
from tests.harness.simulated_controller import scaler_controller

pytestmark = pytest.mark.integration

GUARD, WINDOW = "ForecastUncertainty", "ScaleDownWindow"


async def test_scaler_gets_status_conditions_and_events(cluster, kube_namespace, backend_name, prometheus_factory):
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", 3), kube_namespace)
    apply(cluster, predictive_scaler("web", "web", prom.url, "app_demand", backend_name), kube_namespace)

    async with running(options(cluster, kube_namespace)) as app:
        scaler = await eventually(
            lambda: get(cluster, "predictivescaler", "web", kube_namespace),
            lambda o: (o.get("status") or {}).get("recommendedReplicas") is not None,
            what="a recommendation in status",
        )
        status = scaler["status"]
        assert status["currentReplicas"] == 3
        assert status["observedGeneration"] == scaler["metadata"]["generation"]
        assert status["breakdown"]["bindingSignal"] == "demand"  # the single signal, never a backend's name
        assert status["lastForecast"]["backend"] == backend_name  # the ForecastBackend, not its type
        # Written as kubectl get's FORECAST shows it: 4 significant digits, not a fraction's 4 decimals.
        point = status["lastForecast"]["point"]
        assert point == format_significant(float(point)), point
        assert status["lastForecast"]["leadTimeSeconds"] == 120
        assert set(status["lastForecast"]["quantiles"]) == {"0.5", "0.9"}
        [signal] = status["signalStatuses"]
        assert signal["name"] == "demand" and float(signal["observed"]) == pytest.approx(
            demand(datetime.now(UTC)), abs=6.0
        )
        ready, degraded = condition(scaler, "Ready"), condition(scaler, "Degraded")
        assert ready["status"] == "True" and ready["reason"] == "Recommended"
        assert degraded["status"] == "False" and degraded["reason"] == "EvaluationSucceeded"
        adjusted = condition(scaler, "SpecAdjusted")
        assert (adjusted["status"], adjusted["reason"]) == ("False", "AsSpecified"), adjusted
        row = scaler_table(cluster, kube_namespace)["web"]
        assert (row["Binding"], row["Spec"], row["Forecast"]) == ("demand", "AsSpecified", point)
        assert f"recommended {status['recommendedReplicas']} replicas" in ready["message"]
        # The store every server reads is fed from that status.
        stored = app.store.get(kube_namespace, "web")
        assert stored is not None and stored.recommended_replicas == status["recommendedReplicas"]
        # Shadow scoring starts with the first evaluation: its prediction waits for its lead time.
        assert status["shadow"]["pending"], status["shadow"]

        # The health port (the kubelet's probes, Prometheus) and the webhook port both answer them.
        for port in (app.health.port, app.http.port):
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
                assert (await http.get("/readyz")).status_code == 200
                assert (await http.get("/healthz")).status_code == 200
                exposition = (await http.get("/metrics")).text
                assert "presage_recommended_replicas" in exposition
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.health.port}") as http:
            assert (await http.post("/agones/v1/scale", content=b"{}")).status_code == 404  # no webhook there
            exposition = (await http.get("/metrics")).text
        labels = f'namespace="{kube_namespace}",scaler="web"'
        recommended = next(
            line for line in exposition.splitlines() if line.startswith(f"presage_recommended_replicas{{{labels}")
        )
        assert float(recommended.split()[-1]) == status["recommendedReplicas"]
        assert f"presage_current_replicas{{{labels}}} 3.0" in exposition
        assert "presage_evaluation_duration_seconds_count" in exposition
        assert "presage_prometheus_request_duration_seconds_count" in exposition

        backend = await eventually(
            lambda: get(cluster, "forecastbackend", backend_name),
            lambda o: condition(o, "Ready") is not None,
            what="the backend probe",
        )
        assert backend["status"]["model"] == "seasonal-naive/1hx2"
        assert condition(backend, "Ready")["status"] == "True"
        assert backend["status"]["observedGeneration"] == backend["metadata"]["generation"]
        assert backend["status"]["lastProbeTime"]

        events = json.loads(cluster.kubectl("get", "events", "-n", kube_namespace, "-o", "json").stdout)["items"]
        reasons = {e["reason"] for e in events if e["involvedObject"]["name"] == "web"}
        assert "RecommendationChanged" in reasons

        # A spec change is evaluated at once, not an interval later.
        patched = predictive_scaler(
            "web", "web", prom.url, "app_demand", backend_name, policy={"maxReplicas": 100, "minReplicas": 40}
        )
        patched["spec"]["interval"] = "10m"
        apply(cluster, patched, kube_namespace)
        scaler = await eventually(
            lambda: get(cluster, "predictivescaler", "web", kube_namespace),
            lambda o: (o.get("status") or {}).get("recommendedReplicas") == 40,
            timeout=20,
            what="the new minReplicas to apply",
        )
        assert scaler["status"]["breakdown"]["constraint"] == "MinReplicas"
        assert scaler["status"]["observedGeneration"] == scaler["metadata"]["generation"]

    columns = cluster.kubectl("get", "predictivescalers", "-n", kube_namespace).stdout
    header, row = columns.splitlines()[:2]
    assert header.split()[:8] == ["NAME", "MODE", "TARGET", "CURRENT", "FORECAST", "RECOMMENDED", "READY", "REASON"]
    assert row.split()[:8] == ["web", "Shadow", "web", "3", row.split()[4], "40", "True", "EvaluationSucceeded"]


async def test_unchanged_statuses_are_held_for_the_next_evaluation_and_changes_written_at_once(
    cluster, kube_namespace, backend_name, prometheus_factory
):
    """An evaluation that changes nothing anyone acts on holds its status for the next one: about
    one write per two evaluations, what KEDA is served never older than two intervals, and a
    visible change (the Deployment scaled by hand) written by the first evaluation that sees it."""
    interval = timedelta(seconds=5)
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", 3), kube_namespace)
    apply(cluster, predictive_scaler("web", "web", prom.url, "app_demand", backend_name, interval="5s"), kube_namespace)
    async with running(options(cluster, kube_namespace)) as app:
        await eventually(
            lambda: app.store.get(kube_namespace, "web"), lambda item: item is not None, what="a recommendation"
        )
        evaluations, writes = app.scalers.evaluations, app.scalers.status_writes
        served_ages = []
        for _ in range(60):  # 30 s: six evaluations
            served_ages.append(app.store.age(app.store.get(kube_namespace, "web"), datetime.now(UTC)))
            await asyncio.sleep(0.5)
        evaluations, writes = app.scalers.evaluations - evaluations, app.scalers.status_writes - writes
        assert evaluations >= 5
        assert evaluations // 2 <= writes < evaluations
        assert max(served_ages) <= 2 * interval + timedelta(seconds=2)

        cluster.kubectl("scale", "deployment", "web", "--replicas=7", "-n", kube_namespace)
        scaled = datetime.now(UTC)
        seen = await eventually(
            lambda: get(cluster, "predictivescaler", "web", kube_namespace),
            lambda o: o["status"].get("currentReplicas") == 7,
            what="the new count in status",
        )
        evaluations = app.scalers.evaluations
        generated = datetime.fromisoformat(seen["status"]["lastForecast"]["generatedAt"])
        assert generated - scaled <= interval + timedelta(seconds=1)  # not held for the evaluation after
        # Every decision up to the one written is counted once, held or written: none lost at a hold (that
        # would count about one in two), none twice. The evaluation that wrote may not be counted in
        # ``evaluations`` yet, and one or two after it may be.
        decided = sum(sum(hour["counts"].values()) for hour in seen["status"]["decidedBy"]["hours"])
        assert evaluations - 2 <= decided <= evaluations + 1, (decided, evaluations)


@contextlib.asynccontextmanager
async def _evaluated_once(
    cluster: KubeControlPlane, namespace: str, backend_name: str, prometheus_factory: PrometheusFactory
) -> AsyncIterator[tuple[Any, dict[str, Any]]]:
    """A running controller and its 10m-interval scaler "web" as it is after its first evaluation,
    under a staleness bound of one interval, so that no evaluation's status can be held: every one
    writes."""
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", 3), namespace)
    apply(cluster, predictive_scaler("web", "web", prom.url, "app_demand", backend_name, interval="10m"), namespace)
    async with running(options(cluster, namespace, staleness=WRITES_EVERY_EVALUATION)) as app:
        scaler = await eventually(
            lambda: get(cluster, "predictivescaler", "web", namespace),
            lambda o: (o.get("status") or {}).get("lastForecast") is not None,
            what="a first recommendation",
        )
        yield app, scaler


async def test_status_write_retries_on_conflict(cluster, kube_namespace, backend_name, prometheus_factory, caplog):
    async with _evaluated_once(cluster, kube_namespace, backend_name, prometheus_factory) as (app, stale):
        # Someone else changes the object: the controller's copy is now out of date.
        cluster.kubectl("label", "predictivescaler", "web", "-n", kube_namespace, "touched=yes")
        await asyncio.sleep(1.1)  # status timestamps have one-second resolution
        caplog.set_level(logging.INFO, logger="presage_scaler.controller.status_writer")
        await app.scalers.reconcile(ScalerEntry(obj=stale, generation=stale["metadata"]["generation"]))
    fresh = get(cluster, "predictivescaler", "web", kube_namespace)
    assert "status conflict scaler=" in caplog.text
    assert fresh["metadata"]["labels"]["touched"] == "yes"
    assert fresh["status"]["lastForecast"]["generatedAt"] > stale["status"]["lastForecast"]["generatedAt"]


async def test_a_leader_deposed_mid_retry_writes_nothing(cluster, kube_namespace, backend_name, prometheus_factory):
    """Leadership is checked before every write, retries included: a replica that lost its Lease
    between a conflict and its retry must not overwrite the new leader's status."""
    async with _evaluated_once(cluster, kube_namespace, backend_name, prometheus_factory) as (app, stale):
        cluster.kubectl("label", "predictivescaler", "web", "-n", kube_namespace, "touched=yes")
        await asyncio.sleep(1.1)  # status timestamps have one-second resolution
        checks: list[bool] = []

        def leading_until_the_first_conflict() -> bool:
            checks.append(not checks)  # the first check (before the first patch) says yes, then no
            return checks[-1]

        deposed = ScalerController(
            app.client,
            RecommendationStore(),
            app.backends,
            PrometheusClientPool(),
            EventRecorder(app.client, host="deposed"),
            ScalerMetrics(),
            leading=leading_until_the_first_conflict,
            staleness=WRITES_EVERY_EVALUATION,
        )
        await deposed.reconcile(ScalerEntry(obj=stale, generation=stale["metadata"]["generation"]))
    fresh = get(cluster, "predictivescaler", "web", kube_namespace)
    assert checks == [True, False]  # a conflict happened, and the retry asked again
    assert fresh["status"]["lastForecast"] == stale["status"]["lastForecast"]


class _Exploding:
    """A backend with a bug nobody foresaw: its forecast raises what no error path names."""

    def __init__(self, backend: object) -> None:
        self._backend = backend

    def __getattr__(self, name: str) -> object:
        return getattr(self._backend, name)

    async def forecast(self, requests: object) -> list:
        raise ZeroDivisionError("float division by zero")


class _ExplodingBackends:
    def __init__(self, backends: object) -> None:
        self._backends = backends

    def backend_for(self, name: str) -> _Exploding:
        return _Exploding(self._backends.backend_for(name))  # type: ignore[attr-defined]


async def test_an_unexpected_error_is_internal_error_and_keeps_the_recommendation(
    cluster, kube_namespace, backend_name, prometheus_factory
):
    """The catch-all of one evaluation: the scaler goes Degraded with InternalError naming the
    exception, its last recommendation stays, and the controller goes on."""
    async with _evaluated_once(cluster, kube_namespace, backend_name, prometheus_factory) as (app, good):
        pool = PrometheusClientPool()
        buggy = ScalerController(
            app.client,
            RecommendationStore(),
            _ExplodingBackends(app.backends),
            pool,
            EventRecorder(app.client, host="buggy"),
            ScalerMetrics(),
        )
        try:
            await buggy.reconcile(ScalerEntry(obj=good, generation=good["metadata"]["generation"]))
        finally:
            await pool.aclose()
        assert not app.crashed.is_set()
    after = get(cluster, "predictivescaler", "web", kube_namespace)
    degraded = condition(after, "Degraded")
    assert degraded["status"] == "True" and degraded["reason"] == "InternalError"
    assert degraded["message"] == "unexpected ZeroDivisionError: float division by zero"
    assert after["status"]["recommendedReplicas"] == good["status"]["recommendedReplicas"]
    assert after["status"]["lastForecast"] == good["status"]["lastForecast"]


async def test_a_guard_hold_is_read_from_status_alone(cluster, kube_namespace, backend_name, prometheus_factory):
    """docs/concepts.md's derivation, on what the controller wrote: three scalers whose forecast allows a
    scale-down from 60 replicas, whose uncertainty guard holds (maxRelativeSpread 0 on a noisy signal),
    releases (1000), or is disabled. A previous leader's decidedBy, 12 hours the guard mostly set, is
    continued, and the Ready message says the guard set most of the day."""
    noise = np.random.default_rng(5).normal(0.0, 8.0, 200)
    samples = [(at, value + noise[k % len(noise)]) for k, (at, value) in enumerate(recent_samples())]
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, samples))
    guards = {
        "held": {"maxRelativeSpread": "0"},
        "released": {"maxRelativeSpread": "1000"},
        "disabled": {"enabled": False, "maxRelativeSpread": "0"},
    }
    for name, guard in guards.items():
        apply(cluster, deployment(name, 60), kube_namespace)
        policy = {"maxReplicas": 100, "scaleDownUncertaintyGuard": guard}
        scaler = predictive_scaler(name, name, prom.url, "app_demand", backend_name, interval="10m", policy=policy)
        apply(cluster, scaler, kube_namespace)
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    day = [
        {"start": (hour - k * timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"), "counts": {GUARD: 5, WINDOW: 1}}
        for k in range(12, 0, -1)
    ]
    cluster.kubectl(
        "patch", "predictivescaler", "held", "-n", kube_namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"decidedBy": {"hours": day}}}),
    )  # fmt: skip

    scalers = {}
    async with running(options(cluster, kube_namespace)):
        for name in guards:
            scalers[name] = await eventually(
                lambda name=name: get(cluster, "predictivescaler", name, kube_namespace),
                lambda o: "breakdown" in (o.get("status") or {}),
                what=f"{name}'s first evaluation",
            )
    constraints = {name: scaler["status"]["breakdown"]["constraint"] for name, scaler in scalers.items()}
    assert constraints == {"held": GUARD, "released": WINDOW, "disabled": WINDOW}
    for name, scaler in scalers.items():
        status = scaler["status"]
        assert status["currentReplicas"] == 60 and float(status["breakdown"]["guardSpread"]) > 0, status
        assert forecast_uncertainty_named(status, scaler["spec"]) == (constraints[name] == GUARD), name
        assert guard_held_at(status, scaler["spec"]) == (60 if constraints[name] == GUARD else None), name
        assert status["recommendedReplicas"] == 60, status  # held by the guard, or by the window

    decided = scalers["held"]["status"]["decidedBy"]
    assert [hour["counts"] for hour in decided["hours"]][-1] == {GUARD: 1} and len(decided["hours"]) == 13
    assert [(share["constraint"], share["share"]) for share in decided["shares"]] == [
        (GUARD, "83.5616"),
        (WINDOW, "16.4384"),
    ]
    note = "; ForecastUncertainty held 84% of the last day's decisions: status.advice says what a tuned spec saves"
    assert condition(scalers["held"], "Ready")["message"].endswith(note)
    released = scalers["released"]["status"]["decidedBy"]
    assert released["shares"] == [{"constraint": WINDOW, "share": "100"}]
    assert "held" not in condition(scalers["released"], "Ready")["message"]


def _advise(cluster: KubeControlPlane, namespace: str, name: str, patch: dict[str, Any]) -> str:
    """Write an Advised ``status.advice`` with ``patch`` into the scaler ``name``, as presage advise would; the
    patch as written."""
    text = json.dumps(patch, separators=(",", ":"))
    advice = {"verdict": "Advised", "patch": text, "serviceLevel": "1%", "message": "advised by the test"}
    cluster.kubectl(
        "patch", "predictivescaler", name, "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"advice": advice}}),
    )  # fmt: skip
    return text


async def test_an_advice_is_scored_on_live_demand_until_proven_or_failed(
    cluster, kube_namespace, backend_name, prometheus_factory
):
    """From the moment status.advice holds a patch, every evaluation also decides with the advised spec and
    scores it beside the current one on the demand that comes. "web"'s advice takes the current spec's 50 %
    headroom out: status.advice.live fills, the LIVE column shows its saving, and once proveFor (1h) has
    passed within the service level the verdict is Proven with an Event. "capped"'s advice caps it below
    the demand: its first scored moment is a miss no later moment can make up, so it is FailedLive at once,
    with a Warning, and its record is kept as judged. The controller runs on a simulated clock, an
    evaluation every 5 minutes through the last hour and a half of a real Prometheus's history."""
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples(hours=5)))
    patches = {"web": {"spec": {"policy": {"headroom": None}}}, "capped": {"spec": {"policy": {"maxReplicas": 4}}}}
    written = {}
    for name, patch in patches.items():
        apply(cluster, deployment(name, 15), kube_namespace)
        policy = {"maxReplicas": 100, "headroom": "50%"}
        scaler = predictive_scaler(
            name, name, prom.url, "app_demand", backend_name, interval="5m", policy=policy, advice={"proveFor": "1h"}
        )
        apply(cluster, scaler, kube_namespace)
        written[name] = _advise(cluster, kube_namespace, name, patch)

    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=80)
    now = [start]
    lives: dict[str, list[dict[str, Any]]] = {name: [] for name in patches}
    # The app watches another namespace: only the controller on the simulated clock evaluates these.
    async with running(options(cluster, f"{kube_namespace}-unwatched")) as app:
        await eventually(
            lambda: get(cluster, "forecastbackend", backend_name),
            lambda o: (condition(o, "Ready") or {}).get("status") == "True",
            what="the backend probe",
        )
        pool = PrometheusClientPool()
        controller = scaler_controller(app, pool, now)
        try:
            for k in range(13):  # from the first evaluation to an hour after it
                now[0] = start + k * timedelta(minutes=5)
                for name in patches:
                    obj = get(cluster, "predictivescaler", name, kube_namespace)
                    await controller.reconcile(ScalerEntry(obj=obj, generation=obj["metadata"]["generation"]))
                    lives[name].append(get(cluster, "predictivescaler", name, kube_namespace)["status"]["advice"])
        finally:
            await pool.aclose()
    events = json.loads(cluster.kubectl("get", "events", "-n", kube_namespace, "-o", "json").stdout)["items"]
    told = {
        name: [(e["type"], e["reason"], e["message"]) for e in events if e["involvedObject"]["name"] == name]
        for name in patches
    }
    at = start.strftime("%Y-%m-%dT%H:%M:%SZ")

    web = lives["web"]
    assert [advice["live"]["samples"] for advice in web] == list(range(13))  # each scored past its lead time
    assert all(advice["live"]["since"] == at for advice in web)
    assert [advice["verdict"] for advice in web] == ["Advised"] * 12 + ["Proven"]
    assert [advice["live"]["verdict"] for advice in web] == ["Proving"] * 12 + ["Proven"]
    proven = web[-1]["live"]
    assert proven["provenTime"] == now[0].strftime("%Y-%m-%dT%H:%M:%SZ") and not proven.get("pending")
    assert float(proven["underProvisioned"]) == 0.0 and float(proven["currentUnderProvisioned"]) == 0.0
    # Both specs counted over the same 12 moments of 5 minutes: the advised one, without the headroom, uses fewer.
    advised, current = float(proven["replicaHours"]), float(proven["currentReplicaHours"])
    assert 0 < advised < current, proven
    assert proven["saving"] == f"{100 * (1 - advised / current):.1f}%" and proven["saving"] != "0.0%"
    assert web[-1]["patch"] == written["web"]  # the advice itself is presage advise's, untouched
    assert scaler_table(cluster, kube_namespace)["web"]["Live"] == proven["saving"]
    [(kind, reason, message)] = [event for event in told["web"] if event[1].startswith("Advice")]
    assert (kind, reason) == ("Normal", "AdviceProven")
    assert "met serviceLevel 1% on live demand: under-provisioned 0.00 % of 12 scored moments" in message

    capped = lives["capped"]
    assert [advice["verdict"] for advice in capped] == ["Advised"] + ["FailedLive"] * 12
    failed = capped[1]["live"]
    assert (failed["verdict"], failed["samples"], float(failed["underProvisioned"])) == ("FailedLive", 1, 100.0)
    assert all(advice["live"] == failed for advice in capped[1:])  # kept as judged: nothing more is scored
    [(kind, reason, message)] = [event for event in told["capped"] if event[1].startswith("Advice")]
    assert (kind, reason) == ("Warning", "AdviceFailedLive")
    assert "missed serviceLevel 1% on live demand: under-provisioned 100.00 % of 1 scored moments" in message
