"""What Agones posts to presage's webhook: a FleetAutoscaleReview as ``applyWebhookPolicy`` marshals it."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.serving.http_server import HttpLimits, build_app
from presage_scaler.serving.store import RecommendationStore, StoredRecommendation, TargetRef

UID = "4d0d5c2e-9f6b-4e8e-8a43-2b1f0a7c9d11"
NS = "games"

# The smallest review: the Fleet's name and status, and ``"response": null``.
REVIEW: dict[str, Any] = {
    "request": {
        "uid": UID,
        "name": "arena",
        "namespace": NS,
        "status": {"replicas": 4, "readyReplicas": 2, "reservedReplicas": 0, "allocatedReplicas": 2},
    },
    "response": None,
}

# Everything Agones may add: players, counters and lists, labels and annotations.
FULL: dict[str, Any] = copy.deepcopy(REVIEW)
FULL["request"]["status"].update(
    {
        "players": {"count": 17, "capacity": 40},
        "counters": {"rooms": {"count": 9, "capacity": 20, "allocatedCount": 9, "allocatedCapacity": 10}},
        "lists": {"players": {"count": 3, "capacity": 8, "allocatedCount": 3, "allocatedCapacity": 4}},
    }
)
FULL["request"]["labels"] = {"app": "arena", "team": "netcode"}
FULL["request"]["annotations"] = {"agones.dev/sdk-version": "1.45.0"}


def fleet_recommendation(now: datetime, *, recommended: int = 7) -> StoredRecommendation:
    """A fresh Enforce recommendation for REVIEW's Fleet, within 1–50 replicas."""
    return StoredRecommendation(
        namespace=NS,
        name="arena-ps",
        mode="Enforce",
        target=TargetRef("agones.dev/v1", "Fleet", "arena"),
        recommended_replicas=recommended,
        current_replicas=4,
        generated_at=now - timedelta(seconds=10),
        interval=timedelta(minutes=1),
        min_replicas=1,
        max_replicas=50,
    )


@asynccontextmanager
async def webhook_in_memory(limits: HttpLimits | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """A client for the scaler's HTTP app driven in memory, REVIEW's Fleet recommended 7 replicas."""
    now = datetime.now(UTC)
    store = RecommendationStore()
    await store.put(fleet_recommendation(now))
    app = build_app(store, ScalerMetrics(), now=lambda: now, limits=limits or HttpLimits())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://presage") as client:
        yield client


def assert_documented_answer(body: bytes, status: int, content: bytes) -> None:
    """What the webhook may answer any body with: REVIEW's answer (7 replicas, the request's uid) or
    a 4xx refusal ``{"reason", "message"}``; never a 5xx, and never more than a few KiB."""
    assert status < 500, (status, content[:500])
    assert len(content) < 4096, (status, len(content))
    answer = json.loads(content)
    if status == 200:
        uid = json.loads(body)["request"]["uid"]
        assert answer == {"response": {"uid": uid, "scale": True, "replicas": 7}}
    else:
        assert 400 <= status < 500 and answer.keys() == {"reason", "message"}, (status, answer)
        assert re.fullmatch(r"[A-Z][A-Za-z]+", answer["reason"]) and answer["message"], answer
