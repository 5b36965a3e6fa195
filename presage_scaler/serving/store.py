"""The recommendation store: the only thing the KEDA gRPC server and the Agones webhook read.

The controller (leader) puts a :class:`StoredRecommendation` after every evaluation; every replica
fills its store from the status the leader writes. Readers never trigger a query or a forecast:
KEDA and Agones poll often and on a tight budget, so an answer is a dictionary lookup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from presage_scaler.api.predictive_scaler import Mode


@dataclass(frozen=True)
class TargetRef:
    """The scaled workload, as the PredictiveScaler names it."""

    api_version: str
    kind: str
    name: str


@dataclass(frozen=True)
class StoredRecommendation:
    """What readers need of one PredictiveScaler's latest evaluation."""

    namespace: str
    name: str
    mode: Mode
    target: TargetRef
    recommended_replicas: int
    current_replicas: int | None
    generated_at: datetime
    interval: timedelta
    min_replicas: int
    max_replicas: int
    agones_max_age: timedelta | None = None
    degraded: bool = False  # the status's Degraded condition is True: nothing vouches for it but itself


class RecommendationStore:
    """In-memory recommendations by namespace and name, with change notification.

    Kept per namespace because the Agones webhook looks a Fleet's scaler up among its namespace's
    recommendations on every call. Single event loop, no locks: writers and readers run on the
    same asyncio loop.
    """

    def __init__(self) -> None:
        self._by_namespace: dict[str, dict[str, StoredRecommendation]] = {}
        self._version = 0
        self._changed = asyncio.Condition()
        self.confirmed_at: Callable[[StoredRecommendation], datetime] = lambda rec: rec.generated_at
        """When a recommendation was last confirmed: its forecast time, or later where the evaluating
        replica's Lease vouches for it (:mod:`~presage_scaler.serving.freshness`)."""

    def age(self, rec: StoredRecommendation, now: datetime) -> timedelta:
        """How old ``rec`` is as served: the time since it was last confirmed."""
        return now - self.confirmed_at(rec)

    def get(self, namespace: str, name: str) -> StoredRecommendation | None:
        return self._by_namespace.get(namespace, {}).get(name)

    def in_namespace(self, namespace: str) -> Iterator[StoredRecommendation]:
        return iter(list(self._by_namespace.get(namespace, {}).values()))

    def items(self) -> list[StoredRecommendation]:
        """A snapshot of every recommendation (scrape-time metrics read it)."""
        return [item for names in self._by_namespace.values() for item in names.values()]

    async def put(self, item: StoredRecommendation) -> None:
        self._by_namespace.setdefault(item.namespace, {})[item.name] = item
        await self._notify()

    async def remove(self, namespace: str, name: str) -> None:
        names = self._by_namespace.get(namespace, {})
        if names.pop(name, None) is not None:
            if not names:
                del self._by_namespace[namespace]
            await self._notify()

    @property
    def version(self) -> int:
        """Increases on every change; pass it to :meth:`wait_for_change`."""
        return self._version

    async def wait_for_change(self, seen_version: int) -> int:
        """Wait until the store changed after ``seen_version``; returns the new version."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._version > seen_version)
            return self._version

    async def _notify(self) -> None:
        async with self._changed:
            self._version += 1
            self._changed.notify_all()
