"""The KEDA external scaler over a real loopback socket: plain, TLS and mutual TLS.

The client uses the stubs generated from proto/ (tests/unit/test_proto_fresh.py keeps them fresh),
so every call goes through the same wire contract KEDA uses.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from presage_scaler.proto_gen import externalscaler_pb2 as pb
from presage_scaler.proto_gen import externalscaler_pb2_grpc as pb_grpc
from presage_scaler.serving.grpc_server import SERVICE_NAME, ScalerServer, TLSConfig, serve
from presage_scaler.serving.keda import StaticScaledObjectTriggers, metric_name
from presage_scaler.serving.store import RecommendationStore, StoredRecommendation, TargetRef
from tests.harness.certs import Pem, issue

pytestmark = pytest.mark.integration

NS = "shop"
INTERVAL = timedelta(minutes=1)


def rec(
    name: str = "web",
    *,
    namespace: str = NS,
    mode: str = "Enforce",
    recommended: int = 7,
    current: int | None = 4,
    age: timedelta = timedelta(seconds=5),
    interval: timedelta = INTERVAL,
) -> StoredRecommendation:
    return StoredRecommendation(
        namespace=namespace,
        name=name,
        mode=mode,  # type: ignore[arg-type]
        target=TargetRef("apps/v1", "Deployment", name),
        recommended_replicas=recommended,
        current_replicas=current,
        generated_at=datetime.now(UTC) - age,
        interval=interval,
        min_replicas=1,
        max_replicas=50,
    )


def ref(scaler: str | None = "web", *, namespace: str = NS, scaled_object: str = "web-so") -> pb.ScaledObjectRef:
    metadata = {"scalerAddress": "presage-scaler.presage-system:9090"}
    if scaler is not None:
        metadata["predictiveScaler"] = scaler
    return pb.ScaledObjectRef(name=scaled_object, namespace=namespace, scalerMetadata=metadata)


def metrics_request(scaler: str = "web", **kwargs: str) -> pb.GetMetricsRequest:
    return pb.GetMetricsRequest(scaledObjectRef=ref(scaler, **kwargs), metricName=metric_name(scaler))


# --- certificates -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    ca: Pem
    server: Pem
    client: Pem
    rogue_client: Pem  # signed by a CA the server does not trust


@pytest.fixture(scope="module")
def pki() -> Pki:
    ca = issue("presage-test-ca", ca=True)
    rogue_ca = issue("rogue-ca", ca=True)
    return Pki(
        ca=ca,
        server=issue("presage-scaler", ca, hosts=["localhost", "127.0.0.1"]),
        client=issue("keda-operator", ca),
        rogue_client=issue("keda-operator", rogue_ca),
    )


# --- fixtures -----------------------------------------------------------------------------------


@dataclass
class Harness:
    store: RecommendationStore
    triggers: StaticScaledObjectTriggers
    running: ScalerServer
    channel: grpc.aio.Channel

    @property
    def stub(self) -> pb_grpc.ExternalScalerStub:
        return pb_grpc.ExternalScalerStub(self.channel)


async def _start(
    tls: TLSConfig | None = None, **kwargs: object
) -> tuple[RecommendationStore, StaticScaledObjectTriggers, ScalerServer]:
    store = RecommendationStore()
    triggers = StaticScaledObjectTriggers({(NS, "web-so"): 1})
    running = await serve(store, triggers, host="127.0.0.1", port=0, tls=tls, **kwargs)  # type: ignore[arg-type]
    return store, triggers, running


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    store, triggers, running = await _start(stream_recheck=0.2)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        yield Harness(store, triggers, running, channel)
    finally:
        await channel.close()
        await running.stop(grace=1)


async def _code_of(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call  # type: ignore[misc]
    return info.value.code(), info.value.details() or ""


# --- GetMetricSpec ------------------------------------------------------------------------------


async def test_metric_spec_from_metadata_alone(h: Harness) -> None:
    # Nothing in the store: the spec must not depend on the data source.
    resp = await h.stub.GetMetricSpec(ref("web.checkout"))
    assert len(resp.metricSpecs) == 1
    spec = resp.metricSpecs[0]
    assert spec.metricName == "presage-web-checkout"
    assert spec.targetSize == 1
    assert spec.targetSizeFloat == 1.0


@pytest.mark.parametrize(
    ("scaler", "needle"),
    [(None, "predictiveScaler"), ("", "predictiveScaler"), ("Web_App", "not a valid"), ("x" * 254, "not a valid")],
)
async def test_bad_metadata_is_invalid_argument(h: Harness, scaler: str | None, needle: str) -> None:
    for call in (
        h.stub.GetMetricSpec(ref(scaler)),
        h.stub.IsActive(ref(scaler)),
        h.stub.GetMetrics(pb.GetMetricsRequest(scaledObjectRef=ref(scaler), metricName="presage-web")),
    ):
        code, details = await _code_of(call)
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert needle in details


# --- GetMetrics ---------------------------------------------------------------------------------


async def test_enforce_returns_recommended_replicas(h: Harness) -> None:
    await h.store.put(rec(mode="Enforce", recommended=7, current=4))
    resp = await h.stub.GetMetrics(metrics_request())
    assert len(resp.metricValues) == 1
    value = resp.metricValues[0]
    assert value.metricName == "presage-web"
    assert value.metricValueFloat == 7.0
    assert value.metricValue == 7


async def test_shadow_alone_returns_current_replicas(h: Harness) -> None:
    await h.store.put(rec(mode="Shadow", recommended=9, current=4))
    h.triggers.set(NS, "web-so", 1)
    resp = await h.stub.GetMetrics(metrics_request())
    assert [(v.metricValue, v.metricValueFloat) for v in resp.metricValues] == [(4, 4.0)]


async def test_shadow_beside_other_triggers_returns_zero(h: Harness) -> None:
    await h.store.put(rec(mode="Shadow", recommended=9, current=4))
    h.triggers.set(NS, "web-so", 3)
    resp = await h.stub.GetMetrics(metrics_request())
    assert [(v.metricValue, v.metricValueFloat) for v in resp.metricValues] == [(0, 0.0)]
    assert (await h.stub.IsActive(ref())).result is False


async def test_shadow_with_unknown_triggers_is_unavailable(h: Harness) -> None:
    await h.store.put(rec(mode="Shadow"))
    code, details = await _code_of(h.stub.GetMetrics(metrics_request(scaled_object="not-cached")))
    assert code == grpc.StatusCode.UNAVAILABLE
    assert "refusing to guess" in details


async def test_shadow_with_unknown_current_is_unavailable(h: Harness) -> None:
    await h.store.put(rec(mode="Shadow", current=None))
    code, details = await _code_of(h.stub.GetMetrics(metrics_request()))
    assert code == grpc.StatusCode.UNAVAILABLE
    assert "current replica count" in details


async def test_enforce_does_not_need_triggers(h: Harness) -> None:
    await h.store.put(rec(mode="Enforce", recommended=3))
    resp = await h.stub.GetMetrics(metrics_request(scaled_object="not-cached"))
    assert resp.metricValues[0].metricValue == 3


async def test_stale_recommendation_is_unavailable(h: Harness) -> None:
    # interval 1m -> bound max(3m, 2m) = 3m
    await h.store.put(rec(age=timedelta(minutes=3, seconds=10)))
    for call in (h.stub.GetMetrics(metrics_request()), h.stub.IsActive(ref())):
        code, details = await _code_of(call)
        assert code == grpc.StatusCode.UNAVAILABLE
        assert "stale" in details


async def test_staleness_floor_applies_to_short_intervals(h: Harness) -> None:
    # interval 10s -> bound max(30s, 2m) = 2m: 90s old is still fresh.
    await h.store.put(rec(age=timedelta(seconds=90), interval=timedelta(seconds=10), recommended=5))
    assert (await h.stub.GetMetrics(metrics_request())).metricValues[0].metricValue == 5


async def test_missing_recommendation_is_not_found(h: Harness) -> None:
    code, details = await _code_of(h.stub.GetMetrics(metrics_request("ghost")))
    assert code == grpc.StatusCode.NOT_FOUND
    assert "'ghost'" in details and NS in details


async def test_scaler_in_other_namespace_is_not_found(h: Harness) -> None:
    await h.store.put(rec("web", namespace="elsewhere"))
    for call in (h.stub.GetMetrics(metrics_request()), h.stub.IsActive(ref())):
        code, _ = await _code_of(call)
        assert code == grpc.StatusCode.NOT_FOUND


async def test_unknown_metric_name_is_invalid_argument(h: Harness) -> None:
    await h.store.put(rec())
    request = pb.GetMetricsRequest(scaledObjectRef=ref(), metricName="s0-presage-web")
    code, details = await _code_of(h.stub.GetMetrics(request))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "presage-web" in details


async def test_fifty_concurrent_clients(h: Harness) -> None:
    for i in range(50):
        await h.store.put(rec(f"svc-{i}", recommended=i + 1))
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{h.running.port}") for _ in range(10)]
    try:
        calls = [
            pb_grpc.ExternalScalerStub(channels[i % len(channels)]).GetMetrics(metrics_request(f"svc-{i}"))
            for i in range(50)
        ]
        responses = await asyncio.gather(*calls)
    finally:
        await asyncio.gather(*(c.close() for c in channels))
    assert [r.metricValues[0].metricValue for r in responses] == [i + 1 for i in range(50)]
    assert all(r.metricValues[0].metricName == f"presage-svc-{i}" for i, r in enumerate(responses))


# --- IsActive -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "recommended", "current", "expected"),
    [
        ("Enforce", 3, 0, True),
        ("Enforce", 0, 5, False),
        ("Shadow", 0, 2, True),
        ("Shadow", 5, 0, False),
    ],
)
async def test_is_active(h: Harness, mode: str, recommended: int, current: int, expected: bool) -> None:
    await h.store.put(rec(mode=mode, recommended=recommended, current=current))
    assert (await h.stub.IsActive(ref())).result is expected


async def test_is_active_missing_is_an_error_not_false(h: Harness) -> None:
    code, _ = await _code_of(h.stub.IsActive(ref("ghost")))
    assert code == grpc.StatusCode.NOT_FOUND


async def test_stream_is_active_pushes_flips_and_ends_on_cancel(h: Harness) -> None:
    await h.store.put(rec(recommended=3))
    call = h.stub.StreamIsActive(ref())
    assert (await asyncio.wait_for(call.read(), 5)).result is True
    await h.store.put(rec(recommended=4))  # still active: no message expected
    await h.store.put(rec(recommended=0))
    assert (await asyncio.wait_for(call.read(), 5)).result is False
    await h.store.put(rec(recommended=2))
    assert (await asyncio.wait_for(call.read(), 5)).result is True
    assert h.running.servicer.active_streams == 1
    call.cancel()
    for _ in range(50):
        if h.running.servicer.active_streams == 0:
            break
        await asyncio.sleep(0.05)
    assert h.running.servicer.active_streams == 0
    # The server is still fine afterwards.
    assert (await h.stub.IsActive(ref())).result is True


async def test_stream_is_active_ends_with_status_when_a_stale_recommendation_arrives(h: Harness) -> None:
    await h.store.put(rec(recommended=3))
    call = h.stub.StreamIsActive(ref())
    assert (await asyncio.wait_for(call.read(), 5)).result is True
    await h.store.put(rec(recommended=3, age=timedelta(minutes=4)))
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await asyncio.wait_for(call.read(), 5)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_stream_is_active_recheck_notices_time_passing() -> None:
    now = [datetime.now(UTC)]
    store = RecommendationStore()
    running = await serve(store, StaticScaledObjectTriggers(), host="127.0.0.1", port=0, stream_recheck=0.1)
    # Drive the scaler's clock instead of waiting three minutes.
    running.servicer.scaler.clock = lambda: now[0]
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        await store.put(rec(recommended=3, age=timedelta(0)))
        call = pb_grpc.ExternalScalerStub(channel).StreamIsActive(ref())
        assert (await asyncio.wait_for(call.read(), 5)).result is True
        now[0] += timedelta(minutes=10)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await asyncio.wait_for(call.read(), 5)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await channel.close()
        await running.stop(grace=1)


async def test_stream_missing_scaler_is_not_found(h: Harness) -> None:
    call = h.stub.StreamIsActive(ref("ghost"))
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await asyncio.wait_for(call.read(), 5)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


async def test_stop_with_open_stream_is_prompt() -> None:
    store, _, running = await _start()
    await store.put(rec())
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        call = pb_grpc.ExternalScalerStub(channel).StreamIsActive(ref())
        assert (await asyncio.wait_for(call.read(), 5)).result is True
        loop = asyncio.get_running_loop()
        started = loop.time()
        await running.stop(grace=0.5)
        assert loop.time() - started < 3
        # The cancelled handler unwinds on the next loop iterations.
        for _ in range(40):
            if running.servicer.active_streams == 0:
                break
            await asyncio.sleep(0.05)
        assert running.servicer.active_streams == 0
    finally:
        await channel.close()


# --- health -------------------------------------------------------------------------------------


async def test_health_serving(h: Harness) -> None:
    health = health_pb2_grpc.HealthStub(h.channel)
    for service in ("", SERVICE_NAME):
        resp = await health.Check(health_pb2.HealthCheckRequest(service=service))
        assert resp.status == health_pb2.HealthCheckResponse.SERVING
    assert SERVICE_NAME == "externalscaler.ExternalScaler"


# --- TLS ----------------------------------------------------------------------------------------


def _target(running: ScalerServer) -> str:
    return f"localhost:{running.port}"


async def test_tls_server_auth(pki: Pki) -> None:
    store, _, running = await _start(TLSConfig(pki.server.cert, pki.server.key))
    await store.put(rec(recommended=6))
    channel = grpc.aio.secure_channel(_target(running), grpc.ssl_channel_credentials(root_certificates=pki.ca.cert))
    try:
        resp = await pb_grpc.ExternalScalerStub(channel).GetMetrics(metrics_request())
        assert resp.metricValues[0].metricValue == 6
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await channel.close()
        await running.stop(grace=1)


async def test_tls_plaintext_client_refused(pki: Pki) -> None:
    _, _, running = await _start(TLSConfig(pki.server.cert, pki.server.key))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        code, _ = await _code_of(pb_grpc.ExternalScalerStub(channel).GetMetricSpec(ref(), timeout=5))
        assert code == grpc.StatusCode.UNAVAILABLE
    finally:
        await channel.close()
        await running.stop(grace=1)


@pytest.fixture
async def mtls(pki: Pki) -> AsyncIterator[tuple[RecommendationStore, ScalerServer]]:
    store, _, running = await _start(TLSConfig(pki.server.cert, pki.server.key, client_ca=pki.ca.cert))
    await store.put(rec(recommended=8))
    try:
        yield store, running
    finally:
        await running.stop(grace=1)


async def test_mtls_client_with_cert(pki: Pki, mtls: tuple[RecommendationStore, ScalerServer]) -> None:
    _, running = mtls
    creds = grpc.ssl_channel_credentials(
        root_certificates=pki.ca.cert, private_key=pki.client.key, certificate_chain=pki.client.cert
    )
    async with grpc.aio.secure_channel(_target(running), creds) as channel:
        resp = await pb_grpc.ExternalScalerStub(channel).GetMetrics(metrics_request())
        assert resp.metricValues[0].metricValue == 8


@pytest.mark.parametrize("client", ["none", "rogue"])
async def test_mtls_client_without_trusted_cert_refused(
    pki: Pki, mtls: tuple[RecommendationStore, ScalerServer], client: str
) -> None:
    _, running = mtls
    if client == "none":
        creds = grpc.ssl_channel_credentials(root_certificates=pki.ca.cert)
    else:
        creds = grpc.ssl_channel_credentials(
            root_certificates=pki.ca.cert, private_key=pki.rogue_client.key, certificate_chain=pki.rogue_client.cert
        )
    async with grpc.aio.secure_channel(_target(running), creds) as channel:
        code, _ = await _code_of(pb_grpc.ExternalScalerStub(channel).GetMetrics(metrics_request(), timeout=5))
        assert code == grpc.StatusCode.UNAVAILABLE


def test_tls_config_from_files(pki: Pki, tmp_path: Path) -> None:
    pki.server.write(tmp_path / "tls.crt", tmp_path / "tls.key")
    (tmp_path / "ca.crt").write_bytes(pki.ca.cert)
    config = TLSConfig.from_files(tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "ca.crt")
    assert config == TLSConfig(pki.server.cert, pki.server.key, pki.ca.cert)
    assert isinstance(config.credentials(), grpc.ServerCredentials)
