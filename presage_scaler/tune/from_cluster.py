"""The starting point of ``presage tune --scaler``: a PredictiveScaler as it runs, the ForecastBackend
it uses and its signal's recent history, read with presage's own Kubernetes and Prometheus clients
(the same ones ``presage run`` uses), so a scaler in Shadow can ask what it should be set to."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from presage_scaler.api.parse import parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.quantities import format_duration
from presage_scaler.backtest.config import DEFAULT_WARMUP, backend_spec
from presage_scaler.backtest.memory import DEFAULT_MEMORY_BUDGET, Footprint, points_between
from presage_scaler.backtest.trace import Trace, load_prometheus
from presage_scaler.clients.kube import credentials as kube_config
from presage_scaler.clients.kube.client import ApiError, KubeClient, NotFound
from presage_scaler.clients.kube.presage_resources import FORECAST_BACKENDS
from presage_scaler.clients.kube.scaler_lookup import read_scaler
from presage_scaler.clients.kube.secrets import Secrets
from presage_scaler.clients.prometheus_connection import resolve_connection
from presage_scaler.series.timegrid import align_down
from presage_scaler.tune.errors import TuneError
from presage_scaler.tune.knobs import require_tunable
from presage_scaler.tune.read_window import read_span


@dataclass(frozen=True)
class LiveScaler:
    """What the cluster says about one PredictiveScaler."""

    metadata: dict[str, Any]
    spec: dict[str, Any]
    """Its spec as stored (wire form)."""
    backend: dict[str, Any]
    """The spec of the ForecastBackend it is tuned with: the one it uses, unless another was given."""
    trace: Trace
    """Its signal over the lookback and the history before it that the lookback's decisions read
    (:func:`presage_scaler.tune.read_window.read_span`), at the signal's resolution."""


async def _backend(client: KubeClient, name: str) -> dict[str, Any]:
    try:
        backend = await client.get(FORECAST_BACKENDS, None, name)
    except NotFound:
        raise TuneError(
            f"the scaler's ForecastBackend {name!r} does not exist (kubectl get forecastbackends); "
            "pass --backend-spec to tune with another"
        ) from None
    except ApiError as exc:
        raise TuneError(f"reading ForecastBackend {name!r}: {exc}") from None
    spec: dict[str, Any] = backend.get("spec") or {}
    return spec


async def live_scaler(
    client: KubeClient,
    scaler: dict[str, Any],
    lookback: timedelta,
    now: datetime,
    *,
    warmup: timedelta = DEFAULT_WARMUP,
    prometheus: str | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    jobs: int = 1,
    backend: dict[str, Any] | None = None,
) -> LiveScaler:
    """The PredictiveScaler object ``scaler`` as read from the cluster, with its ForecastBackend (or
    ``backend``, a ForecastBackend spec to tune with instead) and its signal over the ``lookback`` before
    ``now`` (with a warm-up of ``warmup``) and the history its decisions read before that
    (:mod:`presage_scaler.tune.read_window`). ``prometheus`` replaces the query's address.

    Refused before the signal is read: a backend the search cannot tune
    (:func:`presage_scaler.tune.knobs.require_tunable`), and a lookback whose points at the signal's
    resolution would take more than ``memory_budget`` bytes to tune with ``jobs`` processes
    (:class:`presage_scaler.backtest.memory.MemoryBudgetError`)."""
    metadata = scaler.get("metadata") or {}
    name, namespace = metadata.get("name"), metadata.get("namespace")
    spec = parse(PredictiveScalerSpec, scaler.get("spec"), path="spec")
    if spec.signal is None or spec.signal.prometheus is None:
        raise TuneError(f"PredictiveScaler {namespace}/{name} has several signals; presage tune replays one")
    if backend is None:
        backend = await _backend(client, (spec.forecast.backend_ref if spec.forecast else None) or "default")
    tuned_with = backend_spec(backend)
    require_tunable(tuned_with)
    query = spec.signal.prometheus
    connection = await resolve_connection(query, Secrets(client).for_namespace(namespace) if namespace else None)
    resolution = spec.signal.resolution
    end = align_down(now, resolution)
    if lookback < resolution:
        raise TuneError(f"the lookback {format_duration(lookback)} is shorter than the signal's resolution")
    span = read_span(lookback, warmup, spec, tuned_with)
    Footprint(points_between(span, resolution), resolution, jobs).check(memory_budget)
    trace = await load_prometheus(
        prometheus or query.address,
        query.query,
        end - span,
        end,
        resolution,
        connection=connection,
    )
    return LiveScaler(
        metadata={"name": name, "namespace": namespace}, spec=scaler["spec"], backend=backend, trace=trace
    )


async def read_live(
    name: str,
    namespace: str | None,
    lookback: timedelta,
    now: datetime,
    *,
    warmup: timedelta = DEFAULT_WARMUP,
    kubeconfig: Any = None,
    context: str | None = None,
    prometheus: str | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    jobs: int = 1,
    backend: dict[str, Any] | None = None,
) -> LiveScaler:
    """Read the PredictiveScaler ``namespace/name`` and what :func:`live_scaler` reads with it."""
    try:
        config = kube_config.load(kubeconfig, context)
    except kube_config.KubeConfigError as exc:
        raise TuneError(str(exc)) from None
    async with KubeClient(config, user_agent="presage-tune") as client:
        scaler = await read_scaler(client, namespace or config.namespace, name)
        return await live_scaler(
            client,
            scaler,
            lookback,
            now,
            warmup=warmup,
            prometheus=prometheus,
            memory_budget=memory_budget,
            jobs=jobs,
            backend=backend,
        )
