"""The Agones webhook's decisions, over the store, with request bodies shaped exactly as Agones sends them."""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from presage_scaler.serving.agones import MAX_NAME_CHARS, WebhookError, answer
from presage_scaler.serving.store import RecommendationStore, StoredRecommendation, TargetRef
from tests.harness.agones import FULL, NS, REVIEW, UID

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def fleet_rec(
    name: str = "arena-ps",
    *,
    fleet: str = "arena",
    namespace: str = NS,
    mode: str = "Enforce",
    recommended: int = 7,
    age: timedelta = timedelta(seconds=20),
    max_age: timedelta | None = None,
    min_replicas: int = 1,
    max_replicas: int = 50,
    api_version: str = "agones.dev/v1",
    kind: str = "Fleet",
) -> StoredRecommendation:
    return StoredRecommendation(
        namespace=namespace,
        name=name,
        mode=mode,  # type: ignore[arg-type]
        target=TargetRef(api_version, kind, fleet),
        recommended_replicas=recommended,
        current_replicas=4,
        generated_at=NOW - age,
        interval=timedelta(minutes=1),
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        agones_max_age=max_age,
    )


async def store_with(*recs: StoredRecommendation) -> RecommendationStore:
    store = RecommendationStore()
    for rec in recs:
        await store.put(rec)
    return store


def body(review: Any) -> bytes:
    return json.dumps(review).encode()


def refusal(store: RecommendationStore, payload: bytes, now: datetime = NOW) -> WebhookError:
    with pytest.raises(WebhookError) as caught:
        answer(store, payload, now)
    return caught.value


@pytest.mark.parametrize("review", [REVIEW, FULL], ids=["plain", "players-counters-lists-labels"])
async def test_enforce_answers_the_recommendation(review: dict[str, Any]) -> None:
    store = await store_with(fleet_rec(recommended=7))
    result = answer(store, body(review), NOW)
    assert result == {"response": {"uid": UID, "scale": True, "replicas": 7}}
    # Agones unmarshals replicas into an int32: it must be an integer literal on the wire.
    assert re.search(r'"replicas": 7[,}]', json.dumps(result))


@pytest.mark.parametrize(("recommended", "expected"), [(80, 50), (0, 2), (2, 2), (50, 50)])
async def test_min_and_max_are_applied(recommended: int, expected: int) -> None:
    store = await store_with(fleet_rec(recommended=recommended, min_replicas=2, max_replicas=50))
    assert answer(store, body(REVIEW), NOW)["response"]["replicas"] == expected


@pytest.mark.parametrize(
    ("max_age", "age", "fresh"),
    [
        (None, timedelta(minutes=5), True),  # default maxRecommendationAge is 5m
        (None, timedelta(minutes=5, seconds=1), False),
        (timedelta(minutes=10), timedelta(minutes=9), True),
        (timedelta(minutes=2), timedelta(minutes=3), False),
    ],
)
async def test_stale_recommendation_is_refused(max_age: timedelta | None, age: timedelta, fresh: bool) -> None:
    store = await store_with(fleet_rec(max_age=max_age, age=age, recommended=5))
    if fresh:
        assert answer(store, body(REVIEW), NOW)["response"]["replicas"] == 5
    else:
        err = refusal(store, body(REVIEW))
        assert (err.status, err.reason) == (503, "StaleRecommendation")
        assert f"{NS}/arena-ps" in err.message and "maxRecommendationAge" in err.message


async def test_shadow_is_refused_so_the_chain_falls_through() -> None:
    store = await store_with(fleet_rec(mode="Shadow"))
    err = refusal(store, body(FULL))
    assert (err.status, err.reason) == (409, "ShadowMode")
    assert "Enforce" in err.message


async def test_unknown_fleet_is_not_found() -> None:
    store = await store_with(fleet_rec(fleet="lobby"))
    err = refusal(store, body(REVIEW))
    assert (err.status, err.reason) == (404, "NoPredictiveScaler")
    assert "'arena'" in err.message and repr(NS) in err.message


async def test_scaler_in_another_namespace_is_not_found() -> None:
    store = await store_with(fleet_rec(namespace="other-games"))
    assert refusal(store, body(REVIEW)).status == 404


@pytest.mark.parametrize(
    ("api_version", "kind"), [("apps/v1", "Deployment"), ("apps/v1", "Fleet"), ("agones.dev/v1", "GameServerSet")]
)
async def test_only_an_agones_fleet_target_matches(api_version: str, kind: str) -> None:
    store = await store_with(fleet_rec(api_version=api_version, kind=kind))
    assert refusal(store, body(REVIEW)).status == 404


async def test_two_scalers_for_one_fleet_is_a_conflict() -> None:
    store = await store_with(fleet_rec("b-ps"), fleet_rec("a-ps"))
    err = refusal(store, body(REVIEW))
    assert (err.status, err.reason) == (409, "AmbiguousFleet")
    assert "a-ps, b-ps" in err.message


def _without(path: str) -> dict[str, Any]:
    review = copy.deepcopy(REVIEW)
    *parents, leaf = path.split(".")
    node = review
    for key in parents:
        node = node[key]
    del node[leaf]
    return review


def _with(path: str, value: Any) -> dict[str, Any]:
    review = copy.deepcopy(REVIEW)
    *parents, leaf = path.split(".")
    node = review
    for key in parents:
        node = node[key]
    node[leaf] = value
    return review


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        (b"", "invalid JSON"),
        (b"{not json", "invalid JSON"),
        (b"\xff\xfe\xfa", "invalid JSON"),
        (body([REVIEW]), "the body must be a JSON object"),
        (body({"response": None}), "request must be a JSON object"),
        (body(_with("request", None)), "request must be a JSON object"),
        (body(_without("request.status")), "request.status must be a JSON object"),
        (body(_without("request.uid")), "request.uid"),
        (body(_with("request.uid", "")), "request.uid"),
        (body(_with("request.uid", 42)), "request.uid"),
        (body(_without("request.name")), "request.name"),
        (body(_without("request.namespace")), "request.namespace"),
        (body(_without("request.status.allocatedReplicas")), "request.status.allocatedReplicas"),
        (body(_with("request.status.replicas", "4")), "request.status.replicas"),
        (body(_with("request.status.replicas", 4.5)), "request.status.replicas"),
        (body(_with("request.status.replicas", True)), "request.status.replicas"),
        (body(_with("request.status.readyReplicas", -1)), "request.status.readyReplicas"),
        (body(_with("request.status.counters", [1, 2])), "request.status.counters"),
        (body(_with("request.status.lists", "players")), "request.status.lists"),
        (body(_with("request.labels", {"app": 1})), "request.labels"),
        (body(_with("request.annotations", ["a"])), "request.annotations"),
        # What the HTTP layer lets through must still be a 400, never an exception.
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"request":' * 5_000 + b"null" + b"}" * 5_000, "nested too deeply"),
        (b'{"request": 1' + b"7" * 5_000 + b"}", "integer with too many digits"),
        (body(_with("request.uid", "\ud800")), "request.uid contains a lone surrogate"),
        (body(_with("request.name", "arena\udfff")), "request.name contains a lone surrogate"),
        (body(_with("request.namespace", "x" * (MAX_NAME_CHARS + 1))), "request.namespace must be a string of 1 to"),
        (body(_with("request.uid", "u" * 100_000)), "request.uid must be a string of 1 to"),
    ],
)
async def test_malformed_bodies_are_bad_requests(payload: bytes, needle: str) -> None:
    store = await store_with(fleet_rec())
    err = refusal(store, payload)
    assert (err.status, err.reason) == (400, "MalformedRequest")
    assert needle in err.message


async def test_deep_nesting_in_unknown_fields_is_tolerated() -> None:
    # Deep enough to exercise the parser, shallow enough for it: the unknown field is ignored.
    review = _with("request.metadata", json.loads("[" * 200 + "]" * 200))
    store = await store_with(fleet_rec(recommended=3))
    assert answer(store, body(review), NOW)["response"]["replicas"] == 3


async def test_longest_names_are_answered_and_echoed() -> None:
    longest = "n" * MAX_NAME_CHARS
    review = _with("request.uid", longest)
    review["request"]["name"] = longest
    store = await store_with(fleet_rec(fleet=longest))
    assert answer(store, body(review), NOW)["response"]["uid"] == longest


async def test_unknown_fields_are_tolerated() -> None:
    # Newer Agones versions add fields (e.g. request.metadata); they must not break the webhook.
    review = _with("request.metadata", {"generation": 3})
    review["request"]["status"]["somethingNew"] = {"x": 1}
    store = await store_with(fleet_rec(recommended=3))
    assert answer(store, body(review), NOW)["response"]["replicas"] == 3


def test_refusal_body_is_json_with_reason_and_message() -> None:
    err = WebhookError(503, "StaleRecommendation", "too old")
    assert json.loads(json.dumps(err.body())) == {"reason": "StaleRecommendation", "message": "too old"}
