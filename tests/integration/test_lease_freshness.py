"""Held statuses on a real API server: the leader writes a status only when something visible
changes, and every replica serves it as fresh as the leader's Lease vouches."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from presage_scaler.api.serving_contract import StalenessBound
from presage_scaler.controller.app import running
from presage_scaler.proto_gen import externalscaler_pb2 as pb
from presage_scaler.proto_gen import externalscaler_pb2_grpc as pb_grpc
from presage_scaler.serving.freshness import ANNOTATION
from presage_scaler.serving.keda import metric_name
from tests.harness.presage_cluster import (
    apply,
    deployment,
    eventually,
    get,
    options,
    predictive_scaler,
    recent_samples,
)
from tests.harness.prometheus import Series

pytestmark = pytest.mark.integration

INTERVAL = timedelta(seconds=4)
BOUND = 3 * INTERVAL  # the staleness bound below: 3 intervals, no floor
ELECT = {
    "leader_elect": True,
    "retry_period": 0.5,
    "renew_deadline": 1.5,
    "lease_duration": 3.0,
    "staleness": StalenessBound(3.0, timedelta(0)),
}


def _written_at(obj: dict) -> datetime:
    return datetime.fromisoformat(obj["status"]["lastForecast"]["generatedAt"])


async def _metric(port: int, namespace: str) -> grpc.StatusCode:
    """What KEDA gets from the replica serving gRPC on ``port``: OK, or the refusal's code."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.ExternalScalerStub(channel)
        ref = pb.ScaledObjectRef(name="web", namespace=namespace, scalerMetadata={"predictiveScaler": "web"})
        try:
            await stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref, metricName=metric_name("web")))
        except grpc.aio.AioRpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK


async def test_a_standby_serves_held_statuses_as_fresh_as_the_leaders_lease_vouches(
    cluster, kube_namespace, backend_name, prometheus_factory
):
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", 3), kube_namespace)
    scaler = predictive_scaler("web", "web", prom.url, "app_demand", backend_name, interval="4s", mode="Enforce")
    apply(cluster, scaler, kube_namespace)
    elect = {**ELECT, "lease_namespace": kube_namespace}
    async with contextlib.AsyncExitStack() as first, contextlib.AsyncExitStack() as second:
        a = await first.enter_async_context(running(options(cluster, kube_namespace, **elect)))
        b = await second.enter_async_context(running(options(cluster, kube_namespace, **elect)))
        # The written status grows older than the bound while the leader keeps confirming it.
        written = await eventually(
            lambda: get(cluster, "predictivescaler", "web", kube_namespace),
            lambda o: (
                (o.get("status") or {}).get("lastForecast") is not None
                and datetime.now(UTC) - _written_at(o) > BOUND + timedelta(seconds=2)
            ),
            timeout=60,
            what="a written status older than the staleness bound",
        )
        leader, standby, leader_stack = (a, b, first) if a.leading else (b, a, second)
        assert not standby.leading
        assert leader.scalers.status_writes < leader.scalers.evaluations
        record = json.loads(
            get(cluster, "lease", "presage-scaler", kube_namespace)["metadata"]["annotations"][ANNOTATION]
        )
        assert record["shards"] == 1 and 0 <= record["lateness"] < 1
        # Both replicas serve it, as confirmed within the bound.
        now = datetime.now(UTC)
        for replica in (leader, standby):
            served = replica.store.get(kube_namespace, "web")
            assert served is not None and served.generated_at == _written_at(written)
            assert replica.store.age(served, now) < BOUND
            assert await _metric(replica.grpc.port, kube_namespace) == grpc.StatusCode.OK
        # The leader stops: the standby takes over from the record and KEDA is never refused.
        stopping = asyncio.create_task(leader_stack.aclose())
        codes = []
        deadline = time.monotonic() + 3 * BOUND.total_seconds()
        while time.monotonic() < deadline:
            codes.append(await _metric(standby.grpc.port, kube_namespace))
            await asyncio.sleep(0.2)
        await stopping
        assert standby.leading and standby.scalers.evaluations > 0
        assert set(codes) == {grpc.StatusCode.OK}, codes


async def test_a_held_status_goes_stale_once_nobody_confirms_it(
    cluster, kube_namespace, backend_name, prometheus_factory
):
    """The leader stops confirming and no replica takes over: the record ages, and what it vouched
    for is refused once its bound has passed, as an unwritten status would be."""
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", 3), kube_namespace)
    scaler = predictive_scaler("web", "web", prom.url, "app_demand", backend_name, interval="4s", mode="Enforce")
    apply(cluster, scaler, kube_namespace)
    elect = {**ELECT, "lease_namespace": kube_namespace}
    async with running(options(cluster, kube_namespace, **elect)) as leader:
        await eventually(
            lambda: get(cluster, "predictivescaler", "web", kube_namespace),
            lambda o: (
                (o.get("status") or {}).get("lastForecast") is not None
                and datetime.now(UTC) - _written_at(o) > BOUND + timedelta(seconds=2)
            ),
            timeout=60,
            what="a written status older than the staleness bound",
        )
        assert await _metric(leader.grpc.port, kube_namespace) == grpc.StatusCode.OK
        # Its leader election stops: it releases the Lease and evaluates no more, and nobody takes over.
        election = next(task for task in asyncio.all_tasks() if task.get_name() == "leader-election")
        election.cancel()
        await asyncio.gather(election, return_exceptions=True)
        assert not leader.leading
        stopped_at = time.monotonic()
        codes = []
        while time.monotonic() - stopped_at < BOUND.total_seconds() + 4:
            codes.append(await _metric(leader.grpc.port, kube_namespace))
            await asyncio.sleep(0.25)
        assert codes[0] == grpc.StatusCode.OK and codes[-1] == grpc.StatusCode.UNAVAILABLE
