"""KEDA's view of presage with the whole controller running against a real API server and Prometheus.

The controller (`presage run`, in process) evaluates a PredictiveScaler and watches ScaledObjects
(KEDA's own CRD, no KEDA running); the test calls GetMetrics/IsActive over the real gRPC port,
exactly as KEDA does, and checks that Shadow never changes the replica count, alone or beside
other triggers, that Enforce serves the recommendation, and that namespaces are respected; and that
a scaler's ``Consumed`` condition says whether a ScaledObject applies it.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import grpc
import pytest

from presage_scaler.clients.kube.events import EventRecorder
from presage_scaler.clients.prometheus import PrometheusClientPool
from presage_scaler.controller.app import ControllerOptions, RunningController, running
from presage_scaler.controller.predictive_scaler_controller import ScalerController
from presage_scaler.controller.predictive_scaler_objects import ScalerEntry
from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.proto_gen import externalscaler_pb2 as pb
from presage_scaler.proto_gen import externalscaler_pb2_grpc as pb_grpc
from presage_scaler.serving.keda import metric_name
from presage_scaler.serving.store import RecommendationStore
from tests.harness.keda import install_keda_crds, uninstall_keda_crds
from tests.harness.presage_cluster import (
    apply,
    condition,
    deployment,
    get,
    install_crds,
    predictive_scaler,
    scaler_table,
    seasonal_backend,
    unique,
)
from tests.harness.prometheus import Series

pytestmark = pytest.mark.integration

T = TypeVar("T")
CURRENT = 3  # the Deployment's replicas; nothing in these tests may change them


def recent_samples(hours: float = 3.0) -> list[tuple[datetime, float]]:
    """A demand of 100-150 units (10 per replica) up to now, far from what 3 replicas serve."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start = now - timedelta(hours=hours)
    points = (start + timedelta(minutes=i) for i in range(int(hours * 60) + 1))
    return [(at, 125.0 + 25.0 * math.sin(2 * math.pi * at.timestamp() / 3600.0)) for at in points]


@pytest.fixture(scope="module")
def cluster(kube_control_plane):
    install_crds(kube_control_plane)
    install_keda_crds(kube_control_plane)
    return kube_control_plane


@pytest.fixture
def backend_name(cluster) -> Iterator[str]:
    name = unique("sn")
    apply(cluster, seasonal_backend(name))
    yield name
    cluster.kubectl("delete", "forecastbackend", name, "--ignore-not-found", check=False)


@pytest.fixture
def other_namespace(cluster) -> Iterator[str]:
    name = f"elsewhere-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


def scaled_object(name: str, triggers: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name},
        "spec": {"scaleTargetRef": {"name": "web"}, "triggers": triggers},
    }


PRESAGE_TRIGGER = {
    "type": "external",
    "metadata": {"scalerAddress": "presage-scaler.presage-system.svc:9090", "predictiveScaler": "web"},
}
CPU_TRIGGER = {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}


def ref(scaled_object_name: str, namespace: str) -> pb.ScaledObjectRef:
    """What KEDA sends: the ScaledObject's name and namespace and the trigger's metadata."""
    return pb.ScaledObjectRef(
        name=scaled_object_name, namespace=namespace, scalerMetadata=dict(PRESAGE_TRIGGER["metadata"])
    )


async def value(stub: pb_grpc.ExternalScalerStub, scaled_object_name: str, namespace: str) -> int:
    request = pb.GetMetricsRequest(scaledObjectRef=ref(scaled_object_name, namespace), metricName=metric_name("web"))
    [metric] = (await stub.GetMetrics(request)).metricValues
    return int(metric.metricValue)


async def active(stub: pb_grpc.ExternalScalerStub, scaled_object_name: str, namespace: str) -> bool:
    return (await stub.IsActive(ref(scaled_object_name, namespace))).result


async def status_of(call: Awaitable[object]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    return info.value.code(), info.value.details() or ""


async def until(probe: Callable[[], Awaitable[T]], check: Callable[[T], bool], what: str, timeout: float = 60.0) -> T:
    """Poll an async probe; gRPC errors count as "not yet"."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = await probe()
        except grpc.aio.AioRpcError as exc:
            last = f"{exc.code().name}: {exc.details()}"
        else:
            if check(last):  # type: ignore[arg-type]
                return last  # type: ignore[return-value]
        await asyncio.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last}")


def instant(read: Callable[[], T]) -> Callable[[], Awaitable[T]]:
    """A synchronous read as a probe for :func:`until`."""

    async def probe() -> T:
        return read()

    return probe


def options(plane, *namespaces: str) -> ControllerOptions:
    return ControllerOptions(
        kubeconfig=plane.kubeconfig,
        namespaces=namespaces,
        grpc_port=0,
        http_port=0,
        health_port=0,
        grpc_host="127.0.0.1",
        leader_elect=False,
        probe_period=2.0,
    )


def eager_controller(app: RunningController) -> ScalerController:
    """A controller of our own beside ``app``'s, recording every Event at once (no spacing), so a
    repeated Warning shows in the Event's count at once."""
    return ScalerController(
        app.client,
        RecommendationStore(),
        app.backends,
        PrometheusClientPool(),
        EventRecorder(app.client, host="test", min_spacing=timedelta(0)),
        ScalerMetrics(),
        scaled_objects=app.triggers,
    )


async def evaluated(app: RunningController, namespace: str, *, scaled_objects: bool = True) -> None:
    """Wait for the first recommendation (and, unless told otherwise, the ScaledObject cache)."""

    async def ready() -> bool:
        cached = app.triggers.informer.synced or not scaled_objects
        return cached and app.store.get(namespace, "web") is not None

    await until(ready, bool, "the first recommendation in the store", timeout=90)


@pytest.fixture
async def channel_for() -> AsyncIterator[Callable[[RunningController], pb_grpc.ExternalScalerStub]]:
    channels: list[grpc.aio.Channel] = []

    def make(app: RunningController) -> pb_grpc.ExternalScalerStub:
        channels.append(grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc.port}"))
        return pb_grpc.ExternalScalerStub(channels[-1])

    yield make
    for channel in channels:
        await channel.close()


async def test_shadow_and_enforce_answers_follow_the_cluster(
    cluster, kube_namespace, other_namespace, backend_name, prometheus_factory, channel_for
) -> None:
    ns = kube_namespace
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", CURRENT), ns)
    scaler = predictive_scaler("web", "web", prom.url, "app_demand", backend_name)  # mode defaults to Shadow
    apply(cluster, scaler, ns)
    apply(cluster, scaled_object("alone", [PRESAGE_TRIGGER]), ns)
    apply(cluster, scaled_object("mixed", [PRESAGE_TRIGGER, CPU_TRIGGER]), ns)
    # Same PredictiveScaler name, but the ScaledObject lives elsewhere: presage must not cross namespaces.
    apply(cluster, scaled_object("alone", [PRESAGE_TRIGGER]), other_namespace)

    async with running(options(cluster, ns, other_namespace)) as app:
        stub = channel_for(app)
        await evaluated(app, ns)
        recommended = app.store.get(ns, "web").recommended_replicas  # type: ignore[union-attr]
        assert recommended != CURRENT, "the test needs a recommendation that differs from the current count"

        # Shadow, presage alone: the HPA is told to keep what runs.
        assert await value(stub, "alone", ns) == CURRENT
        assert await active(stub, "alone", ns) is True
        # Shadow beside a cpu trigger: 0 and inactive, so the other trigger decides.
        assert await value(stub, "mixed", ns) == 0
        assert await active(stub, "mixed", ns) is False

        # The ScaledObject cache follows the cluster: drop the cpu trigger, then add it back.
        apply(cluster, scaled_object("mixed", [PRESAGE_TRIGGER]), ns)
        await until(lambda: value(stub, "mixed", ns), lambda v: v == CURRENT, "mixed to lose its cpu trigger")
        apply(cluster, scaled_object("mixed", [PRESAGE_TRIGGER, CPU_TRIGGER]), ns)
        await until(lambda: value(stub, "mixed", ns), lambda v: v == 0, "mixed to get its cpu trigger back")

        # A ScaledObject presage has never seen: it cannot tell whether presage is alone, so it refuses.
        code, details = await status_of(
            stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref("ghost", ns), metricName=metric_name("web")))
        )
        assert code == grpc.StatusCode.UNAVAILABLE and "ghost" in details and "refusing to guess" in details

        # The other namespace has no PredictiveScaler "web": NOT_FOUND, not the one next door.
        code, details = await status_of(
            stub.GetMetrics(
                pb.GetMetricsRequest(scaledObjectRef=ref("alone", other_namespace), metricName=metric_name("web"))
            )
        )
        assert code == grpc.StatusCode.NOT_FOUND and other_namespace in details
        code, _ = await status_of(stub.IsActive(ref("alone", other_namespace)))
        assert code == grpc.StatusCode.NOT_FOUND

        # Enforce: the recommendation, alone or beside other triggers (the HPA then takes the maximum).
        scaler["spec"]["mode"] = "Enforce"
        apply(cluster, scaler, ns)

        async def both() -> tuple[int, int, int | None]:
            stored = app.store.get(ns, "web")
            return (
                await value(stub, "alone", ns),
                await value(stub, "mixed", ns),
                stored.recommended_replicas if stored and stored.mode == "Enforce" else None,
            )

        alone, _, _ = await until(
            both, lambda t: t[2] is not None and t[0] == t[1] == t[2], "Enforce to serve the recommendation"
        )
        assert alone != CURRENT
        assert await active(stub, "mixed", ns) is True


async def test_shadow_without_the_scaledobject_crd_is_unavailable(
    cluster, kube_namespace, backend_name, prometheus_factory, channel_for
) -> None:
    """Without KEDA's CRD presage cannot count triggers: UNAVAILABLE, never a guess; it recovers once installed."""
    ns = kube_namespace
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", CURRENT), ns)
    apply(cluster, predictive_scaler("web", "web", prom.url, "app_demand", backend_name), ns)
    uninstall_keda_crds(cluster)
    try:
        async with running(options(cluster, ns)) as app:
            stub = channel_for(app)
            await evaluated(app, ns, scaled_objects=False)
            request = pb.GetMetricsRequest(scaledObjectRef=ref("alone", ns), metricName=metric_name("web"))
            code, details = await status_of(stub.GetMetrics(request))
            assert code == grpc.StatusCode.UNAVAILABLE and "not cached yet" in details
            code, _ = await status_of(stub.IsActive(ref("alone", ns)))
            assert code == grpc.StatusCode.UNAVAILABLE
            # Nor can it tell whether anything applies the scaler.
            consumed = condition(get(cluster, "predictivescaler", "web", ns), "Consumed")
            assert consumed is not None and (consumed["status"], consumed["reason"]) == (
                "Unknown",
                "ScaledObjectsUnknown",
            )

            install_keda_crds(cluster)
            apply(cluster, scaled_object("alone", [PRESAGE_TRIGGER]), ns)
            await until(lambda: value(stub, "alone", ns), lambda v: v == CURRENT, "the ScaledObject informer to sync")
    finally:
        install_keda_crds(cluster)


async def test_enforce_with_nothing_to_apply_it_says_so_once(
    cluster, kube_namespace, backend_name, prometheus_factory
) -> None:
    """Enforce without a ScaledObject: ``Consumed=False`` and one Warning Event however many
    evaluations see it; a ScaledObject naming the scaler turns it True. Shadow: False, no Warning.
    The same evaluations report the lead time clamped into [min, max] in ``SpecAdjusted``."""
    ns = kube_namespace
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", CURRENT), ns)
    enforce = predictive_scaler(
        "web", "web", prom.url, "app_demand", backend_name, mode="Enforce", interval="10m", leadTime={"static": "20m"}
    )
    apply(cluster, enforce, ns)
    # A horizon of the sizing window (lead 2m + interval 10m) is used as written; the default (4x the lead)
    # would be raised to it and reported as HorizonRaised.
    quiet = predictive_scaler(
        "quiet",
        "web",
        prom.url,
        "app_demand",
        backend_name,
        interval="10m",
        forecast={"backendRef": backend_name, "horizon": "12m"},
    )
    apply(cluster, quiet, ns)

    async with running(options(cluster, ns)) as app:
        await until(instant(lambda: app.triggers.informer.synced), bool, "the ScaledObject cache")
        # The running controller evaluates each scaler once (interval 10m); ours goes on from there.
        await until(instant(lambda: app.scalers.evaluations), lambda n: n >= 2, "the first evaluations")
        # A controller of our own, with every Event written at once: a repeated Warning would show
        # in the Event's count, not wait 30 s in the recorder.
        controller = eager_controller(app)

        async def evaluate(name: str) -> dict[str, Any]:
            obj = get(cluster, "predictivescaler", name, ns)
            await controller.reconcile(ScalerEntry(obj=obj, generation=obj["metadata"]["generation"]))
            return get(cluster, "predictivescaler", name, ns)

        for _ in range(3):
            web, quiet = await evaluate("web"), await evaluate("quiet")
        consumed = condition(web, "Consumed")
        assert (consumed["status"], consumed["reason"]) == ("False", "NoScaledObject"), consumed
        assert "nothing applies the recommendation" in consumed["message"]
        assert f"presage scaledobject web -n {ns}" in consumed["message"]
        adjusted = condition(web, "SpecAdjusted")
        assert (adjusted["status"], adjusted["reason"]) == ("True", "LeadTimeClamped"), adjusted
        assert "leadTime.static 20m is above" in adjusted["message"]
        assert web["status"]["lastForecast"]["leadTimeSeconds"] == 900  # the decision itself is unchanged
        assert (condition(quiet, "Consumed")["status"], condition(quiet, "Consumed")["reason"]) == (
            "False",
            "NoScaledObject",
        )
        assert (condition(quiet, "SpecAdjusted")["status"], condition(quiet, "SpecAdjusted")["reason"]) == (
            "False",
            "AsSpecified",
        )

        def warnings() -> list[dict[str, Any]]:
            events = json.loads(cluster.kubectl("get", "events", "-n", ns, "-o", "json").stdout)["items"]
            return [e for e in events if e["reason"] == "NoScaledObject"]

        # Three evaluations of each (four of web, with the running controller's): one Warning, for web.
        [warning] = warnings()
        assert warning["type"] == "Warning" and warning["involvedObject"]["name"] == "web"
        assert warning["count"] == 1

        apply(cluster, scaled_object("web-so", [PRESAGE_TRIGGER]), ns)
        await until(instant(lambda: app.triggers.consumers(ns, "web")), lambda c: c == ["web-so"], "the index")
        consumed = condition(await evaluate("web"), "Consumed")
        assert (consumed["status"], consumed["reason"]) == ("True", "ScaledObjectFound"), consumed
        assert "ScaledObject web-so" in consumed["message"]
        # Deleted again: unconsumed anew, so a second Warning.
        cluster.kubectl("delete", "scaledobject", "web-so", "-n", ns)
        await until(instant(lambda: app.triggers.consumers(ns, "web")), lambda c: c == [], "the index")
        assert condition(await evaluate("web"), "Consumed")["status"] == "False"
        # (one Event counting 2, or two if the running controller recorded the first)
        assert sum(w["count"] for w in warnings()) == 2


async def test_what_the_user_probably_did_not_mean_is_said_where_they_look(
    cluster, kube_namespace, backend_name, prometheus_factory
) -> None:
    """A Shadow scaler without capacity and with an absolute headroom, named by a ScaledObject whose
    scalingModifiers formula averages it with CPU: ``SpecAdjusted`` says CapacityDefaulted, with every
    notice in its message, and so does ``kubectl get``'s SPEC cell; ``Consumed`` says ScalingModifiers,
    with one Warning Event. Its advice's SAVING carries a unit, and reads Applied once the spec holds it."""
    ns = kube_namespace
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", CURRENT), ns)
    scaler = predictive_scaler(
        "web",
        "web",
        prom.url,
        "app_demand",
        backend_name,
        interval="10m",
        forecast={"backendRef": backend_name, "horizon": "12m"},
        policy={"maxReplicas": 500, "headroom": 10},
    )
    del scaler["spec"]["capacity"]
    apply(cluster, scaler, ns)
    averaged = scaled_object("web-avg", [{**PRESAGE_TRIGGER, "name": "presage"}, {**CPU_TRIGGER, "name": "cpu"}])
    averaged["spec"]["advanced"] = {"scalingModifiers": {"target": "1", "formula": "(presage + cpu) / 2"}}
    apply(cluster, averaged, ns)

    async with running(options(cluster, ns)) as app:
        await until(
            instant(lambda: app.triggers.formulas(ns, "web")),
            lambda f: f == {"web-avg": "(presage + cpu) / 2"},
            "the index",
        )
        controller = eager_controller(app)

        async def evaluate() -> dict[str, Any]:
            obj = get(cluster, "predictivescaler", "web", ns)
            await controller.reconcile(ScalerEntry(obj=obj, generation=obj["metadata"]["generation"]))
            return get(cluster, "predictivescaler", "web", ns)

        for _ in range(3):
            web = await evaluate()
        adjusted = condition(web, "SpecAdjusted")
        assert (adjusted["status"], adjusted["reason"]) == ("True", "CapacityDefaulted"), adjusted
        assert "capacity is not set" in adjusted["message"]
        assert "policy.headroom 10 is a number, so it means 10 signal units" in adjusted["message"]
        # Nothing refused: one replica per unit of a demand of 100-150 is sized as the reference says.
        assert web["status"]["breakdown"]["predictive"] > 100
        consumed = condition(web, "Consumed")
        assert (consumed["status"], consumed["reason"]) == ("True", "ScalingModifiers"), consumed
        assert "advanced.scalingModifiers.formula (web-avg: '(presage + cpu) / 2')" in consumed["message"]
        assert "an average or a sum moves the count" in consumed["message"]

        def warnings() -> list[dict[str, Any]]:
            events = json.loads(cluster.kubectl("get", "events", "-n", ns, "-o", "json").stdout)["items"]
            return [e for e in events if e["reason"] == "ScalingModifiers"]

        # However many evaluations see it (the running controller's and ours): one Warning, once.
        [warning] = await until(instant(warnings), lambda w: len(w) == 1, "the ScalingModifiers Event")
        assert warning["type"] == "Warning" and warning["count"] == 1
        assert scaler_table(cluster, ns)["web"]["Spec"] == "CapacityDefaulted"

        # presage advise writes status.advice (here by hand); the controller shows its saving, with its unit.
        advised = {"policy": {"targetQuantile": "0.95"}}
        advice = {
            "verdict": "Advised",
            "saving": "5.1072",
            "serviceLevel": "1%",
            "patch": json.dumps({"spec": advised}),
        }
        patch = json.dumps({"status": {"advice": advice}})
        cluster.kubectl("patch", "ps", "web", "-n", ns, "--subresource=status", "--type=merge", "-p", patch)
        assert (await evaluate())["status"]["adviceSaving"] == "5.1%"
        assert scaler_table(cluster, ns)["web"]["Saving"] == "5.1%"
        # Applied (the spec now holds the advised change): Applied, at the evaluation the spec change starts.
        cluster.kubectl("patch", "ps", "web", "-n", ns, "--type=merge", "-p", json.dumps({"spec": advised}))
        assert (await evaluate())["status"]["adviceSaving"] == "Applied"
        assert scaler_table(cluster, ns)["web"]["Saving"] == "Applied"
