"""What Agones posts to presage's webhook: a FleetAutoscaleReview as ``applyWebhookPolicy`` marshals it."""

from __future__ import annotations

from typing import Any

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
