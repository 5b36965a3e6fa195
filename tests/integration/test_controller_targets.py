"""Scale targets beyond Deployments: a StatefulSet through its scale subresource, an Agones Fleet by status."""

from __future__ import annotations

import json

import httpx
import pytest

from presage_scaler.controller.app import running
from tests.harness.presage_cluster import (
    REPO,
    apply,
    condition,
    deployment,
    eventually,
    get,
    options,
    predictive_scaler,
    recent_samples,
)
from tests.harness.prometheus import Series

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fleet_crd(cluster):
    cluster.kubectl("apply", "-f", str(REPO / "tests" / "fixtures" / "agones-fleet-crd.yaml"))
    cluster.wait_established("crd/fleets.agones.dev")
    return cluster


def _recommended(o) -> bool:
    return (o.get("status") or {}).get("recommendedReplicas") is not None


async def test_statefulset_and_fleet_targets(fleet_crd, kube_namespace, backend_name, prometheus_factory):
    plane = fleet_crd
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    labels = {"app": "db"}
    apply(
        plane,
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db"},
            "spec": {
                "replicas": 5,
                "serviceName": "db",
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "db", "image": "registry.invalid/db"}]},
                },
            },
        },
        kube_namespace,
    )
    apply(
        plane,
        {"apiVersion": "agones.dev/v1", "kind": "Fleet", "metadata": {"name": "arena"}, "spec": {"replicas": 4}},
        kube_namespace,
    )
    # Agones reports replicas in status; presage reads that, not the desired count in spec.
    plane.kubectl(
        "patch",
        "fleet",
        "arena",
        "-n",
        kube_namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"replicas": 7, "readyReplicas": 7, "allocatedReplicas": 2, "reservedReplicas": 0}}),
    )
    sts = predictive_scaler("db", "db", prom.url, "app_demand", backend_name)
    sts["spec"]["scaleTargetRef"] = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"}
    fleet = predictive_scaler("arena", "arena", prom.url, "app_demand", backend_name)
    fleet["spec"]["mode"] = "Enforce"
    fleet["spec"]["scaleTargetRef"] = {
        "apiVersion": "agones.dev/v1",
        "kind": "Fleet",
        "name": "arena",
        "agones": {"maxRecommendationAge": "5m"},
    }
    apply(plane, sts, kube_namespace)
    apply(plane, fleet, kube_namespace)

    async with running(options(plane, kube_namespace)) as app:
        db = await eventually(lambda: get(plane, "predictivescaler", "db", kube_namespace), _recommended, what="db")
        arena = await eventually(
            lambda: get(plane, "predictivescaler", "arena", kube_namespace), _recommended, what="arena"
        )
        assert db["status"]["currentReplicas"] == 5
        assert arena["status"]["currentReplicas"] == 7
        stored = app.store.get(kube_namespace, "arena")
        assert stored is not None and stored.target.kind == "Fleet"
        assert stored.agones_max_age is not None and stored.agones_max_age.total_seconds() == 300
        # Agones asks the webhook exactly as a FleetAutoscaler does; the answer is the recommendation.
        review = {
            "request": {
                "uid": "4f6c8a1e",
                "name": "arena",
                "namespace": kube_namespace,
                "status": {"replicas": 7, "readyReplicas": 7, "reservedReplicas": 0, "allocatedReplicas": 2},
            },
            "response": None,
        }
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{app.http.port}") as http:
            answer = await http.post("/agones/v1/scale", json=review)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {
            "response": {"uid": "4f6c8a1e", "scale": True, "replicas": arena["status"]["recommendedReplicas"]}
        }
    # presage never writes the Fleet.
    assert get(plane, "fleet", "arena", kube_namespace)["spec"]["replicas"] == 4


async def test_apps_targets_are_read_from_a_watch_and_missing_ones_through_the_scale_subresource(
    cluster, kube_namespace, backend_name, prometheus_factory
):
    """Once the Deployment watch has listed, evaluations make no scale GET and still see a count
    changed by hand at once; a target the watch does not know is read through the scale subresource,
    so a missing one gets the GET's own TargetNotFound."""
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", 3), kube_namespace)
    for name in ("web", "ghost"):
        scaler = predictive_scaler(name, name, prom.url, "app_demand", backend_name, interval="2s")
        apply(cluster, scaler, kube_namespace)
    async with running(options(cluster, kube_namespace)) as app:
        await eventually(lambda: app.replicas.watching(), lambda kinds: kinds == ["deployments"], what="the watch")
        scale_gets: list[str] = []
        read = app.client.get

        async def counted(resource, namespace, name, subresource=None):
            if subresource == "scale":
                scale_gets.append(name)
            return await read(resource, namespace, name, subresource)

        app.client.get = counted  # type: ignore[method-assign]
        evaluations = app.scalers.evaluations
        cluster.kubectl("scale", "deployment", "web", "--replicas=6", "-n", kube_namespace)
        await eventually(
            lambda: get(cluster, "predictivescaler", "web", kube_namespace),
            lambda o: o["status"].get("currentReplicas") == 6,
            what="the count scaled by hand, in status",
        )
        ghost = await eventually(
            lambda: get(cluster, "predictivescaler", "ghost", kube_namespace),
            lambda o: (condition(o, "Degraded") or {}).get("reason") == "TargetNotFound",
            what="TargetNotFound for a Deployment that does not exist",
        )
        assert "ghost" in condition(ghost, "Degraded")["message"]
        assert app.scalers.evaluations - evaluations >= 2
        assert scale_gets and set(scale_gets) == {"ghost"}  # web's count came from the watch alone
