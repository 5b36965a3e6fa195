"""Property-based fuzzing of the KEDA gRPC server over a real socket: any request gets a deliberate answer.

Whatever a client sends (odd or enormous names, namespaces, metric names and metadata maps, or bytes
that are not protobuf at all), every RPC must end OK or with a refusal KEDA can act on, never INTERNAL
or UNKNOWN; the error details must stay small enough for any client to read (a Python client fails on
more than 8 KiB of metadata), and the server must keep answering afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from datetime import timedelta

import grpc
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from presage_scaler.api.serving_contract import SCALER_KEY
from presage_scaler.proto_gen import externalscaler_pb2 as pb
from presage_scaler.proto_gen import externalscaler_pb2_grpc as pb_grpc
from presage_scaler.serving.grpc_server import MAX_REQUEST_BYTES, SERVICE_NAME, serve
from presage_scaler.serving.keda import StaticScaledObjectTriggers, metric_name
from presage_scaler.serving.store import RecommendationStore
from tests.integration.test_keda_grpc import NS, rec

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

REFUSALS = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAVAILABLE}
# Half the 8 KiB a Python client accepts; each quoted value is capped at 128 characters.
DETAILS_MAX_BYTES = 4096
# The number of examples comes from the profile (tests/conftest.py, PRESAGE_FUZZ_PROFILE).
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Every path of the server: Enforce, Shadow alone / beside others / with a ScaledObject reporting no
# triggers / with one that is not cached, Shadow without a current count, stale.
SCALERS = ("web", "shadow", "no-current", "stale")
SCALED_OBJECTS = {"alone": 1, "mixed": 3, "empty": 0}


@dataclass
class Server:
    stub: pb_grpc.ExternalScalerStub
    channel: grpc.aio.Channel


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncIterator[Server]:
    store = RecommendationStore()
    await store.put(rec("web", recommended=5))
    await store.put(rec("shadow", mode="Shadow"))
    await store.put(rec("no-current", mode="Shadow", current=None))
    await store.put(rec("stale", age=timedelta(hours=1)))
    triggers = StaticScaledObjectTriggers({(NS, name): count for name, count in SCALED_OBJECTS.items()})
    running = await serve(store, triggers, host="127.0.0.1", port=0, stream_recheck=0.2)
    # Default channel options: the client's own limits are part of what is checked.
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    try:
        yield Server(pb_grpc.ExternalScalerStub(channel), channel)
    finally:
        await channel.close()
        await running.stop(grace=1)


# --- strategies ---------------------------------------------------------------------------------


def _repeated(pattern: str, times: int) -> str:
    return pattern * times


# Up to ~1.4 MB: some requests cross MAX_REQUEST_BYTES and must be refused by size.
long_text = st.builds(_repeated, st.text(min_size=1, max_size=6), st.integers(200, 60_000))
odd_text = st.one_of(st.text(max_size=300), long_text)
odd_names = st.one_of(st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,300}[a-z0-9])?", fullmatch=True), odd_text)


def _huge_map(entries: int, key: str, value: str) -> dict[str, str]:
    return {f"{key}{i}": value for i in range(entries)}


odd_metadata = st.one_of(
    st.dictionaries(odd_text, odd_text, max_size=5),
    st.builds(_huge_map, st.integers(1_000, 20_000), st.text(max_size=8), st.text(max_size=16)),
)


@st.composite
def scaled_object_refs(draw: st.DrawFn) -> pb.ScaledObjectRef:
    """A request for a stored scaler with any subset of its fields replaced by odd values.

    Mostly-valid requests reach every path behind the first check (lookup, staleness, Shadow's trigger
    count); the odd fields reach the refusals and the size limit.
    """
    odd = draw(st.sets(st.sampled_from(["name", "namespace", "scaler", "metadata"])))
    metadata = draw(odd_metadata) if "metadata" in odd else {"scalerAddress": "presage-scaler.presage-system:9090"}
    scaler = draw(st.one_of(st.none(), odd_names) if "scaler" in odd else st.sampled_from(SCALERS))
    if scaler is not None:
        metadata[SCALER_KEY] = scaler
    return pb.ScaledObjectRef(
        name=draw(odd_names if "name" in odd else st.sampled_from(list(SCALED_OBJECTS))),
        namespace=draw(odd_text) if "namespace" in odd else NS,
        scalerMetadata=metadata,
    )


@st.composite
def metrics_requests(draw: st.DrawFn) -> pb.GetMetricsRequest:
    ref = draw(scaled_object_refs())
    matching = metric_name(ref.scalerMetadata.get(SCALER_KEY, ""))
    return pb.GetMetricsRequest(scaledObjectRef=ref, metricName=draw(st.one_of(st.just(matching), odd_text)))


# --- the property -------------------------------------------------------------------------------


async def _first_message(call: grpc.aio.UnaryStreamCall) -> object:
    """A stream's first message (or its error status), then cancel it: its steady state is not fuzzed."""
    try:
        message = await asyncio.wait_for(call.read(), timeout=5)
    finally:
        call.cancel()
    assert message is not grpc.aio.EOF, "a stream must send the activity or end with an error status"
    return message


async def answers_deliberately(server: Server, call: Awaitable[object], request_bytes: int) -> None:
    """The call ends OK or with a refusal whose details are bounded; the server still answers after."""
    try:
        await call
    except grpc.aio.AioRpcError as err:
        details = err.details() or ""
        event(f"{err.code().name}: {details[:40]}")  # --hypothesis-show-statistics: which paths were reached
        if request_bytes > MAX_REQUEST_BYTES:
            assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, details[:300]
        else:
            assert err.code() in REFUSALS, f"{err.code()}: {details[:300]}"
        assert len(details.encode()) <= DETAILS_MAX_BYTES, f"{len(details.encode())} bytes of details"
    else:
        event("OK")
        assert request_bytes <= MAX_REQUEST_BYTES, "an oversized request was answered"
    alive = await server.stub.GetMetricSpec(pb.ScaledObjectRef(namespace=NS, scalerMetadata={SCALER_KEY: "web"}))
    assert alive.metricSpecs[0].metricName == "presage-web"


@FUZZ
@given(request=scaled_object_refs())
async def test_is_active(server: Server, request: pb.ScaledObjectRef) -> None:
    await answers_deliberately(server, server.stub.IsActive(request), request.ByteSize())


@FUZZ
@given(request=scaled_object_refs())
async def test_stream_is_active(server: Server, request: pb.ScaledObjectRef) -> None:
    await answers_deliberately(server, _first_message(server.stub.StreamIsActive(request)), request.ByteSize())


@FUZZ
@given(request=scaled_object_refs())
async def test_get_metric_spec(server: Server, request: pb.ScaledObjectRef) -> None:
    await answers_deliberately(server, server.stub.GetMetricSpec(request), request.ByteSize())


@FUZZ
@given(request=metrics_requests())
async def test_get_metrics(server: Server, request: pb.GetMetricsRequest) -> None:
    await answers_deliberately(server, server.stub.GetMetrics(request), request.ByteSize())


def _string_field_2(value: bytes) -> bytes:
    # Field 2 is a string in both request types (namespace, metricName): any bytes, often bad UTF-8.
    return b"\x12" + bytes([len(value)]) + value


raw_requests = st.one_of(st.binary(), st.binary(max_size=127).map(_string_field_2))


@FUZZ
@given(
    method=st.sampled_from([m.name for m in pb.DESCRIPTOR.services_by_name["ExternalScaler"].methods]), raw=raw_requests
)
async def test_bytes_that_may_not_be_protobuf(server: Server, method: str, raw: bytes) -> None:
    # Without a serializer the bytes go on the wire as they are: bad UTF-8, truncated fields, garbage.
    path = f"/{SERVICE_NAME}/{method}"
    if method == "StreamIsActive":
        call = _first_message(server.channel.unary_stream(path)(raw))
    else:
        call = server.channel.unary_unary(path)(raw)
    await answers_deliberately(server, call, len(raw))
