"""KEDA external scaler: answers KEDA's gRPC calls from the :class:`RecommendationStore` alone.

Nothing on the request path queries Prometheus or runs a forecast: every answer is a dictionary
lookup plus, in Shadow mode only, one :class:`ScaledObjectTriggers` lookup.

The metric is built so the HPA's ``AverageValue`` arithmetic (``desired = ceil(value / target)``)
lands exactly on the value we return: the target is always 1, the value is a replica count.

* Enforce: the value is the recommended replica count.
* Shadow, presage the ScaledObject's only trigger: the value is the current replica count, so the
  HPA keeps what it has.
* Shadow beside other triggers: the value is 0 and IsActive is false. The HPA takes the maximum over
  its metrics and KEDA ORs activity over triggers, so 0/false never binds and the other triggers
  decide, exactly as if presage were absent.

Every failure is a gRPC error status, never a made-up value: KEDA counts errors towards the
ScaledObject's ``fallback.failureThreshold``, whereas a fabricated 0 would silently scale down.
Requests arrive as bytes and are parsed here, so a malformed one is INVALID_ARGUMENT like any other
bad input, and every client-supplied value an error message quotes goes through :func:`echoed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Protocol, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message

from presage_scaler.api.serving_contract import SCALER_KEY, StalenessBound
from presage_scaler.proto_gen import externalscaler_pb2 as pb
from presage_scaler.serving.store import RecommendationStore, StoredRecommendation

log = logging.getLogger(__name__)

METRIC_PREFIX = "presage-"
# PredictiveScaler names are Kubernetes object names: RFC 1123 subdomains.
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME_MAX = 253
_METRIC_UNSAFE = re.compile(r"[^a-z0-9-]")
ECHO_MAX_CHARS = 128

RequestObserver = Callable[[str, str, float | None], None]
"""Called once per KEDA call with the method, the gRPC status name and the seconds it took to answer
(None for ``StreamIsActive``, whose lifetime is not a latency); e.g. ``ScalerMetrics.observe_grpc_request``."""
_T = TypeVar("_T")
_M = TypeVar("_M", bound=Message)


class ScaledObjectTriggers(Protocol):
    """How many triggers a ScaledObject has; Shadow needs it to know whether presage is alone.

    Implementations raise any exception when they cannot tell (object not cached yet, API error):
    the server turns that into ``UNAVAILABLE`` rather than guessing.
    """

    async def trigger_count(self, namespace: str, scaled_object_name: str) -> int: ...


class StaticScaledObjectTriggers:
    """In-memory :class:`ScaledObjectTriggers` for tests, benchmarks and local runs."""

    def __init__(self, counts: Mapping[tuple[str, str], int] | None = None) -> None:
        self.counts: dict[tuple[str, str], int] = dict(counts or {})

    def set(self, namespace: str, scaled_object_name: str, count: int) -> None:
        self.counts[(namespace, scaled_object_name)] = count

    async def trigger_count(self, namespace: str, scaled_object_name: str) -> int:
        try:
            return self.counts[(namespace, scaled_object_name)]
        except KeyError:
            raise LookupError(f"ScaledObject {namespace}/{scaled_object_name} is not known") from None


class ScalerError(Exception):
    """A refusal with the gRPC status KEDA should see and a message that says what to fix."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def echoed(value: str) -> str:
    """``value`` quoted for an error message: at most :data:`ECHO_MAX_CHARS` of it, and its length when cut.

    Names, namespaces and metric names arrive unchecked from the client. Quoted whole, a 3 MiB name
    would be a 3 MiB ``grpc-message`` trailer, and anything past 8 KiB already fails a Python client's
    metadata limit, which then sees RESOURCE_EXHAUSTED instead of the refusal.
    """
    if len(value) <= ECHO_MAX_CHARS:
        return repr(value)
    return f"{value[:ECHO_MAX_CHARS]!r}… ({len(value)} characters)"


def parse_request(message_type: type[_M], raw: bytes) -> _M:
    """A request decoded from the wire; INVALID_ARGUMENT when it is not a valid ``message_type``.

    grpc's own deserializer lets DecodeError (e.g. a string field with bad UTF-8) reach the client as
    UNKNOWN, indistinguishable from a server bug.
    """
    try:
        return message_type.FromString(raw)
    except DecodeError as exc:
        raise ScalerError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"request is not a valid {message_type.DESCRIPTOR.full_name} message: {exc}",
        ) from None


def metric_name(scaler_name: str) -> str:
    """The metric name for a PredictiveScaler: lowercase letters, digits and ``-`` only."""
    return METRIC_PREFIX + _METRIC_UNSAFE.sub("-", scaler_name.lower())


def scaler_name_from(ref: pb.ScaledObjectRef) -> str:
    """The ``predictiveScaler`` trigger metadata, validated; INVALID_ARGUMENT otherwise."""
    name = ref.scalerMetadata.get(SCALER_KEY, "").strip()
    if not name:
        raise ScalerError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"trigger metadata has no {SCALER_KEY!r}: set it to the name of a PredictiveScaler "
            f"in the ScaledObject's namespace",
        )
    if len(name) > _NAME_MAX or not _NAME_RE.match(name):
        raise ScalerError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"trigger metadata {SCALER_KEY}={echoed(name)} is not a valid Kubernetes object name "
            "(lowercase letters, digits, '-' and '.', at most 253 characters)",
        )
    return name


def _namespace_from(ref: pb.ScaledObjectRef) -> str:
    if not ref.namespace:
        raise ScalerError(grpc.StatusCode.INVALID_ARGUMENT, "ScaledObjectRef has no namespace")
    return ref.namespace


class PresageScaler:
    """Decisions, independent of gRPC plumbing: each method returns a value or raises ScalerError."""

    def __init__(
        self,
        store: RecommendationStore,
        triggers: ScaledObjectTriggers,
        *,
        staleness: StalenessBound | None = None,
        triggers_timeout: float = 2.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.triggers = triggers
        self.staleness = staleness or StalenessBound()
        self.triggers_timeout = triggers_timeout
        self.clock = clock

    def metric_spec(self, ref: pb.ScaledObjectRef) -> pb.GetMetricSpecResponse:
        """Built from metadata alone, so KEDA can create its HPA before any recommendation exists."""
        name = metric_name(scaler_name_from(ref))
        return pb.GetMetricSpecResponse(metricSpecs=[pb.MetricSpec(metricName=name, targetSize=1, targetSizeFloat=1.0)])

    def fresh_recommendation(self, ref: pb.ScaledObjectRef, name: str) -> StoredRecommendation:
        """PredictiveScaler ``name``'s recommendation, looked up in the ScaledObject's namespace only."""
        namespace = _namespace_from(ref)
        rec = self.store.get(namespace, name)
        if rec is None:
            raise ScalerError(
                grpc.StatusCode.NOT_FOUND,
                f"no PredictiveScaler {echoed(name)} with a recommendation in namespace {echoed(namespace)}: it must "
                "exist in the ScaledObject's namespace and have been evaluated at least once",
            )
        age = self.store.age(rec, self.clock())
        max_age = self.staleness.max_age(rec.interval)
        if age > max_age:
            raise ScalerError(
                grpc.StatusCode.UNAVAILABLE,
                f"recommendation for PredictiveScaler {echoed(f'{namespace}/{name}')} is stale: confirmed "
                f"{age.total_seconds():.0f}s ago, bound is {max_age.total_seconds():.0f}s; check the presage "
                "controller and its data source",
            )
        return rec

    async def shadow_is_alone(self, ref: pb.ScaledObjectRef) -> bool:
        """Whether presage is the ScaledObject's only trigger; UNAVAILABLE when it cannot be told."""
        try:
            async with asyncio.timeout(self.triggers_timeout):
                count = await self.triggers.trigger_count(ref.namespace, ref.name)
        except Exception as exc:
            raise ScalerError(
                grpc.StatusCode.UNAVAILABLE,
                f"Shadow mode: cannot read the triggers of ScaledObject {echoed(f'{ref.namespace}/{ref.name}')} "
                f"({type(exc).__name__}: {echoed(str(exc))}); refusing to guess whether presage is its only trigger",
            ) from exc
        if count < 1:
            raise ScalerError(
                grpc.StatusCode.UNAVAILABLE,
                f"Shadow mode: ScaledObject {echoed(f'{ref.namespace}/{ref.name}')} reports {count} triggers; "
                "refusing to guess",
            )
        return count == 1

    @staticmethod
    def _current(rec: StoredRecommendation) -> int:
        if rec.current_replicas is None:
            raise ScalerError(
                grpc.StatusCode.UNAVAILABLE,
                f"Shadow mode: the current replica count of {rec.target.kind}/{rec.target.name} is not known yet "
                f"for PredictiveScaler {rec.namespace}/{rec.name}",
            )
        return rec.current_replicas

    async def metric_value(self, ref: pb.ScaledObjectRef, name: str) -> int:
        """The replica count to report for PredictiveScaler ``name``; see the module docstring for each mode."""
        rec = self.fresh_recommendation(ref, name)
        if rec.mode == "Enforce":
            return rec.recommended_replicas
        if await self.shadow_is_alone(ref):
            return self._current(rec)
        return 0

    async def is_active(self, ref: pb.ScaledObjectRef) -> bool:
        """Active exactly when the metric value is above 0, in every mode."""
        return await self.metric_value(ref, scaler_name_from(ref)) > 0

    async def get_metrics(self, request: pb.GetMetricsRequest) -> pb.GetMetricsResponse:
        ref = request.scaledObjectRef
        name = scaler_name_from(ref)
        expected = metric_name(name)
        if request.metricName != expected:
            raise ScalerError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"unknown metric {echoed(request.metricName)}: this trigger serves only {expected!r} "
                "(from GetMetricSpec)",
            )
        value = await self.metric_value(ref, name)
        return pb.GetMetricsResponse(
            metricValues=[pb.MetricValue(metricName=expected, metricValue=value, metricValueFloat=float(value))]
        )


class ExternalScalerServicer:
    """gRPC adapter (method names are the proto's): parses requests, maps ScalerError to a status, streams.

    Each method takes the request's raw bytes (see :func:`parse_request`); ``grpc_server`` registers
    them with no request deserializer.
    """

    def __init__(
        self, scaler: PresageScaler, *, stream_recheck: float = 10.0, observe: RequestObserver | None = None
    ) -> None:
        self.scaler = scaler
        # Staleness changes with time alone, not only with store writes: re-evaluate streams this often.
        self.stream_recheck = stream_recheck
        self.observe = observe
        self.active_streams = 0

    async def _answer(self, method: str, context: grpc.aio.ServicerContext, call: Callable[[], Awaitable[_T]]) -> _T:
        """Run a unary call: a ScalerError becomes its status; the outcome goes to ``observe``."""
        started = time.perf_counter()
        code = grpc.StatusCode.UNKNOWN
        try:
            result = await call()
            code = grpc.StatusCode.OK
            return result
        except ScalerError as err:
            code = err.code
            await context.abort(err.code, err.message)
            raise  # unreachable: abort raises
        finally:
            if self.observe is not None:
                self.observe(method, code.name, time.perf_counter() - started)

    async def GetMetricSpec(self, request: bytes, context: grpc.aio.ServicerContext) -> pb.GetMetricSpecResponse:
        async def call() -> pb.GetMetricSpecResponse:
            return self.scaler.metric_spec(parse_request(pb.ScaledObjectRef, request))

        return await self._answer("GetMetricSpec", context, call)

    async def GetMetrics(self, request: bytes, context: grpc.aio.ServicerContext) -> pb.GetMetricsResponse:
        async def call() -> pb.GetMetricsResponse:
            return await self.scaler.get_metrics(parse_request(pb.GetMetricsRequest, request))

        return await self._answer("GetMetrics", context, call)

    async def IsActive(self, request: bytes, context: grpc.aio.ServicerContext) -> pb.IsActiveResponse:
        async def call() -> pb.IsActiveResponse:
            return pb.IsActiveResponse(result=await self.scaler.is_active(parse_request(pb.ScaledObjectRef, request)))

        return await self._answer("IsActive", context, call)

    async def StreamIsActive(
        self, request: bytes, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.IsActiveResponse]:
        """Push the activity at start and on every flip; an error ends the stream with its status.

        KEDA re-opens a failed stream on its own, so an error here is never reported as ``false``.
        Client cancellation arrives as CancelledError and simply unwinds.
        """
        store = self.scaler.store
        self.active_streams += 1
        # A stream the client cancels ends without a status of its own: count it as CANCELLED.
        code = grpc.StatusCode.CANCELLED
        try:
            ref = parse_request(pb.ScaledObjectRef, request)
            last: bool | None = None
            while True:
                version = store.version
                active = await self.scaler.is_active(ref)
                if active != last:
                    yield pb.IsActiveResponse(result=active)
                    last = active
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.stream_recheck):
                        await store.wait_for_change(version)
        except ScalerError as err:
            code = err.code
            await context.abort(err.code, err.message)
        finally:
            self.active_streams -= 1
            if self.observe is not None:
                self.observe("StreamIsActive", code.name, None)
