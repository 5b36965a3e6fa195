"""``presage run``: the whole scaler process — watches, leader election, controllers, servers.

Every replica watches PredictiveScalers, ForecastBackends and ScaledObjects and serves gRPC from
its store; only the Lease holder evaluates, probes and writes status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp

from presage_scaler.clients.kube import config as kube_config
from presage_scaler.clients.kube.client import KubeClient
from presage_scaler.clients.kube.events import EventRecorder
from presage_scaler.clients.kube.informer import Informer, identity_only
from presage_scaler.clients.kube.leader import LeaderElector
from presage_scaler.clients.prometheus import PrometheusClientPool
from presage_scaler.controller.forecast_backend_controller import FORECAST_BACKENDS, BackendController
from presage_scaler.controller.gc_tuning import collecting_less_often
from presage_scaler.controller.keda_scaledobjects import KubeScaledObjectTriggers
from presage_scaler.controller.predictive_scaler_controller import ScalerController
from presage_scaler.controller.predictive_scaler_objects import PREDICTIVE_SCALERS, Key
from presage_scaler.controller.replica_counts import WatchedReplicas
from presage_scaler.controller.shards import ShardElection, lease_of, shard_lease_name, shard_of
from presage_scaler.controller.status_cadence import LeaseVouch
from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.serving.freshness import ANNOTATION, FreshnessRecord, LeaseFreshness
from presage_scaler.serving.grpc_server import ScalerServer, TLSConfig, serve
from presage_scaler.serving.http_server import HttpServer, TLSFiles, serve_health, serve_http
from presage_scaler.serving.keda import StalenessBound
from presage_scaler.serving.store import RecommendationStore
from presage_scaler.serving.store_metrics import served_metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ControllerOptions:
    """Everything ``presage run`` is configured with (flags map one to one)."""

    kubeconfig: Path | None = None
    context: str | None = None
    namespaces: tuple[str, ...] = ()  # empty: all namespaces
    grpc_port: int = 9090
    grpc_host: str = "[::]"
    grpc_tls: TLSConfig | None = None
    http_port: int = 8080
    http_host: str = "0.0.0.0"
    http_tls: TLSFiles | None = None
    health_port: int = 8081  # /healthz, /readyz, /metrics on http_host, where no webhook client reaches
    leader_elect: bool = True
    lease_namespace: str | None = None  # default: the pod's namespace (or the kubeconfig context's)
    lease_name: str = "presage-scaler"
    shards: int = 1  # above 1: the scalers are split across replicas, one Lease per shard
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}")
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    concurrency: int = 32
    watch_targets: bool = True  # apps/v1 targets' replica counts from watches, not a GET per evaluation
    probe_period: float = 30.0
    prometheus_timeout: float = 10.0
    staleness: StalenessBound = field(default_factory=StalenessBound)


@dataclass
class RunningController:
    """Handles on a started process, for tests and the CLI."""

    options: ControllerOptions
    client: KubeClient
    store: RecommendationStore
    scalers: ScalerController
    backends: BackendController
    elector: LeaderElector | ShardElection | None
    grpc: ScalerServer
    http: HttpServer
    health: HttpServer
    metrics: ScalerMetrics
    scaler_informer: Informer
    backend_informer: Informer
    triggers: KubeScaledObjectTriggers
    replicas: WatchedReplicas | None  # None with watch_targets off
    crashed: asyncio.Event  # set when a component died; the process should exit non-zero

    @property
    def leading(self) -> bool:
        """Whether this replica evaluates anything now (the leader, or the owner of a shard)."""
        if isinstance(self.elector, ShardElection):
            return self.elector.owns_any()
        return self.elector is None or self.elector.is_leader

    @property
    def synced(self) -> bool:
        return self.scaler_informer.synced and self.backend_informer.synced


async def _after(*steps: Coroutine[None, None, None]) -> None:
    """Run coroutines one after another (scalers start once their backends are known and probed)."""
    for step in steps:
        await step


def forecaster_session() -> aiohttp.ClientSession:
    """The session every TimesFM backend shares. No connection limit: each evaluation has at most
    one forecast call in flight, so the controller's concurrency bounds the connections, and no call
    spends its ForecastBackend ``timeout`` waiting for a pooled connection."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))


@contextlib.asynccontextmanager
async def running(options: ControllerOptions) -> AsyncIterator[RunningController]:
    """Start everything; on exit stop the servers, release the Lease and close clients. The cycle
    collector runs less often meanwhile (:mod:`presage_scaler.controller.gc_tuning`)."""
    with collecting_less_often():
        async with _components(options) as app:
            yield app


@contextlib.asynccontextmanager
async def _components(options: ControllerOptions) -> AsyncIterator[RunningController]:
    config = kube_config.load(options.kubeconfig, options.context)
    namespaces = list(options.namespaces) or None
    async with KubeClient(config) as client, forecaster_session() as forecaster_http:
        store = RecommendationStore()
        metrics = served_metrics(ScalerMetrics(), store)
        prometheus = PrometheusClientPool(timeout=options.prometheus_timeout)
        elector: LeaderElector | ShardElection | None = None

        def shard(key: Key) -> int:
            return shard_of(*key, options.shards)

        def leading() -> bool:
            if isinstance(elector, ShardElection):
                return elector.owns_any()
            return elector is None or elector.is_leader

        def owns(key: Key) -> bool:
            return not isinstance(elector, ShardElection) or elector.owns(shard(key))

        def writes_backends() -> bool:  # ForecastBackend status: the leader, or shard 0's owner
            return elector.owns(0) if isinstance(elector, ShardElection) else leading()

        def lease(key: Key) -> str:
            return lease_of(options.lease_name, options.shards, *key)

        # Freshness records (serving.freshness): every replica reads them from the Leases it campaigns
        # for; the holder publishes one at every renewal, and holds statuses by what it published.
        freshness = LeaseFreshness(lambda *key: lease(key), options.shards, options.staleness)
        published: dict[str, LeaseVouch] = {}  # Lease name -> what this replica last published in it
        lag = timedelta(seconds=options.renew_deadline + options.retry_period)

        def publish(name: str, selects: Callable[[Key], bool]) -> dict[str, str]:
            now = datetime.now(UTC)
            lateness = scalers.lateness(selects, freshness.record(name), now)
            published[name] = LeaseVouch(lateness, lag, now)
            return {ANNOTATION: FreshnessRecord(now, lateness, options.shards).encode()}

        def vouch(key: Key) -> LeaseVouch | None:
            return published.get(lease(key))

        backends = BackendController(
            client,
            forecaster_http,
            probe_period=options.probe_period,
            leading=writes_backends,
            fenced=lambda: metrics.status_writes_fenced.labels("ForecastBackend").inc(),
        )
        triggers = KubeScaledObjectTriggers(client, namespaces)
        replicas = WatchedReplicas(client, namespaces) if options.watch_targets else None
        scalers = ScalerController(
            client,
            store,
            backends,
            prometheus,
            EventRecorder(client, host=options.identity),
            metrics,
            concurrency=options.concurrency,
            leading=leading,
            owns=owns,
            scaled_objects=triggers,
            staleness=options.staleness,
            replicas=replicas,
            vouch=vouch,
        )
        lease_namespace = options.lease_namespace or config.namespace
        timing = {
            "lease_duration": options.lease_duration,
            "renew_deadline": options.renew_deadline,
            "retry_period": options.retry_period,
        }
        if options.leader_elect and options.shards > 1:
            elector = ShardElection(
                client,
                lease_namespace,
                options.lease_name,
                options.identity,
                options.shards,
                on_change=lambda s, owned: scalers.on_ownership(lambda key: shard(key) == s, owned),
                busy=lambda s: scalers.in_flight(lambda key: shard(key) == s),
                annotate=lambda s: publish(shard_lease_name(options.lease_name, s), lambda key: shard(key) == s),
                observe=freshness.observe,
                **timing,
            )
        elif options.leader_elect:
            elector = LeaderElector(
                client,
                lease_namespace,
                options.lease_name,
                options.identity,
                on_change=scalers.on_leadership,
                annotate=lambda: publish(options.lease_name, lambda key: True),
                observe=freshness.observe,
                **timing,
            )
        if elector is not None:
            store.confirmed_at = freshness.confirmed_at
        scaler_informer = Informer(
            client, PREDICTIVE_SCALERS, scalers.on_event, namespaces, cache_as=identity_only
        )  # the controller keeps its own copy of each scaler
        backend_informer = Informer(client, FORECAST_BACKENDS, backends.on_event)
        grpc = await serve(
            store,
            triggers,
            port=options.grpc_port,
            host=options.grpc_host,
            tls=options.grpc_tls,
            observe=metrics.observe_grpc_request,
            staleness=options.staleness,
        )

        def ready() -> bool | str:
            if not (scaler_informer.synced and backend_informer.synced):
                return "PredictiveScaler and ForecastBackend caches are not synced yet"
            return True

        http = await serve_http(
            store, metrics, port=options.http_port, host=options.http_host, tls=options.http_tls, ready=ready
        )
        health = await serve_health(metrics, port=options.health_port, host=options.http_host, ready=ready)
        tasks = [
            asyncio.create_task(coro, name=name)
            for name, coro in (
                ("backend-informer", backend_informer.run()),
                ("scaler-informer", scaler_informer.run()),
                ("scaledobject-informer", triggers.run()),
                ("backend-controller", _after(backend_informer.wait_synced(), backends.run())),
                (
                    "scaler-controller",
                    _after(backends.probed_once.wait(), scalers.run()),
                ),
            )
        ]
        if replicas is not None:
            tasks.append(asyncio.create_task(replicas.run(), name="replica-count-informers"))
        if elector is not None:
            tasks.append(asyncio.create_task(elector.run(), name="leader-election"))
        crashed = asyncio.Event()

        def watch_task(task: asyncio.Task[None]) -> None:
            if not task.cancelled() and task.exception() is not None:
                log.critical("component %s crashed", task.get_name(), exc_info=task.exception())
                crashed.set()

        for task in tasks:
            task.add_done_callback(watch_task)
        log.info(
            "presage-scaler started identity=%s namespaces=%s grpc_port=%d http_port=%d health_port=%d "
            "leader_elect=%s shards=%d",
            options.identity,
            ",".join(namespaces or ["*"]),
            grpc.port,
            http.port,
            health.port,
            options.leader_elect,
            options.shards,
        )
        try:
            yield RunningController(
                options,
                client,
                store,
                scalers,
                backends,
                elector,
                grpc,
                http,
                health,
                metrics,
                scaler_informer,
                backend_informer,
                triggers,
                replicas,
                crashed,
            )
        finally:
            await grpc.stop(grace=2.0)
            await http.stop(grace=2.0)
            await health.stop(grace=2.0)
            for task in reversed(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await prometheus.aclose()


async def run_until_signalled(options: ControllerOptions) -> int:
    """Run until SIGTERM/SIGINT (exit 0) or a component crash (exit 1), shutting down cleanly either way.

    A clean shutdown releases the Lease, so a standby replica takes over at once.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with running(options) as app:
        stopped, crashed = asyncio.create_task(stop.wait()), asyncio.create_task(app.crashed.wait())
        await asyncio.wait({stopped, crashed}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        crashed.cancel()
    log.info("presage-scaler stopped pid=%d crashed=%s", os.getpid(), app.crashed.is_set())
    return 1 if app.crashed.is_set() else 0
