"""Signal data from Prometheus: the production :class:`~presage_scaler.engine.evaluator.SignalSource`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

from presage_scaler.api.predictive_scaler import PrometheusQuery, SecretKeyRef
from presage_scaler.api.reasons import Reason
from presage_scaler.clients.prometheus import PrometheusClient, PrometheusClientPool, history_window
from presage_scaler.engine.evaluator import EvaluationError, SignalRead, SignalSpec

TokenResolver = Callable[[SecretKeyRef], Awaitable[str]]
"""Reads a bearer token Secret (in the scaler's own namespace; the controller enforces that)."""


class PrometheusSignalSource:
    """Range and instant queries for one scaler, through a shared pool of clients."""

    def __init__(self, pool: PrometheusClientPool, resolve_token: TokenResolver | None = None) -> None:
        self._pool = pool
        self._resolve_token = resolve_token

    async def _client(self, query: PrometheusQuery) -> PrometheusClient:
        ref = query.bearer_token_secret_ref
        if ref is None:
            return self._pool.get(query)
        if self._resolve_token is None:
            raise EvaluationError(Reason.SECRET_UNAVAILABLE, f"no Secret reader configured for bearer token {ref.name}")
        return self._pool.get(query, await self._resolve_token(ref))

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
