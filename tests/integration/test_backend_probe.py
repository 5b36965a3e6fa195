"""ForecastBackend probing over real HTTP: a small server answering GET /v1/model like presage-forecaster."""

from __future__ import annotations

import asyncio

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

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
    unique,
)
from tests.harness.process import free_port
from tests.harness.prometheus import Series

pytestmark = pytest.mark.integration

MODEL = {
    "model": "google/timesfm-2.5-200m-pytorch",
    "revision": "1d952420fba87f3c6dee4f240de0f1a0fbc790e3",
    "maxContext": 4096,
    "maxHorizon": 64,
    "quantileLevels": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
}


async def model(_: Request) -> JSONResponse:
    return JSONResponse(MODEL)


async def test_timesfm_backend_probe_and_outage(cluster, kube_namespace, prometheus_factory):
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(Starlette(routes=[Route("/v1/model", model)]), host="127.0.0.1", port=port, log_level="warning")
    )
    serving = asyncio.create_task(server.serve())
    name = unique("tfm")
    apply(
        cluster,
        {
            "apiVersion": "scaling.presage.sh/v1alpha1",
            "kind": "ForecastBackend",
            "metadata": {"name": name},
            "spec": {"type": "TimesFM", "timesFM": {"endpoint": f"http://127.0.0.1:{port}", "timeout": "2s"}},
        },
    )
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", 3), kube_namespace)
    apply(cluster, predictive_scaler("web", "web", prom.url, "app_demand", name, interval="2s"), kube_namespace)
    try:
        async with running(options(cluster, kube_namespace)):
            backend = await eventually(
                lambda: get(cluster, "forecastbackend", name),
                lambda o: (condition(o, "Ready") or {}).get("status") == "True",
                what="the TimesFM backend to be probed ready",
            )
            assert backend["status"]["model"] == f"{MODEL['model']}@{MODEL['revision']}"
            assert backend["status"]["observedGeneration"] == backend["metadata"]["generation"]

            server.should_exit = True
            await serving
            backend = await eventually(
                lambda: get(cluster, "forecastbackend", name),
                lambda o: (condition(o, "Ready") or {}).get("status") == "False",
                what="the probe to notice the server is gone",
            )
            ready = condition(backend, "Ready")
            assert ready["reason"] == "BackendUnreachable" and f"127.0.0.1:{port}" in ready["message"]
            assert backend["status"]["model"] == f"{MODEL['model']}@{MODEL['revision']}"  # last known, kept
            scaler = await eventually(
                lambda: get(cluster, "predictivescaler", "web", kube_namespace),
                lambda o: (condition(o, "Degraded") or {}).get("reason") == "BackendUnreachable",
                what="the scaler to be Degraded by its backend",
            )
            assert name in condition(scaler, "Degraded")["message"]
    finally:
        server.should_exit = True
        await asyncio.gather(serving, return_exceptions=True)
        cluster.kubectl("delete", "forecastbackend", name, "--ignore-not-found", check=False)
