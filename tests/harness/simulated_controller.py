"""A controller of the test's own on a simulated clock, against the real API server: one scaler evaluated
once per call, at whatever time the test sets, with the production reconciler and the controller's own
ServiceAccount from ``manifests/`` (so its spec patches meet the RBAC presage ships).

The running controller (:func:`presage_scaler.controller.app.running`) watches a namespace with no scaler
in it and lends the test's :class:`ScalerController` (:func:`scaler_controller`) its API client and its
ForecastBackend cache; the test feeds the scaler's newer versions to the evaluations as the watch would
(:class:`SimulatedScaler`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

from presage_scaler.clients.kube.events import EventRecorder
from presage_scaler.clients.prometheus import PrometheusClientPool
from presage_scaler.controller.app import ControllerOptions, RunningController, running
from presage_scaler.controller.forecast_backend_controller import BackendController, BackendUnusable
from presage_scaler.controller.predictive_scaler_controller import ScalerController
from presage_scaler.controller.predictive_scaler_objects import ScalerEntry
from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.serving.store import RecommendationStore
from tests.harness.kube import KubeControlPlane
from tests.harness.presage_cluster import REPO, WRITES_EVERY_EVALUATION, get, unique


async def usable(backends: BackendController, name: str, timeout: float = 60.0) -> None:
    """Wait until the controller's ForecastBackend cache has probed ``name``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            backends.backend_for(name)
            return
        except BackendUnusable as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"ForecastBackend {name} never became usable: {exc}") from exc
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def simulated_controller(
    cluster: KubeControlPlane, now: list[datetime]
) -> AsyncIterator[tuple[RunningController, ScalerController]]:
    """A controller on the simulated clock ``now[0]`` (module docstring); every evaluation writes its
    status."""
    cluster.kubectl("apply", "-k", str(REPO / "manifests"))
    kubeconfig = cluster.kubeconfig_for_token(cluster.service_account_token("presage-system", "presage-scaler"))
    options = ControllerOptions(
        kubeconfig=kubeconfig,
        namespaces=(unique("elsewhere"),),
        grpc_port=0,
        http_port=0,
        health_port=0,
        leader_elect=False,
        probe_period=1.0,
    )
    prometheus = PrometheusClientPool()
    try:
        async with running(options) as app:
            yield app, scaler_controller(app, prometheus, now)
    finally:
        await prometheus.aclose()


def scaler_controller(
    app: RunningController, prometheus: PrometheusClientPool, now: list[datetime]
) -> ScalerController:
    """A :class:`ScalerController` of the test's own on the simulated clock ``now[0]``, with ``app``'s API
    client and ForecastBackend cache; every evaluation writes its status, and every Event is sent."""
    return ScalerController(
        app.client,
        RecommendationStore(),
        app.backends,
        prometheus,
        EventRecorder(app.client, host="test", min_spacing=timedelta(0)),
        ScalerMetrics(),
        clock=lambda: now[0],
        staleness=WRITES_EVERY_EVALUATION,
    )


class SimulatedScaler:
    """One scaler evaluated by a :func:`simulated_controller` at simulated times. Before each evaluation
    its entry is given the object as the API server holds it when that is newer (a person's patch, or
    presage advise's), as the watch would have delivered it."""

    def __init__(self, controller: ScalerController, cluster: KubeControlPlane, name: str, namespace: str) -> None:
        self._controller = controller
        self._cluster = cluster
        self._name = name
        self._namespace = namespace
        obj = self.read()
        self._entry = ScalerEntry(obj=obj, generation=obj["metadata"]["generation"])

    def read(self) -> dict[str, Any]:
        return get(self._cluster, "predictivescaler", self._name, self._namespace)

    def _watched(self) -> dict[str, Any]:
        obj = self.read()
        if obj["metadata"]["resourceVersion"] != self._entry.obj["metadata"]["resourceVersion"]:
            self._entry.keep(obj)
            self._entry.generation = obj["metadata"]["generation"]
        return obj

    async def evaluate(self) -> dict[str, Any]:
        """Evaluate once; the object as the API server then holds it."""
        self._watched()
        await self._controller.reconcile(self._entry)
        return self._watched()
