"""The gRPC server KEDA talks to: ExternalScaler plus the standard health service, optional (m)TLS.

KEDA's ``external`` trigger side of TLS: ``enableTLS: "true"`` makes KEDA dial with TLS and verify
our certificate against ``caCert``; ``tlsClientCert``/``tlsClientKey`` make it present a client
certificate, which we require when :class:`TLSConfig` has a ``client_ca``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import message_factory
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from presage_scaler.api.serving_contract import StalenessBound
from presage_scaler.proto_gen import externalscaler_pb2 as pb
from presage_scaler.serving.keda import ExternalScalerServicer, PresageScaler, RequestObserver, ScaledObjectTriggers
from presage_scaler.serving.store import RecommendationStore

DEFAULT_PORT = 9090
_SERVICE = pb.DESCRIPTOR.services_by_name["ExternalScaler"]
SERVICE_NAME: str = _SERVICE.full_name
# KEDA's requests are a few hundred bytes; grpc's default of 4 MiB only lets a client make us parse
# more. A larger request is refused by grpc itself with RESOURCE_EXHAUSTED.
MAX_REQUEST_BYTES = 1 << 20


@dataclass(frozen=True)
class TLSConfig:
    """PEM server certificate chain and key; with ``client_ca`` set, clients must present a cert it signed."""

    cert_chain: bytes
    private_key: bytes
    client_ca: bytes | None = None

    @classmethod
    def from_files(cls, cert: Path | str, key: Path | str, client_ca: Path | str | None = None) -> TLSConfig:
        return cls(
            cert_chain=Path(cert).read_bytes(),
            private_key=Path(key).read_bytes(),
            client_ca=Path(client_ca).read_bytes() if client_ca is not None else None,
        )

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.private_key, self.cert_chain)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )


def _method_handlers(servicer: ExternalScalerServicer) -> dict[str, grpc.RpcMethodHandler]:
    """Every method of the proto's service, taking raw bytes: the servicer parses them (``parse_request``)."""
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in _SERVICE.methods:
        make = grpc.unary_stream_rpc_method_handler if method.server_streaming else grpc.unary_unary_rpc_method_handler
        response = message_factory.GetMessageClass(method.output_type)
        handlers[method.name] = make(getattr(servicer, method.name), response_serializer=response.SerializeToString)
    return handlers


@dataclass
class ScalerServer:
    """A started server: the bound port, and :meth:`stop` for a clean shutdown."""

    server: grpc.aio.Server
    port: int
    servicer: ExternalScalerServicer
    health: health.aio.HealthServicer

    async def stop(self, grace: float | None = 5.0) -> None:
        """Report NOT_SERVING, then let in-flight calls finish for ``grace`` seconds and cancel streams."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)


async def serve(
    store: RecommendationStore,
    triggers: ScaledObjectTriggers,
    *,
    port: int = DEFAULT_PORT,
    host: str = "[::]",
    tls: TLSConfig | None = None,
    stream_recheck: float = 10.0,
    observe: RequestObserver | None = None,
    staleness: StalenessBound | None = None,
) -> ScalerServer:
    """Start the server on ``host:port`` (``port=0`` picks a free one) and mark it SERVING.

    ``observe`` is told about every call (see :data:`RequestObserver`), e.g. for metrics;
    ``staleness`` bounds the age of a recommendation it serves (default :class:`StalenessBound`).
    """
    # SO_REUSEPORT off: a second presage on the same port must fail loudly, not share traffic.
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", MAX_REQUEST_BYTES)])
    servicer = ExternalScalerServicer(
        PresageScaler(store, triggers, staleness=staleness),
        stream_recheck=stream_recheck,
        observe=observe,
    )
    handlers = _method_handlers(servicer)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    server.add_registered_method_handlers(SERVICE_NAME, handlers)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    address = f"{host}:{port}"
    bound = server.add_secure_port(address, tls.credentials()) if tls else server.add_insecure_port(address)
    if bound == 0:
        raise OSError(f"cannot bind gRPC server to {address}")
    await server.start()
    for service in ("", SERVICE_NAME):
        await health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    return ScalerServer(server=server, port=bound, servicer=servicer, health=health_servicer)
