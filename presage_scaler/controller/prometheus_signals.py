"""Signal data from Prometheus: the production :class:`~presage_scaler.engine.evaluator.SignalSource`.

Each query's connection is resolved from its Secrets
(:func:`~presage_scaler.clients.prometheus_connection.resolve_connection`); a Secret that cannot be
read or used fails the evaluation with the Secret's own reason and message.
"""

from __future__ import annotations

from datetime import datetime

from presage_scaler.api.prometheus_query import PrometheusQuery
from presage_scaler.clients.kube.secrets import SecretError
from presage_scaler.clients.prometheus import PrometheusClient, PrometheusClientPool, history_window
from presage_scaler.clients.prometheus_connection import SecretSource, resolve_connection
from presage_scaler.engine.evaluator import EvaluationError, SignalRead, SignalSpec


class PrometheusSignalSource:
    """Range and instant queries for one scaler, through a shared pool of clients."""

    def __init__(self, pool: PrometheusClientPool, read_secret: SecretSource | None = None) -> None:
        self._pool = pool
        self._read_secret = read_secret

    async def _client(self, query: PrometheusQuery) -> PrometheusClient:
        try:
            connection = await resolve_connection(query, self._read_secret)
        except SecretError as exc:
            raise EvaluationError(exc.reason, exc.message) from exc
        return self._pool.get(query.address, connection)

    async def range(self, signal: SignalSpec, now: datetime, max_points: int | None) -> SignalRead:
        """The signal's history window ending at ``now`` (aligned to its resolution)."""
        start, end = history_window(signal.history, signal.resolution, max_points, now)
        client = await self._client(signal.query)
        series = await client.query_range(signal.query.query, start, end, signal.resolution)
        return SignalRead(series.history(), series.gap_steps, series.trailing_gap_steps)

    async def instant(self, query: PrometheusQuery, now: datetime) -> float:
        """The single value of an instant query at ``now``."""
        client = await self._client(query)
        return await client.query_instant(query.query, now)
