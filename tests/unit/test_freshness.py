"""Freshness records in Leases: what an owner vouches for, and the age every replica serves by."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from presage_scaler.api.serving_contract import StalenessBound
from presage_scaler.serving.freshness import ANNOTATION, FreshnessRecord, LeaseFreshness
from presage_scaler.serving.store import RecommendationStore, StoredRecommendation, TargetRef

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def rec(name: str = "web", *, age: timedelta, interval: timedelta = MINUTE, **extra: object) -> StoredRecommendation:
    return StoredRecommendation(
        namespace="shop",
        name=name,
        mode="Enforce",
        target=TargetRef("apps/v1", "Deployment", name),
        recommended_replicas=5,
        current_replicas=4,
        generated_at=NOW - age,
        interval=interval,
        min_replicas=1,
        max_replicas=50,
        **extra,
    )


def lease(name: str, record: FreshnessRecord | str | None) -> dict:
    annotations = {} if record is None else {ANNOTATION: record if isinstance(record, str) else record.encode()}
    return {"metadata": {"name": name, "namespace": "presage-system", "annotations": annotations}}


def freshness(shards: int = 1) -> LeaseFreshness:
    return LeaseFreshness(lambda namespace, name: "presage-scaler", shards, StalenessBound())


def test_a_record_round_trips_and_says_when_each_bound_was_confirmed():
    record = FreshnessRecord(NOW, 0.25, 1)
    assert FreshnessRecord.decode(record.encode()) == record
    # Lateness is a share of each scaler's bound: 45 s for a 180 s bound, 30 s for 120 s.
    assert record.confirmed_at(180.0) == NOW - timedelta(seconds=45)
    assert record.confirmed_at(120.0) == NOW - timedelta(seconds=30)


@settings(max_examples=300)
@given(st.one_of(st.none(), st.integers(), st.text(max_size=80), st.binary(max_size=40).map(repr)))
def test_any_annotation_value_decodes_to_a_record_or_to_nothing(value):
    decoded = FreshnessRecord.decode(value)
    assert decoded is None or (decoded.lateness >= 0 and decoded.published_at.tzinfo is not None)


def test_unreadable_or_unsafe_records_vouch_for_nothing():
    for text in [
        '{"publishedAt":"2026-12-03T12:00:00","lateness":0.1,"shards":1}',
        '{"lateness":0.1}',
        "[]",
        '{"publishedAt":"2026-12-03T12:00:00+00:00","lateness":-1,"shards":1}',
        '{"publishedAt":"2026-12-03T12:00:00+00:00","lateness":NaN,"shards":1}',
    ]:
        assert FreshnessRecord.decode(text) is None, text


def test_a_held_recommendation_is_served_as_confirmed_by_its_lease():
    view = freshness()
    store = RecommendationStore()
    store.confirmed_at = view.confirmed_at
    written_long_ago = rec(age=8 * MINUTE)
    assert store.age(written_long_ago, NOW) == 8 * MINUTE  # no record yet: its own age
    view.observe(lease("presage-scaler", FreshnessRecord(NOW - timedelta(seconds=2), 0.4, 1)))
    # Confirmed at least 0.4 × 180 s = 72 s before the record, published 2 s ago: 74 s old at most.
    assert store.age(written_long_ago, NOW) == timedelta(seconds=74)
    # A recommendation written after that is as old as it is.
    assert store.age(rec(age=10 * timedelta(seconds=1)), NOW) == timedelta(seconds=10)
    # An Agones fleet refusing at 90 s has a 90 s bound: 0.4 of it is 36 s.
    fleet = rec(age=8 * MINUTE, agones_max_age=timedelta(seconds=90))
    assert store.age(fleet, NOW) == timedelta(seconds=38)


def test_a_degraded_status_or_a_record_of_another_split_vouches_for_nothing():
    view = freshness()
    view.observe(lease("presage-scaler", FreshnessRecord(NOW, 0.1, 1)))
    assert view.confirmed_at(rec(age=8 * MINUTE, degraded=True)) == NOW - 8 * MINUTE
    view.observe(lease("presage-scaler", FreshnessRecord(NOW, 0.1, 4)))  # written while split in four
    assert view.confirmed_at(rec(age=8 * MINUTE)) == NOW - 8 * MINUTE
    view.observe(lease("presage-scaler", "not json"))
    assert view.record("presage-scaler") is None


def test_a_dead_owners_record_ages_until_what_it_vouched_for_is_stale():
    view = freshness()
    view.observe(lease("presage-scaler", FreshnessRecord(NOW, 0.4, 1)))
    held = rec(age=8 * MINUTE)
    bound = StalenessBound().max_age(MINUTE)
    assert NOW + MINUTE - view.confirmed_at(held) < bound
    assert NOW + 2 * MINUTE - view.confirmed_at(held) > bound  # 72 s + 120 s: stale


def test_each_scaler_is_vouched_for_by_its_own_shards_lease():
    view = LeaseFreshness(lambda namespace, name: f"presage-scaler-shard-{len(name) % 2}", 2, StalenessBound())
    view.observe(lease("presage-scaler-shard-0", FreshnessRecord(NOW, 0.1, 2)))
    assert view.confirmed_at(rec("ab", age=8 * MINUTE)) == NOW - timedelta(seconds=18)
    assert view.confirmed_at(rec("abc", age=8 * MINUTE)) == NOW - 8 * MINUTE  # shard 1: no record
