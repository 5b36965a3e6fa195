"""The Agones FleetAutoscaler webhook, answered from the :class:`RecommendationStore` alone.

Agones POSTs a ``FleetAutoscaleReview`` every sync period (30 s by default, every few seconds
while it gets errors)::

    {"request": {"uid": "…", "name": "<fleet>", "namespace": "<ns>",
                 "status": {"replicas": 3, "readyReplicas": 2, "reservedReplicas": 0,
                            "allocatedReplicas": 1, "players": …, "counters": …, "lists": …},
                 "labels": {…}, "annotations": {…}},
     "response": null}

and reads back ``{"response": {"uid": <same>, "scale": true, "replicas": <int32>}}``. presage
answers with the recommendation of the one PredictiveScaler in that namespace whose
``scaleTargetRef`` is that agones.dev Fleet, clamped into its min/max (Agones applies a webhook's
number as is).

Every refusal is an HTTP error with a JSON ``{"reason", "message"}`` body, never a made-up
number: in a ``Chain`` policy Agones then falls through to the next entry (a Buffer policy), which
is how a stale or Shadow-mode scaler leaves the Fleet to a conventional policy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from presage_scaler.api.predictive_scaler import AgonesFleetTarget
from presage_scaler.serving.store import RecommendationStore, StoredRecommendation

PATH = "/agones/v1/scale"
DEFAULT_MAX_AGE: timedelta = AgonesFleetTarget().max_recommendation_age
"""``scaleTargetRef.agones.maxRecommendationAge`` when the scaler has no ``agones`` block (the API default)."""
MAX_BODY_BYTES = 1 << 20
"""The largest body the webhook reads (:mod:`~presage_scaler.serving.http_server` stops there); a review is ~1 KiB."""
MAX_NAME_CHARS = 253
"""The longest Kubernetes name (a DNS subdomain); also bounds the uid, and so what refusals echo."""
_STATUS_COUNTS = ("replicas", "readyReplicas", "reservedReplicas", "allocatedReplicas")
_INT32_MAX = 2**31 - 1


class WebhookError(Exception):
    """A refusal: the HTTP status Agones sees, a CamelCase reason and a message saying what to fix."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message

    def body(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message}


@dataclass(frozen=True)
class FleetAutoscaleRequest:
    """The parts of Agones' request presage uses; the rest is validated and otherwise ignored."""

    uid: str
    name: str
    namespace: str


def _malformed(message: str) -> WebhookError:
    return WebhookError(400, "MalformedRequest", f"not a FleetAutoscaleReview: {message}")


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _malformed(f"{where} must be a JSON object")
    return value


def _string(request: dict[str, Any], key: str) -> str:
    """A name or uid: echoed in the answer or a refusal, so bounded and encodable as UTF-8."""
    value = request.get(key)
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME_CHARS:
        raise _malformed(f"request.{key} must be a string of 1 to {MAX_NAME_CHARS} characters")
    try:
        value.encode()
    except UnicodeEncodeError:
        # JSON may escape a lone UTF-16 surrogate ("\ud800"); no UTF-8 answer can carry it back.
        raise _malformed(f"request.{key} contains a lone surrogate (an unpaired \\uD800-\\uDFFF escape)") from None
    return value


def _string_map(request: dict[str, Any], key: str) -> None:
    value = request.get(key)
    if value is None:
        return
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise _malformed(f"request.{key} must be an object of strings")


def parse_review(body: bytes) -> FleetAutoscaleRequest:
    """Validate a FleetAutoscaleReview body; :class:`WebhookError` 400 when it is not one."""
    try:
        review = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _malformed(f"invalid JSON ({exc})") from None
    except ValueError:  # Python's limit on digits in an int
        raise _malformed("invalid JSON (an integer with too many digits)") from None
    except RecursionError:
        raise _malformed("invalid JSON (nested too deeply)") from None
    review = _object(review, "the body")
    request = _object(review.get("request"), "request")
    status = _object(request.get("status"), "request.status")
    for key in _STATUS_COUNTS:
        value = status.get(key)
        # bool is an int in Python, not in JSON.
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _INT32_MAX:
            raise _malformed(f"request.status.{key} must be a non-negative integer")
    for key in ("players", "counters", "lists"):
        if status.get(key) is not None:
            _object(status[key], f"request.status.{key}")
    _string_map(request, "labels")
    _string_map(request, "annotations")
    return FleetAutoscaleRequest(
        uid=_string(request, "uid"),
        name=_string(request, "name"),
        namespace=_string(request, "namespace"),
    )


def _is_fleet(rec: StoredRecommendation, fleet: str) -> bool:
    target = rec.target
    return target.kind == "Fleet" and target.api_version.startswith("agones.dev/") and target.name == fleet


def recommendation_for(store: RecommendationStore, request: FleetAutoscaleRequest) -> StoredRecommendation:
    """The one PredictiveScaler in the Fleet's namespace that targets the Fleet; 404/409 otherwise."""
    matches = sorted(
        (r for r in store.in_namespace(request.namespace) if _is_fleet(r, request.name)), key=lambda r: r.name
    )
    if not matches:
        raise WebhookError(
            404,
            "NoPredictiveScaler",
            f"no PredictiveScaler with a recommendation in namespace {request.namespace!r} targets Fleet "
            f"{request.name!r}: it must be in the Fleet's namespace, have scaleTargetRef apiVersion agones.dev/v1, "
            "kind Fleet and this name, and have been evaluated at least once",
        )
    if len(matches) > 1:
        names = ", ".join(r.name for r in matches)
        raise WebhookError(
            409,
            "AmbiguousFleet",
            f"several PredictiveScalers in namespace {request.namespace!r} target Fleet {request.name!r} ({names}); "
            "keep exactly one",
        )
    return matches[0]


def replicas_for(rec: StoredRecommendation, age: timedelta) -> int:
    """The replica count to answer with: fresh (``age``: since it was last confirmed), Enforce,
    within min/max; a WebhookError otherwise."""
    if rec.mode != "Enforce":
        raise WebhookError(
            409,
            "ShadowMode",
            f"PredictiveScaler {rec.namespace}/{rec.name} is in Shadow mode: it only records; the next policy in "
            "the FleetAutoscaler's chain decides. Set spec.mode: Enforce to let presage scale this Fleet",
        )
    max_age = rec.agones_max_age or DEFAULT_MAX_AGE
    if age > max_age:
        raise WebhookError(
            503,
            "StaleRecommendation",
            f"recommendation for PredictiveScaler {rec.namespace}/{rec.name} is stale: confirmed "
            f"{age.total_seconds():.0f}s ago, maxRecommendationAge is {max_age.total_seconds():.0f}s; check the "
            "presage controller and its data source",
        )
    return min(max(rec.recommended_replicas, rec.min_replicas), rec.max_replicas)


def answer(store: RecommendationStore, body: bytes, now: datetime) -> dict[str, Any]:
    """The FleetAutoscaleReview to send back for a request body; raises :class:`WebhookError`."""
    request = parse_review(body)
    rec = recommendation_for(store, request)
    replicas = replicas_for(rec, store.age(rec, now))
    return {"response": {"uid": request.uid, "scale": True, "replicas": replicas}}
