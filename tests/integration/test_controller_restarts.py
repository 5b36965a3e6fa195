"""Restarts: of the API server under a running controller, of the controller itself, of the leader."""

from __future__ import annotations

import asyncio
import signal
import time
from datetime import datetime

import grpc
import pytest

from presage_scaler.controller.app import running
from presage_scaler.proto_gen import externalscaler_pb2 as pb
from presage_scaler.proto_gen import externalscaler_pb2_grpc as pb_grpc
from presage_scaler.serving.keda import metric_name
from tests.harness.presage_cluster import (
    apply,
    condition,
    controller_process,
    deployment,
    eventually,
    get,
    options,
    predictive_scaler,
    recent_samples,
)
from tests.harness.prometheus import Series

pytestmark = pytest.mark.integration


def _generated_at(obj) -> str | None:
    return ((obj.get("status") or {}).get("lastForecast") or {}).get("generatedAt")


async def test_apiserver_restart_mid_run(cluster, kube_namespace, backend_name, prometheus_factory):
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", 3), kube_namespace)
    scaler = predictive_scaler("web", "web", prom.url, "app_demand", backend_name, interval="1s", mode="Enforce")
    apply(cluster, scaler, kube_namespace)

    async with running(options(cluster, kube_namespace)) as app:
        before = await eventually(
            lambda: get(cluster, "predictivescaler", "web", kube_namespace),
            lambda o: _generated_at(o) is not None,
            what="a first recommendation",
        )
        recommended = before["status"]["recommendedReplicas"]
        # While the API server is down, KEDA keeps getting the last recommendation from the store.
        restart = asyncio.create_task(asyncio.to_thread(cluster.restart_apiserver))
        answers = []
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.grpc.port}") as channel:
            stub = pb_grpc.ExternalScalerStub(channel)
            ref = pb.ScaledObjectRef(name="web", namespace=kube_namespace, scalerMetadata={"predictiveScaler": "web"})
            while not restart.done():
                reply = await stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref, metricName=metric_name("web")))
                answers.append(reply.metricValues[0].metricValue)
                await asyncio.sleep(0.1)
        await restart
        restarted_at = datetime.now().astimezone().isoformat()
        assert len(answers) >= 5 and min(answers) >= 1, answers
        after = await eventually(
            lambda: get(cluster, "predictivescaler", "web", kube_namespace),
            lambda o: _generated_at(o) is not None and _generated_at(o) > _generated_at(before),
            what="evaluations to resume after the restart",
        )
        assert after["status"]["recommendedReplicas"] >= recommended
        assert condition(after, "Degraded")["status"] == "False"
        # The watch is live again: a spec change made after the restart is picked up at once.
        changed = predictive_scaler(
            "web",
            "web",
            prom.url,
            "app_demand",
            backend_name,
            interval="10m",
            policy={"maxReplicas": 100, "minReplicas": 60},
        )
        apply(cluster, changed, kube_namespace)
        await eventually(
            lambda: get(cluster, "predictivescaler", "web", kube_namespace),
            lambda o: (o.get("status") or {}).get("recommendedReplicas") == 60,
            timeout=30,
            what=f"a spec change after the restart at {restarted_at} to be evaluated",
        )


async def test_scale_down_window_continues_across_controller_restart(
    cluster,
    kube_namespace,
    backend_name,
    prometheus_factory,
):
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    # 90 replicas for ~100-150 units at 10 per replica: the forecast wants far fewer.
    apply(cluster, deployment("web", 90), kube_namespace)
    spec = predictive_scaler("web", "web", prom.url, "app_demand", backend_name, interval="2s")
    spec["spec"]["policy"] = {"maxReplicas": 100, "stabilization": {"scaleDownWindow": "1h"}}
    spec["spec"]["policy"]["scaleDownUncertaintyGuard"] = {"enabled": False}
    apply(cluster, spec, kube_namespace)

    async with running(options(cluster, kube_namespace)):
        first = await eventually(
            lambda: get(cluster, "predictivescaler", "web", kube_namespace),
            lambda o: (o.get("status") or {}).get("scaleDownCandidateSince") is not None,
            what="a scale-down window to open",
        )
    since = first["status"]["scaleDownCandidateSince"]
    assert first["status"]["breakdown"]["constraint"] == "ScaleDownWindow"
    assert first["status"]["recommendedReplicas"] == 90
    time.sleep(1.1)  # status timestamps have one-second resolution

    async with running(options(cluster, kube_namespace)):
        later = await eventually(
            lambda: get(cluster, "predictivescaler", "web", kube_namespace),
            lambda o: _generated_at(o) > _generated_at(first),
            what="an evaluation by the restarted controller",
        )
    assert later["status"]["scaleDownCandidateSince"] == since
    assert later["status"]["breakdown"]["constraint"] == "ScaleDownWindow"


async def test_standby_takes_over_when_the_leader_is_killed(
    cluster,
    kube_namespace,
    backend_name,
    prometheus_factory,
    tmp_path,
):
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", 3), kube_namespace)
    apply(cluster, predictive_scaler("web", "web", prom.url, "app_demand", backend_name, interval="1s"), kube_namespace)
    processes = {
        name: controller_process(cluster, kube_namespace, name, tmp_path / f"{name}.log") for name in ("a", "b")
    }
    try:
        lease = await eventually(
            lambda: get(cluster, "lease", "presage-scaler", kube_namespace),
            lambda o: o["spec"].get("holderIdentity") in processes,
            what="a leader",
        )
        leader = lease["spec"]["holderIdentity"]
        standby = next(name for name in processes if name != leader)
        await eventually(
            lambda: get(cluster, "predictivescaler", "web", kube_namespace),
            lambda o: _generated_at(o) is not None,
            what="the leader's first recommendation",
        )
        processes[leader].send_signal(signal.SIGKILL)
        processes[leader].wait(timeout=10)
        killed = time.monotonic()
        standby_log = tmp_path / f"{standby}.log"
        killed_mark = len(standby_log.read_text())
        lease = await eventually(
            lambda: get(cluster, "lease", "presage-scaler", kube_namespace),
            lambda o: o["spec"].get("holderIdentity") == standby,
            timeout=20,
            what="the standby to take the lease",
        )
        took_over = time.monotonic() - killed
        assert took_over < 2 * 4 + 2, f"takeover took {took_over:.1f}s for a 4s lease"
        assert lease["spec"]["leaseTransitions"] >= 1
        # Nothing visible changes, so its statuses are held: its log says it evaluated.
        await eventually(
            lambda: standby_log.read_text()[killed_mark:],
            lambda log: f"evaluated scaler={kube_namespace}/web " in log,
            timeout=20,
            what="the new leader to evaluate",
        )
        assert processes[standby].poll() is None
        # Only the leader evaluates: the standby's first evaluation comes after it took the lease.
        logs = (tmp_path / f"{standby}.log").read_text()
        evaluated = f"evaluated scaler={kube_namespace}/web"
        assert "leading=True" in logs and evaluated in logs
        assert logs.index("leading=True") < logs.index(evaluated)
        assert evaluated in (tmp_path / f"{leader}.log").read_text()
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=20)
    # A clean shutdown releases the lease for the next candidate.
    assert get(cluster, "lease", "presage-scaler", kube_namespace)["spec"].get("holderIdentity", "") == ""


async def test_standby_serves_what_the_leader_writes(cluster, kube_namespace, backend_name, prometheus_factory):
    prom = prometheus_factory(Series("app_demand", {"job": "web"}, recent_samples()))
    apply(cluster, deployment("web", 3), kube_namespace)
    apply(cluster, predictive_scaler("web", "web", prom.url, "app_demand", backend_name), kube_namespace)
    elect = {"leader_elect": True, "lease_namespace": kube_namespace, "retry_period": 0.5}
    async with (
        running(options(cluster, kube_namespace, **elect)) as a,
        running(options(cluster, kube_namespace, **elect)) as b,
    ):
        scaler = await eventually(
            lambda: get(cluster, "predictivescaler", "web", kube_namespace),
            lambda o: (o.get("status") or {}).get("recommendedReplicas") is not None,
            what="the leader's recommendation",
        )
        assert [a.leading, b.leading].count(True) == 1
        standby = b if a.leading else a
        stored = await eventually(
            lambda: standby.store.get(kube_namespace, "web"), lambda item: item is not None, what="the standby's store"
        )
        assert stored.recommended_replicas == scaler["status"]["recommendedReplicas"]
        assert standby.scalers.evaluations == 0
