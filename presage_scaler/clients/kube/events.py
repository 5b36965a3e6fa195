"""Kubernetes Events for PredictiveScalers, aggregated so a flapping scaler cannot flood the API server.

An Event is keyed by (object uid, reason). Within ``window`` a repeat updates the existing Event's
count, message and lastTimestamp instead of creating a new one, and at most one write per key is
made every ``min_spacing``: repeats in between are folded into the next write's count. This is
what ``kubectl describe`` users expect: "Recommended ... (x12 over 40m)", not 12 lines.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from presage_scaler.clients.kube.client import JSON, ApiError, KubeClient, NotFound, Resource

log = logging.getLogger(__name__)

EVENTS = Resource("", "v1", "events", True, "Event")
COMPONENT = "presage-scaler"


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Aggregate:
    name: str
    count: int
    first: datetime
    last_written: datetime
    pending: int = 0  # repeats not yet written


class EventRecorder:
    """Creates or updates core/v1 Events about one involved object at a time."""

    def __init__(
        self,
        client: KubeClient,
        *,
        window: timedelta = timedelta(minutes=10),
        min_spacing: timedelta = timedelta(seconds=30),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        host: str = "",
    ) -> None:
        self._client = client
        self._window = window
        self._min_spacing = min_spacing
        self._clock = clock
        self._host = host
        self._aggregates: dict[tuple[str, str], _Aggregate] = {}

    def forget(self, uid: str) -> None:
        """Drop aggregation state for a deleted object."""
        for key in [k for k in self._aggregates if k[0] == uid]:
            del self._aggregates[key]

    async def record(self, involved: JSON, event_type: str, reason: str, message: str) -> None:
        """Emit (or aggregate) one Event; failures are logged, never raised: events are best effort."""
        meta = involved["metadata"]
        key = (meta["uid"], reason)
        now = self._clock()
        aggregate = self._aggregates.get(key)
        try:
            if aggregate is not None and now - aggregate.first <= self._window:
                aggregate.pending += 1
                if now - aggregate.last_written < self._min_spacing:
                    return
                if not await self._update(meta["namespace"], aggregate, message, now):
                    del self._aggregates[key]  # expired by the API server's event TTL: start afresh
                return
            self._aggregates[key] = await self._create(involved, event_type, reason, message, now)
        except ApiError as exc:
            log.warning(
                "event not recorded scaler=%s/%s reason=%s error=%s", meta.get("namespace"), meta["name"], reason, exc
            )

    async def _create(self, involved: JSON, event_type: str, reason: str, message: str, now: datetime) -> _Aggregate:
        meta = involved["metadata"]
        name = f"{meta['name']}.{uuid.uuid4().hex[:16]}"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion"),
                "kind": involved.get("kind"),
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": event_type,
            "count": 1,
            "firstTimestamp": _timestamp(now),
            "lastTimestamp": _timestamp(now),
            "source": {"component": COMPONENT, "host": self._host},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._host or COMPONENT,
        }
        await self._client.create(EVENTS, meta["namespace"], body)
        return _Aggregate(name=name, count=1, first=now, last_written=now)

    async def _update(self, namespace: str, aggregate: _Aggregate, message: str, now: datetime) -> bool:
        """Write the folded repeats; False when the Event no longer exists."""
        count = aggregate.count + aggregate.pending
        patch = {"count": count, "message": message[:1024], "lastTimestamp": _timestamp(now)}
        try:
            await self._client.merge_patch(EVENTS, namespace, aggregate.name, patch)
        except NotFound:
            return False
        aggregate.count, aggregate.pending, aggregate.last_written = count, 0, now
        return True
