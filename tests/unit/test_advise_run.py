"""One ``presage advise`` run with presage's own Kubernetes client against an API server that a test
scripts over a real loopback socket (tests/harness/local_http.py): the listing breaks after its first
page, and one scaler's status write is refused. The scalers listed are still attempted, those whose
last attempt failed last; each failure is written to its own ``status.advice.error`` where the server
allows it, the summary line is printed, and the exit status is 1. Advice that succeeds is checked
against a real API server in tests/integration/test_advise_live.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web

from presage_scaler.clients.kube.credentials import KubeConfig
from presage_scaler.tune.in_cluster_advisor import FIELD_MANAGER, AdviseOptions, advise_cluster
from tests.harness.local_http import serving

NOW = datetime(2026, 12, 6, 12, tzinfo=UTC)
SCALERS = "/apis/scaling.presage.sh/v1alpha1/predictivescalers"


def scaler(name: str, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scaling.presage.sh/v1alpha1",
        "kind": "PredictiveScaler",
        "metadata": {"name": name, "namespace": "shop", "uid": f"uid-{name}", "generation": 1},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "signal": {"prometheus": {"address": "http://127.0.0.1:9", "query": "up"}},
            "capacity": {"perReplica": 10},
            "policy": {"maxReplicas": 10},
            "advice": {"serviceLevel": "1%"},
        },
        "status": {"advice": status},
    }


def status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": message}
    return web.json_response(body, status=code)


async def test_a_broken_listing_and_a_refused_write_stop_only_what_they_touch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    patched: dict[str, list[dict[str, Any]]] = {}
    attempted: list[str] = []

    async def api_server(request: web.Request) -> web.Response:
        if request.method == "GET" and request.path == SCALERS:
            if "continue" in request.query:
                return status(500, "InternalError", "etcd is away")
            page = [
                scaler("again", error="Prometheus at http://127.0.0.1:9 is unreachable"),
                scaler("late", time="9999-12-31T23:59:59Z", observedGeneration=1),
                scaler("refused"),
            ]
            return web.json_response({"items": page, "metadata": {"continue": "page-2"}})
        if request.method == "GET" and "/forecastbackends/" in request.path:
            return status(404, "NotFound", 'forecastbackends.scaling.presage.sh "default" not found')
        if request.method == "PATCH" and request.path.endswith("/status"):
            name = request.path.split("/")[-2]
            patched.setdefault(name, []).append(json.loads(await request.read()))
            attempted.append(name)
            assert request.query["fieldManager"] == FIELD_MANAGER
            if name == "refused":
                return status(403, "Forbidden", "presage-advise may not patch predictivescalers/status")
            return web.json_response(scaler(name))
        if request.method == "POST" and request.path.endswith("/events"):
            return web.json_response(json.loads(await request.read()), status=201)
        return status(404, "NotFound", request.path)

    async with serving(api_server) as url:
        code = await advise_cluster(
            KubeConfig(server=url),
            AdviseOptions(deadline=timedelta(seconds=30)),
            listing_only=False,
            clock=lambda: NOW,
        )
    out, err = capsys.readouterr()
    assert code == 1
    last = "shard 0 of 1: 0 advised, 3 failed, 0 not due, 0 waiting for history; listing failed"
    assert out.splitlines()[-1] == last, out
    assert attempted == ["late", "refused", "again"]  # the one that failed before, last
    assert "presage advise: listing PredictiveScalers: " in err and "etcd is away" in err, err
    # The year-9999 time made "late" due; its failure (no ForecastBackend) is in its own status.
    [late] = patched["late"]
    reason = late["status"]["advice"]["error"]
    assert "ForecastBackend 'default' does not exist" in reason, late
    assert f"shop/late failed: {reason}" in out
    # "refused": its error could not be written either; the run says both.
    [refused] = patched["refused"]
    assert "ForecastBackend 'default' does not exist" in refused["status"]["advice"]["error"]
    [line] = [line for line in out.splitlines() if line.startswith("shop/refused failed: ")]
    assert "writing status.advice.error: " in line and "may not patch" in line, line
