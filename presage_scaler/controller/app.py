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
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from presage_scaler.api.serving_contract import StalenessBound
from presage_scaler.clients.kube import credentials as kube_config
from presage_scaler.clients.kube.client import KubeClient
from presage_scaler.clients.kube.events import EventRecorder
from presage_scaler.clients.kube.informer import Informer, identity_only
from presage_scaler.clients.kube.leader import LeaderElector
from presage_scaler.clients.kube.presage_resources import FORECAST_BACKENDS, PREDICTIVE_SCALERS
from presage_scaler.clients.prometheus import PrometheusClientPool
from presage_scaler.controller.forecast_backend_controller import BackendController
from presage_scaler.controller.gc_tuning import collecting_less_often
from presage_scaler.controller.keda_scaledobjects import KubeScaledObjectTriggers
from presage_scaler.controller.leadership import Leadership
from presage_scaler.controller.predictive_scaler_controller import ScalerController
from presage_scaler.controller.replica_counts import WatchedReplicas
from presage_scaler.controller.shards import ShardElection
from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.serving.grpc_server import ScalerServer, TLSConfig, serve
from presage_scaler.serving.http_server import HttpServer, TLSFiles, serve_health, serve_http
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
    leadership: Leadership
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
    def elector(self) -> LeaderElector | ShardElection | None:
        """The Lease elector(s); None with leader election off."""
        return self.leadership.elector

    @property
    def leading(self) -> bool:
        """Whether this replica evaluates anything now (the leader, or the owner of a shard)."""
        return self.leadership.leading()

    @property
    def synced(self) -> bool:
        return self.scaler_informer.synced and self.backend_informer.synced


async def _after(*steps: Awaitable[object]) -> None:
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
    """Build the process in dependency order (leadership, controllers, elector, informers, servers),
    start its tasks, and on exit stop the servers, then the tasks, then the clients."""
    config = kube_config.load(options.kubeconfig, options.context)
    namespaces = list(options.namespaces) or None
    async with KubeClient(config) as client, forecaster_session() as forecaster_http:
        store = RecommendationStore()
        metrics = served_metrics(ScalerMetrics(), store)
        prometheus = PrometheusClientPool(timeout=options.prometheus_timeout)
        leadership = Leadership(options.lease_name, options.shards, options.staleness)
        backends = BackendController(
            client,
            forecaster_http,
            probe_period=options.probe_period,
            leading=leadership.writes_backends,
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
            leading=leadership.leading,
            owns=leadership.owns,
            scaled_objects=triggers,
            staleness=options.staleness,
            replicas=replicas,
            vouch=leadership.vouch,
        )
        if options.leader_elect:
            _campaign(options, config.namespace, client, leadership, scalers, store)
        scaler_informer = Informer(
            client, PREDICTIVE_SCALERS, scalers.on_event, namespaces, cache_as=identity_only
        )  # the controller keeps its own copy of each scaler
        backend_informer = Informer(client, FORECAST_BACKENDS, backends.on_event)
        ready = _readiness(scaler_informer, backend_informer)
        grpc = await serve(
            store,
            triggers,
            port=options.grpc_port,
            host=options.grpc_host,
            tls=options.grpc_tls,
            observe=metrics.observe_grpc_request,
            staleness=options.staleness,
        )
        http = await serve_http(
            store, metrics, port=options.http_port, host=options.http_host, tls=options.http_tls, ready=ready
        )
        health = await serve_health(metrics, port=options.health_port, host=options.http_host, ready=ready)
        app = RunningController(
            options,
            client,
            store,
            scalers,
            backends,
            leadership,
            grpc,
            http,
            health,
            metrics,
            scaler_informer,
            backend_informer,
            triggers,
            replicas,
            asyncio.Event(),
        )
        tasks = _start_tasks(app)
        _log_started(app, namespaces)
        try:
            yield app
        finally:
            await _stop(app, tasks)
            await prometheus.aclose()


def _campaign(
    options: ControllerOptions,
    default_namespace: str,
    client: KubeClient,
    leadership: Leadership,
    scalers: ScalerController,
    store: RecommendationStore,
) -> None:
    """Build the Lease elector(s), and serve every recommendation's age as its Lease's freshness
    records confirm it."""
    leadership.campaign(
        client,
        options.lease_namespace or default_namespace,
        options.identity,
        scalers,
        lease_duration=options.lease_duration,
        renew_deadline=options.renew_deadline,
        retry_period=options.retry_period,
    )
    store.confirmed_at = leadership.freshness.confirmed_at


def _readiness(scaler_informer: Informer, backend_informer: Informer) -> Callable[[], bool | str]:
    """``/readyz``: ready once both caches have listed; otherwise the reason it is not."""

    def ready() -> bool | str:
        if not (scaler_informer.synced and backend_informer.synced):
            return "PredictiveScaler and ForecastBackend caches are not synced yet"
        return True

    return ready


def _start_tasks(app: RunningController) -> list[asyncio.Task[None]]:
    """Start every long-running component; one that dies sets ``app.crashed``. The backend
    controller starts once the ForecastBackends are listed, the scaler controller once they are
    probed."""
    tasks = [
        asyncio.create_task(coro, name=name)
        for name, coro in (
            ("backend-informer", app.backend_informer.run()),
            ("scaler-informer", app.scaler_informer.run()),
            ("scaledobject-informer", app.triggers.run()),
            ("backend-controller", _after(app.backend_informer.wait_synced(), app.backends.run())),
            ("scaler-controller", _after(app.backends.probed_once.wait(), app.scalers.run())),
        )
    ]
    if app.replicas is not None:
        tasks.append(asyncio.create_task(app.replicas.run(), name="replica-count-informers"))
    if app.elector is not None:
        tasks.append(asyncio.create_task(app.elector.run(), name="leader-election"))

    def watch_task(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.critical("component %s crashed", task.get_name(), exc_info=task.exception())
            app.crashed.set()

    for task in tasks:
        task.add_done_callback(watch_task)
    return tasks


def _log_started(app: RunningController, namespaces: list[str] | None) -> None:
    options = app.options
    log.info(
        "presage-scaler started identity=%s namespaces=%s grpc_port=%d http_port=%d health_port=%d "
        "leader_elect=%s shards=%d",
        options.identity,
        ",".join(namespaces or ["*"]),
        app.grpc.port,
        app.http.port,
        app.health.port,
        options.leader_elect,
        options.shards,
    )


async def _stop(app: RunningController, tasks: list[asyncio.Task[None]]) -> None:
    """Stop the servers (each with a grace period), then cancel the tasks, the Lease elector's
    included (which releases the Lease), and wait for them."""
    await app.grpc.stop(grace=2.0)
    await app.http.stop(grace=2.0)
    await app.health.stop(grace=2.0)
    for task in reversed(tasks):
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


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
