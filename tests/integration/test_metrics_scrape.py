"""A real Prometheus scrapes the scaler's /metrics: every series the dashboard queries is ingested.

The scaler side is real too: the HTTP server on a socket, the KEDA gRPC server reporting its calls,
an evaluation from the production decision code and a shadow ledger.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import grpc
import httpx
import pytest

from presage_scaler.controller.instruments import record_evaluation, record_shadow
from presage_scaler.engine.shadow import Prediction, ShadowLedger
from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.proto_gen import externalscaler_pb2 as pb
from presage_scaler.proto_gen import externalscaler_pb2_grpc as pb_grpc
from presage_scaler.serving.grpc_server import serve
from presage_scaler.serving.http_server import serve_http
from presage_scaler.serving.keda import StaticScaledObjectTriggers, metric_name
from presage_scaler.serving.store import RecommendationStore, StoredRecommendation, TargetRef
from presage_scaler.serving.store_metrics import served_metrics
from tests.harness.dashboard import dashboard, expressions, metric_names, panels_of
from tests.harness.evaluation import SPEC, evaluate
from tests.harness.fixtures_prometheus import PrometheusFactory

pytestmark = pytest.mark.integration

NS, NAME = "shop", "web"


async def _populate(store: RecommendationStore, metrics: ScalerMetrics) -> int:
    """One evaluation, its shadow summary, an error and dependency calls; returns the recommendation."""
    now = datetime.now(UTC)
    rec = evaluate(100.0, 4.0, now=now)
    record_evaluation(metrics, NS, NAME, rec, current_replicas=10, duration_s=0.3)
    ledger = ShadowLedger()
    # Needs 10, reactive had 9; of its two 3-minute windows rps (100) was forecast at 150, covered,
    # and cpu (4) at 3, missed: quantile coverage 0.5.
    prediction = Prediction(now - timedelta(minutes=5), 12, 9, rec.lead_time.value, (150.0, 3.0), timedelta(minutes=3))
    ledger.record(prediction)
    ledger.settle(rec.data, now)
    record_shadow(metrics, NS, NAME, ledger.summary())
    metrics.observe_error(NS, NAME, "NoData")
    metrics.observe_backend_call("default", 0.2, "success")
    metrics.observe_prometheus_call("range", 0.01, "success")
    await store.put(
        StoredRecommendation(
            NS, NAME, "Enforce", TargetRef("apps/v1", "Deployment", "web"), rec.replicas, 10, now, SPEC.interval, 1, 40
        )
    )
    return rec.replicas


def _panel_expr(title: str) -> str:
    """The one query of the dashboard panel with this title, for the scaler :func:`_populate` evaluates."""
    [panel] = [p for p in panels_of(dashboard()["panels"]) if p.get("title") == title]
    [target] = panel["targets"]
    return target["expr"].replace("$namespace", NS).replace("$scaler", NAME)


async def _query(client: httpx.AsyncClient, promql: str) -> list[dict]:
    response = await client.get("/api/v1/query", params={"query": promql})
    response.raise_for_status()
    return response.json()["data"]["result"]


async def test_prometheus_ingests_every_series_the_dashboard_uses(prometheus_factory: PrometheusFactory) -> None:
    store = RecommendationStore()
    metrics = served_metrics(ScalerMetrics(), store)
    recommended = await _populate(store, metrics)
    keda = await serve(
        store, StaticScaledObjectTriggers(), host="127.0.0.1", port=0, observe=metrics.observe_grpc_request
    )
    http = await serve_http(store, metrics, host="127.0.0.1", port=0)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{keda.port}") as channel:
            stub = pb_grpc.ExternalScalerStub(channel)
            ref = pb.ScaledObjectRef(name="web-so", namespace=NS, scalerMetadata={"predictiveScaler": NAME})
            assert (
                await stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref, metricName=metric_name(NAME)))
            ).metricValues
            missing = pb.ScaledObjectRef(name="x", namespace=NS, scalerMetadata={"predictiveScaler": "ghost"})
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.IsActive(missing)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{http.port}") as client:
            assert (await client.post("/agones/v1/scale", content=b"{}")).status_code == 400

        prometheus = prometheus_factory(start=False)
        prometheus.add_scrape_target("presage", f"127.0.0.1:{http.port}", interval="1s")
        prometheus.start()
        wanted = set().union(*(metric_names(e) for e in expressions()))
        async with httpx.AsyncClient(base_url=prometheus.url, timeout=5.0) as client:
            ingested: set[str] = set()
            for _ in range(150):
                series = await _query(client, '{__name__=~"presage_.+", job="presage"}')
                ingested = {s["metric"]["__name__"] for s in series}
                if wanted <= ingested:
                    break
                await asyncio.sleep(0.2)
            assert wanted <= ingested, f"not ingested: {sorted(wanted - ingested)}\n{prometheus.log_tail()}"

            assert [r["value"][1] for r in await _query(client, 'up{job="presage"}')] == ["1"]
            result = await _query(client, f'presage_recommended_replicas{{namespace="{NS}", scaler="{NAME}"}}')
            assert [r["value"][1] for r in result] == [str(recommended)]
            grpc_calls = await _query(client, "presage_grpc_requests_total")
            assert {(r["metric"]["method"], r["metric"]["code"], r["value"][1]) for r in grpc_calls} == {
                ("GetMetrics", "OK", "1"),
                ("IsActive", "NOT_FOUND", "1"),
            }
            webhook = await _query(client, "presage_webhook_requests_total")
            assert [(r["metric"]["code"], r["value"][1]) for r in webhook] == [("400", "1")]
            coverage = await _query(client, "presage_shadow_coverage_ratio")
            assert {(r["metric"]["policy"], r["value"][1]) for r in coverage} == {("presage", "1"), ("reactive", "0")}
            quantile_coverage = await _query(client, "presage_shadow_quantile_coverage_ratio")
            assert [r["value"][1] for r in quantile_coverage] == ["0.5"]
            # The projected curve as the dashboard reads it: rps binds, its flat forecast has ten 1m steps at
            # 100 (0.5: 90, 0.9: 110), and the observed 100 is at offset 0.
            projected = await _query(client, _panel_expr("Projected demand"))
            curve = {(r["metric"]["offset_seconds"], r["metric"]["quantile"]): float(r["value"][1]) for r in projected}
            assert curve.pop(("0", "observed")) == 100
            levels = {"point": 100.0, "0.5": 90.0, "0.9": 110.0}
            assert curve == pytest.approx({(str(60 * k), q): v for k in range(1, 11) for q, v in levels.items()})
    finally:
        await http.stop(grace=1.0)
        await keda.stop(grace=1)
