"""A tenant's CR cannot take presage down: the crash-loop of issue 16, on the real API server.

Objects stored under an older, looser schema stay in etcd after the CRD is tightened (validation
only runs on writes), so presage must survive specs the current CRD would refuse. The test stores
such objects under a loosened copy of today's CRD (the duration bounds, the int-or-string bounds and
the duration CEL rules removed), then checks both paths that used to crash: the informer's update
of a scaler that already has a status, and a fresh start that lists the stored object. Every time,
the hostile scaler is Degraded with InvalidSpec naming the field, the other scalers keep being
evaluated, and the process keeps running.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from presage_scaler.api import quantities
from presage_scaler.controller.app import RunningController, running
from tests.harness.kube import KubeControlPlane
from tests.harness.presage_cluster import (
    REPO,
    apply,
    condition,
    deployment,
    eventually,
    get,
    install_crds,
    options,
    predictive_scaler,
    recent_samples,
    seasonal_backend,
    unique,
)
from tests.harness.prometheus import Series

pytestmark = pytest.mark.integration

# Go's durations, with whole days first as presage writes its own defaults (28d), without bounds.
_UNITS = r"[0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h)"
_LOOSE_DURATION = rf"^([0-9]+d({_UNITS})*|({_UNITS})+)$"


def _loosened(schema: Any) -> Any:
    """A CRD schema as an older presage might have shipped it: no bounds that stop overflow."""
    if isinstance(schema, list):
        return [_loosened(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _loosened(value) for key, value in schema.items()}
    if out.get("x-kubernetes-int-or-string"):
        out.pop("minimum", None)
        out.pop("maximum", None)
    rules = [
        r
        for r in out.get("x-kubernetes-validations", [])
        if "duration(" not in r["rule"]
        and quantities.DURATION_PATTERN not in r["rule"]
        and "type(self)" not in r["rule"]
    ]
    if any(quantities.DURATION_PATTERN in r["rule"] for r in out.get("x-kubernetes-validations", [])):
        out["pattern"] = _LOOSE_DURATION
    if "x-kubernetes-validations" in out:
        out["x-kubernetes-validations"] = rules
        if not rules:
            del out["x-kubernetes-validations"]
    return out


def _install_loose_crds(plane: KubeControlPlane) -> None:
    for path in sorted((REPO / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        loose = copy.deepcopy(crd)
        loose["spec"]["versions"] = _loosened(crd["spec"]["versions"])
        plane.kubectl("apply", "-f", "-", input=json.dumps(loose))


def _merge_patch(plane: KubeControlPlane, kind: str, name: str, patch: dict[str, Any], namespace: str | None = None):
    args = ["patch", kind, name, "--type=merge", "-p", json.dumps(patch)] + (["-n", namespace] if namespace else [])
    return plane.kubectl(*args, check=False)


def _generated_at(plane: KubeControlPlane, namespace: str, name: str) -> str | None:
    return ((get(plane, "predictivescaler", name, namespace).get("status") or {}).get("lastForecast") or {}).get(
        "generatedAt"
    )


async def _invalid_spec(plane: KubeControlPlane, namespace: str, name: str, field: str) -> dict[str, Any]:
    obj = await eventually(
        lambda: get(plane, "predictivescaler", name, namespace),
        lambda o: (condition(o, "Degraded") or {}).get("reason") == "InvalidSpec",
        what=f"{name} to be Degraded with InvalidSpec",
    )
    assert field in condition(obj, "Degraded")["message"], condition(obj, "Degraded")
    return obj


async def _still_evaluating(app: RunningController, plane: KubeControlPlane, namespace: str, names: list[str]) -> None:
    """Each named scaler gets a newer forecast than the one it has now, and nothing crashed."""
    before = {name: _generated_at(plane, namespace, name) for name in names}
    for name in names:
        await eventually(
            lambda name=name: _generated_at(plane, namespace, name),
            lambda at, name=name: at is not None and at != before[name],
            what=f"{name} to be evaluated again",
        )
    assert not app.crashed.is_set()


async def test_hostile_stored_specs_degrade_one_scaler_and_nothing_else(cluster, kube_namespace, prometheus_factory):
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    backend, hostile_backend = unique("sn"), unique("sn-hostile")
    apply(cluster, deployment("web", 3), kube_namespace)
    good = ["good-a", "good-b"]
    try:
        _install_loose_crds(cluster)
        apply(cluster, seasonal_backend(backend))
        apply(cluster, seasonal_backend(hostile_backend))
        for name in [*good, "victim", "victim-amount"]:
            obj = predictive_scaler(name, "web", prom.url, "app_demand", backend, interval="2s")
            apply(cluster, obj, kube_namespace)

        async with running(options(cluster, kube_namespace)) as app:
            for name in [*good, "victim", "victim-amount"]:
                await eventually(
                    lambda name=name: _generated_at(cluster, kube_namespace, name), bool, what=f"{name} evaluated"
                )
            held = get(cluster, "predictivescaler", "victim", kube_namespace)["status"]["recommendedReplicas"]
            # The reproduction: a scaler with a status gets an overflowing duration.
            patched = _merge_patch(
                cluster, "ps", "victim", {"spec": {"leadTime": {"static": "99999999999h"}}}, kube_namespace
            )
            assert patched.returncode == 0, patched.stderr
            patched = _merge_patch(
                cluster, "ps", "victim-amount", {"spec": {"policy": {"headroom": -3}}}, kube_namespace
            )
            assert patched.returncode == 0, patched.stderr
            patched = _merge_patch(cluster, "fb", hostile_backend, {"spec": {"seasonalNaive": {"season": "2562048h"}}})
            assert patched.returncode == 0, patched.stderr

            victim = await _invalid_spec(cluster, kube_namespace, "victim", "spec.leadTime.static")
            assert victim["status"]["recommendedReplicas"] == held  # never silently scaled down
            assert condition(victim, "Ready")["reason"] == "LastRecommendationHeld"
            await _invalid_spec(cluster, kube_namespace, "victim-amount", "spec.policy.headroom")
            await eventually(
                lambda: get(cluster, "forecastbackend", hostile_backend),
                lambda o: (condition(o, "Degraded") or {}).get("reason") == "InvalidSpec",
                what="the hostile backend to be Degraded with InvalidSpec",
            )
            await _still_evaluating(app, cluster, kube_namespace, good)
            assert app.store.get(kube_namespace, "good-a") is not None

        # Today's CRD is back: the stored objects stay, new hostile writes are refused at admission.
        install_crds(cluster)
        refused = _merge_patch(
            cluster, "ps", "good-b", {"spec": {"leadTime": {"static": "99999999999h"}}}, kube_namespace
        )
        assert refused.returncode != 0 and "spec.leadTime.static" in refused.stderr, refused.stderr

        # A fresh start lists the hostile objects (the crash-loop's path) and runs on.
        async with running(options(cluster, kube_namespace)) as app:
            await _still_evaluating(app, cluster, kube_namespace, good)
            await _invalid_spec(cluster, kube_namespace, "victim", "spec.leadTime.static")
            assert app.scaler_informer.synced and app.backend_informer.synced
            assert not app.crashed.is_set()
    finally:
        for name in [*good, "victim", "victim-amount"]:
            cluster.kubectl("delete", "ps", name, "-n", kube_namespace, "--ignore-not-found", check=False)
        for name in (backend, hostile_backend):
            cluster.kubectl("delete", "fb", name, "--ignore-not-found", check=False)
        install_crds(cluster)
