"""One ``presage advise`` run with presage's own Kubernetes client against an API server that a test
scripts over a real loopback socket (tests/harness/local_http.py): the listing breaks after its first
page, and one scaler's status write is refused. The scalers listed are still attempted, those whose
last attempt failed last; each failure is written to its own ``status.advice.error`` where the server
allows it, the summary line is printed, and the exit status is 1. Advice that succeeds is checked
against a real API server in tests/integration/test_advise_live.py.

Which scalers a run advises: every Shadow scaler unless it opts out, an Enforce scaler only with
``spec.advice``; a multi-signal Shadow scaler is skipped, and one whose ForecastBackend cannot be tuned
fails; none of those has its signal read."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web

from presage_scaler.api.advice_scope import NOT_SINGLE_SIGNAL
from presage_scaler.clients.kube.credentials import KubeConfig
from presage_scaler.tune.in_cluster_advisor import FIELD_MANAGER, AdviseOptions, advise_cluster
from tests.harness.local_http import Handler, serving

NOW = datetime(2026, 12, 6, 12, tzinfo=UTC)
SCALERS = "/apis/scaling.presage.sh/v1alpha1/predictivescalers"


def scaler(name: str, address: str = "http://127.0.0.1:9", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scaling.presage.sh/v1alpha1",
        "kind": "PredictiveScaler",
        "metadata": {"name": name, "namespace": "shop", "uid": f"uid-{name}", "generation": 1},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "signal": {"prometheus": {"address": address, "query": "up"}},
            "capacity": {"perReplica": 10},
            "policy": {"maxReplicas": 10},
            "advice": {"serviceLevel": "1%"},
        },
        "status": {"advice": status},
    }


def status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": message}
    return web.json_response(body, status=code)


async def advise_through(api_server: Handler) -> int:
    """One ``presage advise`` run at :data:`NOW` against the API server ``api_server`` answers for; its
    exit status."""
    async with serving(api_server) as url:
        return await advise_cluster(
            KubeConfig(server=url),
            AdviseOptions(deadline=timedelta(seconds=30)),
            listing_only=False,
            clock=lambda: NOW,
        )


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

    code = await advise_through(api_server)
    out, err = capsys.readouterr()
    assert code == 1
    last = "shard 0 of 1: 0 advised, 3 failed, 0 not due, 0 waiting for history, 0 skipped; listing failed"
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


def scaler_as(name: str, prometheus: str, **spec: Any) -> dict[str, Any]:
    """A scaler whose signal is read from ``prometheus`` under the path ``/name``, without ``spec.advice``
    unless ``spec`` sets one."""
    obj = scaler(name, f"{prometheus}/{name}")
    del obj["spec"]["advice"]
    obj["spec"].update(spec)
    return obj


async def test_shadow_is_advised_by_default_and_what_is_not_advised_is_never_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``default`` (Shadow, no spec.advice) and ``enforced`` (Enforce with spec.advice) are advised, each
    with its own settings; ``opted-out``, ``enforce-only`` and the multi-signal ``several`` have nothing
    read, and ``several`` is counted as skipped with the reason; ``forecaster``, whose ForecastBackend is
    TimesFM, fails with the reason in its status before its signal is read."""
    signal_reads: set[str] = set()
    backend_reads: list[str] = []
    patched: dict[str, dict[str, Any]] = {}

    async def prometheus(request: web.Request) -> web.Response:
        signal_reads.add(request.path.split("/")[1])  # the scaler's name
        return web.json_response({"status": "success", "data": {"resultType": "matrix", "result": []}})

    async with serving(prometheus) as prometheus_url:
        several = scaler_as("several", prometheus_url)
        several["spec"]["signals"] = [{"name": "up", **several["spec"].pop("signal"), "capacity": {"perReplica": 1}}]
        page = [
            scaler_as("default", prometheus_url),
            scaler_as("opted-out", prometheus_url, advice={"enabled": False}),
            scaler_as("enforce-only", prometheus_url, mode="Enforce"),
            scaler_as("enforced", prometheus_url, mode="Enforce", advice={"lookback": "3d"}),
            several,
            scaler_as("forecaster", prometheus_url, forecast={"backendRef": "timesfm"}),
        ]

        async def api_server(request: web.Request) -> web.Response:
            if request.method == "GET" and request.path == SCALERS:
                return web.json_response({"items": page, "metadata": {}})
            if request.method == "GET" and "/forecastbackends/" in request.path:
                name = request.path.rsplit("/", 1)[-1]
                backend_reads.append(name)
                spec = (
                    {"type": "TimesFM", "timesFM": {"endpoint": "http://127.0.0.1:9"}}
                    if name == "timesfm"
                    else {"type": "SeasonalNaive"}
                )
                return web.json_response({"metadata": {"name": name}, "spec": spec})
            if request.method == "PATCH" and request.path.endswith("/status"):
                patched[request.path.split("/")[-2]] = json.loads(await request.read())
                return web.json_response({})
            if request.method == "POST" and request.path.endswith("/events"):
                return web.json_response(json.loads(await request.read()), status=201)
            return status(404, "NotFound", request.path)

        code = await advise_through(api_server)
    out, _ = capsys.readouterr()
    assert code == 1  # the TimesFM scaler failed
    # Prometheus answers with no samples: the two advised scalers read their own lookbacks and fail there.
    assert set(patched) == {"default", "enforced", "forecaster"}, patched
    assert sorted(backend_reads) == ["default", "default", "timesfm"]
    assert signal_reads == {"default", "enforced"}
    reason = patched["forecaster"]["status"]["advice"]["error"]
    assert "needs a backend that answers hindcasts (SeasonalNaive); a TimesFM backend does not" in reason
    for name in ("default", "enforced"):
        assert "hindcasts" not in patched[name]["status"]["advice"]["error"], patched[name]
    assert f"shop/several skipped: {NOT_SINGLE_SIGNAL}" in out.splitlines(), out
    assert not [line for line in out.splitlines() if "opted-out" in line or "enforce-only" in line], out
    assert out.splitlines()[-1] == "shard 0 of 1: 0 advised, 3 failed, 0 not due, 0 waiting for history, 1 skipped"
